"""A recovery's phases: one definition for every view of them.

``chaos kill-worker --measure`` (its table, JSON, Markdown and JUnit), ``workload goodput``'s
per-recovery breakdown, ``--plot``'s recovery chart and the trainer's TensorBoard ``recovery/*``
scalars all read a recovery's phases, downtime and steps lost from here, so one name is one
number in all of them (issue 39). Pure arithmetic on the moments a recovery passed, in integer
milliseconds since the epoch as the events date them (:func:`elastix.protocol.timefmt.parse_ms`):
the launcher and the trainer parse the same ``ts`` strings the same way.

A recovery is counted from its **origin**, the first known of:

1. the loss as the trainer dated it (``since_loss`` of ``elastic_detected``: the local backend
   knows when a host exited or was last heard). Every view has it, the trainer included;
2. the kill, when the launcher made it and knows its time (``chaos``): only when the trainer did
   not date the loss (GKE). The time from the kill to a dated loss is named apart,
   ``kill to loss`` (:func:`kill_to_loss`): only the chaos driver knows the kill, so no other
   view could show a detection counted from it;
3. the trainer's last event before the loss surfaced (a restart: the old process's last event).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from elastix.protocol import eventspec, timefmt

IN_PROCESS = ("detection", "cleanup", "waiting for slices", "restore", "first step")
"""An in-process recovery's phases, in order."""
RESTART = ("restore", "first step", "restart")
"""A restart's phases (the new process's: ``restart`` is from the old process's end)."""


@dataclasses.dataclass
class Moments:
    """The moments (ms since the epoch; None: not reached or not known) a recovery passed."""

    kind: str = "in-process"
    """``in-process``, ``restart``, ``start-up`` or ``stall`` (``elastix.measure.events``)."""
    loss: int | None = None  # elastic_detected's ts less its since_loss
    kill: int | None = None  # the launcher's first kill
    prev_event: int | None = None  # the trainer's last event before the loss surfaced
    start: int | None = None  # elastic_detected, or a restarted process's run_start
    cleanup_done: int | None = None
    slices_ready: int | None = None
    restored: int | None = None
    first_step_at: int | None = None  # elastic_first_step, or a restart's first step
    first_fault: int | None = None
    """The first fault's loss, when recoveries another loss cut short came before this one:
    the fault's recovery is timed from it (its phases stay its own, after theirs)."""

    @property
    def origin(self) -> int | None:
        """Where the first phase starts (see the module doc)."""
        return next((t for t in (self.loss, self.kill, self.prev_event) if t is not None), None)

    @property
    def origin_name(self) -> str | None:
        """``loss``, ``kill``, ``last event`` or None: where detection is counted from."""
        for name, t in (("loss", self.loss), ("kill", self.kill),
                        ("last event", self.prev_event)):
            if t is not None:
                return name
        return None


def loss_ms(detected_ms: int, since_loss: Any) -> int | None:
    """When the trainer dated the loss: ``elastic_detected``'s time less its ``since_loss``."""
    if isinstance(since_loss, bool) or not isinstance(since_loss, (int, float)):
        return None
    return detected_ms - round(since_loss * 1000)


def spans(m: Moments) -> list[tuple[str, int, int]]:
    """(phase, start ms, end ms), contiguous, for the phases that were reached."""
    if m.kind in ("start-up", "stall"):
        points = [(m.kind, m.origin), (None, m.first_step_at)]
    elif m.kind == "restart":
        points = [("restart", m.origin), ("restore", m.start), ("first step", m.restored),
                  (None, m.first_step_at)]
    else:
        points = [("detection", m.origin), ("cleanup", m.start),
                  ("waiting for slices", m.cleanup_done), ("restore", m.slices_ready),
                  ("first step", m.restored), (None, m.first_step_at)]
    out = []
    reached = [i for i, (_, t) in enumerate(points) if t is not None]
    for i, j in zip(reached, reached[1:], strict=False):
        # A phase whose end the source did not log is not stretched over the next one: in a
        # recovery that went on, it is unknown ("not in the log"), not longer.
        if j == i + 1 or m.kind != "in-process":
            out.append((points[i][0], points[i][1], points[j][1]))
    return out


def seconds(m: Moments) -> dict[str, float | None]:
    """Each phase's seconds (None when not reached), under the names of the recovery's kind."""
    got = {n: (b - a) / 1000 for n, a, b in spans(m)}
    names = {"restart": RESTART, "start-up": ("start-up",), "stall": ("stall",)}.get(
        m.kind, IN_PROCESS)
    return {n: got.get(n) for n in names}


