"""The fit check's report as a table: one column per mesh the run can train on."""

from __future__ import annotations

from typing import Any

GIB = 1 << 30


def _gib(n: float | None) -> str:
    if n is None:
        return "?"
    return f"{n / GIB:.2f} GiB" if n < 100 * GIB else f"{n / GIB:.1f} GiB"


def _flops(n: float) -> str:
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n:.0f} FLOP"


def _seconds(s: float) -> str:
    if s >= 0.1:
        return f"~{s:.2f} s"
    return f"~{s * 1e3:.1f} ms" if s >= 1e-3 else f"~{s * 1e6:.0f} µs"


def _count(n: float) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e9 else f"{n / 1e6:.1f} M"


def _loss(tiles: int | None) -> str:
    return "whole" if tiles in (0, 1) else f"{tiles} vocabulary tiles"


def headline(report: dict[str, Any]) -> str:
    """One line: what was compiled for what, and how long it took."""
    slices = report["slices"]
    maxtext = report.get("trainer") == "maxtext"
    params = f" ({_count(report['params'])} parameters)" if report.get("params") else ""
    return (f"fit check{' (MaxText train_compile.py)' if maxtext else ''}: "
            f"{report['model']}{params} on {slices} x "
            f"{report.get('tpu_type', report['topology'])} ({report['topology']}, "
            f"{report['chips_per_slice']} chips a slice), batch {report['batch_per_device']} "
            f"x seq {report['seq_len']} a chip, {report['elastic_mode']}: compiled without a "
            f"chip in {report['seconds']:.0f} s (libtpu {report['versions'].get('libtpu')})")


def table(report: dict[str, Any]) -> Any:
    """The per-mesh table (Rich)."""
    from rich.markup import escape
    from rich.table import Table

    meshes = report["meshes"]
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("")
    for m in meshes:
        t.add_column(f"{m['slices']} slice{'s' if m['slices'] > 1 else ''} ({m['chips']} "
                     "chips)", justify="right")
    limit = report["chip"]["limit"]

    def row(label: str, fn, needs: str | None = None) -> None:
        shown = [m for m in meshes if m.get("fits") and (needs is None or needs in m)]
        if shown:
            t.add_row(label, *[fn(m) if m in shown else "" for m in meshes])

    t.add_row("fits", *["yes" if m.get("fits") else "[red]no[/]" for m in meshes])
    if any(not m.get("fits") for m in meshes):
        t.add_row("", *[escape(m.get("error", "")) if not m.get("fits") else "" for m in meshes])
    row("HBM a chip", lambda m: f"{_gib(m['hbm'])} of {_gib(m.get('limit') or limit)}")
    row("  state a chip", lambda m: _gib(m["state_per_chip"]), "state_per_chip")
    row("  temporaries", lambda m: _gib((m.get("memory") or {}).get("temporaries")))
    auto = "" if report.get("trainer") == "maxtext" else " (auto)"
    row(f"remat{auto}", lambda m: m["remat_policy"] + ("" if m["scan_layers"] else ", unrolled"))
    row(f"loss{auto}", lambda m: _loss(m["loss_tiles"]))
    row("attention", lambda m: m["attention"])
    row("global batch", lambda m: str(m["global_batch"]))
    row("FLOPs a step", lambda m: _flops(m["flops_per_step"]), "flops_per_step")
    row("TFLOP/s a chip", lambda m: "~{:.0f} ({:.0%} of peak), predicted".format(
        m["prediction"]["tflops"], m["prediction"]["of_peak"])
        if m.get("prediction", {}).get("tflops") else "not predicted", "prediction")
    row("step", lambda m: _seconds(m["prediction"]["step_seconds"]) + ", predicted"
        if m.get("prediction", {}).get("step_seconds") else "", "prediction")
    row("host copies", lambda m: m["snapshot_copies"], "snapshot_copies")
    t.add_row("compile", *[f"{m['seconds']:.0f} s" for m in meshes])
    return t


def notes(report: dict[str, Any], head_memory: float | None = None,
          restore: str | None = None) -> list[str]:
    """The lines under the table: the prediction's basis, the head's host copies, a restore's
    path, where the chip's memory figure comes from."""
    out = []
    first = next((m for m in report["meshes"] if m.get("fits")), None)
    if first and first.get("prediction", {}).get("basis"):
        out.append(f"predicted TFLOP/s: {first['prediction']['basis']}")
    copies = report.get("host_copies") or {}
    if report.get("trainer") == "maxtext":
        versions = report.get("versions") or {}
        out.append(f"MaxText {versions.get('maxtext', '?')}'s own train_compile.py, in the MaxText "
                   f"environment (JAX {versions.get('jax', '?')}); FLOPs are MaxText's count "
                   "(calculate_tflops_training_per_device); no TFLOP/s is predicted: the "
                   "prediction is fitted to elastix-train's step")
        if report.get("elastic_compiled_off"):
            out.append("compiled with elastic_enabled=false: MaxText's create_device_mesh takes "
                       "the live devices when elastic (this machine's CPU), not the topology's; "
                       "the step is the same program")
    elif copies.get("count"):
        line = (f"host memory on the head: {copies['count']} cop"
                f"{'y' if copies['count'] == 1 else 'ies'} of the {_gib(report['state_bytes'])} "
                f"state, {_gib(copies['bytes'])} ({copies['why']})")
        if head_memory:
            line += (f"; the head's main container has {_gib(head_memory)}, "
                     f"{copies['bytes'] / head_memory:.0%} of it for them")
            if copies["bytes"] > head_memory:
                line += ": too little"
        out.append(line)
    else:
        out.append(f"host memory on the head: no copies of the {_gib(report['state_bytes'])} "
                   "state are held (no --snapshot-period, no checkpoints)")
    if restore:
        out.append(restore)
    chip = report["chip"]
    out.append(f"a {chip['generation']} chip's memory for programs: {_gib(chip['limit'])} "
               f"({chip['limit_source']})")
    return out


def render(report: dict[str, Any], console: Any, head_memory: float | None = None,
           restore: str | None = None, reused: bool = False) -> None:
    """Print the report (headline, table, notes) on ``console``."""
    from rich.markup import escape

    line = headline(report)
    if reused:
        line += f"; the report of {report.get('checked_at', 'an earlier check')}, reused"
    console.print(escape(line))
    console.print(table(report))
    for n in notes(report, head_memory, restore):
        console.print("[dim]" + escape(n) + "[/]")
