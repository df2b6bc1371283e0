"""The local backend: the same rendered JobSet, run as processes on this machine.

Everything about a workload lives in one directory, ``<root>/<name>/``, where ``<root>`` is
``--state-dir`` / ``ELASTIX_STATE_DIR`` or ``<user data dir>/elastix/workloads``. The backend's
jobs each have their own module, and :class:`LocalBackend` is their one face to the commands:

- the create transaction (:mod:`elastix.backends.local.create`): a plan, the state directory
  claimed atomically, a detached supervisor (:mod:`elastix.backends.local.supervisor`) that
  plays the JobSet controller (the head's command becomes the controller process, the trainer
  on CPU devices; each worker pod a heartbeating slice-host process);
- reading (here): list, status and the trainer's events only read that directory;
- faults (:mod:`elastix.backends.local.faults`): real signals to real processes;
- delete (:mod:`elastix.backends.local.delete`): stops the supervisor and sweeps every recorded
  process, so nothing is orphaned even when the supervisor itself was SIGKILLed;
- logs (:mod:`elastix.backends.local.logread`).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastix.backends.base import (
    EVENTS_FILE,
    HEAD_LOG,
    MAXTEXT_LOG,
    Backend,
    Fault,
    KillRecord,
    LogEvent,
    LogOptions,
    PodInfo,
    SliceStatus,
    TrainerEvents,
    WorkloadStatus,
)
from elastix.backends.local import create, delete, faults
from elastix.backends.local.delete import being_deleted, outlived
from elastix.backends.local.logread import logs
from elastix.backends.local.plan import (
    Plan,
    check_root,
    is_workload_name,
    read_workload,
    workload_dir,
)
from elastix.backends.local.state import (
    FINAL_STATES,
    CorruptStateFile,
    PodRecord,
    WorkloadState,
    default_root,
    diagnose,
    proc_matches,
    proc_stopped,
    read_events_bytes,
    read_record,
    supervisor_record,
    trainer_lost_slices,
    trainer_recovery_point,
)
from elastix.errors import (
    EventsUnreadable,
    NotFoundError,
)
from elastix.protocol import entrypoints, eventspec, timefmt
from elastix.protocol.timefmt import utc_now

if TYPE_CHECKING:
    from elastix.workload.selector import Selector

SMOKE_STEPS = 1200  # `workload create --smoke`: 2 min of steps at 0.1 s, more under load


def _parse_time(s: str | None) -> dt.datetime | None:
    return timefmt.parse(s) if s else None


def _disk_full(d: Path) -> str | None:
    """How little is free under ``d`` when that is too little to write a state file, else
    None."""
    try:
        vfs = os.statvfs(d)
    except OSError:
        return None
    free = vfs.f_bavail * vfs.f_frsize
    return f"{free:,} bytes free" if free < 64 * 1024 else None


class LocalBackend(Backend):
    """Runs workloads as local processes; state in one directory per workload."""

    name = "local"

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        # Absolute at once: the supervisor, its heartbeat socket and every later command see
        # the same directory whatever their working directory (a relative one failed every run
        # at start on the socket path).
        self.root = Path(root).absolute() if root else default_root()
        self.notices: list[str] = []

    @classmethod
    def from_target(cls, target: Any) -> LocalBackend:
        # --state-dir declares ELASTIX_STATE_DIR as its envvar: the option already read it
        return cls(target.state_dir)

    # ------------------------------------------------------------------ helpers
    def _dir(self, name: str, must_exist: bool = True) -> Path:
        return workload_dir(self.root, name, must_exist)

    def _raw(self, d: Path) -> tuple[Plan, WorkloadState]:
        return read_workload(d)

    def _supervisor_alive(self, d: Path, state: WorkloadState) -> bool:
        sup = supervisor_record(d, state)
        return bool(sup) and proc_matches(sup["pid"], sup.get("create_time"))

    # ------------------------------------------------------------------ submit
    def submit(self, manifest: dict[str, Any], *, replace: bool = False,
               dry_run: str | None = None, preflight: bool = True, fresh: bool = False) -> str:
        """See :meth:`Backend.submit` and :func:`elastix.backends.local.create.submit`."""
        return create.submit(self.root, manifest, self.notices, replace=replace,
                             dry_run=dry_run, fresh=fresh)

    def clone(self, name: str, *, suffix: str = "reference", dry_run: bool = False) -> str:
        """See :func:`elastix.backends.local.create.clone`."""
        return create.clone(self.root, name, suffix=suffix, dry_run=dry_run)

    # ------------------------------------------------------------------ status
    def list(self, selector: Selector | None = None) -> list[WorkloadStatus]:
        check_root(self.root)
        if not self.root.is_dir():
            return []
        out = []
        for d in self.root.iterdir():
            if (d / "plan.json").exists() and is_workload_name(d.name):
                try:
                    out.append(self.status(d.name))
                except CorruptStateFile as err:  # shown, not hidden: it needs deleting
                    out.append(WorkloadStatus(name=d.name, namespace="local", backend="local",
                                              state="Broken", created=None, num_slices=0,
                                              reasons=[err.message], message=err.message))
                except (NotFoundError, OSError, ValueError):
                    continue  # deleted or half-written while we looked
        if selector is not None:
            out = [w for w in out if selector.matches(w.labels)]
        return sorted(out, key=lambda w: w.created or utc_now())

    def status(self, name: str) -> WorkloadStatus:
        d = self._dir(name)
        plan, st = self._raw(d)
        alive = self._supervisor_alive(d, st)
        state, reasons = st.state, []
        if state == "Starting":
            state = "Pending"
        full = _disk_full(d) if state not in FINAL_STATES else None
        if full is not None:
            reasons.append(f"the state directory's disk is full ({full}): this status is as "
                           f"of {st.updated or 'the start'}, when state.json was last written; "
                           f"free space under {d.parent}")
        if state == "Terminating" and not alive and being_deleted(d):
            # Its supervisor stopped it for a delete (or a create --replace) that has not
            # removed the directory yet: stopping, not dead (a chaos run must not end on it).
            reasons.append(f"being deleted (elastix workload delete {name}, or create "
                           "--replace)")
        elif state not in FINAL_STATES and not alive:
            state = "Failed"
            reasons.append("the local supervisor is not running (killed?); "
                           f"clean up with: elastix workload delete {name} --backend local")
            left = outlived(plan.marker)
            if left:
                reasons.append(f"{len(left)} process{'es' if len(left) > 1 else ''} of {name} "
                               f"outlived its supervisor and still run: {'; '.join(left)}; "
                               f"elastix workload delete {name} --backend local stops them")
        sup = supervisor_record(d, st)
        if state not in FINAL_STATES and alive and sup and proc_stopped(sup["pid"]):
            # A hung JobSet controller: the pods run on, but nothing replaces a failed one and
            # this status is as of its last state write.
            reasons.append(f"the local supervisor (the JobSet controller, pid {sup['pid']}) is "
                           "stopped (SIGSTOP?): no failed pod is replaced and this status is as "
                           f"of {st.updated or 'the start'}; kill -CONT {sup['pid']} resumes "
                           f"it, elastix workload delete {name} stops the run (its head's "
                           "final save made)")

        def pod(p: PodRecord | None, role: str) -> PodInfo | None:
            if p is None:
                return None
            phase, reason = p.phase, p.reason
            if phase == "Running" and not proc_matches(p.pid, p.create_time):
                phase = "Unknown"  # the supervisor has not seen the death (or is gone)
            elif phase == "Running" and proc_stopped(p.pid):
                phase, reason = "Stopped", f"process {p.pid} is stopped (SIGSTOP?)"
            return PodInfo(name=p.name, role=role, phase=phase, slice=p.slice, host=p.host,
                           node="localhost", reason=reason, started=_parse_time(p.started),
                           pid=p.pid)

        # What training sees: a slice the trainer lost is not Ready while its hosts still run.
        lost = trainer_lost_slices(plan.events_file) if state not in FINAL_STATES else {}
        slices = [SliceStatus(index=s.index, hosts=plan.hosts_per_slice,
                              pods=[pod(p, "worker") for p in s.pods],
                              job_failures=s.failures, backoff_limit=s.backoff_limit,
                              lost=lost.get(s.index))
                  for s in st.slices]
        return WorkloadStatus(
            name=name, namespace="local", backend="local", state=state,
            created=_parse_time(plan.created), num_slices=plan.num_slices,
            jobset_restarts=st.restarts, max_restarts=plan.max_restarts,
            head=pod(st.head, "head"), slices=slices, reasons=reasons, message=st.message,
            labels=dict(plan.labels),
            recovery_point=trainer_recovery_point(plan.events_file) if plan.events_file else None)

    def diagnose(self, name: str) -> dict[str, Any]:
        """See :func:`elastix.backends.local.state.diagnose`."""
        return diagnose(self._dir(name))

    def trainer_events(self, name: str, *, tail: bool = False,
                       cheap: bool = False) -> TrainerEvents | None:
        """The events file, else (a command that writes none) the head's log: every attempt's
        for a MaxText head (its lines are stamped, so a restart is measured across attempts),
        the current attempt's for any other. Files here are kept whole, so they reach the
        start, and ``tail`` and ``cheap`` read the same: reading local files is cheap."""
        split = self._split_events(name)
        if split is not None:
            return TrainerEvents(EVENTS_FILE, True, records=split.records,
                                 skipped=len(split.skipped), first_skipped=split.skipped_note())
        d = self._dir(name)
        if not any((d / "logs").glob("head-*.log")):
            return None  # no head has started
        plan = read_record(d / "plan.json", Plan.from_json)
        lines = [e.text for e in self.logs(name, LogOptions(follow=False, timestamps=True))
                 if not e.notice]
        return TrainerEvents(MAXTEXT_LOG if plan.maxtext else HEAD_LOG, True, lines=lines)

    def events_path(self, name: str) -> str | None:
        return read_record(self._dir(name) / "plan.json", Plan.from_json).events_file or None

    def read_events(self, name: str) -> list[dict[str, Any]] | None:
        """The records of the workload's events file, or None when the head writes none."""
        split = self._split_events(name)
        return split.records if split is not None else None

    def _split_events(self, name: str) -> eventspec.Jsonl | None:
        """The workload's events file split into records and torn lines (skipped, counted);
        None when the head writes none.

        Raises:
            EventsUnreadable: a line that is JSON but not an event; the file is not a regular
                file (a FIFO, a link to a device: never opened to block or read without end)
                or larger than :data:`MAX_EVENTS_FILE`.
        """
        d = self._dir(name)
        path = read_record(d / "plan.json", Plan.from_json).events_file
        data = read_events_bytes(path)
        if data is None:
            return None  # a command that writes no events: measurement reads the head's log
        split = eventspec.split_jsonl(data.decode("utf-8", errors="replace"))  # as --events
        if split.bad:
            raise EventsUnreadable(f"events file {path}", split.bad, split.total)
        return split

    # ------------------------------------------------------------------ chaos
    def kill_worker(self, name: str, *, slice: int | None = None, host: int | None = None,
                    seed: int | None = None, dry_run: bool = False) -> KillRecord:
        """SIGKILL one worker pod's process (see :mod:`elastix.backends.local.faults`)."""
        d = self._dir(name)
        return faults.kill_worker(name, *self._raw(d), slice=slice, host=host, seed=seed,
                                  dry_run=dry_run)

    @classmethod
    def fault_support(cls, fault: Fault) -> str | None:
        return None  # every fault is a real signal to a real process here

    def inject(self, name: str, fault: Fault, *, slice: int | None = None,
               host: int | None = None, seed: int | None = None,
               dry_run: bool = False) -> list[KillRecord]:
        """See :func:`elastix.backends.local.faults.inject`."""
        d = self._dir(name)
        return faults.inject(name, fault, *self._raw(d), slice=slice, host=host, seed=seed,
                             dry_run=dry_run)

    def resume(self, name: str, rec: KillRecord) -> bool:
        """See :func:`elastix.backends.local.faults.resume`."""
        return faults.resume(self._dir(name, must_exist=False), rec)

    # ------------------------------------------------------------------ delete
    def exists(self, name: str) -> bool:
        """Whether its state directory has a plan, as ``delete`` needs (a damaged state file
        is still a workload to delete)."""
        return (self._dir(name, must_exist=False) / "plan.json").exists()

    def delete(self, name: str, *, wait: bool = False, timeout: float = 300.0,
               delete_data: bool = False, foreign: bool = False) -> str | None:
        """See :func:`elastix.backends.local.delete.delete` (every local workload is
        elastix's: ``foreign`` changes nothing)."""
        return delete.delete(self.root, name, timeout=timeout, delete_data=delete_data)

    # ------------------------------------------------------------------ logs
    def logs(self, name: str, opts: LogOptions) -> Iterator[LogEvent]:
        """See :func:`elastix.backends.local.logread.logs`."""
        return logs(self._dir(name), name, opts)

    # ------------------------------------------------------------------ policy
    @classmethod
    def defaults(cls, smoke: bool = False) -> dict[str, Any]:
        """The local job: the tiny trainer, checkpointing into the workload's kept data directory
        (it survives ``create --replace`` and ``delete``), slow enough per step to watch a
        recovery. The image is only a label here: the local
        backend runs the command, not the image.

        ``smoke``: the same job, :data:`SMOKE_STEPS` steps long: long enough that a kill after
        it is stepping and its recovery finish well before the end on a loaded 2-core machine,
        short enough that a forgotten one ends by itself within minutes."""
        steps = SMOKE_STEPS if smoke else 3000
        return {
            "docker_image": "elastix-trainer:local",
            "command": (f"{entrypoints.TRAINER_SCRIPT} --preset tiny --steps {steps} "
                        "--step-delay 0.1 "
                        "--checkpoint-dir \"$ELASTIX_LOCAL_DATA_DIR/checkpoints\" "
                        "--checkpoint-period 20 --snapshot-period 5"),
        }

    def where(self) -> str:
        return str(self.root)


