"""MaxText's head log (with pathwaysutils' and Orbax's lines) read as elastix events.

MaxText logs through absl: a line carries at most ``I1129 09:50:01.123456 140 train.py:42]``,
a month, day and *local* time of day with no year and no zone, so it is not used as a time. A
line's time is the one the Kubernetes log API records (``timestamps=true``, RFC3339 with up to
nine fractional digits); :func:`elastix.measure.events.events_from_log` strips it and hands the
rest here. Each format below is quoted from its source, with the version it was read in
(``tests/fixtures/maxtext/formats.json`` vendors them; a test checks these regexes against it,
and ``tests/fixtures/maxtext/*.log`` are logs maxtext 0.2.5, pathwaysutils 0.1.13 and
orbax-checkpoint 0.12.8 really printed):

- MaxText ``src/maxtext/common/metric_logger.py`` (maxtext 0.2.5; @ 000e6d8a):
  ``"completed step: {step}"``, ``"seconds: {:.3f}"``, with elastic training
  ``"live slice count: {n}"``, ... joined by ``", "``: parsed by elastix's own ``step`` line
  pattern (:mod:`elastix.protocol.eventspec`), whose ``live slice count`` part is optional.
- MaxText ``src/maxtext/common/checkpointing.py`` (0.2.5; @ 6762cbb4):
  ``f"restoring from this run's directory step {step}"`` (a restore begins; no size is logged),
  ``f"Saved a checkpoint at step {step}."`` (a synchronous save returned: training waited for
  all of it), ``f"Started an asynchronous checkpoint save for step {step}"``.
- Orbax ``checkpoint/orbax/checkpoint/_src/logging/event_tracking.py`` (orbax-checkpoint
  0.12.8, ``OperationRecorder``): ``'[process=%s] [%s] Finished %s%s in %.2f seconds @ %s'``
  (``load`` for a restore, ``save (blocking + background)`` for a save) and
  ``'[process=%s] [%s] Finished blocking %s in %.2f seconds. Continuing %s @ %s.'``.
- Orbax ``checkpoint/orbax/checkpoint/checkpoint_manager.py`` (orbax-checkpoint 0.12.8,
  ``CheckpointManager.save``, before the device-to-host copy): ``'[process=%s] Saving
  checkpoint at step %d'``: a save's start (``checkpoint_save_started``; ``chaos --during save``
  aims at it; the preemption variant ends ``due to preemption.`` and is not read).
- Orbax ``checkpoint/orbax/checkpoint/_src/checkpointers/checkpointer.py`` (0.11.30;
  @ 01712332): ``'Finished restoring checkpoint in %.2f seconds from %s.'``.
- pathwaysutils ``pathwaysutils/elastic/manager.py`` (0.1.13; @ v0.1.11 1089127f):
  ``"Elastic attempt %d"``, ``"Elastic event detected"`` (``_logger.exception``: a traceback
  follows), ``"Scale up requested."`` (0.1.13 only: a ``ScaleUpSignalError`` restarts the
  attempt on more slices); before ``cf82422``: ``"Slice down event detected. Retrying."``.
- pathwaysutils ``pathwaysutils/elastic/elastic.py`` (0.1.13; @ v0.1.11):
  ``"Sufficient slices active: %s >= %s. Active indices: %s"``.
- absl ``absl/logging/__init__.py`` @ bd30baf2: the prefix ``%c%02d%02d %02d:%02d:%02d.%06d
  %5d %s:%d] `` whose number is the logging thread's id: a restarted process's main thread has
  a new one, which tells where the old process's lines end.

A restart (a new MaxText process after the old one died) is seen from MaxText's start-up lines
(pyconfig's ``Config param`` dump, max_utils' ``System Information``, pathwaysutils' ``Elastic
attempt 1``; maxtext 0.2.5) or a restore, once the previous process has stepped and no
in-process recovery is under way; failing those, from the step counter going back. Each
process's start (``run_start``) is its first line: the log's first, or the first after the old
process's main thread last logged.

What MaxText never logs (the restore's size, which slices were lost, the controller's PID) is
left None, and measurement reports it as "not in the log" rather than guessing.
"""

from __future__ import annotations

import re
from typing import Any

DETECTED = re.compile(r"\b(?:Elastic event detected|Slice down event detected\. Retrying\.)")
SCALE_UP = re.compile(r"\bScale up requested\.")
ATTEMPT = re.compile(r"\bElastic attempt (\d+)\b")
SLICES_READY = re.compile(r"\bSufficient slices active: (\d+) >= (\d+)\.")
RESTORE_FROM = re.compile(r"\brestoring from this run's directory step (\d+)\b")
RESTORE_DONE = re.compile(r"\bFinished restoring checkpoint in (\d+(?:\.\d+)?) seconds from ")
LOAD_DONE = re.compile(r"\] \[(?:a?sync)\] Finished load in (\d+(?:\.\d+)?) seconds @ (\S+)")
SAVE_BLOCKING = re.compile(r"\] \[(?:a?sync)\] Finished blocking save in (\d+(?:\.\d+)?) "
                           r"seconds\. Continuing save @ (\S+?)\.?$")
