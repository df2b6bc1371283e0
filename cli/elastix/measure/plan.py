"""A chaos experiment as a plan: built once from the flags (or read from a plan file), shown by
``chaos run --dry-run``, kept in the report, and run round by round by
:func:`elastix.measure.soak.run_soak`.

A :class:`Plan` is a list of :class:`Round`\\ s, each saying when its faults land (after an
interval, at a step, in a moment, after a delay, or at a scheduled time), which fault, how
many and how spread, at whom, and whether an opener kill first opens the recovery it aims at.
:func:`build_plan` is the one place the flags' rules live (every usage error of ``chaos run``'s
timing, fault and count flags, and ``kill-worker``'s aim); it is pure: files are read through
the reader it is given, durations parsed by the CLI's one grammar.

A plan file is the plan's JSON (``chaos run --dry-run -o yaml|json``; read back by
:mod:`elastix.measure.plan_file`)::

    version: 1
    mode: random
    seed: 7
    rounds:
    - {fault: kill, at: 10.0, slice: 1, host: 0}
    - {fault: term, grace: 5.0, interval: 30.0}
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from elastix.backends.base import FAULTS, Fault, check_pod_index
from elastix.errors import UsageError, shown
from elastix.measure.aim import Aim
from elastix.measure.schedule import (
    Duration,
    Planned,
    mtbf_schedule,
)

if TYPE_CHECKING:
    from elastix.backends.base import WorkloadStatus

MODES = ("random", "slice", "host")
VERSION = 1
MAX_ROUNDS = 10_000
OPENED = ("recovery", "restore")  # moments a round opens itself, with one kill first
DEFAULT_INTERVAL = "2m"


@dataclasses.dataclass(frozen=True)
class Round:
    """One round of a chaos run: ``count`` faults of ``fault``, ``spread`` seconds apart.

    When: ``interval`` seconds after the previous round's last fault (None: no wait), then
    at a step, in a moment, ``after`` seconds (stepping or not), or, none of those, once the
    trainer is stepping; or ``at`` seconds after the trainer was first seen stepping (a
    schedule). ``slice``/``host``: the target (None: chosen by the plan's mode and seed).
    ``opener``: one kill first opens the recovery the round's fault aims at."""

    fault: Fault = Fault()
    count: int = 1
    spread: float = 0.0
    interval: float | None = None
    at: float | None = None
    step: int | None = None
    during: str | None = None
    after: float | None = None
    slice: int | None = None
    host: int | None = None
    opener: bool = False

    def aim(self) -> Aim:
        """The moment :func:`~elastix.measure.chaos.measure_kill` waits for: a scheduled
        round lands when due, stepping or not."""
        if self.at is not None:
            return Aim(after=0)
        return Aim(self.step, self.during, self.after)

    def when(self, i: int) -> str:
        """When round ``i`` (1-based) lands, in words (the dry run's column)."""
        if self.at is not None:
            return f"{self.at:.3f} s after stepping"
        wait = f"{self.interval:g} s after fault {i - 1}" if self.interval is not None else ""
        aim = self.aim()
        if aim.aimed and not (aim.after == 0 and self.interval is not None):
            said = aim.describe() + (" (after an opener kill)" if self.opener else "")
            return f"{said}, {wait} or later" if wait else said
        return wait or "once stepping"

    def target(self) -> str:
        if self.fault.kind == "head":
            return "the head"
        if self.slice is None:
            return "random"
        return f"slice {self.slice}" + (f" host {self.host}" if self.host is not None else "")

    def to_json(self) -> dict[str, Any]:
        """The round as a plan file holds it: the fault, then only what is set."""
        f = self.fault
        d: dict[str, Any] = {"fault": f.kind, "grace": f.grace, "for": f.hang_for}
        d.update(count=self.count if self.count != 1 else None,
                 spread=self.spread if self.count != 1 else None)
        for k in ("interval", "at", "step", "during", "after", "slice", "host"):
            d[k] = getattr(self, k)
        d["opener"] = self.opener or None
        return {k: v for k, v in d.items() if v is not None}


@dataclasses.dataclass(frozen=True)
class Plan:
    """A chaos experiment: its rounds, and how un-pinned victims are chosen (``mode``, drawn
    from ``seed``: the same plan and seed make the same faults at the same moments).
    ``pinned``: every fault's victim is the one ``kill-worker`` picks (its slice, host and
    seed), measured or not."""

    rounds: tuple[Round, ...]
    mode: str = "random"
    seed: int | None = None
    pinned: bool = False

    def faults(self) -> list[Fault]:
        return list(dict.fromkeys(r.fault for r in self.rounds))

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"version": VERSION, "mode": self.mode, "seed": self.seed}
        if self.pinned:
            d["pinned"] = True
        return {**d, "rounds": [r.to_json() for r in self.rounds]}

    def rows(self) -> list[dict[str, Any]]:
        """What ``chaos run --dry-run`` prints: each round's fault, when, whom."""
        return [{"round": i, "fault": r.fault.describe(), "count": r.count,
                 "spread_seconds": r.spread, "when": r.when(i), "target": r.target(),
                 "at_seconds": round(r.at, 3) if r.at is not None else None}
                for i, r in enumerate(self.rounds, 1)]

    def check_targets(self, st: WorkloadStatus) -> None:
        """Every round's slice and host within the workload's shape, before anything is
        killed (a schedule's ``slice: 99`` is refused before its first fault, not at its turn).

        Raises:
            UsageError: a round aims at a slice or a host the workload does not have.
        """
        hosts = max((s.hosts for s in st.slices), default=0)
        for i, r in enumerate(self.rounds, 1):
            check_pod_index(st.name, st.num_slices, hosts, r.slice, r.host,
                            where=f"round {i} ({r.fault.kind}, {r.target()})")
            self._check_count(i, r, st.name, st.num_slices, hosts)

    def _check_count(self, i: int, r: Round, name: str, slices: int, hosts: int) -> None:
        """A round's ``count`` within what the workload holds: each fault takes a slice (a
        slice fault) or a host (a host fault) not yet hit in the round, the head once.

        Raises:
            UsageError: more faults than that (exit 2, nothing killed).
        """
        kind = "slice" if self.mode == "slice" and r.fault.kind == "kill" else r.fault.kind
        unit, cap = ("head", 1) if kind == "head" else ("slice", slices) if kind == "slice" \
            else ("host", slices * hosts if hosts else None)
        if cap is None or r.count <= cap:
            return
        where = f"round {i}: count" if len(self.rounds) > 1 else "--count"
        held = f"{slices} slice{'s' if slices != 1 else ''}" + (
            f" of {hosts} host{'s' if hosts != 1 else ''}" if hosts else "")
        raise UsageError(f"{where} {r.count} asks more {unit} faults than {name} holds: "
                         f"{held}, so {cap} {unit}{'s' if cap != 1 else ''} to fault",
                         hint=f"use --count {cap} or fewer (each fault of a round takes a "
                              f"{unit} not yet hit)")


