"""The training loop on a mesh of slices: restore-or-init, steps, checkpoints, snapshots, logs.

A ``Trainer`` lives for the whole process; a ``Session`` is one attempt on one mesh (the elastic
runtime makes a new session after every event). The loop keeps steps in flight: step N's
loss is read after step N+1 is dispatched, as MaxText does, so Python overhead hides behind the
device (a slice loss therefore surfaces a step late, as on Pathways); on an accelerator more
are dispatched ahead (``InFlight``: about 1.5 s of steps), so the chip keeps working while
the loop's thread waits. Sync-copy, scale-up and end boundaries drain the pipeline first, and a
staged copy counts only once its step has completed, so only completed state is ever saved.

Whatever else a run needs at a step's boundaries (the elastic runtime's bookkeeping, a test
that fails a slice at step 6) is attached as ``Hooks``: one declared interface the loop calls at
fixed points, so the loop itself holds no backend's code. What the loop asks only because
devices can fail (the local backend's stand-in devices answer it; real chips fail by
themselves) is the other seam, ``Devices``: a reader sees which calls exist for that.
The errors that end a run carry their own hint and exit code, as the launcher's do.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import math
import statistics
import threading
import time
from collections.abc import Iterable

import jax
import numpy as np

from elastix.errors import ElastixError, UsageError
from elastix.protocol import eventspec
from elastix_trainer.config import TrainConfig
from elastix_trainer.data import make_iterator
from elastix_trainer.fit import memory_in_use
from elastix_trainer.kernels import ATTENTIONS, attention
from elastix_trainer.mesh import build_mesh, num_devices, on_pathways, slice_devices
from elastix_trainer.model import PRESETS, ModelConfig, flops_per_step, from_file
from elastix_trainer.obs.events import EventLog, log
from elastix_trainer.seams import Devices, Hooks, Session
from elastix_trainer.state.checkpoint import Checkpointer, SaveTimeout, check_matches
from elastix_trainer.state.hostcopy import HostCopy
from elastix_trainer.state.snapshot import SnapshotStore
from elastix_trainer.step import (
    OptConfig,
    StepFns,
    abstract_state,
    build_ahead,
    finite_tree,
    fresh_state,
    init_state,
    precompile,
    step_fns,
)


def loop_platform() -> str:
    """The platform the steps run on: ``tpu`` under Pathways too (its backend is a proxy)."""
    return "tpu" if jax.default_backend() == "tpu" or on_pathways() else jax.default_backend()


def model_config(cfg: TrainConfig, platform: str | None = None) -> ModelConfig:
    """The preset (or ``--model-config``'s model) with the choices of ``platform`` (default:
    where the steps run, :func:`loop_platform`) made: the activation dtype, the attention
    kernel (the remat policy's ``auto`` and the loss's tiles' ``0`` are the compile's to
    resolve: ``fit.choose``). The fit check (``fitcheck``) asks for ``tpu`` on a machine
    without one.

    Raises:
        UsageError: an attention kernel that does not run on this platform or shape.
    """
    model = from_file(cfg.model_config) if cfg.model_config else PRESETS[cfg.preset]
    platform = platform or loop_platform()
    dtype = cfg.dtype
    if dtype == "auto":
        dtype = "bfloat16" if platform == "tpu" else "float32"
    why = attention.check(cfg.attention, platform, cfg.seq_len, model.head_dim)
    if why:
        raise UsageError(why, hint="--attention " + " or ".join(
            a for a in ATTENTIONS if a != cfg.attention))
    return dataclasses.replace(
        model, dtype=dtype, attention=attention.resolve(cfg.attention, platform, cfg.seq_len,
                                                        model.head_dim),
        remat_policy=cfg.remat_policy, num_vocab_tiling=cfg.num_vocab_tiling,
        sa_block=cfg.sa_block or attention.BLOCK, sa_fused_bwd=cfg.sa_use_fused_bwd_kernel,
        scan_layers=cfg.scan_layers)


def opt_config(cfg: TrainConfig) -> OptConfig:
    """The optimizer ``cfg`` asks for (part of what the step compiles)."""
    return OptConfig(lr=cfg.lr, warmup_steps=cfg.warmup_steps, total_steps=cfg.steps,
                     schedule=cfg.lr_schedule, weight_decay=cfg.weight_decay)


def copy_mode(cfg: TrainConfig) -> str:
    """How the run takes host copies of its state (``--snapshot-copy``), ``sync`` where it
    takes none: part of what the step compiles (``step.step_fns``'s ``copy``)."""
    return cfg.snapshot_copy if (cfg.snapshot_period or cfg.checkpoint_dir) else "sync"


AHEAD_SECONDS = 1.5
"""On an accelerator, ``--steps-in-flight 0`` keeps about this much device work dispatched
ahead of the step whose result the loop reads. Why: on a v5e chip a checkpoint's background
write held the GIL for 0.4-1.1 s once a save (inside Tensorstore's ``write``, called by
Orbax's numpy handler; every Python thread stopped, a process beside it did not), and with one
step in flight the chip idled for all of it (docs/benchmarks.md). 1.5 s covers the longest
hold seen with room to spare."""
MAX_IN_FLIGHT = 16


class ReadyClock:
    """When each dispatched step's result was ready on the devices: a thread waits on each
    step's metrics in dispatch order and notes the moment (``time.monotonic``). A step's time
    is then from the devices' side, the time between two results being ready, whatever the loop
    was doing meanwhile (waiting for a copy while the devices computed the steps queued, then
    reading several in a burst): issue 74. The loop still reads every result itself (a failed
    step raises there); this only dates them."""

    WAIT = 5.0
    """Seconds the loop waits for the thread's date of a result it has read (a busy machine);
    past it the loop's own time is used, and the step says so."""

    def __init__(self) -> None:
        import queue

        self._queue: queue.Queue = queue.Queue()
        self._ready: dict[int, float] = {}
        self._cond = threading.Condition()
        threading.Thread(target=self._run, name="elastix-ready-clock", daemon=True).start()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            n, metrics = item
            try:
                metrics.block_until_ready()
            except Exception:  # noqa: BLE001 - the loop's own read raises it where it counts
                return
            with self._cond:
                self._ready[n] = time.monotonic()
                self._cond.notify_all()

    def watch(self, n: int, metrics) -> None:
        """Date step ``n``'s result once the devices have it."""
        self._queue.put((n, metrics))

    def ready(self, n: int) -> float | None:
        """When step ``n``'s result was ready (the loop has read it, so it is); None when the
        thread did not say within :attr:`WAIT` seconds."""
        with self._cond:
            self._cond.wait_for(lambda: n in self._ready, timeout=self.WAIT)
            return self._ready.pop(n, None)

    def close(self) -> None:
        self._queue.put(None)


class InFlight:
    """How many steps the loop keeps dispatched and not yet read (``--steps-in-flight``).

    A step's failure still surfaces at once: the loop always waits on the oldest step in
    flight, so a lost slice fails that one and the ones queued behind it. What more steps in
    flight cost: a stop or a drain (a sync copy, a scale-up, the end) waits for them all, at
    most about ``AHEAD_SECONDS`` with the automatic depth.
    """

    def __init__(self, asked: int, platform: str) -> None:
        self.auto = asked == 0 and platform != "cpu"
        self.depth = asked or 1
        """Steps in flight wanted now: the asked number, 1 on CPU (the loop and the steps share
        its cores: nothing to hide), or, on an accelerator, once three intervals between
        completed steps are known, as many as ``AHEAD_SECONDS`` of them (at most
        ``MAX_IN_FLIGHT``)."""
        self._last: float | None = None
        self._gaps: collections.deque[float] = collections.deque(maxlen=9)

    def completed(self, at: float) -> None:
        """A step's result was read at monotonic ``at``."""
        if not self.auto:
            return
        if self._last is not None:
            self._gaps.append(at - self._last)
        self._last = at
        if len(self._gaps) >= 3:
            step = max(statistics.median(self._gaps), 1e-6)
            self.depth = max(1, min(MAX_IN_FLIGHT, math.ceil(AHEAD_SECONDS / step)))


class Trainer:
    """Owns the data iterator, checkpointer and snapshots across sessions.

    Args:
        cfg: validated config.
        events: the JSONL event log.
        hooks: what to attach at once (``add_hooks``).
        devices: what the loop asks of the devices (:class:`Devices`); by default nothing, as
            on real chips.
    """

    def __init__(self, cfg: TrainConfig, events: EventLog, hooks: Iterable[Hooks] = (),
                 devices: Devices | None = None):
        self.cfg, self.events = cfg, events
        self.model = model_config(cfg)
        self.opt = opt_config(cfg)
        self.slices = slice_devices(cfg.num_slices)
        self.data = make_iterator(cfg.data, cfg.seq_len, self.model.vocab_size, cfg.seed)
        self.ckpt = (Checkpointer(cfg.checkpoint_dir, cfg.checkpoint_period, events,
                                  continuous=cfg.continuous_checkpointing,
                                  async_save=cfg.async_checkpoint, max_to_keep=cfg.max_to_keep,
                                  settle_timeout=cfg.checkpoint_timeout)
                     if cfg.checkpoint_dir else None)
        self.snapshots = SnapshotStore(events)
        self.copy_mode = copy_mode(cfg)
        """How host copies of the state (snapshots, checkpoints) are taken
        (``TrainConfig.snapshot_copy``; ``StepFns.stage`` and ``StepFns.step_copy`` say whether
        the compiled step could take them so). ``overlap`` only when asked for: on a v5e chip
        (2026-12-05) the step's copy into pinned host memory ran at 0.9 GB/s and held the
        copying step for its whole length (docs/benchmarks.md, "The state's copies on a
        chip"). ``staged`` copies on the devices, where the copy costs milliseconds, and leaves
        the slow device-to-host read to a thread while the steps run."""
        self.last_completed = 0
        self.resumed = False  # a state was restored or initialised: later restores recover
        self.stop_requested: str | None = None  # a signal's name: stop at the next step
        self._staged: HostCopy | None = None  # a staged host copy whose read may not have ended
        self.hooks: list[Hooks] = []
        self.add_hooks(*hooks)
        self.devices = devices if devices is not None else Devices()

    def add_hooks(self, *hooks: Hooks) -> None:
        """Attach ``hooks``; they run in ascending ``order``, then in the order attached."""
        self.hooks = sorted([*self.hooks, *hooks], key=lambda h: h.order)

    @functools.cached_property
    def state_shapes(self) -> dict:
        """The training state's shapes and dtypes (``jax.eval_shape``: nothing allocated),
        traced once for the start-up checks that read them."""
        return jax.eval_shape(lambda: init_state(self.model, self.opt, self.cfg.seed))

    def check_resume(self) -> None:
        """Fail with a usage error, before training, when the newest committed checkpoint
        belongs to another model (another --preset)."""
        if self.ckpt is None:
            return
        while (step := self.ckpt.latest_committed()) is not None:
            try:
                check_matches(self.ckpt.directory, step, self.state_shapes)
                return
            except UsageError:
                raise  # readable, but another model's: a re-run cannot help either
            except Exception as e:  # noqa: BLE001 - unreadable metadata: a damaged step
                self.ckpt.mark_damaged(step, e)
        if self.ckpt.damaged:
            raise self.ckpt.unreadable()

    def verify_transfer(self, slice_ids: frozenset[int], what: str) -> None:
        """The devices' verdict on a copy that just ended (``Devices.verify_transfer``)."""
        self.devices.verify_transfer(slice_ids, what)

    # -- sessions ------------------------------------------------------------------------------
    def restore_candidate(self) -> tuple[str, int] | None:
        """Newest of (host snapshot, committed checkpoint); a tie goes to the snapshot (no I/O).
        A staged copy still being read when the steps failed is waited for first."""
        self.settle_copy()
        best = None
        if self.ckpt is not None:
            c = self.ckpt.latest_committed()
            if c is not None:
                best = ("checkpoint", c)
        snap = self.snapshots.latest
        if snap is not None and (best is None or snap.step >= best[1]):
            best = ("snapshot", snap.step)
        return best

    def step_fns_for(self, mesh) -> StepFns:
        """The compiled step for ``mesh`` (built once per mesh, by whichever thread asks first)."""
        return step_fns(*self._step_args(mesh))

    def _step_args(self, mesh) -> tuple:
        return (self.model, self.opt, mesh, self.cfg.batch_per_device, self.cfg.seq_len,
                self.cfg.seed, self.devices.step_prologue, self.copy_mode)

    def build_ahead(self) -> None:
        """Start building the step for every slice, the mesh a run starts on unless a slice is
        down at the start, so that it builds while the checkpoint is checked and the slices
        are awaited. ``start`` then waits for it rather than building it again."""
        build_ahead(*self._step_args(build_mesh(self.slices, frozenset(self.slices))))

    def precompile(self, candidates, stop: threading.Event, warm: bool = False
                   ) -> threading.Thread:
        """Compile the step for each slice set in ``candidates`` in the background (and, with
        ``warm``, run it once on throw-away zeros: ``step.warm_up``)."""
        return precompile(self.step_fns_for, (build_mesh(self.slices, ids) for ids in candidates),
                          stop, warm)

    def start(self, slice_ids) -> Session:
        """Build the mesh on ``slice_ids`` and restore the newest state onto it (or init).

        The step compiles (or loads from the compilation cache) in a thread while the state is
        read: on a restart both take seconds, and neither needs the other.
        """
        ids = frozenset(slice_ids)
        mesh = build_mesh(self.slices, ids)
        self.devices.on_mesh(ids)
        building = threading.Thread(target=self._build_quietly, args=(mesh,),
                                    name="elastix-build-step", daemon=True)
        building.start()
        try:
            session = self._restore_onto(ids, mesh)
        finally:  # whatever happened, no compile may outlive this call (see precompile)
            building.join()
        # Built: the watchdog measures from here, so a step that then hangs is timed alone,
        # not together with a first compile that took long on a loaded machine.
        self.events.progress()
        return session

    def _build_quietly(self, mesh) -> None:
        try:
            self.step_fns_for(mesh)
        except Exception:  # noqa: BLE001 - start() builds again and raises it where it counts
            pass

    def _restore_onto(self, ids: frozenset[int], mesh) -> Session:
        abstract = abstract_state(self.model, self.opt, mesh, self.cfg.seed)
        gb = self.cfg.batch_per_device * num_devices(mesh)
        while True:
            cand = self.restore_candidate()
            if cand is None:
                if self.ckpt is not None and self.ckpt.damaged:
                    raise self.ckpt.unreadable()
                self.data.restore({"next_index": 0})
                self.resumed = True
                self.last_completed = 0
                for hook in self.hooks:
                    hook.after_restore("init", 0)
                # the init program compiles here while the step compiles in start()'s thread
                state = fresh_state(self.model, self.opt, mesh, self.cfg.seed)
                return Session(ids, mesh, self.step_fns_for(mesh), state, 0, gb)
            source, step = cand
            held = memory_in_use(mesh.devices.flat)
            if held:  # what the restore's new state must fit beside (chips only)
                log.info("elastix: restoring step %d from %s: %s", step, source, held)
            t0 = time.monotonic()
            if source == "snapshot":
                state, snap = self.snapshots.restore(abstract)
                data_state, nbytes, path = snap.data_state, snap.nbytes, "host-memory"
                break
            try:
                state, data_state, nbytes = self.ckpt.restore(step, abstract)
            except jax.errors.JaxRuntimeError:
                raise  # a device failed (a slice lost mid-restore): not the checkpoint's fault
            except Exception as e:  # noqa: BLE001 - a truncated or missing file: skip the step
                self.ckpt.mark_damaged(step, e)
                continue
            path = f"{self.ckpt.directory}/{step}"
            break
        jax.block_until_ready(state)
        seconds = time.monotonic() - t0
        self.verify_transfer(ids, f"restore of step {step}")  # a lost host fails it, as on TPU
        self.data.restore(data_state)
        if self.resumed and step > self.last_completed:
            # A copy newer than the last step logged (staged, steps in flight): the steps
            # between completed on the devices and were never logged. Said, so that steps lost
            # and --verify count them rather than miss them.
            self.events.emit(eventspec.STEPS_SKIPPED, first=self.last_completed + 1, last=step,
                             count=step - self.last_completed)
        self.resumed = True
        self.last_completed = step
        for hook in self.hooks:
            hook.after_restore(source, step)
        info = {"source": source, "step": step, "bytes": nbytes, "seconds": seconds, "path": path}
        if source == "checkpoint" and self.ckpt.last_verify is not None:
            info["verified"] = self.ckpt.last_verify[0]  # against the checksums of its commit
        rec = self.events.emit(eventspec.RESTORE, **info)
        # a recovery's elastic_restored dates from this instant, with the recorded seconds
        info.update(seconds=rec["seconds"], ts=rec["ts"])
        return Session(ids, mesh, self.step_fns_for(mesh), state, step, gb, info)

    # -- the loop ------------------------------------------------------------------------------
    def train(self, s: Session, until: int | None = None) -> str:
        """Run steps until ``until`` (default ``cfg.steps``).

        Returns:
            ``"completed"`` or ``"scale_up"`` (a hook's ``scale_up_wanted`` at a safe point; the
            state is in a fresh host snapshot). Raises whatever a step (or a hook) raises.
        """
        target = self.cfg.steps if until is None else until
        flops = flops_per_step(self.model, s.global_batch, self.cfg.seq_len)
        pending: collections.deque = collections.deque()  # (step, metrics), oldest first
        t_prev = time.monotonic()
        clock = ReadyClock()
        copy_next: HostCopy | None = None  # the next dispatch copies this step's state
        copying: HostCopy | None = None  # a copy taken by a step not yet completed
        ahead = InFlight(self.cfg.steps_in_flight, loop_platform())

        def read_oldest() -> None:
            nonlocal t_prev
            t_prev = self._complete(s, pending.popleft(), t_prev, flops, clock)

        def complete_all() -> None:
            nonlocal copying
            while pending:
                read_oldest()
            copying = self._land(s, copying, wait=True)

        try:
            while s.step < target:
                if self.stop_requested:
                    if pending:
                        complete_all()
                    self._save_on_stop(s)
                n = s.step + 1
                for hook in self.hooks:
                    hook.before_dispatch(s, n)
                self.devices.before_dispatch(s, n)
                batch = jax.device_put(self.data.next_batch(s.global_batch), s.fns.batch_sharding)
                if copy_next is not None:
                    s.state, metrics, copy_next.host, copy_next.finite = s.fns.step_copy(s.state,
                                                                                       batch)
                    copying, copy_next = copy_next, None
                else:
                    s.state, metrics = s.fns.step(s.state, batch)
                s.step = n
                # Its transfer is queued now, before any staged copy's read can queue ahead of it.
                metrics.copy_to_host_async()
                clock.watch(n, metrics)
                while len(pending) >= ahead.depth:
                    read_oldest()
                    ahead.completed(t_prev)
                    copying = self._land(s, copying)
                pending.append((n, metrics))
                if self.cfg.step_delay:
                    time.sleep(self.cfg.step_delay)
                snap_due = self.cfg.snapshot_period and n % self.cfg.snapshot_period == 0
                ckpt_due = self.ckpt is not None and (
                    self.ckpt.due(n) and not (copying is not None and copying.checkpoint)
                    or n == target == self.cfg.steps)
                scale_up = any(hook.scale_up_wanted(s) for hook in self.hooks)
                if not (snap_due or ckpt_due or scale_up or n == target):
                    continue
                while copying is not None and pending and \
                        self.last_completed < copying.step + (copying.done is None):
                    # A copy in flight lands before the next starts (at most two host copies),
                    # and only once its step has completed: read the steps up to it.
                    read_oldest()
                if (s.fns.step_copy is not None and not scale_up and n < target and copying is None
                        and not self.stop_requested):
                    # The next step copies this state while it computes: no drain, no wait.
                    copy_next = HostCopy(n, self.data.state(), bool(snap_due), ckpt_due,
                                      time.monotonic())
                    continue
                if s.fns.stage is not None and not scale_up and n < target and \
                        not self.stop_requested:
                    # Copied on the devices now, read to the host while the next steps run.
                    copying = self._stage(s, n, copying, bool(snap_due), ckpt_due)
                    continue
                complete_all()
                jax.block_until_ready(s.state)  # a poisoned state fails here, before any save
                if (snap_due or ckpt_due) and not _all_finite(s.state):
                    raise Diverged(f"the training state holds NaN or inf at step {n} (the loss was "
                                   "still finite): training diverged; nothing from it is saved")
                data_state = self.data.state()
                snap = None
                check = self._copy_check(s, n)  # a copy that needed a lost host fails
                probe = self._copy_probe(s, n)  # ... and stops being waited for once that is known
                if snap_due or scale_up:
                    snap = self.snapshots.take(n, s.state, data_state, check=check, probe=probe)
                if ckpt_due:  # the snapshot's host copy is this step's: written, not copied again
                    self.ckpt.save(n, s.state, data_state, check=check, probe=probe,
                                   host_state=snap.host_state if snap is not None else None)
                    for hook in self.hooks:
                        hook.after_save(s, n)
                if scale_up and n < target:
                    if self.ckpt is not None:
                        self.ckpt.settle()  # scale up only once any in-flight save has settled
                    return "scale_up"
            if pending:
                complete_all()
            return "completed"
        finally:
            clock.close()

    def _stage(self, s: Session, n: int, copying: HostCopy | None, snapshot: bool,
               checkpoint: bool) -> HostCopy:
        """Start the host copy of step ``n``'s state: a copy on the devices (``StepFns.stage``,
        dispatched, not waited for) that a thread reads to host memory. A copy still in
        flight lands first, waited for: at most two host copies exist, and a snapshot is
        never skipped (which step a recovery returns to does not depend on timing)."""
        began = time.monotonic()
        self._land(s, copying, wait=True)
        on_device, finite = s.fns.stage(s.state)
        copy = HostCopy(n, self.data.state(), snapshot, checkpoint, began)
        ids = copy.slice_ids = s.slice_ids
        copy.fetch(on_device, finite,
                   lambda: self.verify_transfer(ids, f"host copy of step {n}"),
                   lambda: self.devices.check_transfer(ids, f"host copy of step {n}"))
        copy.blocking = time.monotonic() - began
        self._staged = copy
        return copy

    def settle_copy(self) -> None:
        """After the steps stopped (a failure, a stop): a staged copy still being read lands
        once its read has ended, as a snapshot if it is whole (its state was complete when it
        was staged, so a read that ends whole is a good copy); a read that failed is dropped.
        So the step a recovery returns to does not depend on how far the read had got when
        the steps failed, only on whether it could end."""
        copy, self._staged = self._staged, None
        if copy is None:
            return
        copy.done.wait()
        if copy.error is None and copy.finite and copy.ended is not None \
                and copy.slice_ids is not None:
            try:  # a read that ended after a host it needed was lost failed, as on a chip
                self.devices.verify_read_ended(copy.slice_ids, f"host copy of step {copy.step}",
                                               copy.ended)
            except Exception as e:  # noqa: BLE001 - the devices' verdict: not kept
                copy.error = e
        if copy.error is not None or not copy.finite:
            log.info("elastix: the host copy of step %d is not kept: %s", copy.step,
                     "its state held NaN or inf" if copy.error is None else
                     (str(copy.error).splitlines() or [type(copy.error).__name__])[0][:200])
            return
        if copy.snapshot:
            self.snapshots.keep(copy.step, copy.host, copy.data_state,
                                copy_seconds=copy.ended - copy.began,
                                blocking_seconds=copy.blocking, copy_began=copy.began)

    def _land(self, s: Session, copy: HostCopy | None, wait: bool = False) -> HostCopy | None:
        """A copy taken by a step while it computed counts once that step has completed (its
        result was read), and a staged copy once its read to the host has ended too (``wait``:
        wait for that read): keep it as the snapshot and hand it to the checkpoint that wanted
        it. Returns the copy still in flight (None once landed). A copy whose state held NaN
        or inf stops the run (``Diverged``), as a boundary copy does; a read that failed
        raises its error, the copy dropped."""
        # the step that took an overlapped copy is the next one; a staged copy's is its own
        if copy is None or self.last_completed < copy.step + (copy.done is None):
            return copy
        if copy.done is not None:
            if not copy.done.is_set() and not wait:
                return copy
            copy.done.wait()
            self._staged = None
            if copy.error is not None:
                raise copy.error  # the read, or the hosts' verdict on it, failed
        landed = time.monotonic() if copy.ended is None else copy.ended
        if not bool(copy.finite):
            raise Diverged(f"the training state holds NaN or inf at step {copy.step} (the loss "
                           "was still finite): training diverged; nothing from it is saved")
        if copy.done is None:  # a staged copy's hosts answered when its read ended
            self.verify_transfer(s.slice_ids, f"host copy of step {copy.step}")
        if copy.snapshot:
            self.snapshots.keep(copy.step, copy.host, copy.data_state,
                                copy_seconds=landed - copy.began, blocking_seconds=copy.blocking,
                                copy_began=copy.began)
        if copy.checkpoint and self.ckpt is not None:
            self.ckpt.save(copy.step, None, copy.data_state, host_state=copy.host)
            for hook in self.hooks:
                hook.after_save(s, copy.step)
        return None

    def _copy_check(self, s: Session, n: int):
        """The verdict on a host copy of step ``n``'s state, for the stores to ask once it ended."""
        return lambda what: self.verify_transfer(s.slice_ids, f"{what} of step {n}")

    def _copy_probe(self, s: Session, n: int):
        """Whether a host copy of step ``n``'s state under way can still complete, for the
        stores to ask between its parts (``Devices.check_transfer``)."""
        return lambda what: self.devices.check_transfer(s.slice_ids, f"{what} of step {n}")

    def _complete(self, s: Session, pending, t_prev: float, flops: float,
                  clock: ReadyClock | None = None) -> float:
        """Read step ``n``'s result, judge it, log it. Its ``seconds`` run from the previous
        result being ready on the devices (``t_prev``; for a session's first step, the session's
        start) to this one's (``ReadyClock``); ``read_lag`` is how much later the loop read it.
        Returns the time this step's result was ready."""
        n, metrics = pending
        # The sync point: a failed step raises JaxRuntimeError here.
        value, grad_norm, lr = (float(v) for v in np.asarray(metrics))
        if not math.isfinite(value):
            # Before any save of this step's state: a diverged state is never checkpointed.
            raise Diverged(f"the loss is {value} at step {n}: training diverged; nothing from "
                           f"step {n} on is saved")
        now = time.monotonic()
        self.devices.verify_complete(s, n, now)
        ready = clock.ready(n) if clock is not None else None
        done = min(ready, now) if ready is not None else now
        seconds = max(done - t_prev, 0.0)
        tflops = flops / max(seconds, 1e-9) / s.fns.num_devices / 1e12
        self.events.emit(eventspec.STEP, step=n, seconds=seconds, loss=value,
                         live_slices=len(s.slice_ids), tflops_per_device=tflops,
                         global_batch=s.global_batch, grad_norm=grad_norm, learning_rate=lr,
                         tokens_per_second_per_device=s.global_batch * self.cfg.seq_len
                         / s.fns.num_devices / max(seconds, 1e-9),
                         clock="device" if ready is not None else "loop",
                         read_lag=now - done)
        self.last_completed = n
        for hook in self.hooks:
            hook.after_complete(s, n, now, seconds)
        return done

    def _save_on_stop(self, s: Session) -> None:
        """A stop was requested (SIGTERM): commit the current step if time allows, then raise
        ``Terminated`` saying what is on storage and how long the save took."""
        why = self.stop_requested
        committed, seconds, note = None, 0.0, "no --checkpoint-dir"
        if self.ckpt is not None:
            t0 = time.monotonic()
            budget = self.cfg.term_save_timeout
            try:
                self.ckpt.settle(timeout=budget)  # the save in flight first
                if s.step not in self.ckpt.committed_steps() and _all_finite(s.state):
                    self.ckpt.save(s.step, s.state, self.data.state(),
                                   check=self._copy_check(s, s.step),
                                   probe=self._copy_probe(s, s.step))
                    self.ckpt.settle(timeout=max(0.0, budget - (time.monotonic() - t0)))
                note = ""
            except SaveTimeout as e:
                note = f"{e}; raise --term-save-timeout (and the pod's grace period) to keep it"
            seconds = time.monotonic() - t0
            committed = self.ckpt.latest_committed()
        raise Terminated(why, s.step, committed, seconds, note)

    def stop_after_loss(self) -> Terminated:
        """A stop was requested and the slices went before the current step was committed (on
        GKE a JobSet's deletion sends SIGTERM to every pod at once, so the hosts may go first):
        the device state is gone, so commit the newest host snapshot if it is newer than the
        newest committed checkpoint, then say what is on storage. Returns the ``Terminated``
        to end the run with."""
        why = self.stop_requested or "a stop request"
        self.settle_copy()
        snap, committed, seconds, note = self.snapshots.latest, None, 0.0, "no --checkpoint-dir"
        if self.ckpt is not None:
            t0 = time.monotonic()
            note = "its slices went while it stopped"
            budget = self.cfg.term_save_timeout
            try:
                # a write the recovery left going (``Checkpointer.leave_writing``) ends first,
                # within the stop's budget, not the longer --checkpoint-timeout of save()
                self.ckpt.settle(timeout=budget)
                newest = self.ckpt.latest_committed()
                if snap is not None and (newest is None or snap.step > newest):
                    self.ckpt.save(snap.step, None, snap.data_state, host_state=snap.host_state)
                    ok = self.ckpt.settle(timeout=max(0.0, budget - (time.monotonic() - t0)))
                    note += (f": saved the host snapshot of step {snap.step}" if ok else
                             f": the host snapshot of step {snap.step} did not commit")
            except SaveTimeout as e:
                note += f": {e}; raise --term-save-timeout (and the pod's grace period) to keep it"
            except Exception as e:  # noqa: BLE001 - the run is stopping: say it, keep the reason
                note += f": saving the host snapshot failed ({type(e).__name__})"
            seconds = time.monotonic() - t0
            committed = self.ckpt.latest_committed()
        return Terminated(why, self.last_completed, committed, seconds, note)

    def finish(self, session: Session | None = None) -> None:
        """Make sure the final state is committed, then release the checkpoint manager.

        Without ``session`` (a caller that stopped early on purpose) it only waits for the
        save in flight.

        A run whose last step is not on storage has not completed: a re-run would resume from
        an older step and redo (or silently lose) the rest. The final save is tried once more
        from the state still in memory (a full disk may have been freed, a storage error may
        have passed); if that fails too, ``FinalSaveFailed`` says so and the run fails.

        Raises:
            FinalSaveFailed: the final step could not be committed (or its write hung).
        """
        if self.ckpt is None:
            return
        final = self.last_completed
        try:
            self.ckpt.settle()
            if session is not None and final not in self.ckpt.committed_steps():
                error = self.ckpt.last_error() or "not committed on storage"
                log.warning("elastix: the final checkpoint (step %d) did not commit (%s); "
                            "saving it again", final, error)
                try:
                    self.ckpt.save(final, session.state, self.data.state(),
                                   check=self._copy_check(session, final),
                                   probe=self._copy_probe(session, final))
                    ok = self.ckpt.settle()
                except OSError as e:  # clearing the failed attempt's files failed too
                    ok, error = False, (str(e).splitlines() or [type(e).__name__])[0]
                if ok is not True:
                    newest = self.ckpt.latest_committed()
                    raise FinalSaveFailed(
                        f"the final checkpoint (step {final}) did not commit: "
                        f"{self.ckpt.last_error() or error}; the newest committed checkpoint is "
                        + (f"step {newest}" if newest is not None else "none"), final, newest)
            self.ckpt.retire()  # what --max-to-keep no longer keeps
        except SaveTimeout as e:  # the write in flight hung: the same failure, said by itself
            raise FinalSaveFailed(str(e), final, None) from None
        finally:
            self.ckpt.close()


STORAGE_HINT = ("make the storage writable again (free space, fix access), then re-run with "
                "the same --checkpoint-dir: it resumes from the newest committed step")
STOPPED_HINT = "it stopped on request; re-run with the same --checkpoint-dir to resume"


class Diverged(ElastixError):
    """The loss or the state stopped being finite: the run stops (it is not retried, since the
    same data and learning rate would diverge again) and the state is never saved."""

    def __init__(self, message: str) -> None:
        super().__init__(message, hint="lower --lr (or check the data); every committed "
                         "checkpoint holds a finite state")


_finite_jit = jax.jit(finite_tree)


def _all_finite(state) -> bool:
    """Every array of ``state`` is free of NaN and inf: one compiled reduction and one
    device-to-host read per save (a read per array is a round trip each through Pathways'
    proxy)."""
    return bool(_finite_jit(state))


class Terminated(ElastixError):
    """The process was asked to stop (SIGTERM) and stopped at a step boundary. Exit code 143
    (128 + SIGTERM), as a process the signal ended, so a supervisor tells it from a failure."""

    exit_code = 143

    def __init__(self, why: str, step: int, committed: int | None, seconds: float,
                 note: str) -> None:
        saved = (f"checkpoint of step {committed} committed" if committed == step and not note
                 else f"newest committed checkpoint: step {committed}" if committed is not None
                 else "no checkpoint committed")
        super().__init__(f"stopped by {why} after step {step}: {saved} ({seconds:.3f} s)"
                         + (f"; {note}" if note else ""), hint=STOPPED_HINT)
        self.step, self.committed = step, committed


class FinalSaveFailed(ElastixError):
    """The final step's checkpoint could not be committed: the run has not completed."""

    def __init__(self, message: str, step: int, committed: int | None) -> None:
        super().__init__(message, hint=STORAGE_HINT)
        self.step, self.committed = step, committed


def run_start_event(trainer: Trainer, cfg: TrainConfig) -> None:
    """``run_start`` with the slice layout and the config."""
    devices = sum(len(d) for d in trainer.slices.values())
    trainer.events.emit(eventspec.RUN_START, num_slices=len(trainer.slices), devices=devices,
                        config=dataclasses.asdict(cfg))
