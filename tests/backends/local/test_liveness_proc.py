"""The hung-host probe on a kernel whose ``/proc/<pid>/status`` has no context-switch counters
(the TPU machine's sandboxed kernel: psutil raises NotImplementedError there, and the local
supervisor died of it before its first poll). psutil's own code reads a real file tree laid out
as that kernel's ``/proc`` (``psutil.PROCFS_PATH``)."""

from __future__ import annotations

import os

import psutil
import pytest

from elastix.backends.local.liveness import Liveness, progress


@pytest.fixture
def proc_without_counters(tmp_path):
    pid = os.getpid()
    (tmp_path / str(pid)).mkdir()
    (tmp_path / "stat").write_text(open("/proc/stat").read())
    (tmp_path / str(pid) / "stat").write_text(open(f"/proc/{pid}/stat").read())
    status = open(f"/proc/{pid}/status").read().splitlines()
    kept = [ln for ln in status if "ctxt_switches" not in ln]
    assert len(kept) < len(status)  # this machine's kernel has them: they were taken out
    (tmp_path / str(pid) / "status").write_text("\n".join(kept) + "\n")
    old, psutil.PROCFS_PATH = psutil.PROCFS_PATH, str(tmp_path)
    try:
        yield pid
    finally:
        psutil.PROCFS_PATH = old


def test_no_counters_give_no_verdict_and_no_error(proc_without_counters):
    pid = proc_without_counters
    with pytest.raises(NotImplementedError):  # what psutil does there
        psutil.Process(pid).num_ctx_switches()
    assert progress(pid) is None
    clock = iter(range(0, 1000, 100))
    live = Liveness(timeout=1.0, clock=lambda: next(clock))
    assert live.hung({"host": pid}) == [] and live.hung({"host": pid}) == []
