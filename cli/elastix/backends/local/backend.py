"""The local backend: the same rendered JobSet, run as processes on this machine.

``submit`` turns the manifest into a plan (``elastix.backends.local.plan.make_plan``) and starts a detached
supervisor (``elastix.backends.local.supervisor``) that plays the JobSet controller: the head's main
container command becomes the controller process (the trainer, on CPU devices), each worker pod a
heartbeating slice-host process. Everything about a workload lives in one directory,
``<root>/<name>/``, where ``<root>`` is ``--state-dir`` / ``ELASTIX_STATE_DIR`` or
``<user data dir>/elastix/workloads``. Reading commands (list, status, logs) only read that
directory; ``kill_worker`` sends a real SIGKILL; ``delete`` stops the supervisor and sweeps every
recorded process, so nothing is orphaned even when the supervisor itself was SIGKILLed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from elastix import interrupts
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
from elastix.backends.local import channel, trainerhead
from elastix.backends.local.logread import every_attempt, follow_files, previous, unstamped
from elastix.backends.local.plan import Plan, compilation_cache_dir, data_dir, make_plan
from elastix.backends.local.state import (
    FINAL_STATES,
    CorruptStateFile,
    PodRecord,
    WorkloadState,
    default_root,
    marked_pids,
    private_append,
    proc_matches,
    proc_stopped,
    read_events_bytes,
    read_procs,
    read_record,
    record_proc,
    sweep,
    trainer_lost_slices,
    trainer_recovery_point,
    write_json_atomic,
)
from elastix.backends.local.supervisor import HEAD_TERM_GRACE, TERM_GRACE, killpg
from elastix.backends.local.workdir import command_files, move_command_files
from elastix.errors import (
    AlreadyExists,
    BackendError,
    EventsUnreadable,
    NotFoundError,
    UsageError,
)
from elastix.protocol import entrypoints, envvars, eventspec, timefmt
from elastix.protocol.timefmt import utc_now
from elastix.workload import labels

if TYPE_CHECKING:
    from elastix.workload.selector import Selector

_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_ASIDE = ".creating-"  # a state directory being built, before it is renamed into place
START_TIMEOUT = 30.0  # seconds for the supervisor to write its first state
SMOKE_STEPS = 1200  # `workload create --smoke`: 2 min of steps at 0.1 s, more under load


def _parse_time(s: str | None) -> dt.datetime | None:
    return timefmt.parse(s) if s else None


def _same_dir(d: Path, ours: os.stat_result) -> bool:
    try:
        st = os.stat(d)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (ours.st_dev, ours.st_ino)


def _disk_full(d: Path) -> str | None:
    """How little is free under ``d`` when that is too little to write a state file, else
    None."""
    try:
        vfs = os.statvfs(d)
    except OSError:
        return None
    free = vfs.f_bavail * vfs.f_frsize
    return f"{free:,} bytes free" if free < 64 * 1024 else None


def _sweep_asides(root: Path) -> None:
    """Remove directories a create built aside and never renamed in because its launcher died
    (``.creating-<pid>-<name>-*`` whose pid no longer runs): nothing else ever will."""
    for p in root.glob(f"{_ASIDE}*"):
        pid = p.name[len(_ASIDE):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
        except PermissionError:
            pass


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
        self._check_root()
        if not _NAME.match(name or ""):
            raise UsageError(f"{name!r} is not a valid workload name",
                             hint="lowercase letters, digits and '-', as in Kubernetes names")
        d = self.root / name
        if must_exist and not (d / "plan.json").exists():
            raise NotFoundError(f"workload {name!r} not found in {self.root}",
                                hint="list workloads with: elastix workload list --backend local")
        return d

    def _raw(self, d: Path) -> tuple[Plan, WorkloadState]:
        return read_record(d / "plan.json", Plan.from_json), WorkloadState.read(d)

    @staticmethod
    def _supervisor(d: Path, state: WorkloadState | None) -> dict[str, Any] | None:
        if state is not None and state.supervisor:
            return state.supervisor
        for rec in read_procs(d):  # before its first state write: the spawner's record
            if rec.get("role") == "supervisor":
                return rec
        return None

    def _supervisor_alive(self, d: Path, state: WorkloadState) -> bool:
        sup = self._supervisor(d, state)
        return bool(sup) and proc_matches(sup["pid"], sup.get("create_time"))

    # ------------------------------------------------------------------ submit
    def submit(self, manifest: dict[str, Any], *, replace: bool = False,
               dry_run: str | None = None, preflight: bool = True, fresh: bool = False) -> str:
        """See :meth:`Backend.submit`. ``fresh`` (``workload create --fresh``): start over: a
        workload of that name is replaced, and its kept data (checkpoints) removed first."""
        name = (manifest.get("metadata") or {}).get("name", "")
        d = self._dir(name, must_exist=False)
        plan = make_plan(manifest, d, dict(os.environ), os.getcwd())
        why = channel.problem(plan.health_address)
        if why:  # the supervisor would fail at start on it: said before anything is made
            raise UsageError(why, hint="remove it (as its owner or root), or pass a shorter "
                                       "--state-dir, whose socket then stays inside it")
        if dry_run:
            if not fresh:
                self._say_finished(name, d, plan)
            return name
        if d.exists():
            if not (replace or fresh):
                raise AlreadyExists(f"workload {name!r} already exists (local, {d})",
                                    hint="pass --replace, or delete it: "
                                         f"elastix workload delete {name} --backend local")
            # The new run's supervisor and its head's imports start now, in step with the
            # old run's stop (its final save): they touch nothing until the directory is theirs.
            pre = self._prestart(d, plan)
            try:
                kept = self.delete(name, wait=True, delete_data=fresh)
                # The previous run's events, logs and measurements lived in its state directory.
                self.notices.append(f"replaced {name}: the previous run's events, logs and "
                                    f"measurements are removed with it"
                                    + (f"; {kept}" if kept else ""))
                self._say_finished(name, d, plan)
                self._launch(name, d, manifest, plan, pre)
            finally:
                _release(pre)
            return name
        if fresh and data_dir(d).is_dir():
            said = self.delete(name, wait=True, delete_data=True)
            self.notices.append(f"--fresh: {name} starts from step 0 ({said})")
        self._say_finished(name, d, plan)
        self._launch(name, d, manifest, plan)
        return name

    def _say_finished(self, name: str, d: Path, plan: Plan) -> None:
        """A notice when the kept data already holds a checkpoint of the job's last step (the
        quickstart run again after it finished): the trainer would resume it and complete
        at once, which nothing else says until ``status``."""
        found = trainerhead.finished_checkpoint(plan.head_command, d, data_dir(d), plan.cwd)
        if found is None:
            return
        kept, steps = found
        self.notices.append(
            f"{name}'s kept data holds a checkpoint of step {kept}, and the job's last step is "
            f"{steps} (--steps): this run resumes it and completes without training a step; to "
            f"start over, create it again with --fresh (or first: elastix workload delete {name} "
            "--delete-data)")

    def _launch(self, name: str, d: Path, manifest: dict[str, Any], plan: Plan,
                pre: subprocess.Popen | None = None) -> None:
        """Claim the state directory, start the supervisor (``pre``: the one
        :meth:`_prestart` started, told to go), return once it has written its first state:
        the commit point (:func:`elastix.interrupts.commit`). Anything before it that fails,
        Ctrl-C included, leaves nothing behind: no directory, no process."""
        ours: os.stat_result | None = None
        proc: subprocess.Popen | None = None
        try:
            # Held from Ctrl-C (milliseconds): what it makes is then known to the undo below,
            # a supervisor started but not yet recorded included.
            with interrupts.deferred():
                ours = self._claim(name, d, manifest, plan)
                proc = _go(d, pre) or self._start_supervisor(d, plan)
            self._await_first_state(name, d, ours, proc)
            interrupts.commit()
        except BaseException:
            if ours is not None:
                with interrupts.deferred():  # a second Ctrl-C must not cut the undo short
                    self._discard(d, ours, proc, plan)
            raise

    @staticmethod
    def _prestart(d: Path, plan: Plan) -> subprocess.Popen | None:
        """A supervisor for the run that replaces the one in ``d``, started before that run
        has stopped (``supervisor --prestart``): it reads ``plan`` and starts its head's
        imports, then waits for :func:`_go`. None if it could not be started: the new run
        then starts as any does, after the stop."""
        env = _supervisor_env(plan)
        proc: subprocess.Popen | None = None
        # Held from Ctrl-C (milliseconds): a process started is one the caller knows of.
        with interrupts.deferred():
            try:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "elastix.backends.local.supervisor", "--prestart",
                     str(d)], env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL, start_new_session=True)
                proc.stdin.write(json.dumps(plan.to_json()).encode() + b"\n")
                proc.stdin.flush()
            except OSError:
                if proc is not None:
                    proc.kill()
                    _release(proc)
                return None
        return proc

    @staticmethod
    def _start_supervisor(d: Path, plan: Plan) -> subprocess.Popen:
        env = _supervisor_env(plan)
        with open(private_append(d / "supervisor.log"), "ab") as out:
            # Its own session: the terminal's Ctrl-C reaches the create, not the workload.
            proc = subprocess.Popen([sys.executable, "-m", "elastix.backends.local.supervisor",
                                     str(d)], env=env, stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        record_proc(d, proc.pid, "supervisor")
        return proc

    @staticmethod
    def _await_first_state(name: str, d: Path, ours: os.stat_result,
                           proc: subprocess.Popen) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while not (d / "state.json").exists():
            if not _same_dir(d, ours):
                raise BackendError(f"workload {name!r} was deleted while it was being created",
                                   hint=f"create it again: elastix workload create {name} "
                                        "--backend local")
            if proc.poll() is not None or time.monotonic() > deadline:
                try:
                    tail = (d / "supervisor.log").read_text(errors="replace").strip().splitlines()
                except FileNotFoundError:
                    tail = []
                last = tail[-1] if tail else "no output"
                raise BackendError(f"the local supervisor did not start: {last}",
                                   hint="run again with --debug; the supervisor's log was: "
                                        + " | ".join(tail[-3:]))
            time.sleep(0.02)

    def clone(self, name: str, *, suffix: str = "reference", dry_run: bool = False) -> str:
        """The same manifest run again under its own name and data (see
        :mod:`elastix.backends.local.clone`)."""
        from elastix.backends.local.clone import copy_of

        d = self._dir(name)
        new, manifest, plan = copy_of(
            name, d, read_record(d / "manifest.json", dict),
            read_record(d / "plan.json", Plan.from_json), dict(os.environ), suffix)
        if not dry_run:
            self._launch(new, self._dir(new, must_exist=False), manifest, plan)
        return new

    def _claim(self, name: str, d: Path, manifest: dict[str, Any], plan: Plan) -> os.stat_result:
        """Make the workload's state directory, atomically: it is built aside (a private
        directory beside it, 0700) and renamed into place, and a rename onto a directory that
        exists fails. So two creates of one name cannot both win, the loser removes only what
        it made, and no reader ever sees a directory without its plan. Returns the directory's
        identity (device and inode): what :meth:`_discard` checks before removing it."""
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            _sweep_asides(self.root)
            aside = Path(tempfile.mkdtemp(prefix=f"{_ASIDE}{os.getpid()}-{name}-", dir=self.root))
        except OSError as e:
            raise BackendError(f"cannot create the workload's state directory {d}: "
                               f"{e.strerror or e}",
                               hint="pass --state-dir DIR (or ELASTIX_STATE_DIR) with a writable "
                                    "directory") from None
        try:
            (aside / "logs").mkdir(mode=0o700)
            write_json_atomic(aside / "manifest.json", manifest)
            write_json_atomic(aside / "plan.json", plan.to_json())
            ours = os.stat(aside)
            self._rename_in(aside, d)
        except FileExistsError:
            shutil.rmtree(aside, ignore_errors=True)
            raise AlreadyExists(f"workload {name!r} already exists (local, {d}): another create "
                                "of that name won", hint=f"see it with: elastix workload status "
                                f"{name} --backend local") from None
        except OSError as e:
            shutil.rmtree(aside, ignore_errors=True)
            raise BackendError(f"cannot create the workload's state directory {d}: "
                               f"{e.strerror or e}",
                               hint="pass --state-dir DIR (or ELASTIX_STATE_DIR) with a writable "
                                    "directory") from None
        return ours

    @staticmethod
    def _rename_in(aside: Path, d: Path) -> None:
        """Rename the built directory into place; FileExistsError when ``d`` exists. (A rename
        onto an *empty* directory would replace it: only a directory with a plan is a workload,
        and an empty one is no one's, so that is right.)"""
        try:
            os.rename(aside, d)
        except OSError as e:
            if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
                raise FileExistsError(e.errno, e.strerror, str(d)) from None
            raise

    @staticmethod
    def _discard(d: Path, ours: os.stat_result, proc: subprocess.Popen | None,
                 plan: Plan) -> None:
        """Undo a submit that failed or was interrupted half-way: stop the supervisor and every
        pod it started (as ``delete`` sweeps them), and remove the state dir only if it is
        still the one this submit made (a delete and another create may have come in between:
        theirs is never touched; the marker is this submit's own)."""
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        mine = _same_dir(d, ours)
        # Not theirs: a workload of the same name has the same socket address.
        _sweep_all(d if mine else None, plan.marker, plan.health_address if mine else None, d)
        if mine:
            shutil.rmtree(d, ignore_errors=True)

    # ------------------------------------------------------------------ status
    def _check_root(self) -> None:
        """A state dir that exists as something else (a file) is bad input, not "no workloads"."""
        if self.root.exists() and not self.root.is_dir():
            raise UsageError(f"--state-dir {self.root} is not a directory",
                             hint="give a directory (created if missing), or leave --state-dir "
                                  "and ELASTIX_STATE_DIR unset for the default")

    def list(self, selector: Selector | None = None) -> list[WorkloadStatus]:
        self._check_root()
        if not self.root.is_dir():
            return []
        out = []
        for d in self.root.iterdir():
            if (d / "plan.json").exists() and _NAME.match(d.name):
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
        if state not in FINAL_STATES and not alive:
            state = "Failed"
            reasons.append("the local supervisor is not running (killed?); "
                           f"clean up with: elastix workload delete {name} --backend local")
            left = _outlived(plan.marker)
            if left:
                reasons.append(f"{len(left)} process{'es' if len(left) > 1 else ''} of {name} "
                               f"outlived its supervisor and still run: {'; '.join(left)}; "
                               f"elastix workload delete {name} --backend local stops them")
        sup = self._supervisor(d, st)
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
        d = self._dir(name)
        plan, st = self._raw(d)
        _check_pod_index(name, plan, slice, host)
        pods = self._running_workers(st, slice, host)
        if not pods:
            where = "".join(f" {k} {v}" for k, v in (("slice", slice), ("host", host))
                            if v is not None)
            raise BackendError(f"no running worker pod of {name}{where} to kill",
                               hint=f"see the pods with: elastix workload status {name}")
        victim = random.Random(seed).choice(pods)
        # Two times bound the fault: ``time`` just before the signal (nothing the fault caused
        # can predate it: ``kill_to_loss`` runs from it) and ``sent`` once it was sent (a
        # SIGKILLed or SIGSTOPped process runs nothing after it: the aim places the fault
        # there). A CLI preempted between the two separates them; neither is right for both.
        rec = KillRecord(workload=name, pod=victim.name, slice=victim.slice, host=victim.host,
                         node="localhost", time=utc_now(), dry_run=dry_run, pid=victim.pid)
        if not dry_run:
            try:
                os.kill(victim.pid, signal.SIGKILL)
            except ProcessLookupError as err:
                raise BackendError(f"worker {victim.name} exited before the kill") from err
            rec.sent = utc_now()
        return rec

    @classmethod
    def fault_support(cls, fault: Fault) -> str | None:
        return None  # every fault is a real signal to a real process here

    def inject(self, name: str, fault: Fault, *, slice: int | None = None,
               host: int | None = None, seed: int | None = None,
               dry_run: bool = False) -> list[KillRecord]:
        """Signal the victim's process: SIGKILL (``kill``, ``slice``: every host of the slice,
        ``head``: the head's process group, as a pod's containers die together), SIGTERM then
        SIGKILL after the grace (``term``: ``--grace``, else the worker pods' rendered
        ``terminationGracePeriodSeconds``), SIGSTOP (``hang``)."""
        if fault.kind == "kill":
            return [self.kill_worker(name, slice=slice, host=host, seed=seed, dry_run=dry_run)]
        d = self._dir(name)
        plan, st = self._raw(d)
        if fault.kind == "head":
            if slice is not None or host is not None:
                raise UsageError("--fault head takes no --slice or --host",
                                 hint="the head is one pod: drop --slice/--host")
            head = st.head
            if head is None or head.phase != "Running" \
                    or not proc_matches(head.pid, head.create_time):
                raise BackendError(f"the head of {name} is not running: nothing to kill",
                                   hint=f"see elastix workload status {name}")
            rec = KillRecord(workload=name, pod=head.name, slice=None, host=None,
                             node="localhost", time=utc_now(), dry_run=dry_run, pid=head.pid,
                             fault="head")
            if not dry_run:
                killpg(head.pid, signal.SIGKILL)
                rec.sent = utc_now()
            return [rec]
        _check_pod_index(name, plan, slice, host)
        running = self._running_workers(st, slice, None if fault.kind == "slice" else host)
        if not running:
            where = "".join(f" {k} {v}" for k, v in (("slice", slice), ("host", host))
                            if v is not None)
            raise BackendError(f"no running worker pod of {name}{where} to fault",
                               hint=f"see the pods with: elastix workload status {name}")
        rng = random.Random(seed)
        if fault.kind == "slice":
            if host is not None:
                raise UsageError("--fault slice takes every host of a slice: not --host",
                                 hint="drop --host (or use --fault kill --slice S --host H)")
            chosen = slice if slice is not None else rng.choice(sorted({p.slice for p in running}))
            victims = [p for p in running if p.slice == chosen]
        else:
            victims = [rng.choice(running)]
        out: list[KillRecord] = []
        for i, v in enumerate(victims):
            rec = KillRecord(workload=name, pod=v.name, slice=v.slice, host=v.host,
                             node="localhost", time=utc_now(), dry_run=dry_run, pid=v.pid,
                             fault=fault.kind)
            if dry_run:
                out.append(rec)
                continue
            sig = {"slice": signal.SIGKILL, "term": signal.SIGTERM,
                   "hang": signal.SIGSTOP}[fault.kind]
            try:
                os.kill(v.pid, sig)
            except ProcessLookupError:
                if fault.kind == "slice" and i > 0:
                    continue  # its slice went down with the first host: that is the fault
                raise BackendError(f"worker {v.name} exited before the fault") from None
            rec.sent = utc_now()  # the two times as in kill_worker
            if fault.kind == "term":
                rec.grace = fault.grace if fault.grace is not None else plan.worker_grace
                _sigkill_after(v.pid, v.create_time, rec.grace)
            out.append(rec)
        return out

    def resume(self, name: str, rec: KillRecord) -> bool:
        """SIGCONT the hung host ``rec`` stopped, if that same process still exists."""
        d = self._dir(name, must_exist=False)
        ours = next((r for r in read_procs(d) if r.get("pid") == rec.pid), None)
        if rec.pid is None or ours is None or not proc_matches(rec.pid, ours.get("create_time")):
            return False
        try:
            os.kill(rec.pid, signal.SIGCONT)
        except ProcessLookupError:
            return False
        rec.resumed = utc_now()
        return True

    @staticmethod
    def _running_workers(st: WorkloadState, slice: int | None,
                         host: int | None) -> list[PodRecord]:
        pods = [p for s in st.slices for p in s.pods
                if (slice is None or p.slice == slice) and (host is None or p.host == host)
                and p.phase == "Running" and proc_matches(p.pid, p.create_time)]
        return sorted(pods, key=lambda p: (p.slice, p.host))

    # ------------------------------------------------------------------ delete
    def exists(self, name: str) -> bool:
        """Whether its state directory has a plan, as ``delete`` needs (a damaged state file
        is still a workload to delete)."""
        return (self._dir(name, must_exist=False) / "plan.json").exists()

    def delete(self, name: str, *, wait: bool = False, timeout: float = 300.0,
               delete_data: bool = False) -> str | None:
        d = self._dir(name, must_exist=False)
        if not (d / "plan.json").exists() and delete_data and data_dir(d).is_dir():
            # deleted before, its data kept: what --delete-data then said it would remove
            shutil.rmtree(data_dir(d), ignore_errors=True)
            return (f"only its data was left: removed its data (checkpoints) in {data_dir(d)}"
                    + _cache_kept(d))
        d = self._dir(name)
        with _held(d) as still_ours:
            if not still_ours:
                # Another delete ran while this one waited: what is left (its data, or
                # nothing) is judged afresh, so each delete says only what it did itself.
                return self.delete(name, wait=wait, timeout=timeout, delete_data=delete_data)
            return self._delete_held(name, d, timeout, delete_data)

    def _delete_held(self, name: str, d: Path, timeout: float, delete_data: bool) -> str | None:
        """:meth:`delete` of ``d``, its lock held (:func:`_held`)."""
        try:
            plan, st = self._raw(d)
        except (OSError, ValueError, KeyError, TypeError):
            plan, st = None, None  # half-written or damaged: sweep what procs.jsonl recorded
        sup = self._supervisor(d, st)
        unanswered = said = None
        if sup and proc_matches(sup["pid"], sup.get("create_time")):
            unanswered = _stop_supervisor(sup, timeout)
        if unanswered:
            # Before the supervisor goes: its guard SIGKILLs every pod when it dies.
            said = _stop_head_itself(d, unanswered, timeout)
            with contextlib.suppress(ProcessLookupError):
                os.kill(sup["pid"], signal.SIGKILL)  # it restarts nothing from here on
        _sweep_all(d, plan.marker if plan else None, plan.health_address if plan else None,
                   d, timeout=min(timeout, 10.0))
        survivors = [r["pid"] for r in read_procs(d)
                     if proc_matches(r["pid"], r.get("create_time"))]
        if survivors:
            raise BackendError(f"processes of {name!r} survived SIGKILL: {survivors}",
                               hint="they may be stuck in the kernel; try again")
        kept = data_dir(d)
        theirs = command_files(d)
        moved = None
        if not delete_data:
            try:
                moved = move_command_files(d, kept)
            except OSError as e:  # never delete what could not be moved: the directory stays
                raise BackendError(f"could not move what {name!r}'s command wrote in {d} into "
                                   f"its kept data {kept}: {e.strerror or e}",
                                   hint="make the state dir writable, then delete again (its "
                                        "processes are stopped; nothing was removed)") from None
        shutil.rmtree(d, ignore_errors=True)
        first = f"{said}; " if said else ""  # what was done in the supervisor's place
        if delete_data and (kept.exists() or theirs):
            shutil.rmtree(kept, ignore_errors=True)
            also = f" and what its command wrote in $ELASTIX_WORKLOAD_DIR ({', '.join(theirs)})"
            return (first + f"removed its data (checkpoints) in {kept}" + (also if theirs else "")
                    + _cache_kept(d))
        if not kept.exists():
            return said
        return (first + f"kept its data (checkpoints) in {kept}"
                + (f", and {moved}" if moved else "") + "; --delete-data removes it")

    # ------------------------------------------------------------------ logs
    def logs(self, name: str, opts: LogOptions) -> Iterator[LogEvent]:
        d = self._dir(name)
        stamped = read_record(d / "plan.json", Plan.from_json).stamped
        if opts.timestamps and not stamped:
            return self._stamped(name, opts)
        container = opts.container
        if opts.slice is not None or opts.host is not None:
            _check_pod_index(name, read_record(d / "plan.json", Plan.from_json), opts.slice,
                             opts.host)
            if container not in (None, labels.WORKER_CONTAINER):
                raise NotFoundError(f"worker pods have no container {container!r}",
                                    hint=f"the worker container is {labels.WORKER_CONTAINER}")
            if opts.previous:
                raise NotFoundError("the local backend keeps no previous worker log",
                                    hint="a replaced host appends to its one log: drop --previous")
            path = d / "logs" / f"worker-{opts.slice or 0}-{opts.host or 0}.log"
            if not path.exists():
                raise NotFoundError(f"no worker slice {opts.slice or 0} host {opts.host or 0} "
                                    f"in {name!r}")
            return follow_files(d, lambda: [path], opts)
        if container not in (None, labels.MAIN_CONTAINER):
            raise NotFoundError(f"container {container!r} does not run on the local backend",
                                hint=f"local workloads run the head's {labels.MAIN_CONTAINER} "
                                     "container and the slice hosts (--slice/--host)")

        def heads() -> list[Path]:
            files = list((d / "logs").glob("head-*.log"))
            return sorted(files, key=lambda p: int(p.stem.split("-")[1]))

        if opts.previous:  # every attempt's head writes its own head-N.log
            attempts = heads()
            if len(attempts) < 2:
                raise NotFoundError(f"workload {name} has no previous head attempt: it has not "
                                    "restarted", hint=f"elastix logs {name} shows the current one")
            prev, cur = attempts[-2:]
            lines = previous(d, prev, cur, opts)
        elif stamped and opts.timestamps and not opts.follow:
            lines = every_attempt(d, heads, opts)  # a restart is measured across attempts
        else:
            lines = follow_files(d, heads, opts)
        return lines if opts.timestamps or not stamped else unstamped(lines)

    def _stamped(self, name: str, opts: LogOptions) -> Iterator[LogEvent]:
        """``--timestamps`` locally: a process writes straight to its log file, so no time per
        line is recorded to add; say so once, then the lines as written (elastix's own lines
        start with their time; measurement reads the events file here, not the log)."""
        lines = self.logs(name, dataclasses.replace(opts, timestamps=False))
        # Worded for what the reader sees (issue 39): elastix-train's lines do start with a time.
        yield LogEvent("--timestamps: the local backend adds no time of its own (each process "
                       "writes its log file directly); lines are shown as written, "
                       "elastix-train's with the time it wrote them", notice=True)
        yield from lines

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


def _cache_kept(d: Path) -> str:
    """What ``--delete-data`` leaves on purpose: the compilation cache every workload of the
    state directory shares (another workload's entries are in it; JAX keys them apart)."""
    cache = compilation_cache_dir(d)
    return (f"; kept the compilation cache all workloads here share, {cache}"
            if cache.is_dir() else "")


def _supervisor_env(plan: Plan) -> dict[str, str]:
    """A supervisor's environment: the launcher's, and the workload's marker (its sweeps)."""
    return {**os.environ, envvars.LOCAL_MARKER: plan.marker}


def _go(d: Path, pre: subprocess.Popen | None) -> subprocess.Popen | None:
    """Tell a pre-started supervisor that ``d`` is its run's now; None if there is none, or it
    died (then one is started afresh)."""
    if pre is None or pre.poll() is not None:
        return None
    os.close(private_append(d / "supervisor.log"))  # there before it runs, as a spawned one's
    try:
        pre.stdin.write(b"go\n")
        pre.stdin.close()
    except OSError:
        return None
    record_proc(d, pre.pid, "supervisor")
    return pre


def _release(pre: subprocess.Popen | None) -> None:
    """A pre-started supervisor never told to go (the replace failed or was interrupted):
    end of file ends it and its head's imports, having touched nothing on disk."""
    if pre is None or pre.stdin.closed:
        return
    try:
        pre.stdin.close()
    except OSError:
        pass
    try:  # it ends its head and exits at once; killed, its head dies with it all the same
        pre.wait(2.0)
    except subprocess.TimeoutExpired:
        pre.kill()
        pre.wait()


def _sweep_all(procs_of: Path | None, marker: str | None, health_address: str | None,
               d: Path, timeout: float = 10.0) -> None:
    """SIGKILL every process of a workload whose supervisor is stopped or killed: those
    ``procs_of``'s ``procs.jsonl`` records (None: the directory is someone else's now) and
    those carrying ``marker``; then remove the supervisor's short socket directory outside
    ``d``, which a SIGKILLed supervisor leaves. ``delete`` and a create undone both end so."""
    sweep(procs_of, marker, timeout=timeout)
    if health_address is not None:
        channel.remove(health_address, d)


def _outlived(marker: str) -> list[str]:
    """``pid N (command)`` of each live process carrying the workload's marker.

    Looked for only when the supervisor died without finishing: its guard kills these, so any
    left means the guard was killed too (``delete`` still sweeps them by the marker).
    """
    import psutil

    out = []
    for pid in marked_pids(marker):
        try:
            cmd = " ".join(psutil.Process(pid).cmdline()) or "?"
        except psutil.Error:
            continue
        out.append(f"pid {pid} ({cmd if len(cmd) <= 60 else cmd[:57] + '...'})")
    return out


@contextlib.contextmanager
def _held(d: Path) -> Iterator[bool]:
    """An exclusive lock on the workload directory ``d`` (flock on the directory itself: no
    file left behind), for one ``delete`` at a time. Yields whether ``d`` is still the
    directory that was locked (False: it was removed, or replaced, while this waited)."""
    import fcntl

    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            now = os.stat(d)
        except FileNotFoundError:
            yield False
            return
        locked = os.fstat(fd)
        yield (now.st_dev, now.st_ino) == (locked.st_dev, locked.st_ino)
    finally:
        os.close(fd)


def _stop_supervisor(sup: dict[str, Any], timeout: float) -> str | None:
    """SIGTERM the supervisor (it stops its pods, the head first with its grace, then exits)
    and wait for it; None when it did. For a supervisor that is stopped (SIGSTOP) or does not
    exit in time, why: its pods' processes still need their SIGTERM."""
    import psutil

    pid, made = sup["pid"], sup.get("create_time")
    try:
        stopped = psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return None
    if not stopped:
        os.kill(pid, signal.SIGTERM)
        # The head's grace (its final save), then the hosts': what the supervisor allows.
        deadline = time.monotonic() + min(timeout, HEAD_TERM_GRACE + TERM_GRACE + 5.0)
        while proc_matches(pid, made):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        else:
            return None
    return "was stopped (SIGSTOP)" if stopped else "did not exit in time"


def _stop_head_itself(d: Path, why: str, timeout: float) -> str:
    """What a kubelet does whatever the JobSet controller does: SIGTERM the head pod's process
    group, wait its grace (its final save), SIGKILL what is left. The slice hosts are still up
    (the sweep ends them after), so the head commits its step rather than seeing a slice go."""
    heads = [r for r in read_procs(d) if r.get("role") == "head"
             and proc_matches(r["pid"], r.get("create_time"))]
    what = f"the supervisor (the local JobSet controller) {why}"
    if not heads:
        return f"{what}: elastix stopped its processes itself; no head was running"
    head = heads[-1]
    for sig in (signal.SIGTERM, signal.SIGCONT):  # a stopped head acts on SIGTERM once resumed
        try:
            os.killpg(head["pid"], sig)
        except (ProcessLookupError, PermissionError):
            pass
    started = time.monotonic()
    grace = min(timeout, HEAD_TERM_GRACE)
    _sigkill_after(head["pid"], head.get("create_time"), grace)
    took = time.monotonic() - started
    if took >= grace:
        return (f"{what}: elastix sent the head SIGTERM itself, as a kubelet does; it did not "
                f"exit in its {grace:g} s grace and was killed (steps since its last "
                "checkpoint are lost)")
    return (f"{what}: elastix sent the head SIGTERM itself, as a kubelet does, and it exited "
            f"after {took:.1f} s (its final save)")


def _sigkill_after(pid: int, create_time: float | None, grace: float) -> None:
    """Wait until ``pid`` has exited, at most ``grace`` seconds, then SIGKILL it if it is still
    the same process: the kubelet's end of a pod's grace period."""
    deadline = time.monotonic() + grace
    while proc_matches(pid, create_time):
        if time.monotonic() >= deadline:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        time.sleep(0.01)


def _check_pod_index(name: str, plan: Plan, slice: int | None, host: int | None) -> None:
    """``--slice``/``--host`` within the workload's shape, or bad input naming the range. The
    same checks and errors as the GKE backend: a command must not depend on which backend runs
    the workload to tell a typo from a workload that is between pods."""
    num = plan.num_slices
    if slice is not None and not 0 <= slice < num:
        raise UsageError(f"--slice {slice} is out of range: {name} has {num} slices "
                         f"(0-{num - 1})", hint=f"see them with: elastix workload status {name}")
    hosts = plan.hosts_per_slice
    if host is not None and not 0 <= host < hosts:
        raise UsageError(f"--host {host} is out of range: {name} has {hosts} hosts per "
                         f"slice (0-{hosts - 1})",
                         hint=f"see them with: elastix workload status {name}")
