"""The local backend's files and processes: where a workload lives and what it has started.

One directory per workload (``<root>/<name>/``) holds everything: ``plan.json`` (what to run,
derived once from the rendered JobSet), ``manifest.json``, ``state.json`` (written atomically by
the supervisor), ``procs.jsonl`` (every process ever started, with its start time, so ``delete``
can sweep them even after the supervisor was SIGKILLed), ``logs/`` and the trainer's
``events.jsonl``. Every process also carries ``ELASTIX_LOCAL_MARKER=<uuid>`` in its environment,
which finds grandchildren that escaped their process group. What the supervisor runs is
``elastix.backends.local.plan``.

Imported by the launcher and by the supervisor; stdlib only at import time (psutil lazily).
"""

from __future__ import annotations

import ctypes
import dataclasses
import io
import json
import os
import signal
import stat
import sys
import time
from pathlib import Path
from typing import IO, Any

from elastix.backends.local.typed import fits, typed
from elastix.errors import EventsUnreadable, UsageError
from elastix.protocol import envvars, eventspec, recovery
from elastix.protocol.recovery import RecoveryPoint

FINAL_STATES = ("Completed", "Failed")


class CorruptStateFile(UsageError, ValueError):
    """A workload file elastix wrote is no longer what it wrote (edited, truncated, disk full).

    A ``ValueError`` too, so code that sweeps a damaged workload (``delete``) still catches it.
    """

    def __init__(self, path: Path, err: Exception) -> None:
        name = path.parent.name
        super().__init__(f"local workload {name!r} is damaged: {path} is not a valid "
                         f"{path.name} ({type(err).__name__}: {err})",
                         hint=f"remove it with: elastix workload delete {name} --backend local "
                              f"(--state-dir {path.parent.parent})")


def read_record(path: Path, parse: Any) -> Any:
    """``parse(json)`` of a file elastix wrote; a missing file raises ``FileNotFoundError``.

    Raises:
        CorruptStateFile: not UTF-8 JSON, or not shaped as ``parse`` expects.
    """
    try:
        return parse(read_json(path))
    except (ValueError, KeyError, TypeError, AttributeError) as err:  # JSON, UTF-8 or shape
        raise CorruptStateFile(path, err) from None


@dataclasses.dataclass
class PodRecord:
    """One pod (a local process) as ``state.json`` records it."""

    name: str
    role: str
    """``head`` or ``worker``."""
    slice: int | None
    host: int | None
    pid: int | None = None
    create_time: float | None = None
    phase: str = "Pending"
    started: str | None = None
    exit_code: int | None = None
    reason: str | None = None
    log: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(PodRecord)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PodRecord:
        return cls(**typed(cls, {f.name: data[f.name] for f in dataclasses.fields(cls)
                                 if f.name in data}))


@dataclasses.dataclass
class SliceState:
    """One slice's Job: its pods and its failures against ``backoffLimit``."""

    index: int
    failures: int
    backoff_limit: int
    pods: list[PodRecord]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "failures": self.failures,
                "backoff_limit": self.backoff_limit, "pods": [p.to_json() for p in self.pods]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> SliceState:
        return cls(data["index"], data["failures"], data["backoff_limit"],
                   [PodRecord.from_json(p) for p in data["pods"]])


@dataclasses.dataclass
class WorkloadState:
    """``state.json``: what the supervisor last saw (written atomically on every change).

    Before the supervisor's first write, :meth:`read` returns the default: ``Pending``.
    """

    state: str = "Pending"
    """Starting, Running, Restarting, Completed, Failed or Terminating."""
    restarts: int = 0
    max_restarts: int = 0
    supervisor: dict[str, Any] | None = None
    """``{"pid", "create_time"}`` of the supervisor that writes this file."""
    message: str | None = None
    updated: str | None = None
    head: PodRecord | None = None
    slices: list[SliceState] = dataclasses.field(default_factory=list)
    events: list[dict[str, str]] = dataclasses.field(default_factory=list)
    """The supervisor's recent log lines, ``{"ts", "msg"}``."""

    def to_json(self) -> dict[str, Any]:
        return {"supervisor": self.supervisor, "state": self.state, "restarts": self.restarts,
                "max_restarts": self.max_restarts, "message": self.message,
                "updated": self.updated, "head": self.head.to_json() if self.head else None,
                "slices": [s.to_json() for s in self.slices], "events": self.events}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkloadState:
        head = data.get("head")
        sup = data.get("supervisor")
        if sup is not None and not (isinstance(sup, dict) and fits(sup.get("pid"), int)
                                    and fits(sup.get("create_time"), float | None)):
            raise TypeError(f"supervisor {sup!r:.60} is not a pid and its start time")
        plain = typed(cls, {k: data.get(k, d) for k, d in (
            ("state", "Pending"), ("restarts", 0), ("max_restarts", 0), ("message", None),
            ("updated", None), ("events", []))})
        return cls(**plain, supervisor=sup, head=PodRecord.from_json(head) if head else None,
                   slices=[SliceState.from_json(s) for s in data.get("slices", [])])

    @classmethod
    def read(cls, workload_dir: Path) -> WorkloadState:
        """``state.json`` of a workload, or the default before the supervisor wrote it.

        Raises:
            OSError: the file cannot be read.
            CorruptStateFile: it is not the JSON the supervisor writes.
        """
        try:
            return read_record(workload_dir / "state.json", cls.from_json)
        except FileNotFoundError:
            return cls()

    def write(self, workload_dir: Path) -> None:
        write_json_atomic(workload_dir / "state.json", self.to_json())


