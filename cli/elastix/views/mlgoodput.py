"""`workload goodput --categories ml-goodput`: the run in ml-goodput-measurement's categories."""

from __future__ import annotations

from typing import Any

from elastix.measure.goodput import GoodputReport
from elastix.measure.mlgoodput import DIFFERENCES, LIBRARY, MlGoodputReport


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.1%}"


def print_ml_goodput(console: Any, ml: MlGoodputReport, rep: GoodputReport, source: str) -> None:
    """The library's goodput and categories (those with time in them, OTHER always), its slice
    efficiency, elastix's own two totals, and where the definitions differ."""
    from rich.table import Table

    tot = ml.total_elapsed_time
    until = "job end" if ml.ended else "its last event (no completed run_end)"
    console.print(f"ml-goodput goodput {ml.goodput_percent / 100:.1%} over {tot:.1f} s to "
                  f"{until} ({source}; as {LIBRARY} counts it, {ml.disruption_count} "
                  f"disruption{'' if ml.disruption_count == 1 else 's'})", markup=False)
    t = Table()
    t.add_column("category")
    t.add_column("seconds", justify="right")
    t.add_column("share", justify="right")
    rows = [("productive", ml.productive_seconds)]
    for cat, v in ml.badput_seconds.items():
        if isinstance(v, dict):
            rows += [(f"{cat}.{sub}", x) for sub, x in v.items() if x > 0]
        elif v > 0 or cat == "OTHER":
            rows.append((cat, v))
    for name, secs in rows:
        t.add_row(name, f"{secs:.3f}", f"{secs / tot:.1%}" if tot else "-")
    console.print(t)
    if ml.stepping_slice_efficiency is not None:
        console.print(f"slice efficiency: stepping {_pct(ml.stepping_slice_efficiency)}, "
                      f"available {_pct(ml.available_slice_efficiency)}", markup=False)
    console.print(f"elastix's own: goodput {_pct(rep.goodput)}, slice-weighted "
                  f"{_pct(rep.slice_weighted_goodput)} (workload goodput --categories elastix)",
                  markup=False)
    console.print(DIFFERENCES, markup=False)
