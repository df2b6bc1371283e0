"""``workload forecast --plot``: goodput against the training's size, one line per policy."""

from __future__ import annotations

import dataclasses
from typing import Any

from elastix.measure.forecast import POLICIES, Costs, Scenario
from elastix.measure.forecast_report import forecast


def sweep(c: Costs, sc: Scenario, runs: int, seed: int, points: int = 6
          ) -> dict[str, list[tuple[int, float, float, float]]]:
    """Each policy's goodput (mean, low, high) at today's periods, at sizes from
    ``sc.slices / 4**(points-1)`` up to ``sc.slices`` (spares and the replica-resize floor
    scaled with it)."""
    sizes = sorted({max(1, round(sc.slices / 4 ** k)) for k in range(points)})
    out: dict[str, list[tuple[int, float, float, float]]] = {p: [] for p in POLICIES}
    for n in sizes:
        f = n / sc.slices
        at = dataclasses.replace(sc, slices=n, spare_slices=round(sc.spare_slices * f),
                                 min_slices=max(1, min(n, round(sc.min_slices * f))))
        for row in forecast(c, at, runs, seed, search=False).rows:
            out[row.policy].append((n, row.goodput.mean, row.goodput.low, row.goodput.high))
    return out


def plot_forecast(lines: dict[str, list[tuple[int, float, float, float]]], path: str) -> Any:
    """Draw ``lines`` (:func:`sweep`) to ``path``; returns the figure's axes."""
    import matplotlib

    from elastix.views.fonts import bundled_fonts_only

    bundled_fonts_only()  # as elastix.views.plot: no scan of the system's fonts
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    try:
        for policy, pts in lines.items():
            xs = [p[0] for p in pts]
            ax.plot(xs, [100 * p[1] for p in pts], marker="o", label=policy)
            ax.fill_between(xs, [100 * p[2] for p in pts], [100 * p[3] for p in pts], alpha=0.2)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("slices")
        ax.set_ylabel("goodput (% of wall time)")
        ax.set_title("forecast goodput at today's periods (95 % interval)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    return ax