SAVE_DONE = re.compile(r"\] \[(?:a?sync)\] Finished save(?: \(blocking \+ background\))? in "
                       r"(\d+(?:\.\d+)?) seconds @ (\S+)")
SAVED = re.compile(r"\bSaved a checkpoint at step (\d+)\.")
SAVE_ASYNC = re.compile(r"\bStarted an asynchronous checkpoint save for step (\d+)\b")
SAVE_START = re.compile(r"\] \[process=\d+\] Saving checkpoint at step (\d+)\s*$")
START_UP = re.compile(r"\] (?:Config param \w|System Information: Jax Version|"
                      r"Elastic attempt 1\s*$)")
ABSL = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:\d\d\.\d{6}\s+(\d+) [^\s:]+:\d+\] ")
TRACEBACK = "Traceback (most recent call last):"
TRACEBACK_CHAIN = ("The above exception was the direct cause of the following exception:",
                   "During handling of the above exception, another exception occurred:")
_STEP_DIR = re.compile(r"/(\d+)/?\.?$")

MARKERS = ("completed step:", "Elastic event detected", "Slice down event detected",
           "Elastic attempt", "Sufficient slices active", "restoring from this run's directory",
           "Finished restoring checkpoint", "Finished load in", "Scale up requested",
           "Saved a checkpoint at step")
"""Text of the lines measurement reads: a line with one of these that does not parse is
reported as skipped (other lines are just other loggers' output)."""

Events = list[tuple[str, dict[str, Any]]]


def _committed(step: int, seconds: float | None, blocking: float | None) -> tuple[str, dict]:
    return ("checkpoint_committed", {"step": step, "bytes": None, "seconds": seconds,
                                     "blocking_seconds": blocking})


def _path_step(path: str) -> int | None:
    """The step a checkpoint path ends in (Orbax names each step's directory by its number)."""
    m = _STEP_DIR.search(path)
    return int(m.group(1)) if m else None


