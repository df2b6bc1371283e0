"""Rich tables and lines for workload status, kills and log notices (no backend calls here)."""

from __future__ import annotations

import collections
import datetime as dt
from typing import Any

from elastix.backends.base import KillRecord, QueueStatus, SliceStatus, WorkloadStatus
from elastix.measure.progress import Progress, Recovering
from elastix.protocol.timefmt import iso_ms, utc_now

STATE_STYLE = {"Running": "green", "Completed": "green", "Pending": "yellow",
               "Restarting": "yellow", "Degraded": "yellow", "Terminating": "dim",
               "Suspended": "dim", "Failed": "red", "Ready": "green", "Lost": "red",
               "Stopped": "red"}


def age(seconds: float | None) -> str:
    """``42s``, ``5m3s``, ``2h4m``, ``3d2h`` (like kubectl)."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60}m"
    return f"{s // 86400}d{s % 86400 // 3600}h"


def _styled(state: str) -> str:
    style = STATE_STYLE.get(state)
    return f"[{style}]{state}[/]" if style else state


def _phases(pods: list[Any]) -> str:
    counts = collections.Counter(p.phase for p in pods)
    return ", ".join(f"{n} {phase}" for phase, n in sorted(counts.items())) or "no pods"


def _head(st: WorkloadStatus) -> str:
    if st.head is None:
        return "-"
    h = st.head
    extra = f", {h.restarts} restarts" if h.restarts else ""
    return f"{_styled(h.phase)}{extra}"


def _since(p: Progress | None, now: dt.datetime) -> str:
    if p is None or p.last_step_at is None:
        return "-"
    return age(p.seconds_since_step(int(now.timestamp() * 1000))) + " ago"


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def workloads_table(items: list[WorkloadStatus], now: dt.datetime | None = None,
                    progress: dict[str, Progress | bool | None] | None = None,
                    wide: bool = False, made_by: bool = False) -> Any:
    """One row per workload: state, slices ready, the last step and how long ago it came,
    the loss, the step of the newest committed checkpoint (SAVED: the recovery point), slice
    restarts and age; ``wide`` (``-o wide``) adds the steps at risk since that checkpoint and
    when it committed, step time, goodput so far, pods, JobSet restarts and the head.

    SLICE RESTARTS counts what ``status`` counts per slice (a killed host restarts its whole
    slice): container restarts stay 0 when the pods are recreated, as they are on TPU.
    ``made_by`` (``list --all``) adds MADE BY after NAME: elastix, xpk, gcluster or other.
    """
    from rich.table import Table

    from elastix.workload.labels import made_by as maker

    now = now or utc_now()
    progress = progress or {}
    table = Table(box=None, header_style="bold", pad_edge=False)
    cols = ["NAME", "STATE", "SLICES", "STEP", "LAST STEP", "LOSS", "SAVED", "SLICE RESTARTS",
            "AGE"]
    if wide:
        cols[7:7] = ["AT RISK", "SAVED AT", "STEP TIME", "GOODPUT", "PODS", "JOBSET RESTARTS",
                     "HEAD"]
    if made_by:
        cols.insert(1, "MADE BY")
    for col in cols:
        table.add_column(col, no_wrap=col in ("NAME", "STATE"))
    for st in items:
        p = progress.get(st.name) or None  # False: not read for this backend
        pods = [p_ for s in st.slices for p_ in s.pods] + ([st.head] if st.head else [])
        ready = sum(1 for s in st.slices if s.state == "Ready")
        running = sum(1 for p_ in pods if p_.phase == "Running")
        rp = st.recovery_point
        row = [st.name, *([maker(st.labels)] if made_by else []), _styled(st.state),
               f"{ready}/{st.num_slices}",
               _num(p.last_step if p else None, "d"), _since(p, now),
               _num(p.loss if p else None, ".4f"), _num(rp.step if rp else None, "d")]
        if wide:
            row += [_num(rp.steps_at_risk if rp else None, "d"),
                    f"{rp.committed:%H:%M:%S}Z" if rp and rp.committed else "-",
                    _num(p.step_seconds if p else None, ".3f") + ("" if not p or
                    p.step_seconds is None else " s"),
                    _num(p.goodput * 100 if p and p.goodput is not None else None, ".1f")
                    + ("" if not p or p.goodput is None else " %"),
                    f"{running}/{len(pods)} running",
                    f"{st.jobset_restarts}/{st.max_restarts if st.max_restarts is not None else '-'}",
                    _head(st)]
        row += [str(sum(s.slice_restarts for s in st.slices)), age(st.age_seconds(now))]
        table.add_row(*row)
    return table


def training_line(p: Progress | None, now: dt.datetime | None = None) -> str:
    """``training: step 1234 (3s ago), 0.105 s/step, loss 4.2100, goodput 96.1 % so far,
    1 recovery`` (or that the trainer has not completed a step)."""
    if p is None:
        return "training: nothing to read yet (no trainer events, no head log)"
    if p.unreadable is not None:
        return f"training: the trainer's events cannot be read: {p.unreadable}"
    return _training_line(p, now or utc_now()) + _failed_saves(p) + skipped_note(p.skipped)


def _failed_saves(p: Progress) -> str:
    """``; 3 checkpoint saves failed since the newest commit (step 420), last: step 480:
    RESOURCE_EXHAUSTED ...``: training goes on, but nothing since that commit is safe."""
    if not p.failed_saves:
        return ""
    since = (f"the newest commit (step {p.last_committed})" if p.last_committed is not None
             else "the start (none committed)")
    n = p.failed_saves
    return (f"; {n} checkpoint save{'' if n == 1 else 's'} failed since {since}, last: "
            f"{p.last_save_error}")


def skipped_note(n: int) -> str:
    """``; 2 unreadable lines skipped`` (torn lines of the events file), or ""."""
    return f"; {n} unreadable line{'' if n == 1 else 's'} skipped" if n else ""


def _training_line(p: Progress, now: dt.datetime) -> str:
    if p.recovering is not None:
        return recovering_line(p, p.recovering, now)
    if p.last_step is None and p.resumed_complete is not None:
        return (f"training: none to do: it resumed the kept checkpoint of step "
                f"{p.resumed_complete}, at or past its last step (start over: workload delete "
                "--delete-data, or workload create --fresh)")
    if p.last_step is None:
        return "training: no step completed yet"
    parts = [f"step {p.last_step} ({_since(p, now)})"]
    if p.step_seconds is not None:
        parts.append(f"{p.step_seconds:.3f} s/step")
    if p.loss is not None:
        parts.append(f"loss {p.loss:.4f}")
    if p.goodput is not None:
        parts.append(f"goodput {p.goodput:.1%} so far")
    if p.live_slices is not None:
        parts.append(f"{p.live_slices} live slice{'' if p.live_slices == 1 else 's'}")
    if p.recoveries is not None:
        parts.append(f"{p.recoveries} recover{'y' if p.recoveries == 1 else 'ies'}")
    return "training: " + ", ".join(parts)


def recovering_line(p: Progress, r: Recovering, now: dt.datetime) -> str:
    """``training: recovering: waiting for slices for 3.2 s (slice 1 lost); recovery 2, 3.3 s
    so far; last step 142 (4s ago)``: while a recovery runs the last step line is stale."""
    now_ms = int(now.timestamp() * 1000)

    def secs(since: int) -> str:
        return f"{max(0, now_ms - since) / 1000:.1f} s"

    lost = (f" (slice{'s' if len(r.lost_slices) > 1 else ''} "
            f"{', '.join(map(str, r.lost_slices))} lost)" if r.lost_slices else "")
    line = (f"training: recovering: {r.phase} for {secs(r.phase_since)}{lost}; "
            f"recovery {r.index}, {secs(r.since)} so far")
    if p.last_step is not None:
        line += f"; last step {p.last_step} ({_since(p, now)})"
    return line


def _slice_row(s: SliceStatus) -> list[str]:
    backoff = f"{s.job_failures}/{s.backoff_limit}" if s.backoff_limit is not None else \
        str(s.job_failures)
    nodes = sorted({p.node for p in s.pods if p.node})
    budget = s.max_slice_restarts
    restarts = f"{s.slice_restarts}/{budget}" if budget is not None else str(s.slice_restarts)
    return [str(s.index), _styled(s.state), f"{s.ready}/{s.hosts}", _phases(s.pods),
            str(sum(p.restarts for p in s.pods)), restarts, backoff,
            ", ".join(nodes[:2]) + (f" +{len(nodes) - 2}" if len(nodes) > 2 else "")]


def status_renderable(st: WorkloadStatus, now: dt.datetime | None = None,
                      progress: Progress | None | bool = False) -> Any:
    """A header, how training goes (when ``progress`` is given: None means no events), the
    per-slice table and, when stuck, why."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from elastix.workload.labels import made_by

    now = now or utc_now()
    ready = sum(1 for s in st.slices if s.state == "Ready")
    maker = made_by(st.labels) if st.backend == "gke" else "elastix"
    lines = [
        Text.from_markup(f"[bold]{st.name}[/]  namespace {st.namespace}  backend {st.backend}  "
                         f"state {_styled(st.state)}  age {age(st.age_seconds(now))}"
                         + ("" if maker == "elastix" else
                            f"  made by {maker}, not elastix")),
        Text.from_markup(f"slices ready {ready}/{st.num_slices}   JobSet restarts "
                         f"{st.jobset_restarts}/{st.max_restarts if st.max_restarts is not None else '-'}"),
    ]
    if st.head is not None:
        h = st.head
        lines.append(Text.from_markup(
            f"head {h.name}: {_styled(h.phase)}, {h.restarts} container restarts"
            + (f", node {h.node}" if h.node else "")
            + (f", started {iso_ms(h.started)}" if h.started else "")
            + (f" ({h.reason})" if h.reason else "")))
    else:
        lines.append(Text("head: no pod yet"))
    if progress is not False:
        lines.append(Text(training_line(progress or None, now)))
    if st.recovery_point is not None:
        lines.append(Text(st.recovery_point.line()))
    if st.queue is not None:
        lines.append(Text(queue_line(st.queue)))
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("SLICE", "STATE", "READY", "PODS", "RESTARTS", "SLICE RESTARTS",
                "POD FAILURES/BACKOFF", "NODES"):
        table.add_column(col)
    for s in st.slices:
        table.add_row(*_slice_row(s))
    parts: list[Any] = [*lines, table]
    parts.extend(Text(f"slice {s.index} is lost: {s.lost}") for s in st.slices if s.lost)
    if st.message:
        parts.append(Text(f"message: {st.message}"))
    if st.reasons:
        parts.append(Text.from_markup("[yellow]why it is not running:[/]"))
        parts.extend(Text(f"  - {r}") for r in st.reasons)
    return Group(*parts)


def queue_line(q: QueueStatus) -> str:
    """``Kueue: LocalQueue Q, Workload W, waiting for admission, position 3`` (what the
    why-stuck lines explain)."""
    state = ("admitted" if q.admitted else "quota reserved, admission checks pending"
             if q.quota_reserved else "waiting for quota")
    out = f"Kueue: LocalQueue {q.queue}, " + (f"Workload {q.workload}, {state}" if q.workload
                                               else "no Workload yet")
    if q.position is not None:
        out += f", position {q.position + 1} in the LocalQueue"
    return out


def kill_json(rec: KillRecord) -> dict[str, Any]:
    return {"workload": rec.workload, "pod": rec.pod, "slice": rec.slice, "host": rec.host,
            "node": rec.node, "time": iso_ms(rec.time), "dry_run": rec.dry_run, "pid": rec.pid}
