"""The trainer's events: names, keys and log-line templates (docs/events.md).

The trainer writes each event to its JSONL file and logs it as one line formatted from the
event's template here (:func:`line`). Measurement reads either source: its line regexes are
built from the same templates (:func:`pattern`), so rewording a line changes both sides at once
and ``tests/protocol`` checks that every line parses back to the values it was made from.

A template is a ``str.format`` string over the event's values. ``measured`` names the values
measurement reads back from the line, in the order they appear; a line's text after the last
measured value (the step's loss, the resize's slice list) is free to change.
"""

from __future__ import annotations

import dataclasses
import json
import re
import string
from typing import Any, NamedTuple

RUN_START = "run_start"
STEP = "step"
CHECKPOINT_SAVE_STARTED = "checkpoint_save_started"
CHECKPOINT_COMMITTED = "checkpoint_committed"
CHECKPOINT_SAVE_FAILED = "checkpoint_save_failed"
CHECKPOINT_DAMAGED = "checkpoint_damaged"
SNAPSHOT_TAKEN = "snapshot_taken"
RESTORE = "restore"
ELASTIC_DETECTED = "elastic_detected"
ELASTIC_CLEANUP_DONE = "elastic_cleanup_done"
ELASTIC_SLICES_READY = "elastic_slices_ready"
ELASTIC_RESTORED = "elastic_restored"
ELASTIC_FIRST_STEP = "elastic_first_step"
ELASTIC_RESIZE = "elastic_resize"
ELASTIC_LOST_AGAIN = "elastic_lost_again"
STEPS_SKIPPED = "steps_skipped"
RUN_END = "run_end"

COMMON_KEYS = ("ts", "event", "pid")
"""Keys of every record."""


@dataclasses.dataclass(frozen=True)
class EventType:
    """One event: its JSONL keys (besides :data:`COMMON_KEYS`) and its log line."""

    name: str
    keys: tuple[str, ...]
    """The record's own keys, as docs/events.md lists them."""
    template: str
    """The log line's text after the time prefix, a ``str.format`` template."""
    measured: tuple[str, ...]
    """The values measurement reads back from the line (template order)."""
    optional: tuple[str, ...] = ()
    """Measured values a line may lack (lines of other trainers, older versions)."""
    sometimes: tuple[str, ...] = ()
    """Record keys only some records carry (``since_loss``: the local backend's)."""


_RESTORED = "elastix: restored step {step} from {source} ({bytes} bytes in {seconds:.3f} s)"

