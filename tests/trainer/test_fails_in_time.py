"""The stand-in devices fail *in time*: a step or a copy that needs a dead host never completes.

Each test runs the real trainer in this process on 2 slices of CPU devices, with real slice-host
processes (``python -m elastix.backends.local.host``) heartbeating to the real local health
source, and kills (SIGKILL) or freezes (SIGSTOP) one of them at one exact moment of the run,
from a hook on the training loop's own thread: between steps, during a step, during a
checkpoint's device-to-host copy, just after it, during a host snapshot's copy, during start-up,
during a restore, and a hung host. The killed host is replaced at once, as the supervisor does.

What every kill must give, with nothing undone afterwards:
- the recovery restores exactly the newest state whose copy ended before the loss (a host
  snapshot taken, a checkpoint whose copy ``save()`` finished), nothing older, nothing newer;
- steps lost count from the last step completed before the loss: ``last_step`` of the
  detection is the last ``step`` event written before the kill;
- nothing completes, is snapshotted or starts saving between the kill and the detection.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import jax
import pytest
from trainer_helpers import make_cfg, on, run_elastic, tap

from elastix.protocol.heartbeat import new_key
from elastix_trainer.elastic.local.health import LocalHeartbeatHealth

SLICE = 1  # the slice whose host dies
TIMEOUT = 1.0  # heartbeat timeout: how long a hung host holds a step


class Hosts:
    """One real slice-host process per slice, and a supervisor's replacement of a dead one."""

    def __init__(self, num_slices: int) -> None:
        self.dir = tempfile.mkdtemp(prefix="elastix-test-")  # short and 0700, as the supervisor's
        self.addr = f"unix:{self.dir}/health.sock"
        self.key = new_key()
        self.health = LocalHeartbeatHealth(self.addr, num_slices, timeout=TIMEOUT, key=self.key)
        self.procs = {s: self._spawn(s) for s in range(num_slices)}
        self.health.wait_for(num_slices, 60)

    def _spawn(self, s: int) -> subprocess.Popen:
        env = dict(os.environ, ELASTIX_LOCAL_HEALTH=self.addr, ELASTIX_SLICE=str(s),
                   ELASTIX_HOST="0", ELASTIX_HEARTBEAT_INTERVAL="0.05",
                   ELASTIX_HEARTBEAT_KEY=self.key)
        return subprocess.Popen([sys.executable, "-m", "elastix.backends.local.host"], env=env,
                                stdout=subprocess.DEVNULL)

    def kill(self, s: int) -> None:
        """SIGKILL the host of slice ``s``; its replacement starts at once."""
        old = self.procs[s]
        os.kill(old.pid, signal.SIGKILL)
        old.wait(10)
        self.procs[s] = self._spawn(s)

    def freeze(self, s: int, replace_when) -> None:
        """SIGSTOP the host of slice ``s``; once ``replace_when()``, the platform replaces it
        (as the supervisor replaces a hung host's pod, a while after it hangs)."""
        old = self.procs[s]
        os.kill(old.pid, signal.SIGSTOP)

        def replace():
            while not replace_when():
                threading.Event().wait(0.02)
            os.kill(old.pid, signal.SIGKILL)
            old.wait(10)
            self.procs[s] = self._spawn(s)

        threading.Thread(target=replace, daemon=True).start()

    def close(self) -> None:
        self.health.close()
        for p in self.procs.values():
            p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def hosts():
    h = Hosts(2)
    yield h
    h.close()


def _cfg(tmp_path, **kw):
    # Checkpoints every 4 steps, host snapshots every 3: step 8's checkpoint copies the state
    # itself, step 9's snapshot too, step 12 saves both from one copy.
    base = dict(num_slices=2, steps=14, checkpoint_period=4, snapshot_period=3,
                checkpoint_dir=str(tmp_path / "ck"), max_slice_losses=3, slice_wait_timeout=60,
                elastic_mode="pause-resume")
    return make_cfg(**{**base, **kw})


class Kill:
    """What the run had when the kill came, read on the loop's thread at that moment."""

    def __init__(self) -> None:
        self.done = False
        self.last_step: int | None = None
        self.saved: list[tuple[str, int]] = []  # states whose copy ended before the loss
        self.events_before = 0

    def fire(self, trainer, act) -> None:
        ev = trainer.events
        self.last_step = max((r["step"] for r in ev.of("step")), default=0)
        self.saved = ([("snapshot", r["step"]) for r in ev.of("snapshot_taken")]
                      + [("checkpoint", s) for s in trainer._test_copied])
        self.events_before = len(ev.records)
        self.done = True
        act()