@dataclasses.dataclass(frozen=True)
class Flags:
    """The flags a plan is built from, as given (None: not given). ``kill_worker``: the one
    fault of ``chaos kill-worker`` (its ``slice``/``host`` pin the victim)."""

    kills: int | None = None
    interval: str | None = None
    mode: str = "random"
    fault: str = "kill"
    grace: str | None = None
    hang_for: str | None = None
    count: int = 1
    spread: str = "0"
    at_step: str | None = None
    during: str | None = None
    after: str | None = None
    mtbf: str | None = None
    schedule: str | None = None
    seed: int | None = None
    kill_worker: bool = False
    slice: int | None = None
    host: int | None = None


Reader = Callable[[str], list[Planned]]
"""Reads a ``--schedule`` file (``elastix.commands.faults.load_schedule``)."""
PlanReader = Callable[[str], "Plan"]
"""Reads a ``--plan`` file (``elastix.commands.faults.load_plan``)."""


def parse_fault(kind: str, grace: str | None, hang_for: str | None, duration: Duration
                ) -> Fault:
    """``--fault`` and its options, checked (exit 2 before anything is killed)."""
    if kind not in FAULTS:
        raise UsageError(f"--fault {shown(kind)} is not one of {', '.join(FAULTS)}",
                         hint="e.g. --fault term (planned maintenance)")
    if grace is not None and kind != "term":
        raise UsageError(f"--grace is for --fault term, not {kind}", hint="drop --grace")
    if hang_for is not None and kind != "hang":
        raise UsageError(f"--for is for --fault hang, not {kind}", hint="drop --for")
    return Fault(kind, duration(grace, "--grace", True) if grace is not None else None,
                 duration(hang_for, "--for", False) if hang_for is not None else None)


def build_plan(flags: Flags, *, duration: Duration, read_schedule: Reader,
               plan_file: str | None = None, read_plan: PlanReader | None = None) -> Plan:
    """The plan the flags say, every flag rule checked (exit 2 before anything is killed);
    with ``plan_file``, the plan it holds (``--seed``: another seed for its victims).

    Raises:
        UsageError: a bad or contradictory flag, or a schedule or plan file that is not one.
    """
    if plan_file is not None:
        return _from_file(flags, plan_file, read_plan)
    if flags.kill_worker:
        return _one_fault(flags, duration)
    if flags.mode not in MODES:
        raise UsageError(f"--mode {shown(flags.mode)} is not {', '.join(MODES)}",
                         hint="use --mode random, --mode host or --mode slice")
    fault = parse_fault(flags.fault, flags.grace, flags.hang_for, duration)
    if flags.count < 1:
        raise UsageError(f"--count {flags.count} is out of range: 1 or more",
                         hint="e.g. --count 2")
    spread = duration(flags.spread, "--spread", True)
    steps = _steps(flags.at_step)
    _one_timing(flags)
    kills, planned = _kills(flags, steps, read_schedule)
    if flags.mtbf is not None:
        planned = mtbf_schedule(duration(flags.mtbf, "--mtbf", False), kills, flags.seed, fault)
    if flags.during in ("startup", "compile") and kills > 1 and fault.kind != "head":
        raise UsageError(f"--during {flags.during} aims at the run's start, which comes once: "
                         f"--kills {kills} cannot all land in it",
                         hint="use --kills 1 (or --fault head, whose restarts start again)")
    after = duration(flags.after, "--after", True) if flags.after is not None else None
    Aim(None, flags.during, after)  # checks the moment
    every = duration(flags.interval or DEFAULT_INTERVAL, "--interval", True)
    if planned is not None:
        rounds = [Round(p.fault, flags.count, spread, at=p.at, slice=p.slice, host=p.host)
                  for p in planned]
    else:
        rounds = [Round(fault, flags.count, spread, interval=every if i > 1 else None,
                        step=steps[i - 1] if steps else None, during=flags.during,
                        after=(0.0 if i > 1 else after) if after is not None else None,
                        opener=flags.during in OPENED)
                  for i in range(1, kills + 1)]
    return Plan(tuple(rounds), flags.mode, flags.seed)


