"""The trainer's process: logging, events, health, the trainer and its runtime, assembled.

``run(cfg)`` is what ``elastix-train`` does after parsing its flags: it picks the health source
for where it runs, creates what the run writes to, wires the trainer, its runtime, the
watchdog and TensorBoard together, and turns the run's outcome into an exit code.
``assemble`` (and ``build_trainer`` under it) is the part tests and benchmarks share with it:
the trainer and its runtime, with the local stand-in devices attached where the devices are
stand-ins.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import signal
import time

import jax

from elastix.errors import UsageError
from elastix.protocol import envvars, eventspec, timefmt
from elastix_trainer.elastic.health import HealthSource, PathwaysHealth, StaticHealth
from elastix_trainer.elastic.local import legacy
from elastix_trainer.elastic.local.health import LocalHeartbeatHealth
from elastix_trainer.elastic.local.standin import LocalStandIn
from elastix_trainer.elastic.runtime import ElasticRuntime, TrainingFailed
from elastix_trainer.mesh import on_pathways, slice_devices
from elastix_trainer.obs import mlgoodput, recoverypoint
from elastix_trainer.obs.events import EventLog, log, quiet_libraries, setup_logging
from elastix_trainer.obs.watchdog import Watchdog, default_timeout
from elastix_trainer.seams import Hooks, Session
from elastix_trainer.state import compilecache, hostmem
from elastix_trainer.state.manager import pathways_persistence
from elastix_trainer.train import Trainer, run_start_event


def health_from_env(num_slices: int) -> HealthSource:
    """The health source for this process: the local backend's heartbeats when it set an
    address, pathwaysutils' probe on Pathways, else every slice is taken as live.

    Here rather than in ``health``: ``local_health`` builds on ``health``, so the module that
    picks between them sits above both.
    """
    if os.environ.get(envvars.LOCAL_HEALTH):
        from elastix_trainer.elastic.local.health import LocalHeartbeatHealth

        return LocalHeartbeatHealth.from_env(num_slices)
    if on_pathways():
        return PathwaysHealth()
    return StaticHealth(num_slices)


def build_trainer(cfg, events: EventLog, health: HealthSource
                  ) -> tuple[Trainer, LocalStandIn | None]:
    """The trainer for ``cfg``, with the local stand-in attached where the devices need one.

    Pathways' slices fail by themselves: a lost slice's step fails there, and its health
    source is Pathways' own probe. Everywhere else the devices are this process's CPUs standing
    in for the slices' chips, whatever the health source (the local heartbeats, a test's
    manual one, the static one of a plain run), and ``LocalStandIn`` makes them fail as the
    chips would, from that source.
    """
    if on_pathways() or isinstance(health, PathwaysHealth) or (
            jax.default_backend() != "cpu" and not isinstance(health, LocalHeartbeatHealth)):
        # Real chips fail by themselves too; the stand-in's seam (a program and a host callback
        # before every step) is for chips whose slice hosts are the local backend's processes.
        return Trainer(cfg, events), None
    standin = LocalStandIn(health)
    trainer = Trainer(cfg, events, devices=standin)
    legacy.set_aside_marked(trainer.ckpt.directory if trainer.ckpt is not None else None)
    return trainer, standin


def assemble(cfg, events: EventLog, health: HealthSource) -> ElasticRuntime:
    """The trainer for ``cfg`` (``build_trainer``) and the elastic runtime that drives it
    (``runtime.trainer``), attached to it."""
    trainer, _ = build_trainer(cfg, events, health)
    return ElasticRuntime(trainer, health)


class SettleHeap(Hooks):
    """After the run's first completed step: the young generations collected, then every
    object still alive (the imports, the traced and compiled step, the run's bookkeeping)
    moved out of the collector's reach (``gc.freeze``), once per process.

    Why: CPython collects its oldest generation when it has grown by a quarter, and each such
    collection walks every object the process holds, holding the GIL: the loop cannot dispatch
    the next step meanwhile, and the chip idles. On a TPU v5e chip (12-06, bench-1g,
    ``--continuous-checkpointing``, 60 steps) the first two saves each came with one step of
    0.72-0.78 s instead of 0.13 s: 1.24 s of the 1.31 s the saves cost the run. On CPU a
    ``gc.callbacks`` trace of the ``small`` preset showed what sets such pauses off: the new
    objects of Orbax's first saves, then a collection of the oldest generation walking 200
    thousand objects (100-176 ms) in the writer's threads. With this hook the same trace shows
    20 ms here, once, and the later collection of the oldest generation walking 3 thousand
    objects in 2 ms. On the chip (12-07) it did not remove that stall: one step of 0.6-0.8 s
    per save remained, with the GIL free (a stack sampler's longest gap 39 ms) and the loop
    waiting for the step's metrics while Tensorstore wrote the save (docs/benchmarks.md,
    issue 58's fourth session). It stays for the CPU-side pauses it does remove. Only the
    young generations are collected
    here (a full collection took 100-140 ms): cycles that died in the oldest generation since
    its last collection stay unfreed (0 to 20 objects at this point on CPU); reference
    counting frees everything else as before. Megatron-LM takes the same view with
    ``--manual-gc`` (``megatron/training/arguments.py``: the threshold-based collector off, a
    collection at points the program chooses, against CPU-side jitter). Attached by
    the program (``run(settle_heap=True)``), not by an in-process run: a test process must
    not freeze what its other tests leave behind."""

    order = 100  # after every other hook has seen the step

    def __init__(self) -> None:
        self.done = False

    def after_complete(self, session: Session, n: int, done_at: float, seconds: float) -> None:
        if self.done:
            return
        self.done = True
        t = time.perf_counter()
        collected = gc.collect(1)
        gc.freeze()
        log.info("elastix: heap settled after the first step: %d objects frozen in %.1f ms "
                 "(%d collected)", gc.get_freeze_count(), (time.perf_counter() - t) * 1e3,
                 collected)


def _make_local_dir(flag: str, path: str | None) -> None:
    """Create a local output directory up front: one that cannot exist (``/proc/x``, under a
    file, no permission) is bad input said in one line, not an OSError from the first write."""
    if not path or path.startswith("gs://"):
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{flag} {path}: cannot create it ({e.strerror or e})",
                         hint="give a writable local directory (created if missing) or a "
                              "gs:// URL") from None


def _stop_on_sigterm(trainer: Trainer) -> None:
    """SIGTERM (a deleted, failed or preempted workload) stops the run at the next step
    boundary, after committing a checkpoint if ``--term-save-timeout`` allows, with ``run_end``
    written and exit code 143. The handler also matters for its own sake: in the head pod the
    trainer is often PID 1 (``bash -c`` execs a lone command), and PID 1 ignores a signal whose
    action is the default, so without it SIGTERM did nothing until the kubelet's SIGKILL."""
    def handler(signum, frame):
        name = signal.Signals(signum).name
        if trainer.stop_requested is None:
            log.info("elastix: %s received: stopping after the current step", name)
        trainer.stop_requested = name

    signal.signal(signal.SIGTERM, handler)


def absolute_checkpoint_dir(cfg):
    """``cfg`` with a relative local ``--checkpoint-dir`` made absolute against the working
    directory, said once.

    Resolved, not refused: a relative path means "here" to every other command-line tool, and
    the local backend runs the head in the directory ``workload create`` ran in. Orbax itself
    refuses one ("Checkpoint path should be absolute") on every save, which used to fail each
    save of a whole run and end it with a wrong hint.
    """
    ck = cfg.checkpoint_dir
    if not ck or ck.startswith("gs://") or os.path.isabs(ck):
        return cfg
    absolute = os.path.abspath(ck)
    log.info("elastix: --checkpoint-dir %s is relative: using %s", ck, absolute)
    return dataclasses.replace(cfg, checkpoint_dir=absolute)


def check_host_memory(cfg, trainer: Trainer, root: str = "/") -> None:
    """Refuse, before the first step, a run whose host copies of the state cannot fit in host
    memory (``state.hostmem``; ``root``: where ``/proc`` and ``/sys`` are read); the plan is
    logged either way."""
    need = hostmem.copies(cfg, hostmem.tree_bytes(trainer.state_shapes),
                          cpu_replicas=len(trainer.slices) if jax.default_backend() == "cpu"
                          else 0,
                          persistence=pathways_persistence())
    have = hostmem.available(root)
    if need.count:
        log.info("elastix: host memory: %d cop%s of the %s state (%s), %s available",
                 need.count, "y" if need.count == 1 else "ies", hostmem.size(need.state_bytes),
                 hostmem.size(need.bytes), hostmem.size(have.bytes) if have else "unknown")
    hostmem.check(cfg, need, have)


def run(cfg, *, settle_heap: bool = False) -> int:
    """Set up logging, events, health and the trainer; run; return 0 or raise TrainingFailed.
    ``settle_heap``: the process is the program's own (``SettleHeap``)."""
    setup_logging()
    quiet_libraries(debug=bool(os.environ.get(envvars.DEBUG)))
    cfg = absolute_checkpoint_dir(cfg)
    _make_local_dir("--checkpoint-dir", cfg.checkpoint_dir)
    events_file = cfg.resolved_events_file()
    if events_file and not events_file.startswith("gs://"):
        _make_local_dir("the events file's directory",
                        os.path.dirname(os.path.abspath(events_file)))
    compilecache.enable(compilecache.resolve(cfg.compilation_cache_dir, cfg.checkpoint_dir))
    events = EventLog(cfg.resolved_events_file())
    records = mlgoodput.attach(events, cfg, os.environ.get(envvars.WORKLOAD) or "elastix")
    point = recoverypoint.attach_from_env(events)  # GKE: the recovery point on the JobSet
    board = None
    if cfg.tensorboard_dir:
        from elastix_trainer.obs.tboard import TensorBoardSink

        try:
            board = TensorBoardSink(cfg.tensorboard_dir).attach(events)
        except OSError as e:
            if point is not None:
                point.close()
            events.close()
            if records is not None:
                records.close()
            raise UsageError(f"--tensorboard-dir {cfg.tensorboard_dir}: cannot write there "
                             f"({e.strerror or e})", hint="give a writable directory (created "
                             "if missing) or a gs:// URL") from None
    try:
        health = health_from_env(len(slice_devices(cfg.num_slices)))
        trainer, standin = build_trainer(cfg, events, health)
        check_host_memory(cfg, trainer)
        runtime = ElasticRuntime(trainer, health)
        if settle_heap:
            trainer.add_hooks(SettleHeap())
        _stop_on_sigterm(trainer)
        if not on_pathways():
            # The step builds while the checkpoint is checked and the slices are awaited. Not
            # on Pathways: there the devices of a slice that is not up yet are not known to be
            # compilable against, and no source says so; the step is built once they are up.
            trainer.build_ahead()
        trainer.check_resume()
        run_start_event(trainer, cfg)
        default = default_timeout(cfg.slice_wait_timeout, cfg.checkpoint_timeout)
        limit = cfg.watchdog_timeout if cfg.watchdog_timeout is not None else default
        dog = (Watchdog(events, limit, lambda: trainer.last_completed, startup=default).start()
               if limit > 0 else None)
        log.info("elastix: training %s for %d steps on %d slices (%s mode), started %s",
                 cfg.model_name, cfg.steps, len(trainer.slices), cfg.elastic_mode, timefmt.iso_ms())
        outcome = runtime.run()
        if standin is not None:
            standin.drain()
        end = {"status": outcome.status, "reason": outcome.reason, "step": outcome.step}
        if dog is not None:
            dog.stop()
        events.emit(eventspec.RUN_END, **end)
        health.close()
    finally:
        if point is not None:
            point.close()  # the final point (bounded: the API never holds the exit long)
        events.close()
        if records is not None:
            records.close()
        if board is not None:
            board.close()
    if outcome.status != "completed":
        err = TrainingFailed(outcome.reason, hint=outcome.hint or "committed checkpoints are "
                             "intact; re-run with the same --checkpoint-dir to resume")
        err.exit_code = outcome.exit_code
        raise err
    return 0  # the run_end line said it: "run end: completed at step N"