def _run_with(tmp_path, hosts, attach, **cfg_kw):
    """Run to the end with ``attach(trainer, runtime, kill)`` setting up the kill."""
    kill = Kill()

    def setup(trainer, runtime):
        trainer._test_copied = []
        # after_save: the checkpoint's copy of step n ended (and was answered for)
        on(trainer, after_save=lambda s, n: trainer._test_copied.append(n))
        attach(trainer, runtime, kill)

    outcome, trainer, _ = run_elastic(_cfg(tmp_path, **cfg_kw), hosts.health, setup=setup)
    assert kill.done, "the kill never came"
    assert outcome.status == "completed", outcome
    return trainer, kill


def _check(trainer, kill, *, restored: tuple[str, int] | None = None) -> dict:
    """The recovery restored the newest state copied before the loss and counted its lost
    steps from the last step completed before it; nothing was kept in between."""
    records = trainer.events.records
    after = records[kill.events_before:]
    i = next(i for i, r in enumerate(after) if r["event"] == "elastic_detected")
    detected = after[i]
    kept = [(r["event"], r.get("step")) for r in after[:i]
            if r["event"] in ("step", "snapshot_taken", "checkpoint_save_started")]
    assert kept == [], f"work completed after the host was lost: {kept}"
    assert detected["last_step"] == kill.last_step
    # DATA_LOSS from a step or a copy; before the first step, the runtime's own look at the
    # slices once the session is set up ("went down during the restore") may see it first.
    assert "DATA_LOSS" in detected["error"] or "went down during" in detected["error"]
    newest = max(kill.saved, key=lambda x: (x[1], x[0] == "snapshot"), default=("init", 0))
    if restored is not None:
        assert newest == restored, (newest, kill.saved)
    back = next(r for r in after if r["event"] == "elastic_restored")
    assert (back["source"], back["step"]) == newest, (back, kill.saved)
    return detected


@pytest.mark.parametrize("async_checkpoint", [True, False])
def test_killed_between_steps(tmp_path, hosts, async_checkpoint):
    def attach(trainer, runtime, kill):
        def after(session, n, done_at, seconds):
            if n == 10 and not kill.done:
                kill.fire(trainer, lambda: hosts.kill(SLICE))
        on(trainer, after_complete=after)

    trainer, kill = _run_with(tmp_path, hosts, attach, async_checkpoint=async_checkpoint)
    assert kill.last_step == 10
    _check(trainer, kill, restored=("snapshot", 9))


def test_killed_during_a_step(tmp_path, hosts):
    """Killed while step 10 runs (dispatched, its result not yet answered for): 10 never
    completes, 9 did."""
    def attach(trainer, runtime, kill):
        def before(session, n):
            if n == 11 and not kill.done:  # step 10 is in flight
                kill.fire(trainer, lambda: hosts.kill(SLICE))
        on(trainer, before_dispatch=before)

    trainer, kill = _run_with(tmp_path, hosts, attach)
    assert kill.last_step == 9
    _check(trainer, kill, restored=("snapshot", 9))


def _kill_in_copy(hosts: Hosts, what: str, step: int):
    def attach(trainer, runtime, kill):
        def verify(slice_ids, copy):
            if copy == f"{what} of step {step}" and not kill.done:
                kill.fire(trainer, lambda: hosts.kill(SLICE))
        tap(trainer, first={"verify_transfer": verify})  # before the stand-in's verdict
    return attach


def test_killed_during_a_checkpoint_copy(tmp_path, hosts):
    """The checkpoint of step 8 copies the state itself: killed during that copy, it never
    starts writing (``checkpoint_save_failed``); the snapshot of 6 is the newest state."""
    trainer, kill = _run_with(tmp_path, hosts, _kill_in_copy(hosts, "checkpoint copy", 8))
    assert kill.last_step == 8
    failed = [r for r in trainer.events.of("checkpoint_save_failed") if r["step"] == 8]
    assert failed and "DATA_LOSS" in failed[0]["error"]
    _check(trainer, kill, restored=("snapshot", 6))
    assert 8 in [r["step"] for r in trainer.events.of("checkpoint_committed")]  # saved again