def _from_file(flags: Flags, path: str, read_plan: PlanReader | None) -> Plan:
    """``--plan FILE``: its rounds, and no flag that would say them again."""
    given = {f.name for f in dataclasses.fields(Flags)
             if getattr(flags, f.name) != f.default and f.name != "seed"}
    if given:
        flag = "--" + sorted(given)[0].replace("_", "-").replace("hang-for", "for")
        raise UsageError(f"--plan and {flag} cannot be combined: the plan file says its rounds",
                         hint=f"drop {flag} (or make a new plan with it: --dry-run -o yaml)")
    assert read_plan is not None
    plan = read_plan(path)
    return plan if flags.seed is None else dataclasses.replace(plan, seed=flags.seed)


def _one_timing(flags: Flags) -> None:
    timing = [f for f, v in (("--at-step", flags.at_step), ("--during", flags.during),
                             ("--after", flags.after), ("--mtbf", flags.mtbf),
                             ("--schedule", flags.schedule)) if v is not None]
    if len(timing) > 1:
        raise UsageError(f"{timing[0]} and {timing[1]} cannot be combined: they both say when "
                         "faults land", hint=f"keep one of {', '.join(timing)}")
    if flags.interval is not None and (flags.mtbf or flags.schedule):
        raise UsageError(f"--interval and {'--mtbf' if flags.mtbf else '--schedule'} cannot "
                         "be combined", hint="the schedule says when each fault lands")


def _kills(flags: Flags, steps: list[int] | None, read_schedule: Reader
           ) -> tuple[int, list[Planned] | None]:
    """How many rounds: ``--kills`` [3], or the schedule's faults, or ``--at-step``'s steps;
    and the schedule read, if one was given."""
    kills, planned = flags.kills, None
    if flags.schedule is not None:
        if kills is not None:
            raise UsageError("--kills and --schedule cannot be combined: the file lists the "
                             "faults", hint="drop --kills")
        planned = read_schedule(flags.schedule)
        kills = len(planned)  # the file's count: the header, JUnit's cases (not --kills' 3)
    if steps is not None:
        if kills is not None and kills != len(steps):
            raise UsageError(f"--kills {kills} but --at-step names {len(steps)} steps",
                             hint="one step per round, or drop --kills")
        kills = len(steps)
    kills = 3 if kills is None else kills
    if kills < 1:
        raise UsageError(f"--kills {kills} is out of range: 1 or more", hint="e.g. --kills 3")
    if kills > MAX_ROUNDS:  # each round is planned (and printed) before the first fault
        raise UsageError(f"--kills {shown(kills)} is out of range: at most {MAX_ROUNDS:,}",
                         hint="e.g. --kills 3, or a --schedule or --plan file")
    return kills, planned


def _one_fault(flags: Flags, duration: Duration) -> Plan:
    """``kill-worker``'s one fault: its victim pinned (the one the plain kill-worker picks
    with the same ``--seed``) unless an aim picks it (at a recovery: a slice the opener
    spared)."""
    if flags.host is not None and flags.slice is None:
        raise UsageError("--host needs --slice", hint="e.g. --slice 0 --host 1")
    fault = parse_fault(flags.fault, flags.grace, flags.hang_for, duration)
    fault.check_target(flags.slice, flags.host)
    after = duration(flags.after, "--after", True) if flags.after is not None else None
    aim = Aim(int(flags.at_step) if flags.at_step is not None else None, flags.during, after)
    pinned = flags.slice is not None or flags.host is not None or not aim.aimed
    return Plan((Round(fault, step=aim.at_step, during=aim.during, after=aim.after,
                       slice=flags.slice, host=flags.host, opener=aim.during in OPENED),),
                seed=flags.seed, pinned=pinned)


def _steps(text: str | None) -> list[int] | None:
    """``--at-step N`` or ``N1,N2,...``: increasing step numbers, 1 or more."""
    if text is None:
        return None
    try:
        steps = [int(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"--at-step {shown(text)} is not a step or a list of steps",
                         hint="e.g. --at-step 40 or --at-step 40,80,120") from None
    if any(n < 1 for n in steps) or steps != sorted(set(steps)):
        raise UsageError(f"--at-step {shown(text)}: steps must be 1 or more and increasing",
                         hint="e.g. --at-step 40,80,120")
    return steps
