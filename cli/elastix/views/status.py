"""Rich tables and lines for workload status, kills and log notices (no backend calls here)."""

from __future__ import annotations

import collections
import datetime as dt
from typing import Any

from elastix.backends.base import KillRecord, SliceStatus, WorkloadStatus
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


def workloads_table(items: list[WorkloadStatus], now: dt.datetime | None = None) -> Any:
    """One row per workload: state, slices ready, pods, restarts, head, age."""
    from rich.table import Table

    now = now or utc_now()
    table = Table(box=None, header_style="bold", pad_edge=False)
    for col in ("NAME", "STATE", "SLICES", "PODS", "RESTARTS", "JOBSET RESTARTS", "HEAD", "AGE"):
        table.add_column(col)
    for st in items:
        pods = [p for s in st.slices for p in s.pods] + ([st.head] if st.head else [])
        ready = sum(1 for s in st.slices if s.state == "Ready")
        running = sum(1 for p in pods if p.phase == "Running")
        table.add_row(st.name, _styled(st.state), f"{ready}/{st.num_slices}",
                      f"{running}/{len(pods)} running", str(sum(p.restarts for p in pods)),
                      f"{st.jobset_restarts}/{st.max_restarts if st.max_restarts is not None else '-'}",
                      _head(st), age(st.age_seconds(now)))
    return table


def _slice_row(s: SliceStatus) -> list[str]:
    backoff = f"{s.job_failures}/{s.backoff_limit}" if s.backoff_limit is not None else \
        str(s.job_failures)
    nodes = sorted({p.node for p in s.pods if p.node})
    budget = s.max_slice_restarts
    restarts = f"{s.slice_restarts}/{budget}" if budget is not None else str(s.slice_restarts)
    return [str(s.index), _styled(s.state), f"{s.ready}/{s.hosts}", _phases(s.pods),
            str(sum(p.restarts for p in s.pods)), restarts, backoff,
            ", ".join(nodes[:2]) + (f" +{len(nodes) - 2}" if len(nodes) > 2 else "")]


def status_renderable(st: WorkloadStatus, now: dt.datetime | None = None) -> Any:
    """A header, the per-slice table and, when stuck, why."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    now = now or utc_now()
    ready = sum(1 for s in st.slices if s.state == "Ready")
    lines = [
        Text.from_markup(f"[bold]{st.name}[/]  namespace {st.namespace}  backend {st.backend}  "
                         f"state {_styled(st.state)}  age {age(st.age_seconds(now))}"),
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


def kill_line(rec: KillRecord) -> str:
    """``killed pod X (slice 1, host 2) on node N at 2026-...Z`` (UTC, to the millisecond)."""
    verb = "would kill" if rec.dry_run else "killed"
    where = f"slice {rec.slice}, host {rec.host}"
    node = f" on node {rec.node}" if rec.node else ""
    pid = f" (pid {rec.pid})" if rec.pid else ""
    return f"{verb} pod {rec.pod}{pid} ({where}){node} at {iso_ms(rec.time)}"


def kill_json(rec: KillRecord) -> dict[str, Any]:
    return {"workload": rec.workload, "pod": rec.pod, "slice": rec.slice, "host": rec.host,
            "node": rec.node, "time": iso_ms(rec.time), "dry_run": rec.dry_run, "pid": rec.pid}
