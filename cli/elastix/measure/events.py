"""Recovery measurement from the trainer's event log or from the head's log lines.

Pure functions, no JAX, no I/O: the two sources (docs/events.md) are first normalised into one
stream of :class:`Event` (times truncated to the millisecond, ``seconds`` rounded to 3 decimals,
only the keys both sources carry), so everything computed from that stream is identical whichever
source it came from. Recoveries (:func:`recoveries`) and goodput (:mod:`elastix.measure.goodput`) are then
computed from the stream.

Times are integer milliseconds since the Unix epoch. Kill times come from the launcher's clock
(:class:`~elastix.backends.base.KillRecord`), event times from the trainer's: the same clock
locally; on GKE they differ by the NTP skew between the machines (usually milliseconds).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from elastix.errors import EventsUnreadable, UsageError
from elastix.measure import maxtext
from elastix.protocol import eventspec, timefmt
from elastix.protocol import phases as phasedef

if TYPE_CHECKING:
    from elastix.backends.base import TrainerEvents

# The keys of each event that the log lines also carry; nothing else survives normalisation.
_KEYS: dict[str, tuple[str, ...]] = {name: ev.measured for name, ev in eventspec.EVENTS.items()}
_SECONDS = eventspec.SECONDS_KEYS


@dataclasses.dataclass(frozen=True)
class Event:
    """One normalised trainer event: ``t`` in ms since the epoch, ``name``, and its data."""

    t: int
    name: str
    data: dict[str, Any]


# The contract's time formats (elastix.protocol.timefmt), under the names measurement uses.
parse_ts = timefmt.parse_ms  # ISO 8601 -> ms since the epoch, truncated
ms_of = timefmt.to_ms  # a datetime (e.g. a kill time) -> ms, truncated like event times
fmt_ms = timefmt.from_ms  # ms -> ``2026-11-29T09:50:01.123Z``


_TEXT = {"error", "reason", "status", "source", "kind"}
MAX_COUNT = 2**53
"""The largest step, byte count or slice count an event may carry (a float still holds it)."""


class BadValue(ValueError):
    """A value of an event that no trainer writes (NaN or negative seconds, a step that is
    no whole number): ``key`` names it."""

    def __init__(self, key: str, value: Any, why: str) -> None:
        from elastix.errors import shown

        super().__init__(f"{key} {shown(value)} {why}")
        self.key = key


def _value(key: str, v: Any) -> Any:
    """``v`` as measurement keeps it, checked by the kind of value ``key`` holds (the log
    lines' grammar: seconds, whole numbers, text, a list of slices).

    Raises:
        BadValue: not a value of that kind.
    """
    if v is None:
        return None
    if key in _SECONDS:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1e12:
            # (NaN and infinities fail the range too; a huge int never becomes a float)
            raise BadValue(key, v, "is not a duration (seconds, a finite number, 0 or more)")
        return float(f"{float(v):.3f}")  # what the log line prints
    if key in _TEXT:
        if not isinstance(v, str):
            raise BadValue(key, v, "is not text")
        return v.splitlines()[0] if v and key == "error" else v
    if key == "lost_slices":
        if not isinstance(v, list) or not all(_count(x) for x in v):
            raise BadValue(key, v, "is not a list of slice indices")
        return v
    if not _count(v, -MAX_COUNT):  # a run_end's step -1: none completed
        raise BadValue(key, v, "is not a whole number")
    return v


def _count(v: Any, low: int = 0) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and low <= v <= MAX_COUNT


def _norm(name: str, t: int, raw: dict[str, Any]) -> Event:
    """The event as measurement keeps it: its measured keys, checked (:func:`_value`).

    Raises:
        BadValue: a value no trainer writes.
    """
    data = {key: _value(key, raw.get(key)) for key in _KEYS[name]}
    if name == eventspec.STEP and data["step"] is None:
        raise BadValue("step", None, "is missing: a step event names its step")
    for key in eventspec.EVENTS[name].sometimes:  # record-only keys, when a record has them
        if raw.get(key) is not None:
            data[key] = raw[key]
    return Event(t, name, data)


def events_from_records(records: Iterable[dict[str, Any]]) -> list[Event]:
    """Normalise event dicts (one JSONL line each, docs/events.md). Unknown events are skipped.

    Raises:
        UsageError: a record without a valid ``ts`` or ``event``.
    """
    out = []
    for i, rec in enumerate(records):
        name = rec.get("event") if isinstance(rec, dict) else None
        if name not in _KEYS:
            continue
        try:
            if not isinstance(rec.get("ts"), str):  # a number, a list: no time
                raise ValueError
            t = parse_ts(rec["ts"])
        except (TypeError, ValueError, OverflowError):
            raise UsageError(f"event {i + 1} ({name}) has no valid 'ts'",
                             hint="events must follow docs/events.md") from None
        try:
            out.append(_norm(name, t, rec))
        except BadValue as err:
            raise UsageError(f"event {i + 1} ({name}): {err}",
                             hint="events must follow docs/events.md") from None
    return _fix_recovery_restores(out)


def events_from_jsonl(text: str) -> LogEvents:
    """Parse and normalise the text of an events.jsonl file; torn lines (half a record, a run
    of NUL bytes) are skipped and counted in the result's ``skipped`` (:func:`log_note`).

    Raises:
        EventsUnreadable: lines that are JSON but not objects with an ``event`` (all counted,
            the first named; ``eventspec.split_jsonl``), or a record without a valid ``ts``.
    """
    split = eventspec.split_jsonl(text)
    if split.bad:
        raise EventsUnreadable("events file", split.bad, split.total)
    return with_skipped(events_from_records(split.records), len(split.skipped),
                        split.skipped_note())


def with_skipped(events: list[Event], skipped: int, first: str | None) -> LogEvents:
    """``events`` with the count of lines skipped to read them (:func:`log_note` says it)."""
    out = LogEvents(events)
    out.skipped, out.first_skipped = skipped, first
    return out


# Events the training loop writes itself, in order; a background save's commit may land in the
# file after a later step, so only these must never go back in time.
_IN_ORDER = ("run_start", "step", "elastic_detected", "elastic_cleanup_done",
             "elastic_slices_ready", "elastic_restored", "elastic_first_step", "run_end")


def time_goes_back(events: list[Event]) -> str | None:
    """Where the training loop's time goes backwards (a clock stepped back, two runs' files
    mixed), or None.

    Goodput over such a stream would be nonsense (a negative wall time): it is reported instead.
    """
    prev: tuple[int, Event] | None = None
    for i, ev in enumerate(events, 1):
        if ev.name not in _IN_ORDER:
            continue
        if prev is not None and ev.t < prev[1].t:
            return (f"time goes backwards: event {i} ({ev.name} at {fmt_ms(ev.t)}) is "
                    f"{(prev[1].t - ev.t) / 1000:.3f} s before event {prev[0]} ({prev[1].name})")
        prev = i, ev
    return None


# A time at the start of a line: elastix's own (``2026-11-29T09:50:01.123Z``) or the one the
# Kubernetes log API puts before every line with ``timestamps=true`` (RFC3339, up to 9 digits).
# One separator after the time, as the log API writes it: the rest keeps its own indentation
# (a dying MaxText's traceback frames are indented; measurement skips them by it).
_LINE_RE = re.compile(r"^\s*(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))\s(.*)$")
_FRACTION = re.compile(r"(\.\d{6})\d+")


def _line_patterns() -> list[tuple[str, re.Pattern[str], tuple[str, ...]]]:
    """(event, regex, measured keys) for each line template of the protocol, in its order.

    A recovery's restore shares the start-up restore's line: it is parsed as ``restore`` and
    told apart afterwards by its recovery window (:func:`_fix_recovery_restores`).
    """
    out, seen = [], set()
    for name, ev in eventspec.EVENTS.items():
        if ev.template not in seen:
            seen.add(ev.template)
            out.append((name, eventspec.pattern(name), ev.measured))
    return out


_PATTERNS = _line_patterns()


def _convert(key: str, text: str | None) -> Any:
    if text is None:
        return None
    if key in eventspec.TEXT_KEYS or key in ("source", "status"):
        return text
    if key == "lost_slices":
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    if key in _SECONDS:
        return float(text)
    return int(text)


class LogEvents(list):
    """The events of a log (a list of :class:`Event`) and the lines that could not be read
    (of an events file too: its torn lines, :func:`events_from_jsonl`).

    ``skipped`` counts the lines that name something measurement reads (a step, a MaxText or
    pathwaysutils recovery line) but did not parse or carry no time; ``first_skipped`` says
    which line came first and why. Other loggers' lines are not counted: they are not skipped,
    just not ours.
    """

    skipped: int = 0
    first_skipped: str | None = None


def _split_time(line: str) -> tuple[int | None, str]:
    """(ms, the rest) of a line: its own leading time wins over the log API's before it."""
    t: int | None = None
    body = line
    for _ in range(2):  # the API's time, then maybe the line's own
        m = _LINE_RE.match(body)
        if not m:
            break
        try:
            t = parse_ts(_FRACTION.sub(r"\1", m.group(1)))  # Python 3.10 takes 6 digits at most
        except ValueError:
            break
        body = m.group(2)
    return t, body


