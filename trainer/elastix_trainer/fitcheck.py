"""``elastix-train fit-check``: the run's step compiled for TPU slices that are not there.

JAX compiles for a TPU topology it does not own: with libtpu installed (``pip install
'elastix[tpu]'``, no chip needed) ``jax.experimental.topologies.get_topology_desc`` gives the
topology's abstract devices, and a step lowered over a mesh of them compiles and reports its
memory (``Compiled.memory_analysis()``). What is compiled here is exactly what
``elastix-train`` compiles with the same flags on those slices, because it is the trainer's
own entry point: the flags parsed by ``config.parse_args``, the model and its platform choices
by ``train.model_config`` (for ``tpu``), the optimizer and the copy mode by
``train.opt_config`` and ``train.copy_mode``, and the step by ``step.step_fns``, which tries
the ``auto`` remat policies and loss tiles in ``fit.choose``'s order against the chip's memory
(``chips``: a topology's devices cannot say it). A step assembled by hand instead was 21-50 %
off the trainer's own compile on a v5e chip (issue 73).

Meshes: the run's elastic policy says which it can meet. Pause-resume trains on every slice;
replica-resize also on each smaller count down to ``--min-slices``
(``elastic.runtime.min_slices``). Each is compiled and judged.

``elastix-train fit-check --topology v5e:4x4 --slices 3 -- <the run's flags>`` prints one JSON
document on stdout (:data:`VERSION`); progress lines on stderr start with :data:`PROGRESS`, a
line every :data:`TICK` seconds while a compile runs. Exit 0 when it ran (a mesh that does not
fit is in the report: the launcher refuses it), 2 for bad input, 1 when a compile failed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import sys
import threading
import time
from typing import Any

from elastix.errors import UsageError
from elastix.protocol import entrypoints

VERSION = entrypoints.FIT_CHECK_VERSION
"""The report's format (``version``); the launcher refuses another."""
PROGRESS = entrypoints.FIT_CHECK_PROGRESS
"""Every progress line on stderr starts with this (libtpu writes lines of its own there)."""
TICK = 15.0
"""Seconds between the lines that say a long compile is still running."""


def _say(text: str) -> None:
    print(f"{PROGRESS} {text}", file=sys.stderr, flush=True)


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    """(the check's own flags, the run's flags after ``--``)."""
    ap = argparse.ArgumentParser(
        prog="elastix-train fit-check",
        description="Compile the run's step for TPU slices without a chip, for every mesh its "
                    "elastic policy can train on, and report memory, choices and speed as JSON. "
                    "The run's own flags follow --.")
    ap.add_argument("--topology", required=True,
                    help="A slice's topology as JAX names it, e.g. v5e:4x4 (needs libtpu)")
    ap.add_argument("--slices", type=int, required=True, help="Slices the run starts on")
    ap.add_argument("--chips-per-host", default="2x2x1",
                    help="A host's chips (default 2x2x1: the 4-chip TPU VMs)")
    ap.add_argument("--output", help="Write the JSON here instead of stdout")
    if "--" in argv:
        i = argv.index("--")
        own, run = argv[:i], argv[i + 1:]
    else:
        own, run = argv, []
    ns = ap.parse_args(own)
    if ns.slices < 1:
        raise UsageError(f"--slices must be at least 1, got {ns.slices}", hint="e.g. --slices 3")
    try:
        bounds = tuple(int(x) for x in ns.chips_per_host.split("x"))
        if len(bounds) != 3 or min(bounds) < 1:
            raise ValueError
    except ValueError:
        raise UsageError(f"--chips-per-host {ns.chips_per_host!r} is not AxBxC",
                         hint="e.g. 2x2x1") from None
    ns.bounds = bounds
    return ns, run


def versions() -> dict[str, str]:
    """What the compile depends on besides the flags: elastix, JAX, jaxlib and libtpu."""
    out = {}
    for dist in ("elastix", "jax", "jaxlib", "libtpu"):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = ""
    return out


