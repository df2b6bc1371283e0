"""A plan file's plan (``chaos run --plan FILE``; its document already parsed, by
:mod:`elastix.commands.faults`): every field checked as the flags are, and the rules the flags
keep across rounds, each a one-line error naming the round and the key (exit 2, before any
fault). The plan itself, and the flags' rules: :mod:`elastix.measure.plan`."""

from __future__ import annotations

from typing import Any

from elastix.errors import UsageError, shown
from elastix.measure.aim import MOMENTS
from elastix.measure.plan import MAX_ROUNDS, MODES, OPENED, VERSION, Plan, Round
from elastix.measure.schedule import Duration, entries, fault_entry, seconds_of

_KEYS = ("fault", "grace", "for", "count", "spread", "interval", "at", "step", "during",
         "after", "slice", "host", "opener")
_WHEN = ("at", "step", "during", "after")


def parse_plan(doc: Any, source: str, duration: Duration) -> Plan:
    """A plan file's plan (its document already parsed), every field checked as the flags
    are: a one-line error naming the round and the key.

    Raises:
        UsageError: not a plan, an unknown key, a bad value, a rule the flags would break.
    """
    if not isinstance(doc, dict):
        raise UsageError(f"{source} is not a plan: a mapping with rounds",
                         hint="make one with elastix chaos run NAME ... --dry-run -o yaml")
    unknown = sorted(set(map(str, doc)) - {"version", "mode", "seed", "pinned", "rounds"})
    if unknown:
        raise UsageError(f"{source}: unknown key {shown(unknown[0])}",
                         hint="keys: version, mode, seed, rounds")
    if doc.get("version", VERSION) != VERSION:
        raise UsageError(f"{source}: version {shown(doc.get('version'))} is not {VERSION}",
                         hint="make it again with this elastix's chaos run --dry-run -o yaml")
    mode = doc.get("mode", "random")
    if mode not in MODES:
        raise UsageError(f"{source}: mode {shown(mode)} is not {', '.join(MODES)}",
                         hint="mode: random")
    seed = doc.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise UsageError(f"{source}: seed {shown(seed)} is not a whole number", hint="seed: 7")
    rounds = entries(doc.get("rounds"), f"{source}: rounds", "rounds", MAX_ROUNDS,
                     "rounds: [{fault: kill, interval: 60}]")
    out = tuple(_round(r, f"{source}, round {i}", duration) for i, r in enumerate(rounds, 1))
    pinned = _flag(doc.get("pinned", False), source, "pinned")
    _check_rounds(out, source, pinned)
    return Plan(out, mode, seed, pinned)


def _check_rounds(rounds: tuple[Round, ...], source: str, pinned: bool) -> None:
    """The rules the flags enforce across rounds, for a plan file's rounds: the run's start
    aimed at once (unless by head faults, whose restarts start again), steps increasing,
    scheduled times in order, a pinned fault one fault.

    Raises:
        UsageError: the first round that breaks one, named.
    """
    first: dict[str, int] = {}
    step: tuple[int, int] | None = None
    at: tuple[int, float] | None = None
    for i, r in enumerate(rounds, 1):
        where = f"{source}, round {i}"
        if r.during in ("startup", "compile"):
            j = first.setdefault(r.during, i)
            if j != i and not (r.fault.kind == "head" and rounds[j - 1].fault.kind == "head"):
                raise UsageError(f"{where}: during {r.during} again (round {j} aims at it): "
                                 "the run's start comes once",
                                 hint=f"keep one round during {r.during}, or make them "
                                      "fault: head (a restart starts the run again)")
        if r.step is not None:
            if step is not None and r.step <= step[1]:
                raise UsageError(f"{where}: step {r.step} is not after round {step[0]}'s "
                                 f"step {step[1]}: steps must increase",
                                 hint="order the rounds by step, as --at-step 40,80,120")
            step = (i, r.step)
        if r.at is not None:
            if at is not None and r.at < at[1]:
                raise UsageError(f"{where}: at {r.at:g} s is before round {at[0]}'s "
                                 f"{at[1]:g} s: rounds run in order",
                                 hint="order the rounds by at (a schedule file is sorted "
                                      "for you)")
            at = (i, r.at)
        if pinned and r.count != 1:
            raise UsageError(f"{where}: count {r.count} with pinned: a pinned fault is "
                             "kill-worker's one fault, at its one victim",
                             hint="drop pinned (the plan's mode picks the victims), or count")


def _round(item: Any, where: str, duration: Duration) -> Round:
    fault, sl, host = fault_entry(item, where, _KEYS, duration)
    secs = {k: seconds_of(item[k], where, k, duration, zero_ok=True)
            for k in ("spread", "interval", "at", "after") if k in item}
    count, step = item.get("count", 1), item.get("step")
    for key, v in (("count", count), ("step", step)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
            raise UsageError(f"{where}: {key} {shown(v)} is not a whole number, 1 or more",
                             hint=f"e.g. {key}: 2")
    during = item.get("during")
    if during is not None and during not in MOMENTS:
        raise UsageError(f"{where}: during {shown(during)} is not a moment: {', '.join(MOMENTS)}",
                         hint="e.g. during: save")
    when = [k for k in _WHEN if item.get(k) is not None]
    if len(when) > 1:
        raise UsageError(f"{where}: {when[0]} and {when[1]} cannot be combined: a round has "
                         "one moment", hint=f"keep one of {', '.join(when)}")
    if "at" in secs and "interval" in secs:
        raise UsageError(f"{where}: at and interval cannot be combined: at says when",
                         hint="drop interval")
    opener = _flag(item.get("opener", during in OPENED), where, "opener")
    if opener != (during in OPENED):
        raise UsageError(f"{where}: opener goes with during recovery or restore, and only "
                         "with them", hint="drop opener")
    return Round(fault, count, secs.get("spread", 0.0), secs.get("interval"), secs.get("at"),
                 step, during, secs.get("after"), sl, host, opener)


def _flag(v: Any, where: str, key: str) -> bool:
    if not isinstance(v, bool):
        raise UsageError(f"{where}: {key} {shown(v)} is not true or false", hint=f"{key}: true")
    return v
