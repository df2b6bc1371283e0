"""MaxText's head log (with pathwaysutils' and Orbax's lines) read as elastix events.

MaxText logs through absl: a line carries at most ``I1129 09:50:01.123456 140 train.py:42]``,
a month, day and *local* time of day with no year and no zone, so it is not used as a time. A
line's time is the one the Kubernetes log API records (``timestamps=true``, RFC3339 with up to
nine fractional digits); :func:`elastix.measure.events.events_from_log` strips it and hands the
rest here. The formats below are quoted from their sources (``tests/fixtures/maxtext/formats.json``
vendors them with their commits; a test checks these regexes against it):

- MaxText ``src/maxtext/common/metric_logger.py`` @ 000e6d8a: ``"completed step: {step}"``,
  ``"seconds: {:.3f}"``, ... joined by ``", "``: parsed by elastix's own ``step`` line pattern
  (:mod:`elastix.protocol.eventspec`), whose ``live slice count`` part is optional.
- MaxText ``src/maxtext/common/checkpointing.py`` @ 6762cbb4:
  ``f"restoring from this run's directory step {step}"`` (a restore begins; no size is logged).
- Orbax ``checkpoint/orbax/checkpoint/_src/checkpointers/checkpointer.py`` @ 01712332:
  ``'Finished restoring checkpoint in %.2f seconds from %s.'`` (the restore ended).
- pathwaysutils ``pathwaysutils/elastic/manager.py`` @ v0.1.11 (1089127f):
  ``"Elastic attempt %d"``, ``"Elastic event detected"`` (``_logger.exception``: a traceback
  follows); before ``cf82422``: ``"Slice down event detected. Retrying."``.
- pathwaysutils ``pathwaysutils/elastic/elastic.py`` @ v0.1.11:
  ``"Sufficient slices active: %s >= %s. Active indices: %s"``.

What MaxText never logs (the restore's size, which slices were lost, the controller's PID) is
left None, and measurement reports it as "not in the log" rather than guessing.
"""

from __future__ import annotations

import re
from typing import Any

DETECTED = re.compile(r"\b(?:Elastic event detected|Slice down event detected\. Retrying\.)")
ATTEMPT = re.compile(r"\bElastic attempt (\d+)\b")
SLICES_READY = re.compile(r"\bSufficient slices active: (\d+) >= (\d+)\.")
RESTORE_FROM = re.compile(r"\brestoring from this run's directory step (\d+)\b")
RESTORE_DONE = re.compile(r"\bFinished restoring checkpoint in (\d+(?:\.\d+)?) seconds from ")

MARKERS = ("completed step:", "Elastic event detected", "Slice down event detected",
           "Elastic attempt", "Sufficient slices active", "restoring from this run's directory",
           "Finished restoring checkpoint")
"""Text of the lines measurement reads: a line with one of these that does not parse is
reported as skipped (other lines are just other loggers' output)."""


class Reader:
    """Turns MaxText's lines, in order, into ``(event, raw values)`` pairs.

    MaxText logs no "recovered" line: the first ``completed step`` after an ``Elastic event
    detected`` is the recovery's first step, so the reader keeps the state of the recovery it
    opened (never one elastix's own lines opened: those carry their own first-step line).
    """

    def __init__(self) -> None:
        self.recovery = 0
        self.open = False  # a recovery opened by a MaxText line, not yet stepping again
        self.restore_step: int | None = None

    def line(self, body: str) -> list[tuple[str, dict[str, Any]]] | None:
        """The events of one line (maybe none); None when the line is not MaxText's."""
        if DETECTED.search(body):
            self.recovery += 1
            self.open = True
            return [("elastic_detected", {"recovery": self.recovery, "lost_slices": None,
                                          "last_step": None, "error": None})]
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
        m = RESTORE_DONE.search(body)
        if m:
            step, self.restore_step = self.restore_step, None
            return [("restore", {"step": step, "source": "checkpoint", "bytes": None,
                                 "seconds": float(m.group(1))})]
        return None

    def step(self, step: int, seconds: float | None) -> list[tuple[str, dict[str, Any]]]:
        """After a ``completed step`` line: the first one of an open recovery ends it."""
        if not self.open:
            return []
        self.open = False
        return [("elastic_first_step", {"recovery": self.recovery, "step": step,
                                        "seconds": seconds})]