def topology_devices(topology: str, slices: int, bounds: tuple[int, ...]) -> list:
    """The abstract devices of ``slices`` slices of ``topology`` (each knows its slice).

    Raises:
        UsageError: libtpu is missing, or it does not know the topology.
    """
    import importlib.util

    if importlib.util.find_spec("libtpu") is None:
        raise UsageError("libtpu is not installed, so there is no TPU compiler here",
                         hint="pip install 'elastix[tpu]' (JAX's TPU compiler; no chip needed)")
    # libtpu otherwise takes a machine-wide lock file (/tmp/libtpu_lockfile), meant for a
    # process that owns the chips: a second check beside the first (or beside a trainer on a
    # chip) failed to start ("Internal error when accessing libtpu multi-process lockfile").
    # Nothing here owns a chip.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")  # no GCE metadata server to ask
    from jax.experimental import topologies

    try:
        desc = topologies.get_topology_desc(platform="tpu", topology_name=topology,
                                            chip_config_name="default",
                                            chips_per_host_bounds=bounds, num_slices=slices)
    except Exception as e:  # noqa: BLE001 - libtpu's words, one line
        raise UsageError(f"libtpu does not know the topology {topology!r} "
                         f"({(str(e).strip().splitlines() or [''])[0][:160]})",
                         hint="e.g. v5e:4x4, v6e:2x4 or v5p:2x2x2") from None
    return list(desc.devices)


def by_slice(devices: list) -> dict[int, list]:
    """A topology's devices by slice (one slice's devices carry no ``slice_index``): never the
    environment's slicing, which is the local backend's (``mesh.slice_devices``)."""
    groups: dict[int, list] = {}
    for d in devices:
        groups.setdefault(int(getattr(d, "slice_index", None) or 0), []).append(d)
    return {k: sorted(v, key=lambda d: d.id) for k, v in sorted(groups.items())}


def slice_counts(cfg, total: int) -> list[int]:
    """The meshes the run can train on, largest first (module docstring)."""
    from elastix_trainer.elastic.runtime import min_slices

    least = min_slices(cfg, total)
    if least > total:
        raise UsageError(f"--min-slices {least} exceeds the {total} slices",
                         hint=f"use --min-slices {total} or fewer")
    return list(range(total, least - 1, -1))


class _Ticker:
    """A line every :data:`TICK` seconds while a compile runs."""

    def __init__(self, what: str) -> None:
        self.what, self.t0 = what, time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fit-check-tick")

    def _run(self) -> None:
        while not self._stop.wait(TICK):
            _say(f"{self.what}: still compiling ({time.monotonic() - self.t0:.0f} s)")

    def __enter__(self) -> _Ticker:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.t0


def _memory(compiled) -> dict[str, int] | None:
    try:
        ma = compiled.memory_analysis()
    except Exception:  # noqa: BLE001 - not every backend analyses memory
        return None
    if ma is None:
        return None
    return {"arguments": int(ma.argument_size_in_bytes), "outputs": int(ma.output_size_in_bytes),
            "aliased": int(ma.alias_size_in_bytes), "temporaries": int(ma.temp_size_in_bytes),
            "code": int(ma.generated_code_size_in_bytes)}


def check_mesh(cfg, model, groups: dict, slices: int, chip, progress=_say) -> dict[str, Any]:
    """Compile the run's step on its first ``slices`` slices; what it needs and chose."""
    from elastix_trainer import fit, predict, step
    from elastix_trainer.mesh import build_mesh, num_devices
    from elastix_trainer.model import flops_per_step
    from elastix_trainer.train import copy_mode, opt_config

    mesh = build_mesh(groups, range(slices))
    chips = num_devices(mesh)
    what = f"{slices} slice{'s' if slices > 1 else ''} ({chips} chips)"
    progress(f"{what}: compiling")
    out: dict[str, Any] = {"slices": slices, "chips": chips,
                           "global_batch": cfg.batch_per_device * chips}
    with _Ticker(what) as tick:
        try:
            fns = step.step_fns(model, opt_config(cfg), mesh, cfg.batch_per_device,
                                cfg.seq_len, cfg.seed, None, copy_mode(cfg))
        except fit.DoesNotFit as e:
            out.update(fits=False, seconds=round(tick.seconds, 1), error=e.message,
                       hint=e.hint)
            progress(f"{what}: does not fit ({tick.seconds:.0f} s)")
            return out
    limit = fit.device_limit(mesh)
    used = fns.model
    flops = flops_per_step(used, out["global_batch"], cfg.seq_len)
    out.update(
        fits=True, seconds=round(tick.seconds, 1), hbm=fns.peak_bytes, limit=limit,
        memory=_memory(fns.step), state_per_chip=fit.state_bytes(fns.abstract),
        remat_policy=used.remat_policy, loss_tiles=used.num_vocab_tiling,
        attention=used.attention, scan_layers=used.scan_layers,
        snapshot_copies=("staged on the chips" if fns.stage is not None else
                         "copied while the step runs" if fns.step_copy is not None else
                         "at step boundaries"),
        flops_per_step=flops,
        prediction=predict.tflops(cfg, used, chip, flops, chips, len(groups[0])))
    progress(f"{what}: compiled in {tick.seconds:.0f} s: "
             + (f"{fns.peak_bytes / fit.GIB:.2f} of {limit / fit.GIB:.2f} GiB a chip"
                if fns.peak_bytes and limit else "fits"))
    return out


