"""Status tells what training sees: a hung (SIGSTOPped) host and a slice the trainer lost.

The host's process still exists, so the supervisor's record says Running; status must still
show the slice as not Ready. Real processes and real signals, with the stand-in controller.
"""

from __future__ import annotations

import os
import signal
import sys

import psutil
from local_helpers import STANDIN, wait_until
from local_helpers import workload_status as _status

from elastix.backends.base import LogOptions


def _create(cli, name: str, events: bool) -> None:
    # The supervisor's replacement of hung hosts off: these tests look at a host while it hangs
    # (test_local_hung_replaced.py covers the replacement).
    cli("workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
        "--elastic-slices", "2", "--command",
        f"{sys.executable} {STANDIN} --steps 100000 --step-delay 0.05"
        + (" --events" if events else ""), env={"ELASTIX_LOCAL_HUNG_HOST_TIMEOUT": "0"})


def _stepping(cli, backend, name: str) -> dict:
    """Status once the controller steps on both slices (it has its health source by then)."""
    wait_until(lambda: "completed step: 1," in "\n".join(
        ev.text for ev in backend.logs(name, LogOptions())), 60, "first step")
    return wait_until(lambda: _running(cli, name), 30, "both slices ready")


def _running(cli, name: str) -> dict | None:
    st = _status(cli, name)
    return st if [s["state"] for s in st["slices"]] == ["Ready", "Ready"] else None


def _stop(st: dict, slice_id: int, host: int) -> int:
    pid = st["slices"][slice_id]["pods"][host]["pid"]
    os.kill(pid, signal.SIGSTOP)
    return pid


def test_a_slice_the_trainer_lost_is_not_ready_while_its_hosts_exist(cli, backend):
    _create(cli, "hung", events=True)
    st = _stepping(cli, backend, "hung")
    pid = _stop(st, 1, 0)
    try:
        st = wait_until(lambda: (s := _status(cli, "hung"))["slices"][1]["state"] == "Lost"
                        and s, 30, "the trainer to declare slice 1 lost")
        assert st["state"] == "Running" and st["slices"][0]["state"] == "Ready"
        assert st["slices"][1]["lost"].startswith("the trainer declared it lost at ")
        assert "(recovery 1: DATA_LOSS" in st["slices"][1]["lost"]
        assert psutil.Process(pid).status() == psutil.STATUS_STOPPED  # it was never replaced
        text = cli("workload", "status", "hung").stdout
        assert "slices ready 1/2" in text and "Lost" in text
        assert "slice 1 is lost: the trainer declared it lost at" in text
    finally:
        os.kill(pid, signal.SIGCONT)
    # Heartbeats resume, the trainer has its slices again: Ready, and the same processes.
    st = wait_until(lambda: _running(cli, "hung"), 30, "slice 1 ready again")
    assert st["slices"][1]["pods"][0]["pid"] == pid and st["slices"][1]["lost"] is None
    backend.delete("hung")


def test_a_stopped_host_shows_stopped_without_any_trainer_events(cli, backend):
    _create(cli, "frozen", events=False)
    st = _stepping(cli, backend, "frozen")
    pid = _stop(st, 0, 1)
    try:
        st = _status(cli, "frozen")
        host = st["slices"][0]["pods"][1]
        assert host["phase"] == "Stopped" and f"process {pid} is stopped" in host["reason"]
        assert [s["state"] for s in st["slices"]] == ["Stopped", "Ready"]
        assert st["slices"][0]["ready"] == 1 and st["slices"][0]["lost"] is None
        assert "slices ready 1/2" in cli("workload", "status", "frozen").stdout
    finally:
        os.kill(pid, signal.SIGCONT)
    assert _running(cli, "frozen")
    backend.delete("frozen")