def test_killed_just_after_a_checkpoint_copy(tmp_path, hosts):
    """Killed once step 8's copy ended: that checkpoint is good (its write needs no host) and
    is what the recovery restores."""
    def attach(trainer, runtime, kill):
        def after_save(session, n):
            if n == 8 and not kill.done:
                kill.fire(trainer, lambda: hosts.kill(SLICE))
        on(trainer, after_save=after_save)

    trainer, kill = _run_with(tmp_path, hosts, attach)
    _check(trainer, kill, restored=("checkpoint", 8))


def test_killed_during_a_snapshot(tmp_path, hosts):
    """The snapshot of step 9 is never kept: the checkpoint of 8 is the newest state."""
    trainer, kill = _run_with(tmp_path, hosts, _kill_in_copy(hosts, "host snapshot", 9))
    assert 9 not in [r["step"] for r in trainer.events.records[:kill.events_before]
                     if r["event"] == "snapshot_taken"]
    _check(trainer, kill, restored=("checkpoint", 8))


def test_killed_during_a_staged_read(tmp_path, hosts):
    """``--snapshot-copy staged``: the snapshot of step 9 is copied on the devices, then read by
    a thread while the steps go on; a host killed before the hosts answered for that read
    fails it, and the copy is never kept, whatever the loop was doing meanwhile. The newest
    state is what was whole before: the checkpoint of 8 once committed, else the snapshot
    of 6."""
    trainer, kill = _run_with(tmp_path, hosts, _kill_in_copy(hosts, "host copy", 9),
                              snapshot_copy="staged")
    records = trainer.events.records
    back = next(r for r in records[kill.events_before:] if r["event"] == "elastic_restored")
    assert (back["source"], back["step"]) in {("checkpoint", 8), ("snapshot", 6)}, back
    first = records.index(back)
    assert 9 not in [r["step"] for r in records[:first] if r["event"] == "snapshot_taken"]
    taken = [r["step"] for r in records if r["event"] == "snapshot_taken"]
    assert taken[:2] == [3, 6] and 9 in taken[2:]  # taken again after the recovery


@pytest.mark.parametrize(("what", "step", "copy_mode", "restored"), [
    ("host snapshot", 9, "sync", {("checkpoint", 8)}),
    ("checkpoint copy", 8, "sync", {("snapshot", 6)}),
    ("host copy", 9, "staged", {("checkpoint", 8), ("snapshot", 6)}),
])
def test_a_copy_stops_once_its_loss_is_known(tmp_path, hosts, what, step, copy_mode, restored):
    """Killed between two parts of a copy: the copy stops at its next part, failed, without
    running on to its end for the hosts' verdict (on a chip the stand-in's copy of a 7 GB
    state would run on for seconds). Nothing of it is kept."""
    verdicts: list[str] = []

    def attach(trainer, runtime, kill):
        inner = trainer.devices

        def probe(slice_ids, copy):
            if copy == f"{what} of step {step}" and not kill.done:
                kill.fire(trainer, lambda: hosts.kill(SLICE))
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline:  # until the stand-in knows it
                    try:
                        inner.check_transfer(slice_ids, copy)
                    except jax.errors.JaxRuntimeError:
                        return
                    threading.Event().wait(0.01)
                raise AssertionError("the stand-in never saw the kill")

        def verify(slice_ids, copy):
            if not trainer.events.of("elastic_detected"):  # the copies before the recovery
                verdicts.append(copy)

        tap(trainer, first={"check_transfer": probe, "verify_transfer": verify})

    trainer, kill = _run_with(tmp_path, hosts, attach, snapshot_copy=copy_mode)
    assert f"{what} of step {step}" not in verdicts  # stopped before its end
    records = trainer.events.records
    detected = next(r for r in records[kill.events_before:] if r["event"] == "elastic_detected")
    if copy_mode == "sync":  # a staged read fails in its thread: a step may say it first
        assert f"during the {what} of step {step}" in detected["error"], detected["error"]
    back = next(r for r in records[kill.events_before:] if r["event"] == "elastic_restored")
    assert (back["source"], back["step"]) in restored, back
    first = records.index(back)
    kept = "checkpoint_committed" if what == "checkpoint copy" else "snapshot_taken"
    assert step not in [r["step"] for r in records[:first] if r["event"] == kept]
    if what == "checkpoint copy":
        failed = [r for r in trainer.events.of("checkpoint_save_failed") if r["step"] == step]
        assert failed and "DATA_LOSS" in failed[0]["error"]