_TYPES = (
    EventType(STEP, ("step", "seconds", "loss", "live_slices", "tflops_per_device",
                     "global_batch", "grad_norm", "learning_rate",
                     "tokens_per_second_per_device", "clock", "read_lag"),
              "completed step: {step}, seconds: {seconds:.3f}, live slice count: {live_slices}, "
              "TFLOP/s/device: {tflops_per_device:.3f}, loss: {loss:.4f}",
              ("step", "seconds", "live_slices"), optional=("live_slices",),
              sometimes=("grad_norm", "learning_rate", "tokens_per_second_per_device", "clock",
                         "read_lag")),
    EventType(RUN_START, ("num_slices", "devices", "config"),
              "elastix: run start: pid {pid}, slices {num_slices}, devices {devices}",
              ("pid", "num_slices", "devices")),
    EventType(CHECKPOINT_SAVE_STARTED, ("step",),
              "elastix: checkpoint save started: step {step}", ("step",)),
    EventType(CHECKPOINT_COMMITTED, ("step", "seconds", "bytes", "blocking_seconds",
                                     "copy_seconds"),
              "elastix: checkpoint committed: step {step} ({bytes} bytes in {seconds:.3f} s, "
              "blocking {blocking_seconds:.3f} s)",
              ("step", "bytes", "seconds", "blocking_seconds"), sometimes=("copy_seconds",)),
    EventType(CHECKPOINT_SAVE_FAILED, ("step", "error"),
              "elastix: checkpoint save failed: step {step}: {error}", ("step", "error")),
    EventType(CHECKPOINT_DAMAGED, ("step", "error"),
              "elastix: checkpoint damaged, skipped: step {step}: {error}", ("step", "error")),
    EventType(SNAPSHOT_TAKEN, ("step", "seconds", "bytes", "copy_seconds", "copy_began"),
              "elastix: snapshot taken: step {step} ({bytes} bytes in {seconds:.3f} s)",
              ("step", "bytes", "seconds"), sometimes=("copy_seconds", "copy_began")),
    EventType(RESTORE, ("source", "step", "bytes", "seconds", "path", "verified"), _RESTORED,
              ("step", "source", "bytes", "seconds"), sometimes=("verified",)),
    EventType(ELASTIC_DETECTED, ("recovery", "kind", "error", "last_step", "live_slices",
                                 "lost_slices", "since_loss"),
              "elastix: slice down, retrying (recovery {recovery}, slices lost {lost_slices}, "
              "last step {last_step}): {error}",
              ("recovery", "lost_slices", "last_step", "error"), sometimes=("since_loss",)),
    EventType(ELASTIC_CLEANUP_DONE, ("recovery", "seconds"),
              "elastix: cleanup done in {seconds:.3f} s", ("seconds",)),
    EventType(ELASTIC_SLICES_READY, ("recovery", "live_slices", "required_slices", "seconds"),
              "elastix: sufficient slices active: {live_slices} >= {required_slices} "
              "(waited {seconds:.3f} s)", ("live_slices", "required_slices", "seconds")),
    # The same line as a start-up restore: measurement tells them apart by the recovery window.
    EventType(ELASTIC_RESTORED, ("recovery", "source", "step", "bytes", "seconds"), _RESTORED,
              ("step", "source", "bytes", "seconds")),
    EventType(ELASTIC_FIRST_STEP, ("recovery", "step", "seconds"),
              "elastix: first step after recovery {recovery}: step {step} in {seconds:.3f} s",
              ("recovery", "step", "seconds")),
    EventType(ELASTIC_LOST_AGAIN, ("recovery", "lost_slices", "live_slices"),
              "elastix: slice lost again during recovery {recovery}: slices lost "
              "{lost_slices}, {live_slices} live", ("recovery", "lost_slices", "live_slices")),
    EventType(ELASTIC_RESIZE, ("recovery", "from_slices", "to_slices"),
              "elastix: resized mesh (recovery {recovery}): {from_slices} -> {to_slices} slices "
              "{slices} ({why})", ("recovery", "from_slices", "to_slices")),
    # A restore of a copy newer than the last step logged (a staged copy, steps in flight): the
    # steps between were computed on the devices, their results never read.
    EventType(STEPS_SKIPPED, ("first", "last", "count"),
              "elastix: steps {first}-{last} were computed but never logged ({count} skipped, "
              "their losses not read): the copy restored is newer than the last step logged",
              ("first", "last", "count")),
    EventType(RUN_END, ("status", "reason", "step"),
              "elastix: run end: {status} at step {step} ({reason})",
              ("status", "step", "reason"), optional=("reason",)),
)
EVENTS: dict[str, EventType] = {t.name: t for t in _TYPES}
"""Every event, by name, in the order measurement tries their lines."""

SECONDS_KEYS = ("seconds", "blocking_seconds")
"""Durations: printed with 3 decimals in lines, so measurement rounds the records' to 3."""
TEXT_KEYS = ("error", "reason")
"""Free text, to the end of the line (the first line of an error)."""
_VALUE_RE = {"seconds": r"(-?\d+(?:\.\d+)?)", "blocking_seconds": r"(-?\d+(?:\.\d+)?)",
             "error": "(.*)", "reason": "(.*)", "status": r"(\w+)",
             "source": "(checkpoint|snapshot|init)", "lost_slices": r"\[([\d, ]*)\]"}
_INT_RE = r"(-?\d+)"


RECORD_DIGITS = {"seconds": 6, "blocking_seconds": 6, "copy_seconds": 6, "since_loss": 6,
                 "read_lag": 6,
                 "tflops_per_device": 6, "tokens_per_second_per_device": 3}
"""Decimals a record keeps of these measured floats (its log line prints its own); every other
value (a loss, a learning rate) is recorded as it is."""


def build(name: str, **values: Any) -> tuple[dict[str, Any], str]:
    """An event's record fields and its log line, from its values given once.

    The record holds the event's keys (durations rounded: :data:`RECORD_DIGITS`); a value only
    the template names (``pid``, the resize's slice list and reason) goes to the line alone.

    Raises:
        KeyError: an unknown event, a value that is neither a key nor in the template, or a
            value the template needs is missing.
    """
    ev = EVENTS[name]
    in_line = {f for _, f, _, _ in string.Formatter().parse(ev.template) if f}
    unknown = set(values) - set(ev.keys) - in_line - set(COMMON_KEYS)
    if unknown:
        raise KeyError(f"event {name} has no key {sorted(unknown)}")
    missing = set(ev.keys) - set(ev.sometimes) - set(values)
    if missing:
        raise KeyError(f"event {name} needs {sorted(missing)}")
    record = {k: round(v, RECORD_DIGITS[k]) if k in RECORD_DIGITS and isinstance(v, float) else v
              for k, v in values.items() if k in ev.keys}
    return record, line(name, **values)


