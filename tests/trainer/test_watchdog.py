"""The watchdog turns a silent hang into a failure the JobSet restarts, with the stacks."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time

from trainer_helpers import REPO, cli_env

from elastix_trainer.obs.events import EventLog
from elastix_trainer.obs.watchdog import EXIT_CODE, Watchdog


def _dog(events, timeout):
    exits = []
    dog = Watchdog(events, timeout, lambda: 41, exit=exits.append).start()
    return dog, exits


def test_silence_fires_once_with_stacks_and_run_end(caplog):
    events = EventLog(None)
    with caplog.at_level(logging.INFO, logger="elastix_trainer"):
        dog, exits = _dog(events, 0.3)
        deadline = time.monotonic() + 30
        while not exits and time.monotonic() < deadline:
            time.sleep(0.02)
    assert exits == [EXIT_CODE] and dog.fired
    (end,) = events.of("run_end")
    assert end["status"] == "failed" and end["step"] == 41
    assert end["reason"].startswith("no progress for ") and "watchdog at 0.3 s" in end["reason"]
    assert "--- thread MainThread ---" in caplog.text and "test_watchdog.py" in caplog.text


def test_events_keep_it_quiet():
    events = EventLog(None)
    dog, exits = _dog(events, 0.5)
    try:
        for step in range(1, 31):  # 1.5 s of steady progress, three timeouts' worth
            events.emit("step", step=step, seconds=0.05, loss=1.0, live_slices=1,
                        tflops_per_device=0.0, global_batch=8)
            time.sleep(0.05)
        assert exits == [] and not dog.fired
    finally:
        dog.stop()


def test_start_up_is_bounded_by_the_start_up_limit_then_the_timeout():
    """A first compile slower than a short --watchdog-timeout (a loaded machine) is start-up,
    bounded by ``startup``; from the built session on, the timeout counts."""
    clock = [0.0]
    events = EventLog(None)
    events.last_emit = 0.0
    exits = []
    dog = Watchdog(events, 8.0, lambda: 0, startup=100.0, clock=lambda: clock[0],
                   exit=exits.append)
    clock[0] = 50.0
    assert dog._limit() == 100.0  # compiling for 50 s: still start-up, no fire
    events.progress()  # the session is built
    assert events.started and dog._limit() == 8.0
    assert Watchdog(EventLog(None), 8.0, lambda: 0)._limit() == 8.0  # no start-up limit given


def test_a_trainer_stuck_in_a_step_exits_3_with_run_end(tmp_path):
    events_file = tmp_path / "events.jsonl"
    args = ["--preset", "tiny", "--steps", "50", "--batch-per-device", "1", "--seq-len", "32",
            "--num-slices", "4", "--step-delay", "600", "--watchdog-timeout", "8",
            "--events-file", str(events_file)]
    proc = subprocess.run([sys.executable, "-m", "elastix_trainer", *args], env=cli_env(),
                          cwd=REPO, capture_output=True, text=True, timeout=240)
    assert proc.returncode == EXIT_CODE, proc.stderr
    records = [json.loads(ln) for ln in events_file.read_text().splitlines()]
    end = records[-1]
    assert end["event"] == "run_end" and end["status"] == "failed"
    assert end["reason"].startswith("no progress for ") and "watchdog at 8 s" in end["reason"]
    assert "--- thread MainThread ---" in proc.stdout and "time.sleep" in proc.stdout
    assert proc.stderr.splitlines()[-2].startswith("error: no progress for ")
