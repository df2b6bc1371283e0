"""Private by default (issue 34): under the usual umask 022 everything a local workload writes
(state, plan with every --env value, manifest, logs, events, checkpoints) is its user's alone.
A real workload of the real trainer, its files walked on disk."""

from __future__ import annotations

import os
import stat

from local_helpers import tiny_trainer, wait_until, workload_events


def _open_to_others(root) -> list[str]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        for n in [*dirnames, *filenames]:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                continue
            if st.st_mode & 0o077:
                out.append(f"{oct(st.st_mode & 0o777)} {os.path.relpath(p, root)}")
    return out


def test_a_workload_under_umask_022_writes_nothing_others_can_read(cli, backend, state_dir):
    old = os.umask(0o022)  # the usual login umask: the launcher must not rely on a strict one
    try:
        cli("workload", "create", "priv", "--tpu-type", "v5litepod-8", "--num-slices", "1",
            "--env", "SECRET_TOKEN=hunter2", "--command",
            tiny_trainer("") + " --checkpoint-dir $ELASTIX_LOCAL_DATA_DIR/ckpt", timeout=120)
        wait_until(lambda: any(e.get("event") == "checkpoint_committed"
                               for e in workload_events(backend, "priv")), 180,
                   "a checkpoint committed")
    finally:
        os.umask(old)
    try:
        data = state_dir / ".data" / "priv"
        assert (data / "ckpt").is_dir()
        assert (state_dir / "priv" / "plan.json").is_file()
        assert _open_to_others(state_dir / "priv") == []
        assert _open_to_others(data) == []
        for d in (state_dir / "priv", data):
            assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    finally:
        cli("workload", "delete", "priv", "--wait", "--delete-data")