def line(name: str, **values: Any) -> str:
    """The log line of event ``name`` (without the time prefix) from its values.

    Raises:
        KeyError: an unknown event, or a value its template needs is missing.
    """
    return EVENTS[name].template.format(**values)


def pattern(name: str) -> re.Pattern[str]:
    """A regex whose groups capture the event's ``measured`` values from a line's text."""
    ev = EVENTS[name]
    parts = [(lit, field) for lit, field, _, _ in string.Formatter().parse(ev.template)]
    last = max(i for i, (_, field) in enumerate(parts) if field in ev.measured)
    out = []
    for i, (lit, field) in enumerate(parts[:last + 1]):
        value = _VALUE_RE.get(field, _INT_RE) if field in ev.measured else ".*?"
        if field in TEXT_KEYS and lit.endswith(" "):
            # Text may be empty, and a log pipeline may strip the blank before it.
            seg = re.escape(lit[:-1]) + " ?" + value
        else:
            seg = re.escape(lit) + value
        if i == last and i + 1 < len(parts) and parts[i + 1][1] is None:
            seg += re.escape(parts[i + 1][0])  # the template's closing text, e.g. ")"
        out.append(f"(?:{seg})?" if field in ev.optional else seg)
    return re.compile("".join(out))


_LOST_ENDS = frozenset({ELASTIC_SLICES_READY, ELASTIC_RESTORED, RUN_START, RUN_END})


def relevant_to_lost(text: str) -> bool:
    """Whether a JSONL line may change :func:`next_lost` (a cheap test before parsing it: the
    file grows by a ``step`` event a step, and those never do)."""
    return '"elastic_' in text or '"run_' in text


def next_lost(lost: dict[int, str], event: dict[str, Any]) -> dict[int, str]:
    """Slices the trainer has declared lost and not yet recovered, after one more event.

    ``elastic_detected`` names the ``lost_slices`` of a recovery, which ends at
    ``elastic_slices_ready`` (or ``elastic_restored``); a ``run_start`` (a restarted head) or a
    ``run_end`` clears them. ``{slice: why}``; any other event leaves ``lost`` as it was.
    """
    try:
        name = event["event"]
        if name == ELASTIC_DETECTED:
            why = (f"the trainer declared it lost at {event.get('ts', '?')} (recovery "
                   f"{event.get('recovery', '?')}: {event.get('error', '')})")
            return {int(s): why for s in event.get("lost_slices") or []}
    except (KeyError, TypeError, ValueError):
        return lost  # not an event of ours
    return {} if name in _LOST_ENDS else lost


class Jsonl(NamedTuple):
    """An events file split by :func:`split_jsonl`."""

    records: list[dict[str, Any]]
    """The events, in the order written."""
    bad: list[tuple[int, str]]
    """Damage, as ``(line number, why)``: lines that are JSON but not an object with an
    ``event`` (something other than the trainer wrote there); every unreadable line when
    nothing else was read (not an events file at all)."""
    skipped: list[tuple[int, str]]
    """Torn lines skipped, as ``(line number, why)``: half a record (a head killed mid-write,
    a full disk) or a run of NUL bytes, anywhere but at the end."""
    total: int
    """Non-blank lines."""

    def skipped_note(self) -> str | None:
        """``line N, not JSON`` for the first skipped line, or None."""
        return f"line {self.skipped[0][0]}, {self.skipped[0][1]}" if self.skipped else None


def split_jsonl(text: str) -> Jsonl:
    """The records of an events file, its damaged lines, its torn lines and its count of
    non-blank lines.

    One rule for every reader (a live file and ``--events FILE`` alike). A line that is not
    JSON is torn: half a record, left by a head killed mid-write on a full disk, which the
    next head ends and writes after (``EventLog``), or a run of NUL bytes a crash left. Torn
    lines are skipped wherever they are and counted (``skipped``: readers say how many),
    except a torn *last* line, which is what a file being written looks like (the trainer
    mid-line) and is skipped without a word. A line that is JSON but not an object with an
    ``event`` is damage (``bad``), for the caller to report; so is every unreadable line of
    a file with no record at all.
    """
    records: list[dict[str, Any]] = []
    bad: list[tuple[int, str]] = []
    torn: list[tuple[int, str]] = []
    lines = text.splitlines()
    last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
    end_torn = False
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            if i == last:
                end_torn = True
            torn.append((i + 1, "not JSON"))
            continue
        if not isinstance(rec, dict) or "event" not in rec:
            bad.append((i + 1, "not an object with an 'event'"))
            continue
        records.append(rec)
    total = sum(1 for ln in lines if ln.strip())
    if not records:  # not an events file: nothing in it reads as one
        return Jsonl(records, sorted(bad + torn), [], total)
    if end_torn:  # the writer may be mid-line
        torn.pop()
    return Jsonl(records, bad, torn, total)
