"""A state directory others control is refused before anything starts (issue 59, item 3).

The state root, its ``.cache/jax`` (the compilation cache every workload of it loads code from)
and its ``.data`` (their checkpoints) must each be a directory of the user's own that no one
else may write to, as the heartbeat socket's directory already must be; else ``workload
create`` exits 2 with the fix in the hint, and makes nothing. The real entry point, in-process:
a refused create starts no process (the fast tier's guard would fail it if it did).
"""

from __future__ import annotations

import os
import stat

import pytest

from elastix.backends.local import private
from elastix.main import main

OTHER_UID = 65534  # nobody


def _create(root, *extra, capsys):
    code = main(["workload", "create", "demo", "--backend", "local", "--state-dir", str(root),
                 "--tpu-type", "v5litepod-8", "--num-slices", "1", "--command", "true",
                 *extra])
    err = " ".join(capsys.readouterr().err.split())
    return code, err


def _as_root():
    if os.geteuid() != 0:
        pytest.skip("making a directory another user's needs root (CI runs as root)")


@pytest.mark.parametrize("where", ["", ".cache", ".cache/jax", ".data"])
def test_a_directory_others_may_write_is_refused(tmp_path, capsys, where):
    root = tmp_path / "state"
    private.prepare(root)
    bad = root / where if where else root
    os.chmod(bad, 0o777)
    code, err = _create(root, capsys=capsys)
    assert code == 2, err
    assert err.startswith("error: the state directory") and "Traceback" not in err
    assert f"{bad} may be written by its group and others (mode 0777)" in err
    assert "nothing was started" in err and f"hint: chmod go-w {bad}" in err
    assert not (root / "demo").exists()


@pytest.mark.parametrize("where", ["", ".cache/jax", ".data"])
def test_a_directory_of_another_user_is_refused(tmp_path, capsys, where):
    _as_root()
    root = tmp_path / "state"
    private.prepare(root)
    bad = root / where if where else root
    os.chown(bad, OTHER_UID, OTHER_UID)
    code, err = _create(root, capsys=capsys)
    assert code == 2, err
    assert f"{bad} belongs to another user (uid {OTHER_UID})" in err
    assert "--state-dir DIR (or ELASTIX_STATE_DIR) with a directory of your own" in err
    assert not (root / "demo").exists()


def test_a_file_in_place_of_the_cache_is_refused(tmp_path, capsys):
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    (root / ".cache").write_text("")
    code, err = _create(root, capsys=capsys)
    assert code == 2 and "the state directory's .cache" in err and "is not a directory" in err


def test_missing_ones_are_made_private_whatever_the_umask(tmp_path):
    old = os.umask(0o002)
    try:
        private.prepare(tmp_path / "state")
    finally:
        os.umask(old)
    for rel in ("", *private.SHARED):
        st = os.stat(tmp_path / "state" / rel)
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    assert private.problem(tmp_path / "state") is None
