"""SIGTERM to a real trainer process: a last checkpoint, ``run_end``, exit 143 — also as PID 1.

In the head pod the trainer is PID 1 (``bash -c`` execs a lone command); PID 1 ignores a signal
whose action is the default, so before the handler a deleted or preempted workload's trainer
went on until the kubelet's SIGKILL, abandoning the save in flight and writing no ``run_end``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys

import pytest
from trainer_helpers import REPO, cli_env, wait_until

from elastix_trainer.obs.events import EventLog
from elastix_trainer.state.checkpoint import Checkpointer

ARGS = ["--preset", "tiny", "--steps", "100000", "--batch-per-device", "1", "--seq-len", "32",
        "--num-slices", "4", "--step-delay", "0.05", "--checkpoint-period", "1000"]


def _events(path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def _steps(path) -> int:
    return sum(1 for r in _events(path) if r["event"] == "step")


def _check_stopped(tmp_path, events_file, returncode, stderr):
    assert returncode == 143, stderr
    (end,) = [r for r in _events(events_file) if r["event"] == "run_end"]
    step = end["step"]
    assert end["status"] == "failed"
    assert end["reason"].startswith(f"stopped by SIGTERM after step {step}: checkpoint of step "
                                    f"{step} committed (")
    assert Checkpointer(str(tmp_path / "ck"), 1, EventLog(None)).latest_committed() == step
    lines = [ln for ln in stderr.splitlines() if ln.startswith(("error:", "hint:"))]
    assert lines[0].startswith("error: stopped by SIGTERM") and "Traceback" not in stderr
    assert lines[1] == ("hint: it stopped on request; re-run with the same --checkpoint-dir to "
                        "resume")


def test_sigterm_commits_the_current_step_and_exits_143(tmp_path):
    events_file = tmp_path / "events.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "elastix_trainer", *ARGS, "--checkpoint-dir",
                             str(tmp_path / "ck"), "--events-file", str(events_file)],
                            env=cli_env(), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: _steps(events_file) >= 3, 180, "three steps")
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _check_stopped(tmp_path, events_file, proc.returncode, stderr)


def test_sigterm_reaches_the_trainer_as_pid_1(tmp_path):
    unshare = shutil.which("unshare")
    probe = subprocess.run([unshare or "unshare", "--pid", "--fork", "--mount-proc", "true"],
                           capture_output=True, text=True) if unshare else None
    if probe is None or probe.returncode != 0:
        pytest.skip("a new PID namespace needs unshare and root: "
                    + (probe.stderr.strip() if probe else "no unshare"))
    events_file = tmp_path / "events.jsonl"
    # --kill-child: if the test fails and kills unshare, the trainer (PID 1 in there) goes too.
    proc = subprocess.Popen([unshare, "--pid", "--fork", "--kill-child", "--mount-proc",
                             sys.executable, "-m",
                             "elastix_trainer", *ARGS, "--checkpoint-dir", str(tmp_path / "ck"),
                             "--events-file", str(events_file)],
                            env=cli_env(), cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    trainer = None
    try:
        wait_until(lambda: _steps(events_file) >= 3, 180, "three steps")
        children = open(f"/proc/{proc.pid}/task/{proc.pid}/children").read().split()
        (trainer,) = [int(c) for c in children]
        (nspid,) = [ln for ln in open(f"/proc/{trainer}/status").read().splitlines()
                    if ln.startswith("NSpid:")]
        assert nspid.split()[-1] == "1"  # the trainer is PID 1 of its namespace
        os.kill(trainer, signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if trainer is not None:
            try:
                os.kill(trainer, signal.SIGKILL)  # nothing left behind, whatever happened
            except ProcessLookupError:
                pass
    _check_stopped(tmp_path, events_file, proc.returncode, stderr)


def _run_with_sigterm_handler(cfg, health, hook_for):
    """The elastic runtime in-process with the CLI's SIGTERM handler (the previous one put back
    after), ``hook_for(trainer)`` attached as its ``before_dispatch`` hook."""
    from trainer_helpers import on, run_elastic

    from elastix_trainer.program import _stop_on_sigterm

    def setup(trainer, runtime):
        _stop_on_sigterm(trainer)
        on(trainer, before_dispatch=hook_for(trainer))

    previous = signal.getsignal(signal.SIGTERM)
    try:
        outcome, _, _ = run_elastic(cfg, health, setup=setup)
    finally:
        signal.signal(signal.SIGTERM, previous)
    return outcome


def _assert_stopped_with_the_snapshot(outcome, step: int, snapshot: int) -> None:
    """Stopped by SIGTERM after ``step``, its slices gone: the host snapshot of ``snapshot`` was
    committed (the newest checkpoint), exit code 143."""
    assert outcome.exit_code == 143, outcome
    assert outcome.reason.startswith(f"stopped by SIGTERM after step {step}: newest committed "
                                     f"checkpoint: step {snapshot} ("), outcome.reason
    assert outcome.reason.endswith("; its slices went while it stopped: saved the host "
                                   f"snapshot of step {snapshot}")


def test_slices_gone_while_stopping_commit_the_host_snapshot(tmp_path):
    """On GKE a JobSet's deletion sends SIGTERM to every pod at once: the slices may go before
    the head's final save. It does not wait for them to come back (they will not); it commits
    its newest host snapshot, newer than the last checkpoint, and exits 143."""
    from trainer_helpers import make_cfg

    from elastix_trainer.elastic.health import ManualHealth

    health = ManualHealth(4)
    health.on_wait = lambda h, required: h.set_up(1, 2)  # a waiter would get them back, later
    ck_dir = tmp_path / "ck"
    cfg = make_cfg(checkpoint_dir=str(ck_dir), steps=100, snapshot_period=5)

    def term_and_lose(session, n):
        if n == 7:
            os.kill(os.getpid(), signal.SIGTERM)  # a real signal, to the handler the CLI sets
            health.set_down(1, 2)

    outcome = _run_with_sigterm_handler(cfg, health, lambda trainer: term_and_lose)
    _assert_stopped_with_the_snapshot(outcome, step=6, snapshot=5)
    assert health.waits == [4]  # start-up only: no wait for slices that will not return
    assert Checkpointer(str(ck_dir), 1, EventLog(None)).committed_steps() == [4, 5]


def test_sigterm_while_waiting_for_a_lost_slice_commits_the_host_snapshot(tmp_path):
    """A slice is lost and the recovery waits for its replacement (on GKE minutes): the
    workload is deleted meanwhile. The wait ends at the SIGTERM, not at --slice-wait-timeout
    after the kubelet's SIGKILL: the host snapshot, newer than the last checkpoint, is
    committed and the run exits 143."""
    from trainer_helpers import make_cfg

    from elastix_trainer.elastic.health import ManualHealth

    health = ManualHealth(4)

    def term_in_recovery_wait(h, required):
        if len(h.waits) == 2:  # the recovery's wait: the replacement is far away
            os.kill(os.getpid(), signal.SIGTERM)  # a real signal, to the CLI's handler

    health.on_wait = term_in_recovery_wait
    ck_dir = tmp_path / "ck"
    cfg = make_cfg(checkpoint_dir=str(ck_dir), steps=100, snapshot_period=3,
                   slice_wait_timeout=60)

    def lose_once(trainer):
        def lose(session, n):
            if n == 8 and not trainer.events.of("elastic_detected"):
                health.set_down(2)
        return lose

    outcome = _run_with_sigterm_handler(cfg, health, lose_once)
    _assert_stopped_with_the_snapshot(outcome, step=7, snapshot=6)
    assert health.waits == [4, 4]
    assert Checkpointer(str(ck_dir), 1, EventLog(None)).committed_steps() == [4, 6]


def test_a_stop_waits_for_a_write_left_going_only_within_its_budget(tmp_path):
    """The recovery left the save of step 4 writing (the snapshot of step 4 is as new) and a
    SIGTERM comes while it waits for the lost slice. The stop waits for that write within
    --term-save-timeout, not --checkpoint-timeout: a stalled disk costs the stop its budget (1 s
    here), and the reason says which write and which flag."""
    import threading
    import time

    from trainer_helpers import make_cfg

    from elastix_trainer.elastic.health import ManualHealth

    health = ManualHealth(4)
    gate = threading.Event()

    def term_in_recovery_wait(h, required):
        if len(h.waits) == 2:
            os.kill(os.getpid(), signal.SIGTERM)

    health.on_wait = term_in_recovery_wait
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"), steps=100, snapshot_period=2,
                   slice_wait_timeout=60, term_save_timeout=1.0, checkpoint_timeout=60.0)

    def hold_then_lose(trainer):
        def hook(session, n):
            if n == 4 and not trainer.events.of("elastic_detected"):
                trainer.ckpt._writer.put(lambda: gate.wait(120))  # the save of 4 waits here
            if n == 5 and not trainer.events.of("elastic_detected"):
                health.set_down(2)
        return hook

    t0 = time.monotonic()
    try:
        outcome = _run_with_sigterm_handler(cfg, health, hold_then_lose)
    finally:
        gate.set()
    assert time.monotonic() - t0 < 45  # not the 60 s of --checkpoint-timeout
    assert outcome.exit_code == 143, outcome
    assert "the checkpoint write of step 4 did not finish in 1 s" in outcome.reason, outcome
    assert "--term-save-timeout" in outcome.reason
