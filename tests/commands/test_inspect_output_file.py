"""``workload inspect --output-file``: what is at the path decides (issue 59, item 4).

A directory, a FIFO or a device (here a link to ``/dev/null``: the hunt copied it with mknod,
which needs root) is never replaced, ``--force`` or not: one line, exit 2, nothing read or
written. A regular file is replaced only when it is an earlier bundle, or with ``--force``;
the message says what was replaced. A local workload as submit leaves it (its plan, no
process) is enough to make a real bundle: the real entry point runs in-process.
"""

from __future__ import annotations

import json
import os
import stat

import pytest

from elastix.main import main


@pytest.fixture
def state(tmp_path):
    from elastix.backends.local.plan import make_plan
    from elastix.backends.local.state import write_json_atomic
    from elastix.workload.render import render
    from elastix.workload.spec import build_spec

    spec = build_spec(None, {"name": "peek", "tpu_type": "v5litepod-16", "num_slices": 2,
                             "docker_image": "img:1", "command": "true"})
    d = tmp_path / "state" / "peek"
    d.mkdir(parents=True)
    write_json_atomic(d / "plan.json", make_plan(render(spec), d, {}, str(tmp_path)).to_json())
    return tmp_path / "state"


def _inspect(state, out, *extra, capsys):
    code = main(["workload", "inspect", "peek", "--backend", "local", "--state-dir",
                 str(state), "--output-file", str(out), *extra])
    got = capsys.readouterr()
    return code, got.err


def _one_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[0].startswith("error: ") and "Traceback" not in err, err
    assert all(ln.startswith(("error: ", "hint: ", "  ")) for ln in lines), err
    return " ".join(err.split())


def test_a_fifo_is_never_replaced(state, tmp_path, capsys):
    fifo = tmp_path / "bundle.json"
    os.mkfifo(fifo)
    for extra in ((), ("--force",)):
        code, err = _inspect(state, fifo, *extra, capsys=capsys)
        assert code == 2
        assert "is not a regular file (a FIFO): nothing was written there" in _one_error(err)
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_device_is_never_replaced(state, tmp_path, capsys):
    dev = tmp_path / "null"
    dev.symlink_to("/dev/null")
    code, err = _inspect(state, dev, "--force", capsys=capsys)
    assert code == 2 and "(a character device)" in _one_error(err)
    assert os.path.islink(dev) and os.readlink(dev) == "/dev/null"


def test_a_directory_is_refused(state, tmp_path, capsys):
    code, err = _inspect(state, tmp_path, capsys=capsys)
    assert code == 2 and "is a directory" in _one_error(err)


def test_another_file_is_kept_unless_forced(state, tmp_path, capsys):
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    code, err = _inspect(state, notes, capsys=capsys)
    assert code == 2
    said = _one_error(err)
    assert "exists and is not an elastix workload inspect bundle: it was left as it is" in said
    assert "--force" in said
    assert notes.read_text() == "my notes\n"
    code, err = _inspect(state, notes, "--force", capsys=capsys)
    assert code == 0 and "replaced the file there: --force" in err
    assert json.loads(notes.read_text())["workload"]["name"] == "peek"


@pytest.mark.parametrize("form", ["json", "yaml"])
def test_an_earlier_bundle_is_replaced_and_said(state, tmp_path, capsys, form):
    out = tmp_path / f"bundle.{form}"
    code, err = _inspect(state, out, "-o", form, capsys=capsys)
    assert code == 0 and "replaced" not in err
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    first = out.read_text()
    code, err = _inspect(state, out, "-o", form, capsys=capsys)
    assert code == 0 and "(replaced the earlier bundle there" in err
    assert "peek" in out.read_text() and first
