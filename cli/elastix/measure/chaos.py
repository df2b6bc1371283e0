"""Kill workers and measure the recovery: one kill (``kill-worker --measure``) or a soak.

The measurement itself is pure (:mod:`elastix.measure.events`); this module only drives a backend: read
the trainer's events (or the head's log lines when the events are out of reach), kill, and poll
until the recovery that follows the kill has completed its first step, the workload has died, or
the timeout has passed. Clock and sleep are injected so callers (and tests) control waiting.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable
from typing import Any

from elastix.backends.base import Backend, KillRecord, LogOptions, WorkloadStatus
from elastix.errors import UsageError
from elastix.measure.events import Event, Recovery, events_from_log, events_from_records, ms_of, recoveries
from elastix.measure.goodput import GoodputReport, goodput
from elastix.protocol.timefmt import iso_ms

DEAD_STATES = ("Failed", "Completed", "Succeeded")
MODES = ("random", "slice", "host")


def read_stream(backend: Backend, name: str) -> tuple[list[Event], str]:
    """The workload's normalised events and their source: ``"events"`` or ``"log"``."""
    recs = backend.read_events(name)
    if recs is not None:
        return events_from_records(recs), "events"
    lines = [e.text for e in backend.logs(name, LogOptions(follow=False)) if not e.notice]
    return events_from_log(lines), "log"


@dataclasses.dataclass
class KillMeasurement:
    """One kill and the recovery that followed it (``recovery`` is None if none started)."""

    kills: list[KillRecord]
    recovery: Recovery | None
    source: str
    state_after: str
    jobset_restarts: int  # during the measurement
    head_restarts: int
    head_pid_before: int | None
    head_pid_after: int | None
    timed_out: bool

    @property
    def pid_same(self) -> bool | None:
        """The controller kept its PID: from the backend's view and from the trainer's."""
        views = [self.recovery.pid_same if self.recovery else None]
        if self.head_pid_before is not None and self.head_pid_after is not None:
            views.append(self.head_pid_before == self.head_pid_after)
        known = [v for v in views if v is not None]
        return all(known) if known else None

    @property
    def in_process(self) -> bool:
        """Recovered without restarting the JobSet or the head, in the same process."""
        r = self.recovery
        return bool(r and r.complete and r.kind == "in-process" and self.jobset_restarts == 0
                    and self.head_restarts == 0 and self.pid_same is not False)

    def to_json(self) -> dict[str, Any]:
        return {
            "kills": [{"pod": k.pod, "slice": k.slice, "host": k.host, "node": k.node,
                       "time": iso_ms(k.time), "pid": k.pid} for k in self.kills],
            "recovery": self.recovery.to_json() if self.recovery else None,
            "source": self.source, "state_after": self.state_after,
            "jobset_restarts": self.jobset_restarts, "head_restarts": self.head_restarts,
            "head_pid_before": self.head_pid_before, "head_pid_after": self.head_pid_after,
            "pid_same": self.pid_same, "in_process": self.in_process, "timed_out": self.timed_out,
        }


def _head(st: WorkloadStatus) -> tuple[int, int | None]:
    return (st.head.restarts, st.head.pid) if st.head else (0, None)