def check(cfg, topology: str, slices: int, bounds: tuple[int, ...] = (2, 2, 1),
          progress=_say) -> dict[str, Any]:
    """The report of ``cfg``'s run on ``slices`` slices of ``topology`` (module docstring)."""
    import jax

    from elastix.protocol import chips as chip_table
    from elastix_trainer.state import hostmem
    from elastix_trainer.state.manager import pathways_persistence
    from elastix_trainer.step import init_state
    from elastix_trainer.train import model_config, opt_config

    t0 = time.monotonic()
    counts = slice_counts(cfg, slices)
    devices = topology_devices(topology, counts[0], bounds)
    chip = chip_table.by_kind(devices[0].device_kind)
    if chip is None:
        raise UsageError(f"no chip facts for {devices[0].device_kind!r}",
                         hint="the fit check knows v5e, v6e, v5p and v4")
    model = model_config(cfg, "tpu")
    shapes = jax.eval_shape(lambda: init_state(model, opt_config(cfg), cfg.seed))
    whole = hostmem.tree_bytes(shapes)
    params = hostmem.tree_bytes(shapes["params"])
    copies = hostmem.copies(cfg, whole, persistence=pathways_persistence())
    per_slice = len(by_slice(devices)[0])
    progress(f"{cfg.model_name} on {slices} x {topology} ({per_slice} chips a slice), "
             f"{len(counts)} mesh{'es' if len(counts) > 1 else ''} to compile")
    meshes = []
    # Never JAX's persistent cache: an executable compiled without a chip cannot be loaded
    # back ("PjRtCompiler must be constructed with a Client"), and a run's cache is no place
    # for one either (a run on its chips keys its programs differently: docs/benchmarks.md).
    cache_was = jax.config.jax_enable_compilation_cache
    jax.config.update("jax_enable_compilation_cache", False)
    try:
        for n in counts:
            # Each mesh on a topology of its own slice count: libtpu 0.0.42.1's cross-slice
            # all-reduce lowering aborted the process (SIGILL in ConstructLocalOffsetTable)
            # for a mesh over 2 of a 3-slice topology's slices. A chip runs the same program.
            group = by_slice(devices if n == counts[0] else
                             topology_devices(topology, n, bounds))
            meshes.append(check_mesh(cfg, model, group, n, chip, progress))
    finally:
        jax.config.update("jax_enable_compilation_cache", cache_was)
    return {
        "version": VERSION,
        "model": cfg.model_name,
        "params": params // 4,
        "state_bytes": whole,
        "batch_per_device": cfg.batch_per_device,
        "seq_len": cfg.seq_len,
        "elastic_mode": cfg.elastic_mode,
        "topology": topology,
        "slices": slices,
        "chips_per_slice": per_slice,
        "chip": {"generation": chip.generation, "kind": chip.device_kind, "limit": chip.limit,
                 "limit_source": chip.limit_source, "peak_flops": chip.peak_flops},
        "host_copies": {"count": copies.count, "bytes": copies.bytes, "why": copies.said()},
        "meshes": meshes,
        "versions": versions(),
        "seconds": round(time.monotonic() - t0, 1),
    }


def main(argv: list[str]) -> int:
    """``elastix-train fit-check`` (module docstring); returns the exit code."""
    ns, run = parse(argv)
    # JAX's CPU client for everything but the compile: a chip on this machine stays free
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from elastix_trainer.config import parse_args

    cfg = parse_args(run)
    report = check(cfg, ns.topology, ns.slices, ns.bounds)
    text = json.dumps(report, indent=1)
    if ns.output:
        with open(ns.output, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    else:
        print(text)
    _say(f"done in {report['seconds']:.0f} s")
    return 0
