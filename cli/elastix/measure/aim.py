"""Aimed faults: when a chaos fault lands, found from the trainer's own events.

A fault "now" rarely lands where recoveries go wrong: during a checkpoint's copy, a host
snapshot, a restore, a recovery, the start-up or the first compile. An :class:`Aim` names the
moment (``--during``), a step (``--at-step``) or a delay (``--after``); :func:`find_open` says
whether the moment is open in the events read so far, and :func:`landing` says afterwards where
the fault really landed relative to it (a save that committed a millisecond before the kill
is not a kill during a save, and the report says so).

Each moment is a window between two events of docs/events.md, read from any source (the events
file, or the head's log lines: MaxText's are mapped to the same events by
:mod:`elastix.measure.maxtext`):

=========== ===================================================== ============================
moment      opens at                                              closes at
=========== ===================================================== ============================
save        ``checkpoint_save_started`` of step S                 its ``checkpoint_committed``
                                                                  or ``checkpoint_save_failed``
snapshot    the ``step`` S a host snapshot follows (S a multiple  ``snapshot_taken`` of S
            of the snapshot period)
recovery    ``elastic_detected``                                  ``elastic_first_step``
restore     a recovery's ``elastic_slices_ready``                 its ``elastic_restored``
startup     the workload runs, no ``run_start`` yet               ``run_start``
compile     ``run_start``                                         the run's first ``step``
=========== ===================================================== ============================

A save's own device-to-host copy is its first ``copy_seconds`` (in its commit; logs without
it: ``blocking_seconds``, an upper bound that also holds the wait for the previous save): a
fault then fails the save (nothing of that step is written); one after the copy, during the
background write, lets it commit, as on Pathways, where the write is the controller's. A
fault is placed where it had surely landed: once its signal was sent (``KillRecord.sent``,
else its time), so a save committed after a fault placed inside its copy (beyond the
millisecond the times are kept to) is a simulation that failed late, never the clock.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from typing import TYPE_CHECKING, Any

from elastix.backends.local.state import open_events
from elastix.errors import UsageError
from elastix.measure.events import Event, events_from_records, events_of, fmt_ms

if TYPE_CHECKING:
    from elastix.backends.base import Backend

MOMENTS = ("save", "snapshot", "restore", "recovery", "startup", "compile")
"""The moments ``--during`` aims at, in the order a run meets them (roughly)."""

_RUN_START, _STEP = "run_start", "step"
_SAVE, _COMMITTED, _SAVE_FAILED = ("checkpoint_save_started", "checkpoint_committed",
                                   "checkpoint_save_failed")
_SNAPSHOT = "snapshot_taken"
_DETECTED, _READY, _RESTORED, _FIRST = ("elastic_detected", "elastic_slices_ready",
                                        "elastic_restored", "elastic_first_step")


@dataclasses.dataclass(frozen=True)
class Aim:
    """When a fault lands: at a step, during a moment, after a delay; all None: once the
    trainer is stepping (a step after its first save), as an un-aimed kill does."""

    at_step: int | None = None
    during: str | None = None
    after: float | None = None  # seconds

    def __post_init__(self) -> None:
        given = [f for f, v in (("--at-step", self.at_step), ("--during", self.during),
                                ("--after", self.after)) if v is not None]
        if len(given) > 1:
            raise UsageError(f"{given[0]} and {given[1]} cannot be combined: a fault has one "
                             "moment", hint="aim with one of --at-step, --during, --after")
        if self.during is not None and self.during not in MOMENTS:
            raise UsageError(f"--during {self.during!r} is not a moment: {', '.join(MOMENTS)}",
                             hint="e.g. --during save")
        if self.at_step is not None and self.at_step < 1:
            raise UsageError(f"--at-step {self.at_step} is out of range: 1 or more",
                             hint="steps count from 1")

    @property
    def aimed(self) -> bool:
        return self.at_step is not None or self.during is not None or self.after is not None

    def describe(self) -> str:
        if self.at_step is not None:
            return f"at step {self.at_step}"
        if self.during is not None:
            return f"during {self.during}"
        if self.after is not None:
            return f"after {self.after:g} s"
        return "once stepping"

    def needs_stepping(self) -> bool:
        """Whether the fault waits for steady state first (an un-aimed one, or one aimed at a
        moment only a stepping run has: a save, a snapshot)."""
        return not self.aimed or self.during in ("save", "snapshot")


@dataclasses.dataclass(frozen=True)
class Window:
    """A moment found open: which, what it is (``checkpoint save of step 20``), when it
    opened (ms) and the index of the event that opened it (None: it opens with the run)."""

    moment: str
    what: str
    opened: int | None
    index: int | None
    step: int | None = None


def _last(events: list[Event], names: tuple[str, ...], since: int = 0) -> int | None:
    for i in range(len(events) - 1, since - 1, -1):
        if events[i].name in names:
            return i
    return None


def _after(events: list[Event], i: int, pred) -> int | None:
    return next((j for j in range(i + 1, len(events)) if pred(events[j])), None)


def snapshot_period(events: list[Event], records: list[dict[str, Any]] | None) -> int | None:
    """The trainer's snapshot period: its ``run_start`` config's (elastix's trainer, in its
    events file), else the gap between its last two snapshots; None when unknown, 0 when the
    config says it takes none."""
    for rec in reversed(records or []):
        if rec.get("event") == _RUN_START and isinstance(rec.get("config"), dict):
            v = rec["config"].get("snapshot_period")
            if isinstance(v, int):
                return v
            break
    steps = [e.data.get("step") for e in events if e.name == _SNAPSHOT]
    steps = [s for s in steps if isinstance(s, int)]
    if len(steps) >= 2 and steps[-1] > steps[-2]:
        return steps[-1] - steps[-2]
    return None


def saves_configured(records: list[dict[str, Any]] | None) -> bool | None:
    """Whether the run saves checkpoints, from its ``run_start`` config; None when unknown."""
    for rec in reversed(records or []):
        if rec.get("event") == _RUN_START and isinstance(rec.get("config"), dict):
            cfg = rec["config"]
            if "checkpoint_dir" in cfg:
                return bool(cfg.get("checkpoint_dir")) and bool(cfg.get("checkpoint_period", 1))
            break
    return None


REACH_FOLLOWED = 0.001
"""Seconds from an event to a fault aimed at it, where the events file is followed as it is
written (the local backend: inotify wakes the launcher; docs/chaos.md, "about a
millisecond"): a copy shorter than this is over before a fault can land in it."""
REACH_POLLED = 1.0
"""The same where the events are read once a poll (GKE, a MaxText head's log)."""


def save_copy_note(events: list[Event], following: bool) -> str | None:
    """What ``--during save`` says before it kills when this run's checkpoint copies are
    shorter than a fault can follow a save's start here: it will land in the write, after the
    copy (where the save still commits); None when a copy can be hit, or none is known yet."""
    start = _last(events, (_RUN_START,)) or 0
    copies = [float(c) for e in events[start:] if e.name == _COMMITTED
              for c in [e.data.get("copy_seconds", e.data.get("blocking_seconds"))]
              if isinstance(c, (int, float)) and not isinstance(c, bool)][-5:]
    reach = REACH_FOLLOWED if following else REACH_POLLED
    if not copies or max(copies) >= reach:
        return None
    how = ("the launcher is woken by each event line" if following
           else "the trainer's events are read once a second")
    return (f"--during save: this run's checkpoint copies last at most {max(copies) * 1000:.1f}"
            f" ms (its last {len(copies)}), shorter than a fault can follow a save's start here"
            f" (about {reach * 1000:g} ms: {how}); it will land in the save's write, after the "
            "copy, where the save still commits (a larger state copies for longer)")


def check_reachable(aim: Aim, events: list[Event], records: list[dict[str, Any]] | None) -> None:
    """Refuse an aim the run can never meet, before anything is killed (exit 2).

    Raises:
        UsageError: ``--at-step`` already passed in the current run; ``--during save`` on a
            run that saves no checkpoint; ``--during snapshot`` on one that takes no snapshot.
    """
    if aim.at_step is not None:
        start = _last(events, (_RUN_START,)) or 0
        done = [e.data["step"] for e in events[start:] if e.name == _STEP
                and isinstance(e.data.get("step"), int)]
        if done and max(done) >= aim.at_step:
            raise UsageError(f"--at-step {aim.at_step} is in the past: the run is at step "
                             f"{max(done)}", hint=f"aim at a later step, e.g. --at-step "
                                                  f"{max(done) + 10}")
    if aim.during == "save" and saves_configured(records) is False:
        raise UsageError("--during save: the head saves no checkpoints (its run_start config "
                         "has no --checkpoint-dir or a --checkpoint-period of 0)",
                         hint="aim at another moment, or give the trainer --checkpoint-dir")
    if aim.during == "snapshot" and snapshot_period(events, records) == 0:
        raise UsageError("--during snapshot: the head takes no host snapshots (its run_start "
                         "config has --snapshot-period 0)",
                         hint="give the trainer --snapshot-period N, or aim --during save")


def compile_passed(events: list[Event], head: tuple[bool, int | None]) -> int | None:
    """The step of a run whose first compile has passed with none to come: its ``run_start``
    was followed by steps and the head running now is the one that wrote it. ``head``: whether
    the head runs, and when it started (ms; None: unknown, taken as the writer). None: the
    compile is open, or a head that is restarting (down, or started after the run_start)
    brings a new one."""
    start = _last(events, (_RUN_START,))
    steps = [] if start is None else [e.data.get("step") for e in events[start:]
                                      if e.name == _STEP]
    running, started = head
    if not steps or not running or (started is not None and started > events[start].t):
        return None
    return steps[-1]


def find_open(events: list[Event], aim: Aim, since: int = 0,
              records: list[dict[str, Any]] | None = None, late: bool = False) -> Window | None:
    """The window of ``aim`` open now, in ``events`` (read so far), or None.

    ``since``: events before this index belong to an earlier fault: a window they opened is
    not aimed at again (a second kill waits for the next save, not the one the first hit).
    ``late``: a recovery (or its restore) after ``since`` is the one an opener kill began,
    and no other comes: once it opened it is returned even if it has closed since (a restore
    of 20 ms can open and close between two reads of a busy machine), so the fault lands
    after it, a miss reported as one, instead of waiting for a window that never comes.
    ``at_step`` is "open" once step N-1 of the current run completed (the fault lands while
    step N runs), or once step N did, when the events never showed N-1.
    """
    if aim.at_step is not None:
        start = _last(events, (_RUN_START,)) or 0
        for i in range(len(events) - 1, max(start, since) - 1, -1):
            e = events[i]
            if e.name == _STEP and isinstance(e.data.get("step"), int) \
                    and e.data["step"] >= aim.at_step - 1:
                return Window("step", f"step {aim.at_step}", e.t, i, aim.at_step)
        return None
    m = aim.during
    if m == "startup":
        return Window("startup", "the run's start-up", None, None) \
            if _last(events, (_RUN_START,), since) is None and since == 0 else None
    if m == "compile":
        i = _last(events, (_RUN_START,), since)
        if i is None or _after(events, i, lambda e: e.name == _STEP) is not None:
            return None
        return Window("compile", "the run's start and first compile", events[i].t, i)
    if m in ("recovery", "restore"):
        i = _last(events, (_DETECTED,), since)
        if i is None or (not late and _after(
                events, i, lambda e: e.name in (_FIRST, _RUN_START)) is not None):
            return None
        r = events[i].data.get("recovery")
        label = f"recovery {r}" if r is not None else "the recovery"
        if m == "recovery":
            return Window("recovery", label, events[i].t, i)
        j = _after(events, i, lambda e: e.name == _READY)
        if j is None or (not late and _after(events, j, lambda e: e.name in (_RESTORED,
                                                                              "restore"))):
            return None
        return Window("restore", f"the restore of {label}", events[j].t, j)
    if m == "save":
        i = _last(events, (_SAVE,), since)
        if i is None:
            return None
        s = events[i].data.get("step")
        if _after(events, i, lambda e: (e.name in (_COMMITTED, _SAVE_FAILED)
                                        and e.data.get("step") == s)
                  or e.name in (_DETECTED, _RUN_START)) is not None:
            return None
        return Window("save", f"the checkpoint save of step {s}", events[i].t, i, s)
    if m == "snapshot":
        period = snapshot_period(events, records)
        i = _last(events, (_STEP, _SNAPSHOT, _DETECTED, _RUN_START), since)
        if not period or i is None or events[i].name != _STEP:
            return None
        s = events[i].data.get("step")
        if not isinstance(s, int) or s % period:
            return None
        return Window("snapshot", f"the host snapshot of step {s}", events[i].t, i, s)
    return None


@dataclasses.dataclass
class Landing:
    """Where a fault landed relative to the moment it aimed at."""

    aimed: str  # Aim.describe()
    what: str | None  # the window hit: "the checkpoint save of step 20"
    opened: int | None  # ms
    closed: int | None  # ms: the event that closed the window, when it came
    fault: int  # ms: the first fault's time
    inside: bool | None  # the fault landed before the window closed (None: unknown)
    note: str = ""

    @property
    def offset(self) -> float | None:
        """Seconds from the window's opening to the fault."""
        return None if self.opened is None else (self.fault - self.opened) / 1000

    def text(self) -> str:
        """``during save: 0.031 s into the checkpoint save of step 20 (inside its copy: the
        save failed)``: one line for tables and JUnit."""
        if self.what is None:
            return f"{self.aimed}: {self.note}" if self.note else self.aimed
        where = f"{self.offset:.3f} s into {self.what}" if self.offset is not None \
            else f"in {self.what}"
        if self.inside is False:
            where = f"after {self.what}"
        return f"{self.aimed}: {where}" + (f" ({self.note})" if self.note else "")

    def to_json(self) -> dict[str, Any]:
        return {"aimed": self.aimed, "window": self.what,
                "opened": fmt_ms(self.opened) if self.opened is not None else None,
                "closed": fmt_ms(self.closed) if self.closed is not None else None,
                "offset_seconds": self.offset, "inside": self.inside, "note": self.note}


def landing(events: list[Event], aim: Aim, window: Window | None, fault: int) -> Landing:
    """Where the fault at ``fault`` (ms) landed, read from the events after it."""
    if window is None:
        return Landing(aim.describe(), None, None, None, fault, None)
    close = None
    note = ""
    start = window.index if window.index is not None else 0
    s = window.step
    failed_it = False
    if window.moment == "step":
        j = _after(events, start, lambda e: e.name == _STEP and e.data.get("step") == s)
        # the fault landed while step N ran when N had not completed by then
        close = events[j].t if j is not None else None
        note = "step completed before the fault" if close is not None and close <= fault \
            else "while it ran"
        # N never completed and the run detected the loss: the fault failed it (the run logs
        # a step before it could detect a later loss), whether or not a recovery redid N yet
        failed_it = close is None and _after(
            events, start, lambda e: e.name == _DETECTED) is not None
    elif window.moment == "save":
        # its end, before a later save of the same step (a recovery that redid it) or a restart
        j = _after(events, start, lambda e: (e.name in (_COMMITTED, _SAVE_FAILED, _SAVE)
                                             and e.data.get("step") == s)
                   or e.name == _RUN_START)
        if j is not None and events[j].name not in (_COMMITTED, _SAVE_FAILED):
            j = None
        if j is not None:
            close = events[j].t
            if events[j].name == _SAVE_FAILED:
                note = "the save failed: " + str(events[j].data.get("error") or "")[:80]
            else:
                # the trainer's own copy end, else the loop's
                # whole hold, an upper bound (logs of other trainers)
                copy = events[j].data.get("copy_seconds", events[j].data.get("blocking_seconds"))
                copy_end = window.opened + round(float(copy) * 1000) \
                    if isinstance(copy, (int, float)) and window.opened is not None else None
                if close <= fault:
                    note = "it committed before the fault"
                elif copy_end is not None and fault >= copy_end - 1:  # both ms, truncated
                    note = "after its copy, during the write: it committed"
                else:
                    note = "it committed"
        else:
            note = "the save never ended"
    elif window.moment == "snapshot":
        # A copy that needed a lost host fails the step: the recovery's detection ends it.
        j = _after(events, start, lambda e: (e.name == _SNAPSHOT and e.data.get("step") == s)
                   or e.name in (_DETECTED, _RUN_START))
        if j is not None and events[j].name == _SNAPSHOT:
            close = events[j].t
            note = "the snapshot was kept" + (" before the fault" if close <= fault else "")
        else:
            close = events[j].t if j is not None else None
            note = "no snapshot of that step was kept"
    elif window.moment in ("recovery", "restore"):
        names = (_FIRST,) if window.moment == "recovery" else (_RESTORED, "restore")
        j = _after(events, start, lambda e: e.name in (*names, _RUN_START, _DETECTED))
        if j is not None and events[j].name == _DETECTED:
            close = events[j].t
            note = (f"cut short: recovery {events[j].data.get('recovery')} began "
                    f"{(close - fault) / 1000:.3f} s after the fault")
        else:
            close = events[j].t if j is not None and events[j].name != _RUN_START else None
    elif window.moment == "startup":
        j = _after(events, -1, lambda e: e.name == _RUN_START)
        close = events[j].t if j is not None else None
    elif window.moment == "compile":
        j = _after(events, start, lambda e: e.name == _STEP)
        close = events[j].t if j is not None else None
    inside = True if failed_it else None if close is None and window.moment not in (
        "save", "snapshot") else (close is None or fault < close)
    return Landing(aim.describe(), window.what, window.opened, close, fault, inside, note)


class _FileWatch:
    """Wakes when a file is written (Linux inotify through libc), so a fault aimed at a
    4-ms checkpoint copy lands inside it: the trainer writes each event line at once, and a
    poll every few ms would land after the copy of a small model. None where there is no
    inotify: the feed then polls."""

    IN_MODIFY = 0x2

    def __init__(self, libc: Any, fd: int) -> None:
        self.libc, self.fd, self.wd = libc, fd, -1

    @classmethod
    def make(cls) -> _FileWatch | None:
        import ctypes

        try:  # the process's own symbols: libc's, without find_library's subprocess
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
        except (OSError, AttributeError):
            return None
        return cls(libc, fd) if fd >= 0 else None

    def watch(self, path: str) -> None:
        if self.wd >= 0:
            self.libc.inotify_rm_watch(self.fd, self.wd)
        self.wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), self.IN_MODIFY)

    def wait(self, timeout: float) -> None:
        import select

        if self.wd < 0:
            time.sleep(timeout)
            return
        ready, _, _ = select.select([self.fd], [], [], timeout)
        if ready:
            try:
                while os.read(self.fd, 65536):
                    pass
            except BlockingIOError:
                pass

    def close(self) -> None:
        os.close(self.fd)