def events_from_log(lines: Iterable[str]) -> LogEvents:
    """Normalise the head's log lines (docs/events.md, "Log lines"); other lines are skipped.

    Reads elastix's own lines and MaxText's (:mod:`elastix.measure.maxtext`). A line's time is
    its own leading time or, for lines without one (MaxText's), the Kubernetes log API's
    (``timestamps=true``) before it. Never raises on a line's content: what could not be read
    is counted in the result's ``skipped``.
    """
    out: list[Event] = []
    mt = maxtext.Reader()
    skipped, first = 0, None
    for n, line in enumerate(lines, 1):
        t, body = _split_time(line)
        if t is not None:
            start = mt.observe(t, body, len(out))
            if start is not None:  # a MaxText process began at this earlier line
                out.insert(start[0], _norm("run_start", start[1], {}))
        try:
            got = _read_line(body, mt) if t is not None else None
            new = [_norm(name, t, raw) for name, raw in got] if got is not None else []
        except (ValueError, TypeError, KeyError):  # a number that is no number, and the like
            got = None
        if got is None:
            if any(k in body for k in maxtext.MARKERS):
                skipped += 1
                if first is None:
                    why = "no time: read it with timestamps" if t is None else "unreadable"
                    first = f"line {n} ({why}): {body.strip()[:80]}"
            continue
        out += new
    res = LogEvents(_fix_recovery_restores(out))
    res.skipped, res.first_skipped = skipped, first
    return res


