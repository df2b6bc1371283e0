"""When a soak's faults land: drawn as a fleet's failures arrive (``--mtbf``), or replayed
from a file (``--schedule``).

A schedule file is YAML (or JSON): a list of faults, each a mapping with ``at`` (a duration
after the soak's start: ``90s``, ``5m``, or seconds) and optionally ``fault`` (:data:`FAULTS`,
default ``kill``), ``slice``, ``host``, ``grace`` (term) and ``for`` (hang)::

    - {at: 30s, fault: kill, slice: 0, host: 1}
    - {at: 2m, fault: term, grace: 10s}
    - {at: 3m, fault: slice, slice: 1}
    - {at: 4m30s, fault: hang, for: 20s}

Times count from the moment the trainer is first seen stepping (a step after its first save),
so a schedule replays alike whatever the start-up took.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Callable
from typing import Any

from elastix.backends.base import FAULTS, Fault
from elastix.errors import UsageError, shown

MAX_SCHEDULE = 10_000  # faults in one file; more is not a schedule a soak can keep


@dataclasses.dataclass(frozen=True)
class Planned:
    """One fault of a schedule (``--mtbf``, ``--schedule``): due ``at`` seconds after the
    soak's start (the trainer first seen stepping), of kind ``fault``, at a pinned victim or
    a random one."""

    at: float
    fault: Fault = Fault()
    slice: int | None = None
    host: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"at_seconds": round(self.at, 3), "fault": self.fault.describe(),
                "slice": self.slice, "host": self.host}


def mtbf_schedule(mtbf: float, kills: int, seed: int | None, fault: Fault = Fault()
                  ) -> list[Planned]:
    """``kills`` fault times drawn as a fleet's failures arrive: independent exponential gaps
    of mean ``mtbf`` seconds (a Poisson process), reproducible from ``seed``."""
    rng = random.Random(seed)
    t, out = 0.0, []
    for _ in range(kills):
        t += rng.expovariate(1.0 / mtbf)
        out.append(Planned(t, fault))
    return out


Duration = Callable[[str, str, bool], float]
"""Parses a duration: (text, what it is for, whether 0 is allowed) -> seconds, or raises a
UsageError (the CLI's one grammar, ``elastix.commands.options.parse_duration_in``)."""


def seconds_of(v: Any, where: str, key: str, parse: Duration, zero_ok: bool | None = None
               ) -> float:
    """A file's duration (``90s``, ``5m``, or seconds), by the CLI's grammar; 0 allowed for
    ``at`` unless ``zero_ok`` says otherwise."""
    if isinstance(v, bool) or not isinstance(v, (int, float, str)):
        raise UsageError(f"{where}: {key} is not a duration", hint=f"e.g. {key}: 90s")
    return parse(str(v), f"{where}: {key}", key == "at" if zero_ok is None else zero_ok)


def index_of(v: Any, where: str, key: str) -> int | None:
    """A file's slice or host index: 0 or more, or None."""
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise UsageError(f"{where}: {key} {shown(v)} is not a {key} index (0 or more)",
                         hint=f"e.g. {key}: 0")
    return v


def entries(doc: Any, source: str, what: str, most: int, example: str) -> list[Any]:
    """A file's list of entries (a schedule's faults, a plan's rounds): a non-empty list of
    at most ``most``."""
    if not isinstance(doc, list) or not doc:
        raise UsageError(f"{source} is not a list of {what}", hint=f"e.g. {example}")
    if len(doc) > most:
        raise UsageError(f"{source} has {len(doc)} {what}, more than {most}",
                         hint=f"split it into several {'plans' if what == 'rounds' else 'soaks'}")
    return doc


def fault_entry(item: Any, where: str, keys: tuple[str, ...], duration: Duration
                ) -> tuple[Fault, int | None, int | None]:
    """An entry's fault (``fault``, ``grace``, ``for``) and target (``slice``, ``host``),
    checked as the flags are, after its keys (``keys``: the ones it may have).

    Raises:
        UsageError: not a mapping, an unknown key or fault, a bad duration or index, a
            target the fault does not take.
    """
    if not isinstance(item, dict):
        raise UsageError(f"{where} is not a mapping", hint="e.g. - {at: 30s, fault: kill}")
    unknown = sorted(set(map(str, item)) - set(keys))
    if unknown:
        raise UsageError(f"{where}: unknown key {shown(unknown[0])}",
                         hint=f"keys: {', '.join(keys)}")
    kind = item.get("fault", "kill")
    if kind not in FAULTS:
        raise UsageError(f"{where}: fault {shown(kind)} is not one of {', '.join(FAULTS)}",
                         hint="e.g. fault: term")
    # grace 0 as --grace 0: SIGTERM, then SIGKILL at once (a schedule used to refuse it)
    grace = seconds_of(item["grace"], where, "grace", duration, True) if "grace" in item \
        else None
    hang_for = seconds_of(item["for"], where, "for", duration) if "for" in item else None
    if grace is not None and kind != "term":
        raise UsageError(f"{where}: grace is for fault term only", hint="drop grace")
    if hang_for is not None and kind != "hang":
        raise UsageError(f"{where}: for is for fault hang only", hint="drop for")
    sl, host = index_of(item.get("slice"), where, "slice"), index_of(item.get("host"), where,
                                                                  "host")
    if host is not None and sl is None:
        raise UsageError(f"{where}: host needs slice", hint="e.g. slice: 0, host: 1")
    fault = Fault(kind, grace, hang_for)
    fault.check_target(sl, host, where)
    return fault, sl, host


KEYS = ("at", "fault", "slice", "host", "grace", "for")


def parse_schedule(doc: Any, source: str, duration: Duration) -> list[Planned]:
    """The faults of a schedule document (already parsed YAML), in time order.

    Raises:
        UsageError: not a list of mappings, an unknown key or fault, a bad time or index.
    """
    out = []
    for i, item in enumerate(entries(doc, source, "faults", MAX_SCHEDULE,
                                     "- {at: 30s, fault: kill, slice: 0}"), 1):
        where = f"{source}, fault {i}"
        fault, sl, host = fault_entry(item, where, KEYS, duration)
        if "at" not in item:
            raise UsageError(f"{where} has no 'at'", hint="e.g. at: 90s")
        out.append(Planned(seconds_of(item["at"], where, "at", duration), fault, sl, host))
    return sorted(out, key=lambda p: p.at)