def default_root() -> Path:
    """``<user data dir>/elastix/workloads``."""
    import platformdirs

    return Path(platformdirs.user_data_dir("elastix")) / "workloads"


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def private_append(path: Path) -> int:
    """A file descriptor appending to ``path``, made 0600 if new, whatever the umask (the
    launcher writes into a workload's state directory from the user's shell)."""
    return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write-then-rename, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    # 0600 whatever the umask: a plan holds the workload's environment (every --env value).
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with open(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:  # a full disk: the old file stays whole, no half-written one is left
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# ----------------------------------------------------------------------------- processes


def die_with_parent(expected_ppid: int | None = None) -> bool:
    """Ask Linux to SIGKILL this process when its parent dies; False if the parent is gone already.

    Without it, a SIGKILLed supervisor would leave its pods running (slice hosts heartbeating)
    forever. Safe between fork and exec (the supervisor's ``preexec_fn``).
    """
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    # The parent may have died before prctl took effect: then we are already an orphan.
    return expected_ppid is None or os.getppid() == expected_ppid


def record_proc(workload_dir: Path, pid: int, role: str, **fields: Any) -> float | None:
    """Append a started process to ``procs.jsonl`` (for ``sweep``); returns its start time.

    The start time makes the record name this process only, never a later one reusing the pid.
    """
    create_time = create_time_of(pid)
    with open(private_append(workload_dir / "procs.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps({"pid": pid, "create_time": create_time, "role": role, **fields})
                + "\n")
    return create_time


def proc_matches(pid: int, create_time: float | None) -> bool:
    """True if ``pid`` is alive (not a zombie) and is the process recorded (same start time)."""
    import psutil

    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(p.create_time() - create_time) < 0.05
    except psutil.Error:
        return False


def proc_stopped(pid: int | None) -> bool:
    """True if ``pid`` is alive but stopped (SIGSTOP, ``T`` in ``/proc/PID/stat``): a hung host
    whose heartbeats stopped while its process still exists."""
    import psutil

    try:
        return pid is not None and psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return False


MAX_EVENTS_FILE = 1 << 30
"""Bytes of a workload's events file read whole (1 GiB: millions of steps' events)."""

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a directory"),
          (stat.S_ISSOCK, "a socket"))


def open_events(path: str | Path) -> IO[bytes] | None:
    """A workload's events file opened to read, or None when there is none (yet).

    The file is in the workload's directory, where its command may write: it is stat'ed first
    and opened without blocking, so a FIFO put there can never hang a reader (``open`` blocks
    until a writer comes, ``read`` until it writes) and a link to ``/dev/zero`` is never read
    (it never ends).

    Raises:
        EventsUnreadable: it is not a regular file, or cannot be opened.
    """
    if not str(path):
        return None
    where = f"events file {path}"
    try:
        kind = next((k for test, k in _KINDS if test(os.stat(path).st_mode)), None)
        if kind is None:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            mode = os.fstat(fd).st_mode  # it may have been swapped since the stat
            if stat.S_ISREG(mode):
                os.set_blocking(fd, True)
                return os.fdopen(fd, "rb")
            os.close(fd)
            kind = next((k for test, k in _KINDS if test(mode)), "not a file")
    except FileNotFoundError:
        return None  # not yet, or a command that writes none
    except OSError as e:
        raise EventsUnreadable(where, [], 0, why=f"cannot be read: {e.strerror}",
                               hint="check its permissions") from None
    raise EventsUnreadable(where, [], 0, why=f"is not a regular file ({kind})",
                           hint="the trainer writes its events to a regular file there; "
                                "something else (the workload's command?) put this in its "
                                "place: remove it")


def read_events_bytes(path: str | Path, limit: int = MAX_EVENTS_FILE) -> bytes | None:
    """The events file whole (:func:`open_events`), at most ``limit`` bytes; None: none yet.

    Raises:
        EventsUnreadable: not a regular file, unreadable, or larger than ``limit``.
    """
    f = open_events(path)
    if f is None:
        return None
    with f:
        try:
            data = f.read(limit + 1)
        except OSError as e:
            raise EventsUnreadable(f"events file {path}", [], 0,
                                   why=f"cannot be read: {e.strerror}") from None
    if len(data) > limit:
        raise EventsUnreadable(f"events file {path}", [], 0,
                               why=f"is larger than {limit >> 20} MiB: not read",
                               hint="measure from a copy of its lines of this run "
                                    "(elastix workload goodput --events FILE)")
    return data


def _events_lines(events_file: str | Path) -> io.TextIOWrapper | None:
    """The events file's lines, or None when there is none or it cannot be read (a status
    shows the pods' view without it)."""
    try:
        f = open_events(events_file)
    except EventsUnreadable:
        return None
    return io.TextIOWrapper(f, encoding="utf-8", errors="replace") if f is not None else None


def trainer_lost_slices(events_file: str | Path) -> dict[int, str]:
    """Slices the trainer has declared lost and not yet recovered: ``{slice: why}``
    (``eventspec.next_lost`` over its events file; ``{}`` when the command writes none). Only
    the lines that can change it are parsed: the file grows by a ``step`` event a step."""
    lost: dict[int, str] = {}
    f = _events_lines(events_file)
    if f is None:
        return {}
    with f:
        for line in f:
            if not eventspec.relevant_to_lost(line):
                continue
            try:
                ev = json.loads(line)
            except ValueError:
                continue  # a line being written now, or a torn one
            if isinstance(ev, dict):
                lost = eventspec.next_lost(lost, ev)
    return lost


def trainer_recovery_point(events_file: str | Path) -> RecoveryPoint | None:
    """The recovery point of the trainer's events file (``recovery.of_jsonl``: the newest
    ``checkpoint_committed``, its time, the steps since), as the GKE head publishes it on its
    JobSet; None when nothing is committed yet or the command writes no events."""
    f = _events_lines(events_file)
    if f is None:
        return None
    with f:
        return recovery.of_jsonl(f)


def create_time_of(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def read_jsonl(path: Path) -> list[Any]:
    """The records of an append-only JSONL file whose writer may be mid-line or was killed.

    Raises:
        FileNotFoundError: no such file.
    """
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass  # a line being written now, or cut by a SIGKILL mid-write
    return out


def read_procs(workload_dir: Path) -> list[dict[str, Any]]:
    """Every process record appended to ``procs.jsonl`` (see :func:`record_proc`)."""
    try:
        return read_jsonl(workload_dir / "procs.jsonl")
    except FileNotFoundError:
        return []


def marked_pids(marker: str, exclude: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Live processes whose environment carries this workload's marker."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid"]):
        if p.info["pid"] in exclude:
            continue
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get(envvars.LOCAL_MARKER) == marker:
                found.append(p.info["pid"])
        except psutil.Error:
            continue
    return found


def sweep(workload_dir: Path | None, marker: str | None, exclude: set[int] | None = None,
          timeout: float = 5.0) -> list[int]:
    """SIGKILL every process this workload started (and their groups); wait until gone.

    ``workload_dir`` None: by ``marker`` alone (the directory may hold another workload now).
    Returns the pids that were killed. Raises nothing: what survives ``timeout`` is returned too,
    and the caller decides.
    """
    exclude = set(exclude or ()) | {os.getpid()}
    victims: set[int] = set()
    for rec in read_procs(workload_dir) if workload_dir is not None else []:
        pid = rec["pid"]
        if pid in exclude or not proc_matches(pid, rec.get("create_time")):
            continue
        victims.add(pid)
        try:
            if os.getpgid(pid) == pid:  # its own group: take grandchildren along
                os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    if marker:
        victims.update(marked_pids(marker, exclude))
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(proc_matches(pid, None) for pid in victims):
            break
        time.sleep(0.02)
    return sorted(victims)


def supervisor_record(d: Path, state: WorkloadState | None) -> dict[str, Any] | None:
    """The workload's supervisor (pid, create time), from its state, or before its first state
    write from the record its spawner made."""
    if state is not None and state.supervisor:
        return state.supervisor
    for rec in read_procs(d):
        if rec.get("role") == "supervisor":
            return rec
    return None


SUPERVISOR_LOG_LINES = 60
"""The supervisor log's last lines a bundle keeps: its starts, exits and replacements."""


def diagnose(d: Path) -> dict[str, Any]:
    """The local sections of a bundle (``elastix workload inspect``) of the workload in ``d``:
    its manifest, the supervisor's last state and log lines, and each recorded process, alive
    or not. Read-only; what cannot be read is a line in ``unreadable``."""
    unreadable: list[str] = []

    def part(what: str, read: Any) -> Any:
        try:
            return read()
        except (OSError, ValueError) as e:
            unreadable.append(f"{what}: {e}")
            return None

    def log_tail() -> list[str]:
        with open(d / "supervisor.log", "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 64 * 1024))
            text = f.read().decode("utf-8", errors="replace")
        return text.splitlines()[-SUPERVISOR_LOG_LINES:]

    procs = [{"role": r.get("role"), "pid": r.get("pid"),
              "alive": proc_matches(r["pid"], r.get("create_time")),
              "stopped": proc_stopped(r["pid"])}
             for r in part("processes", lambda: read_procs(d)) or [] if "pid" in r]
    return {"manifest": part("manifest", lambda: read_json(d / "manifest.json")) or {},
            "supervisor_state": part("state", lambda: read_json(d / "state.json")),
            "supervisor_log": part("supervisor log", log_tail),
            "processes": procs, "unreadable": unreadable}
