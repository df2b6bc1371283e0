"""A hung (SIGSTOPped) slice host is killed and replaced by the supervisor, as the platform
evicts a hung host's pod; with that off, a run that gives up waiting says what to look at.

Real processes and real signals, with the stand-in controller (the trainer's health source).
"""

from __future__ import annotations

import os
import signal
import sys

import psutil
from local_helpers import STANDIN, wait_until
from local_helpers import workload_status as _status

from elastix.backends.base import LogOptions


def _create(cli, name: str, **env: str) -> None:
    cli("workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
        "--elastic-slices", "2", "--command",
        f"{sys.executable} {STANDIN} --steps 100000 --step-delay 0.05 --events", env=env)


def _text(backend, name: str) -> str:
    return "\n".join(ev.text for ev in backend.logs(name, LogOptions()))


def test_a_hung_host_is_killed_and_its_slice_replaced(cli, backend, state_dir):
    _create(cli, "hang", ELASTIX_LOCAL_HUNG_HOST_TIMEOUT="3")
    try:
        wait_until(lambda: "completed step: 1," in _text(backend, "hang"), 60, "first step")
        st = wait_until(lambda: (s := _status(cli, "hang"))["slices"][1]["ready"] == 2 and s,
                        30, "slice 1 ready")
        pid = st["slices"][1]["pods"][0]["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            wait_until(lambda: _status(cli, "hang")["slices"][1]["job_failures"] > 0, 60,
                       "the supervisor to replace the hung host")
            assert (not psutil.pid_exists(pid)
                    or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE)
        finally:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        st = wait_until(lambda: (s := _status(cli, "hang"))["state"] == "Running"
                        and [x["state"] for x in s["slices"]] == ["Ready", "Ready"]
                        and s["slices"][1]["pods"][0]["pid"] != pid and s, 60, "slice 1 back")
        assert st["jobset_restarts"] == 0
        log = (state_dir / "hang" / "supervisor.log").read_text()
        assert f"worker slice 1 host 0 (pid {pid}) hung (no progress for" in log
        # The controller lived through it: the slice came back to the same process.
        wait_until(lambda: _text(backend, "hang").count("sufficient slices active") >= 2, 60,
                   "the controller to have its slices again")
    finally:
        backend.delete("hang")