def _read_line(body: str, mt: maxtext.Reader) -> list[tuple[str, dict[str, Any]]] | None:
    """The events of one line's text, or None when it is none of the lines measurement reads."""
    for name, pat, keys in _PATTERNS:
        pm = pat.search(body)
        if pm:
            raw = {k: _convert(k, v) for k, v in zip(keys, pm.groups(), strict=True)}
            extra = mt.step(raw["step"], raw["seconds"], body) if name == "step" else []
            return [(name, raw)] + extra
    return mt.line(body)


def log_note(events: list[Event]) -> str:
    """``"; skipped N lines (first: ...)"`` for a source's name, or "" when none was skipped."""
    n = getattr(events, "skipped", 0)
    if not n:
        return ""
    return (f"; skipped {n} line{'s' if n != 1 else ''} elastix could not read "
            f"(first: {events.first_skipped})")  # type: ignore[attr-defined]


def events_of(got: TrainerEvents | None) -> tuple[list[Event], str]:
    """A backend's trainer events (``Backend.trainer_events``) normalised, and their source as
    reports name it: ``"events"`` or ``"log"``, with what was skipped (:func:`log_note`).
    Nothing to read yet (None) is no events, from the log."""
    if got is not None and got.records is not None:
        events = with_skipped(events_from_records(got.records), got.skipped, got.first_skipped)
        return events, "events" + log_note(events)
    events = events_from_log(got.lines or [] if got is not None else [])
    return events, "log" + log_note(events)


def _fix_recovery_restores(events: list[Event]) -> list[Event]:
    """A restore inside a recovery window is that recovery's ``elastic_restored``.

    The log has one "restored step" line for both kinds, and a trainer may write both events
    for one recovery restore; either way one ``elastic_restored`` per recovery remains (the last).
    """
    out: list[Event] = []
    in_recovery = False
    for ev in events:
        if ev.name == "elastic_detected":
            in_recovery = True
        elif ev.name in ("elastic_first_step", "run_start"):
            in_recovery = False
        elif ev.name in ("restore", "elastic_restored") and in_recovery:
            out = [e for e in out if not (e.name == "elastic_restored" and e.t >= _last_t(out))]
            ev = Event(ev.t, "elastic_restored", ev.data)
        out.append(ev)
    return out