def test_killed_during_start_up(tmp_path, hosts):
    """Killed before any state is on the devices: the first step fails, the run starts over
    from step 0 with nothing lost."""
    def attach(trainer, runtime, kill):
        def on_mesh(slice_ids):
            if not kill.done:
                kill.fire(trainer, lambda: hosts.kill(SLICE))
        tap(trainer, then={"on_mesh": on_mesh})  # once the stand-in took its roll: the
        # hosts this session needs

    trainer, kill = _run_with(tmp_path, hosts, attach)
    assert kill.last_step == 0
    _check(trainer, kill, restored=("init", 0))


def test_killed_during_a_restore(tmp_path, hosts):
    """A second host dies while the recovery restores: the restore fails at its own copy
    (not a step later), and the next recovery restores the same state."""
    def attach(trainer, runtime, kill):
        def after(session, n, done_at, seconds):
            if n == 10 and not kill.done:
                kill.fire(trainer, lambda: hosts.kill(SLICE))

        def verify(slice_ids, what):
            if what.startswith("restore") and runtime.recoveries == 1 and not second:
                second.append(what)
                hosts.kill(0)
        second: list[str] = []
        on(trainer, after_complete=after)
        tap(trainer, first={"verify_transfer": verify})

    trainer, kill = _run_with(tmp_path, hosts, attach)
    detected = trainer.events.of("elastic_detected")
    assert len(detected) == 2
    assert "during the restore of step 9" in detected[1]["error"]
    # Nothing completed since the first loss: the last step completed is still 10 (the
    # recovery that failed restored nothing), so 10 -> 9 is the one step lost in all.
    assert detected[1]["last_step"] == 10
    restored = trainer.events.of("elastic_restored")
    assert [(r["recovery"], r["source"], r["step"]) for r in restored] == [(2, "snapshot", 9)]


def test_a_hung_host_holds_the_step_then_fails_it(tmp_path, hosts):
    """Frozen (SIGSTOP) after step 10: the next step cannot complete; it is held until the
    host's heartbeats are a timeout old, then fails with DATA_LOSS; nothing completes
    meanwhile."""
    def attach(trainer, runtime, kill):
        def after(session, n, done_at, seconds):
            if n == 10 and not kill.done:
                kill.fire(trainer, lambda: hosts.freeze(
                    SLICE, lambda: trainer.events.of("elastic_detected")))
        on(trainer, after_complete=after)

    trainer, kill = _run_with(tmp_path, hosts, attach)
    detected = _check(trainer, kill, restored=("snapshot", 9))
    assert "stopped answering" in detected["error"]
    # Dated at the last time the host was heard (a heartbeat or an answer), before detection.
    assert detected["since_loss"] > 0



def test_a_read_that_ended_after_its_host_died_is_not_kept(hosts):
    """The stand-in as strict as a chip (issue 74): a staged copy whose read ended after a host
    of its mesh was killed is dropped once the loss is known, whatever the stand-in said at
    the read's end (it learns of a kill late, and CPU memory stays readable; a chip's read
    from a dead slice fails). A read that ended before the kill is kept. A real SIGKILL; the
    exit's time is the host watcher's."""
    from elastix_trainer.elastic.local.standin import LocalStandIn

    devices = LocalStandIn(hosts.health)
    mesh = frozenset({0, 1})
    devices.on_mesh(mesh)
    before = time.monotonic()
    hosts.kill(SLICE)
    deadline = time.monotonic() + 60
    while SLICE not in hosts.health.losses(mesh):  # until the stand-in knows it
        assert time.monotonic() < deadline, "the stand-in never saw the kill"
        threading.Event().wait(0.01)
    devices.verify_read_ended(mesh, "host copy of step 9", before)  # ended before: kept
    with pytest.raises(jax.errors.JaxRuntimeError) as got:
        devices.verify_read_ended(mesh, "host copy of step 9", time.monotonic())
    assert "DATA_LOSS" in str(got.value) and "before the read ended" in str(got.value)
    assert "during the host copy of step 9" in str(got.value)