class Reader:
    """Turns MaxText's lines, in order, into ``(event, raw values)`` pairs.

    MaxText logs no "recovered" line: the first ``completed step`` after an ``Elastic event
    detected`` (or ``Scale up requested.``) is the recovery's first step, so the reader keeps
    the state of the recovery it opened (never one elastix's own lines opened: those carry
    their own first-step line). It also follows MaxText's processes (:meth:`observe`).
    """

    def __init__(self) -> None:
        self.recovery = 0
        self.open = False  # a recovery opened by a MaxText line, not yet stepping again
        self.restore_step: int | None = None
        self.maxtext = False  # the log is MaxText's: it starts its processes' run_start
        self.elastix = False  # elastix's own trainer logs its run_start itself
        self.stepped = False  # the current process completed a step
        self.last_step: int | None = None
        self.main_tid: str | None = None  # the thread that logs the current process's steps
        self.first: tuple[int, int] | None = None  # (position, ms) of the log's first line
        self.after_main: tuple[int, int] | None = None  # of the line after main_tid's last
        self._prev_main = False
        self._traceback: str | None = None  # the dying process's traceback: "frames", "error"
        self.blocking: dict[int, float] = {}  # step -> Orbax's blocking part of its save
        self.total: dict[int, float] = {}  # step -> Orbax's whole save
        self.async_saves: set[int] = set()

    def observe(self, t: int, body: str, pos: int) -> tuple[int, int] | None:
        """See every timed line first; ``(position, ms)`` of a process's ``run_start`` to
        insert among the events read so far, or None.

        ``pos`` is how many events were read before this line: a process's start is known
        only once its start-up lines show, after its first line, so it is inserted back there.
        """
        if not self.maxtext and (self.first is None or t < self.first[1]):
            self.first = (0, t)  # the earliest line (a log may carry others' lines first)
        if self._prev_main or self._traceback:
            # The line after the main thread's last is the next process's first, unless the
            # dying process printed its traceback there first (the local backend's failing
            # head always does; a SIGKILL of the whole group prints none).
            if self._traceback_goes_on(body):
                self._prev_main = False
                return None
            self.after_main = (pos, t)
        m = ABSL.match(body)
        self._prev_main = bool(m and m.group(1) == self.main_tid)
        if "elastix: run start:" in body:
            self.elastix = True
        if self.elastix or not m:
            return None
        if not self.maxtext:
            if START_UP.search(body) or "completed step:" in body:
                self.maxtext = True
                return self.first
            return None
        back = self._step_of(body)
        if self.stepped and not self.open and (
                START_UP.search(body) or RESTORE_FROM.search(body)
                or (back is not None and self.last_step is not None and back <= self.last_step)):
            self.stepped, self.main_tid = False, None
            start = self.after_main or (pos, t)
            self.after_main = None
            return start
        return None

    def _traceback_goes_on(self, body: str) -> bool:
        """Whether ``body``, after the main thread's last line, belongs to the dying process's
        Python traceback (CPython's format: ``Traceback (most recent call last):``, indented
        frame lines, the error's line; a chained one after a blank line and "The above
        exception ..." or "During handling ..."; JAX's ``----`` and "For simplicity, JAX has
        removed ..." lines between them)."""
        if body.startswith(TRACEBACK) or body.startswith(TRACEBACK_CHAIN) or (
                self._traceback is not None and not body.strip()):
            self._traceback = "frames"
            return True
        if self._traceback == "frames":
            if not body.startswith((" ", "\t", "-----", "For simplicity, JAX")):
                self._traceback = "error"  # the error's own line ends the frames
            return True
        self._traceback = None
        return False

    @staticmethod
    def _step_of(body: str) -> int | None:
        m = re.search(r"\bcompleted step: (\d+),", body)
        return int(m.group(1)) if m else None

    def line(self, body: str) -> Events | None:
        """The events of one line (maybe none); None when the line is not MaxText's."""
        if DETECTED.search(body) or SCALE_UP.search(body):
            self.recovery += 1
            self.open = True
            why = "Scale up requested." if SCALE_UP.search(body) else None
            return [("elastic_detected", {"recovery": self.recovery, "lost_slices": None,
                                          "last_step": None, "error": why})]
        m = ATTEMPT.search(body)
        if m:  # attempt 1 is the start-up; a later one follows the cleanup of an event
            return [("elastic_cleanup_done", {"seconds": None})] if (
                self.open and int(m.group(1)) > 1) else []
        m = SLICES_READY.search(body)
        if m:
            return [("elastic_slices_ready", {"live_slices": int(m.group(1)),
                                              "required_slices": int(m.group(2)),
                                              "seconds": None})] if self.open else []
        m = RESTORE_FROM.search(body)
        if m:
            self.restore_step = int(m.group(1))
            return []
        m = RESTORE_DONE.search(body) or LOAD_DONE.search(body)
        if m and self.elastix:  # elastix's trainer logs its restores and saves itself
            return []
        if m:
            step, self.restore_step = self.restore_step, None
            if step is None and m.re is LOAD_DONE:
                step = _path_step(m.group(2))
            return [("restore", {"step": step, "source": "checkpoint", "bytes": None,
                                 "seconds": float(m.group(1))})]
        saves = self._save(body)
        return [] if saves and self.elastix else saves

    def _save(self, body: str) -> Events | None:
        """A save's stall, in a ``checkpoint_committed`` at the line that ends it: all of the
        save when MaxText saved synchronously (it waits, then logs ``Saved a checkpoint``),
        else Orbax's blocking part (MaxText trained on while Orbax wrote)."""
        m = SAVE_BLOCKING.search(body) or SAVE_DONE.search(body)
        if m:
            step = _path_step(m.group(2))
            if step is None:
                return []
            secs = float(m.group(1))
            if m.re is SAVE_BLOCKING:
                self.blocking[step] = secs
                return []
            if step in self.async_saves:
                self.async_saves.discard(step)
                return [_committed(step, secs, self.blocking.pop(step, None))]
            self.total[step] = secs
            return []
        m = SAVE_START.search(body)
        if m:
            return [("checkpoint_save_started", {"step": int(m.group(1))})]
        m = SAVE_ASYNC.search(body)
        if m:
            self.async_saves.add(int(m.group(1)))
            return []
        m = SAVED.search(body)
        if m:
            step = int(m.group(1))
            self.blocking.pop(step, None)
            secs = self.total.pop(step, None)
            return [_committed(step, secs, secs)]
        return None

    def step(self, step: int, seconds: float | None, body: str = "") -> Events:
        """After a ``completed step`` line: the first one of an open recovery ends it."""
        self.stepped, self.last_step = True, step
        m = ABSL.match(body)
        if m:
            self.main_tid = m.group(1)
        if not self.open:
            return []
        self.open = False
        return [("elastic_first_step", {"recovery": self.recovery, "step": step,
                                        "seconds": seconds})]