def measure_kill(backend: Backend, name: str, do_kill: Callable[[], list[KillRecord]], *,
                 timeout: float = 600.0, poll: float = 1.0,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> KillMeasurement:
    """Kill (``do_kill``) and wait for the recovery that follows; measure it.

    The baseline (recoveries so far, restart counters, head PID) is read before the kill, so the
    first recovery that appears afterwards is this kill's.
    """
    before = backend.status(name)
    events, _ = read_stream(backend, name)
    n_before = len(recoveries(events))
    kills = do_kill()
    deadline = clock() + timeout
    rec: Recovery | None = None
    timed_out = True
    while True:
        events, source = read_stream(backend, name)
        new = recoveries(events)[n_before:]
        rec = new[0] if new else None
        st = backend.status(name)
        if (rec and rec.complete) or st.state in DEAD_STATES:
            timed_out = False
            break
        if clock() >= deadline:
            break
        sleep(poll)
    if rec is not None:
        rec.kill = ms_of(kills[0].time)
    h0, h1 = _head(before), _head(st)
    return KillMeasurement(kills, rec, source, st.state,
                           st.jobset_restarts - before.jobset_restarts, max(0, h1[0] - h0[0]),
                           h0[1], h1[1], timed_out)


@dataclasses.dataclass
class SoakResult:
    """A chaos experiment: every kill's measurement, the run's goodput, what missed a bound."""

    measurements: list[KillMeasurement]
    goodput: GoodputReport
    violations: list[str]
    died: bool

    @property
    def ok(self) -> bool:
        return not self.violations and not self.died

    def to_json(self) -> dict[str, Any]:
        downs = [m.recovery.downtime for m in self.measurements
                 if m.recovery and m.recovery.downtime is not None]
        lost = [m.recovery.steps_lost for m in self.measurements
                if m.recovery and m.recovery.steps_lost is not None]
        return {
            "kills": [m.to_json() for m in self.measurements],
            "totals": {"kills": len(self.measurements), "recovered": len(downs),
                       "downtime_seconds": sum(downs), "mean_downtime_seconds":
                       sum(downs) / len(downs) if downs else None,
                       "max_downtime_seconds": max(downs, default=None),
                       "steps_lost": sum(lost), "goodput": self.goodput.goodput},
            "goodput": self.goodput.to_json(), "violations": self.violations, "died": self.died,
            "ok": self.ok,
        }


def check_bounds(m: KillMeasurement, i: int, max_downtime: float | None,
                 max_steps_lost: int | None) -> list[str]:
    """Why kill ``i`` (1-based) missed a bound; empty when it did not."""
    r = m.recovery
    if r is None or not r.complete:
        why = "the workload died" if m.state_after in DEAD_STATES else "no recovery in time"
        return [f"kill {i}: {why} (state {m.state_after})"]
    out = []
    if max_downtime is not None and r.downtime is not None and r.downtime > max_downtime:
        out.append(f"kill {i}: downtime {r.downtime:.1f} s > {max_downtime:g} s")
    if max_steps_lost is not None and r.steps_lost is not None and r.steps_lost > max_steps_lost:
        out.append(f"kill {i}: {r.steps_lost} steps lost > {max_steps_lost}")
    return out


def _killer(backend: Backend, name: str, mode: str, rng: random.Random
            ) -> Callable[[], list[KillRecord]]:
    """What one kill does in each mode: any worker, one chosen host, or every host of a slice."""
    def kill() -> list[KillRecord]:
        if mode == "random":
            return [backend.kill_worker(name, seed=rng.randrange(2**31))]
        running = [(s.index, p.host) for s in backend.status(name).slices for p in s.pods
                   if p.phase == "Running" and p.role == "worker"]
        if not running:
            raise UsageError(f"workload {name} has no running worker to kill",
                             hint="wait until `elastix workload status` shows it Running")
        if mode == "host":
            sl, host = rng.choice(running)
            return [backend.kill_worker(name, slice=sl, host=host)]
        sl = rng.choice(sorted({s for s, _ in running}))
        return [backend.kill_worker(name, slice=sl, host=h) for s, h in running if s == sl]
    return kill


def run_soak(backend: Backend, name: str, *, kills: int, interval: float, mode: str = "random",
             seed: int | None = None, max_downtime: float | None = None,
             max_steps_lost: int | None = None, timeout: float = 600.0, poll: float = 1.0,
             on_kill: Callable[[int, KillMeasurement], None] | None = None,
             clock: Callable[[], float] = time.monotonic,
             sleep: Callable[[float], None] = time.sleep) -> SoakResult:
    """Kill ``kills`` times, ``interval`` seconds apart (at least), measuring each recovery.

    Stops early if the workload dies. ``on_kill(i, measurement)`` reports progress.
    """
    if mode not in MODES:
        raise UsageError(f"unknown chaos mode {mode!r}", hint="use random, slice or host")
    if kills < 1 or interval < 0:
        raise UsageError("--kills must be >= 1 and --interval >= 0")
    rng = random.Random(seed)
    kill = _killer(backend, name, mode, rng)
    out: list[KillMeasurement] = []
    violations: list[str] = []
    died = False
    for i in range(1, kills + 1):
        started = clock()
        m = measure_kill(backend, name, kill, timeout=timeout, poll=poll, clock=clock,
                         sleep=sleep)
        out.append(m)
        violations += check_bounds(m, i, max_downtime, max_steps_lost)
        if on_kill:
            on_kill(i, m)
        if m.state_after in DEAD_STATES and not (m.recovery and m.recovery.complete):
            died = True
            break
        if i < kills:
            sleep(max(0.0, interval - (clock() - started)))
    events, _ = read_stream(backend, name)
    report = goodput(events, kills=[ms_of(m.kills[0].time) for m in out])
    return SoakResult(out, report, violations, died)