def _last_t(events: list[Event]) -> int:
    """Time of the most recent ``elastic_detected``: restores after it belong to its recovery."""
    for ev in reversed(events):
        if ev.name == "elastic_detected":
            return ev.t
    return 0


snake = phasedef.snake
"""A phase or cause as a JSON key: ``waiting for slices`` -> ``waiting_for_slices`` (tables
print the words; JSON consumers index keys)."""


@dataclasses.dataclass
class Recovery:
    """One recovery from a failure: in-process (``elastic_*`` events) or a process restart.

    Times are ms since the epoch (None when that point was not reached or is unknown).
    """

    index: int  # 1-based, in order of appearance
    kind: str
    """``in-process``, ``restart``; or, made by the chaos driver (never by
    :func:`recoveries`), ``start-up`` (a fault that landed before the run's first step and was
    absorbed by its start: no recovery event, only the first step after it) or ``stall`` (a
    host hung for less than the loss timeout: training waited for it, lost nothing, and its
    next step came once it answered)."""
    kill: int | None = None  # from the launcher's KillRecord, when known
    also_killed: list[int] = dataclasses.field(default_factory=list)
    """Kills (ms) this recovery took in besides :attr:`kill`: one before its start (two kills,
    one detection) or one that landed while it ran (a second slice lost during the recovery:
    it is replaced inside this recovery, and no later recovery is its)."""
    start: int | None = None  # elastic_detected, or the new process's run_start
    cleanup_done: int | None = None
    slices_ready: int | None = None
    restored: int | None = None
    first_step_at: int | None = None
    last_step: int | None = None  # last step logged before the failure surfaced
    restored_step: int | None = None
    skipped: tuple[int, int] | None = None
    """Steps (first, last) the trainer said it skipped (``steps_skipped``): computed on the
    devices, never logged, before the copy of ``last`` it restored."""
    restore_source: str | None = None
    restore_bytes: int | None = None
    restore_load_seconds: float | None = None
    first_step: int | None = None
    first_step_time_seconds: float | None = None
    live_slices: int | None = None
    required_slices: int | None = None
    slices_before: int | None = None  # the steps' own slice count (MaxText's live slice count)
    slices_after: int | None = None
    lost_slices: list[int] | None = None
    error: str | None = None
    pid_before: int | None = None
    pid_after: int | None = None
    lost_again: list[tuple[int, list[int]]] = dataclasses.field(default_factory=list)
    """Slices the trainer saw lost while this recovery waited for its slices (ms, slice ids):
    a second failure inside it, said by the trainer (``elastic_lost_again``), kill record or
    not."""
    prev_event: int | None = None  # last event before the failure surfaced (restart: old run)
    loss: int | None = None  # when the trainer dated the loss itself (local: since_loss)
    first_fault: int | None = None
    """The first fault's loss (or its kill), when recoveries another loss cut short came before
    this one: the fault's recovery, timed from it (docs/chaos.md, "Measured as what
    happened"); set by the chaos driver, never by :func:`recoveries`."""

    @property
    def complete(self) -> bool:
        """Training is stepping again."""
        return self.first_step_at is not None

    def moments(self) -> phasedef.Moments:
        """The moments this recovery passed, as :mod:`elastix.protocol.phases` reads them."""
        return phasedef.Moments(self.kind, self.loss, self.kill, self.prev_event, self.start,
                                self.cleanup_done, self.slices_ready, self.restored,
                                self.first_step_at, self.first_fault)

    @property
    def detection_from(self) -> str | None:
        """Where the first phase (detection, or restart) is counted from: ``"loss"`` (the
        moment the trainer dated the loss itself: ``since_loss``, the local backend's host
        exit or last heartbeat; every view has it, TensorBoard included), else ``"kill"``
        (the launcher's kill time, as ``chaos kill-worker --measure`` knows it), else
        ``"last event"`` (the trainer's last event before the failure surfaced). The kill
        before a dated loss is :attr:`kill_to_loss`, in no phase (:mod:`elastix.protocol.phases`).
        """
        return self.moments().origin_name

    @property
    def kill_to_loss(self) -> float | None:
        """Seconds from the launcher's kill to the loss the trainer dated (None unless both
        are known): the chaos driver's alone, so named apart from detection."""
        return phasedef.kill_to_loss(self.moments())

    def phases(self) -> list[tuple[str, int, int]]:
        """(phase, start ms, end ms), contiguous, for the phases that were reached."""
        return phasedef.spans(self.moments())

    def phase_seconds(self) -> dict[str, float | None]:
        """Each phase's duration in seconds (None when not reached)."""
        return phasedef.seconds(self.moments())

    def restore_split(self) -> dict[str, float] | None:
        """The restore phase in two: re-initialisation (everything before the checkpoint's
        own read: a restarted process's imports, config, mesh and state set-up; in-process,
        the mesh and state rebuilt on the slices that are back) and the checkpoint's own load
        (Orbax's ``Finished load in S seconds``, or the trainer's restore seconds). In MaxText
        the first is most of it, restarted or not. None when either bound is not known."""
        secs = self.phase_seconds().get("restore")
        if secs is None or self.restore_load_seconds is None:
            return None
        load = min(self.restore_load_seconds, secs)
        return {"reinitialisation": round(secs - load, 3), "load": round(load, 3)}

    @property
    def downtime(self) -> float | None:
        """Seconds from the loss (or the kill, else the detection) to the first completed
        step after it (:func:`elastix.protocol.phases.downtime`)."""
        return phasedef.downtime(self.moments())

    @property
    def steps_skipped(self) -> tuple[int, int, bool] | None:
        """Steps completed but never logged before the restored copy: (first, last, said),
        ``said`` False where an events file from before ``steps_skipped`` restored a step newer
        than its last logged one (inferred). None when the restore was not past the log."""
        if self.skipped is not None:
            return (*self.skipped, True)
        if self.last_step is not None and self.restored_step is not None \
                and self.restored_step > self.last_step:
            return (self.last_step + 1, self.restored_step, False)
        return None

    @property
    def steps_lost(self) -> int | None:
        """The last step completed before the failure (the last logged, or a skipped one the
        restored copy proves completed) minus the step training resumed from: never negative."""
        last, skipped = self.last_step, self.steps_skipped
        if skipped is not None and last is not None:
            last = max(last, skipped[1])
        return phasedef.steps_lost(last, self.restored_step)

    @property
    def not_in_log(self) -> list[str]:
        """What a recovery that went on passed through but its source did not say: phases
        whose bounds were not logged and, in-process, the restore's size and the lost slices
        (MaxText logs neither). Reported as unknown, never estimated."""
        if not self.complete:
            return []
        out = [p for p, secs in self.phase_seconds().items() if secs is None]
        if self.kind == "in-process":
            out += [k for k in ("restore_bytes", "lost_slices") if getattr(self, k) is None]
        return out

    @property
    def pid_same(self) -> bool | None:
        if self.pid_before is None or self.pid_after is None:
            return None
        return self.pid_before == self.pid_after

    def phase_at(self, t: int) -> str:
        """The phase this recovery was in at ``t`` (ms): before it ("before detection") or one
        of :meth:`phases`."""
        for name, a, b in self.phases():
            if a <= t < b:
                return name
        return "before detection"

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict: times as ISO strings, phases in seconds, derived numbers."""
        d = dataclasses.asdict(self)
        d["also_killed"] = [{"time": fmt_ms(t), "phase": snake(self.phase_at(t))}
                            for t in self.also_killed]
        d["lost_again"] = [{"time": fmt_ms(t), "phase": snake(self.phase_at(t)),
                            "slices": sl} for t, sl in self.lost_again]
        for k in ("kill", "start", "cleanup_done", "slices_ready", "restored", "first_step_at",
                  "prev_event", "loss", "first_fault"):
            d[k] = fmt_ms(d[k]) if d[k] is not None else None
        d.update(complete=self.complete, detection_from=self.detection_from,
                 kill_to_loss_seconds=self.kill_to_loss, downtime_seconds=self.downtime,
                 steps_lost=self.steps_lost, pid_same=self.pid_same,
                 steps_skipped=None if self.steps_skipped is None else dict(zip(
                     ("first", "last", "said"), self.steps_skipped, strict=True)),
                 phases={snake(k): v for k, v in self.phase_seconds().items()},
                 restore_split=self.restore_split(),
                 not_in_log=[snake(k) for k in self.not_in_log])
        return d


def recoveries(events: list[Event]) -> list[Recovery]:
    """Every recovery in a normalised event stream, in order.

    An ``elastic_detected`` opens an in-process recovery that the ``elastic_*`` events fill in;
    a second ``run_start`` is a restart (the controller process was replaced), resumed from the
    start-up ``restore`` and completed by the next ``step``.
    """
    out: list[Recovery] = []
    cur: Recovery | None = None
    pid: int | None = None
    last_step: int | None = None
    live: int | None = None  # the last step's slice count, when its line says it
    prev_t: int | None = None
    prev_name: str | None = None
    started = False
    for ev in events:
        d = ev.data
        if ev.name == "run_start":
            if started:
                cur = Recovery(len(out) + 1, "restart", start=ev.t, last_step=last_step,
                               pid_before=pid, pid_after=d["pid"], prev_event=prev_t,
                               slices_before=live)
                out.append(cur)
            started, pid = True, d["pid"]
        elif ev.name == "elastic_detected":
            # A loss found while the process was still starting (nothing since its run_start):
            # the time before it is start-up, not detection; without a kill time or the
            # trainer's own date of the loss, when it happened is not in the log.
            origin = None if prev_name == "run_start" else prev_t
            cur = Recovery(len(out) + 1, "in-process", start=ev.t, pid_before=pid,
                           last_step=d["last_step"] if d["last_step"] is not None else last_step,
                           lost_slices=d["lost_slices"], error=d["error"], prev_event=origin,
                           slices_before=live,
                           loss=phasedef.loss_ms(ev.t, d.get("since_loss")))
            out.append(cur)
        elif cur is not None and not cur.complete:
            _fill(cur, ev, pid, d.get("live_slices") if ev.name == "step" else live)
        if ev.name == "step":
            last_step, live = d["step"], d.get("live_slices")
        prev_t, prev_name = ev.t, ev.name
    return out


def _fill(cur: Recovery, ev: Event, pid: int | None, live: int | None) -> None:
    d = ev.data
    if ev.name == "elastic_cleanup_done":
        cur.cleanup_done = ev.t
    elif ev.name == "elastic_lost_again":
        cur.lost_again.append((ev.t, list(d.get("lost_slices") or [])))
    elif ev.name == "elastic_slices_ready":
        cur.slices_ready = ev.t
        cur.live_slices, cur.required_slices = d["live_slices"], d["required_slices"]
    elif ev.name == "steps_skipped":
        cur.skipped = (d["first"], d["last"])
    elif ev.name in ("elastic_restored", "restore"):
        cur.restored, cur.restored_step = ev.t, d["step"]
        cur.restore_source, cur.restore_bytes = d["source"], d["bytes"]
        cur.restore_load_seconds = d["seconds"]
    elif ev.name == ("step" if cur.kind == "restart" else "elastic_first_step"):
        if cur.kind == "restart" and cur.restored_step is None and d.get("step") is not None:
            # no restore was logged: the new process resumed from the step before its first
            # (from init, step 0, when nothing was saved where it could read it)
            cur.restored_step = d["step"] - 1
            cur.restore_source = "init" if d["step"] == 1 else None
        cur.first_step_at, cur.first_step = ev.t, d["step"]
        cur.first_step_time_seconds = d["seconds"]
        cur.slices_after = live
        if cur.kind == "in-process":
            cur.pid_after = pid


def assign_kills(recs: list[Recovery], kills: list[int]) -> None:
    """Attach kill times (ms) to recoveries: each kill to the first later unclaimed recovery
    (:attr:`Recovery.kill`); more kills before that recovery's start, and kills that land
    while it runs (until its first step), are that recovery's too (:attr:`Recovery.also_killed`),
    never a later recovery's: a kill during a recovery used to be taken as the next
    recovery's kill, its detection then counted from a moment long before its own."""
    pending = sorted(kills)
    for rec in recs:
        if not pending or rec.start is None:
            continue
        if pending[0] <= rec.start:
            rec.kill = pending.pop(0)
            while pending and pending[0] <= rec.start:  # two kills, one recovery
                rec.also_killed.append(pending.pop(0))
        end = rec.first_step_at
        if rec.kill is not None and end is not None:
            while pending and pending[0] <= end:  # landed during it
                rec.also_killed.append(pending.pop(0))
