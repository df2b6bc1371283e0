"""replica-resize on the local backend comes back to every slice after a killed one is replaced.

The real trainer, the real supervisor, a real SIGKILL through the CLI; waits are on the
trainer's events.
"""

from __future__ import annotations

import json
import os
import signal

from local_helpers import tiny_trainer, wait_until
from local_helpers import workload_events as _events

TRAIN = tiny_trainer("--elastic-mode replica-resize --min-slices 1 --max-slice-losses 10 "
                     "--slice-wait-timeout 120")


def _resizes(backend, name: str, seen: int) -> list[tuple[int, int]]:
    return [(e["from_slices"], e["to_slices"]) for e in _events(backend, name)[seen:]
            if e["event"] == "elastic_resize"]


def test_replica_resize_scales_back_up_once_the_killed_slice_is_replaced(cli, backend,
                                                                        state_dir):
    """The replacement is held back (its supervisor stopped) until the runtime has resized onto
    the survivor, and is heard within the heartbeat timeout of its predecessor's last beat (a
    generous timeout: exits are detected at once anyway), the case that used to stay at 1."""
    name = "back"
    cli("workload", "create", name, "--tpu-type", "v5litepod-4", "--num-slices", "2",
        "--elastic-slices", "2", "--max-slice-restarts", "3", "--command", TRAIN,
        env={"ELASTIX_HEALTH_TIMEOUT": "600"})
    supervisor = json.loads((state_dir / name / "state.json").read_text())["supervisor"]["pid"]
    try:
        wait_until(lambda: any(e["event"] == "step" and e.get("live_slices") == 2
                               for e in _events(backend, name)), 300, "a step on 2 slices")
        seen = len(_events(backend, name))
        os.kill(supervisor, signal.SIGSTOP)  # no replacement until the resize happened
        try:
            cli("chaos", "kill-worker", name, "--slice", "1")
            wait_until(lambda: (2, 1) in _resizes(backend, name, seen), 180,
                       "the resize to 1 slice")
        finally:
            os.kill(supervisor, signal.SIGCONT)
        wait_until(lambda: _resizes(backend, name, seen)[-1:] == [(1, 2)], 180,
                   "the scale-up back to 2 slices")
        after = len(_events(backend, name))
        wait_until(lambda: any(e["event"] == "step" and e.get("live_slices") == 2
                               for e in _events(backend, name)[after:]), 120,
                   "a step on 2 slices again")
    finally:
        cli("workload", "delete", name)
