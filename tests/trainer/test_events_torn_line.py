"""A head killed with half a line written, and the head that follows (issue 48).

A real full disk (a 64 KiB tmpfs) and real processes: the first head writes events until the
disk is full, with the last one cut part-way (the kernel wrote what fit), and is SIGKILLed;
space comes back and a restarted head appends its own events. It must end the torn line first:
glued to it, its ``run_start`` was lost with the torn line, and the torn line was no longer
the last, so every reader refused the file for the rest of the run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from tmpfs import small_tmpfs

from elastix.protocol.eventspec import split_jsonl

# The head: EventLog as the trainer uses it, writing step events until a write fails.
FILL = """
import sys, time
from elastix_trainer.obs.events import EventLog
log = EventLog(sys.argv[1])
log.emit("run_start", num_slices=2, devices=2, config={})
step = 100000  # six digits each: lines of one length, an odd one (65536 is no multiple of it)
while not log._write_failed:
    step += 1
    log.emit("step", step=step, seconds=0.5, loss=2.5, live_slices=2, tflops_per_device=0.1,
             global_batch=8, logged=False)
print("full", flush=True)
time.sleep(600)
"""
RESTART = """
import sys
from elastix_trainer.obs.events import EventLog
log = EventLog(sys.argv[1])
log.emit("run_start", num_slices=2, devices=2, config={"restarted": True})
log.emit("step", step=1, seconds=0.5, loss=2.5, live_slices=2, tflops_per_device=0.1,
         global_batch=8, logged=False)
log.close()
"""


@pytest.fixture
def small_disk(tmp_path):
    with small_tmpfs(tmp_path / "small", "size=64k") as d:
        yield d


def test_a_restarted_head_ends_the_torn_line_before_it_appends(small_disk):
    events = small_disk / "events.jsonl"
    head = subprocess.Popen([sys.executable, "-c", FILL, str(events)], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert head.stdout.readline() == "full\n"  # the disk is full: a write failed
    finally:
        os.kill(head.pid, signal.SIGKILL)
        head.wait()
    left = events.read_bytes()
    assert left and not left.endswith(b"\n")  # half a line, as a killed head leaves it
    subprocess.run(["mount", "-o", "remount,size=1m", str(small_disk)], check=True)
    subprocess.run([sys.executable, "-c", RESTART, str(events)], check=True, timeout=120)
    split = split_jsonl(events.read_text(encoding="utf-8", errors="replace"))
    starts = [r for r in split.records if r["event"] == "run_start"]
    assert [s["config"] for s in starts] == [{}, {"restarted": True}]  # its own line
    assert split.records[-1]["event"] == "step" and split.records[-1]["step"] == 1
    assert split.bad == [] and len(split.skipped) == 1  # the torn line, skipped and counted
    assert split.skipped[0][0] == left.count(b"\n") + 1