class EventFeed:
    """The trainer's events, read as they grow, cheaply enough to poll every few ms.

    A local events file is read from where the last read stopped (one open descriptor, so a
    re-created workload's new file is noticed by its inode), and :meth:`wait` wakes as soon as
    it is written; any other source (a head's log, GKE) is read whole through
    ``Backend.trainer_events`` at each poll.
    """

    def __init__(self, backend: Backend, name: str) -> None:
        self.backend, self.name = backend, name
        self.path = backend.events_path(name)
        self.records: list[dict[str, Any]] | None = None
        self.events: list[Event] = []
        self._f = None
        self._ino: int | None = None
        self._buf = b""
        self._watch = _FileWatch.make() if self.path is not None else None

    @property
    def following(self) -> bool:
        """The events file is read as it grows (and :meth:`wait` wakes on its writes)."""
        return self._f is not None

    def wait(self, timeout: float, sleep: Any = time.sleep) -> None:
        """Until the events file is written or ``timeout`` seconds passed (``sleep`` when the
        file is not followed)."""
        if self._f is not None and self._watch is not None:
            self._watch.wait(timeout)
        else:
            sleep(timeout)

    def poll(self) -> list[Event]:
        try:
            ino = os.stat(self.path).st_ino if self.path is not None else None
        except FileNotFoundError:
            ino = None  # not yet, or a head that writes none (MaxText): its log, read whole
        if ino is None:
            got = self.backend.trainer_events(self.name)
            self.records = got.records if got is not None else None
            self.events = events_of(got)[0]
            return self.events
        if self._f is None or ino != self._ino:
            if self._f is not None:
                self._f.close()
                self._f = None
            # never opened to block: a FIFO there is said (EventsUnreadable), not waited on
            self._f = open_events(self.path)
            if self._f is None:  # gone since the stat
                return self.events
            self._ino, self._buf, self.records, self.events = ino, b"", [], []
            if self._watch is not None:
                self._watch.watch(self.path)
        self._buf += self._f.read()
        *lines, self._buf = self._buf.split(b"\n")
        new = []
        for ln in lines:
            try:
                rec = json.loads(ln)
            except ValueError:
                continue  # measurement reports a damaged line; aiming skips it
            if isinstance(rec, dict):
                new.append(rec)
        if new:
            assert self.records is not None
            self.records += new
            self.events += events_from_records(new)
        return self.events

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        if self._watch is not None:
            self._watch.close()
            self._watch = None