def downtime(m: Moments) -> float | None:
    """Seconds from the loss (or the kill) to the first completed step after it: the phases'
    sum. With neither known, from the detection (in-process) or a restarted process's start:
    the phases' sum less the detection, or less the restart's gap before its new process.
    After recoveries cut short, from the first fault (:attr:`Moments.first_fault`): more than
    this recovery's own phases."""
    origin = next((t for t in (m.first_fault, m.loss, m.kill, m.start) if t is not None), None)
    if origin is None or m.first_step_at is None:
        return None
    return (m.first_step_at - origin) / 1000


def kill_to_loss(m: Moments) -> float | None:
    """Seconds from the launcher's kill to the loss the trainer dated (SIGKILL to the host's
    exit, as the local supervisor saw it): before the origin, so in no phase. Never negative:
    a loss dated at the kill's millisecond or before it (the two are kept to the ms, the loss
    as a detection less ``since_loss``; a hung host's loss is its last heartbeat, before the
    SIGSTOP) came with the kill, 0."""
    if m.kill is None or m.loss is None:
        return None
    return max(0, m.loss - m.kill) / 1000


def steps_lost(last_step: int | None, restored_step: int | None) -> int | None:
    """Last step completed before the failure minus the step training resumed from (never
    negative: a restore is never of a step past the last completed)."""
    if last_step is None or restored_step is None:
        return None
    return max(0, last_step - restored_step)


def snake(name: str) -> str:
    """A phase as a key: ``waiting for slices`` -> ``waiting_for_slices``."""
    return name.replace(" ", "_").replace("-", "_")


@dataclasses.dataclass
class Measured:
    """One in-process recovery as the trainer's own events give it (:class:`InProcess`)."""

    moments: Moments
    last_step: int | None
    restored_step: int | None

    def scalars(self) -> dict[str, float | None]:
        """``<phase>_seconds``, ``downtime_seconds`` and ``steps_lost``: the names the JSON
        gives them (``phases``, ``downtime_seconds``, ``steps_lost``) and TensorBoard's
        ``recovery/*`` tags."""
        out: dict[str, float | None] = {
            f"{snake(n)}_seconds": v for n, v in seconds(self.moments).items()}
        out["downtime_seconds"] = downtime(self.moments)
        lost = steps_lost(self.last_step, self.restored_step)
        out["steps_lost"] = None if lost is None else float(lost)
        return out


class InProcess:
    """Folds raw event records (docs/events.md), one at a time, into in-process recoveries:
    what a listener in the trainer (TensorBoard) sees, with no launcher to ask.

    The moments are the events' own times, as ``elastix.measure.events.recoveries`` reads
    them; ``last_step`` is ``elastic_detected``'s, else the last ``step`` before it.
    """

    def __init__(self, parse: Callable[[str], int] = timefmt.parse_ms) -> None:
        self._parse = parse
        self._cur: Measured | None = None
        self._last_step: int | None = None

    @property
    def current(self) -> Measured | None:
        """The recovery under way (None between recoveries)."""
        return self._cur

    def add(self, r: dict[str, Any]) -> Measured | None:
        """Take one record; the recovery it completed (its ``elastic_first_step``), or None."""
        name = r.get("event")
        if name == eventspec.STEP and isinstance(r.get("step"), int):
            self._last_step = r["step"]
            return None
        if name == eventspec.ELASTIC_DETECTED:
            t = self._parse(r["ts"])
            last = r.get("last_step")
            self._cur = Measured(Moments(loss=loss_ms(t, r.get("since_loss")), start=t),
                                 last if last is not None else self._last_step, None)
            return None
        cur = self._cur
        if cur is None:
            return None
        m = cur.moments
        if name == eventspec.ELASTIC_CLEANUP_DONE:
            m.cleanup_done = self._parse(r["ts"])
        elif name == eventspec.ELASTIC_SLICES_READY:
            m.slices_ready = self._parse(r["ts"])
        elif name in (eventspec.ELASTIC_RESTORED, eventspec.RESTORE):
            m.restored, cur.restored_step = self._parse(r["ts"]), r.get("step")
        elif name == eventspec.ELASTIC_FIRST_STEP:
            m.first_step_at = self._parse(r["ts"])
            self._cur = None
            return cur
        elif name == eventspec.RUN_START:
            self._cur = None  # the process was replaced: a restart, not this recovery
        return None
