"""``elastix logs --previous`` on the local backend: every head attempt keeps its own log, so the
attempt before the current one is reachable after a workload restart."""

from __future__ import annotations

import re
import sys

from local_helpers import STANDIN, wait_until


def _pids(text: str) -> list[str]:
    return re.findall(r"controller pid (\d+)", text)


def test_previous_is_the_attempt_before_the_current_one(cli, backend):
    cli("workload", "create", "crashy", "--tpu-type", "v5litepod-8", "--num-slices", "1",
        "--elastic-slices", "1", "--max-slice-restarts", "1", "--max-restarts", "1",
        "--command", f"{sys.executable} {STANDIN} --steps 100000 --step-delay 0.05 "
                     "--fail-after 2")
    try:
        wait_until(lambda: backend.status("crashy").state == "Failed", 60, "Failed")
        cur = cli("logs", "crashy")
        prev = cli("logs", "crashy", "--previous")
        (pid_now,), (pid_before,) = _pids(cur.stdout), _pids(prev.stdout)
        assert pid_now != pid_before and "user code failed" in prev.stdout
        assert "head attempt 0 (the current attempt is 1)" in prev.stderr
        r = cli("logs", "crashy", "--previous", "--slice", "0", check=False)
        assert r.returncode == 1 and "no previous worker log" in r.stderr
    finally:
        cli("workload", "delete", "crashy", "--wait", check=False)


def test_no_previous_before_a_restart(cli, backend):
    cli("workload", "create", "steady", "--tpu-type", "v5litepod-8", "--num-slices", "1",
        "--elastic-slices", "1", "--max-slice-restarts", "1",
        "--command", f"{sys.executable} {STANDIN} --steps 2 --step-delay 0.05")
    try:
        wait_until(lambda: backend.status("steady").state in ("Completed", "Failed"), 60, "end")
        r = cli("logs", "steady", "--previous", check=False)
        assert r.returncode == 1 and "Traceback" not in r.stderr
        assert "workload steady has no previous head attempt: it has not restarted" in r.stderr
    finally:
        cli("workload", "delete", "steady", "--wait", check=False)
