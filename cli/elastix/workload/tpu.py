"""The TPU catalogue: accelerator types elastix can place, with their GKE and Pathways names.

Names follow Cloud TPU's: ``v5litepod-16`` (chip count) for v5e and v6e, ``v4-16`` and
``v5p-16`` (TensorCore count, two per chip) for v4 and v5p. The topology spelling
(``v5litepod-4x4``, ``v4-2x2x2``) names the same types. Aliases ``v5e-16`` and ``v6e-16`` work too.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math

from elastix.errors import UsageError


@dataclasses.dataclass(frozen=True)
class TpuType:
    """One accelerator type, as a GKE node pool and a Pathways instance see it."""

    name: str  # canonical Cloud TPU name, e.g. "v5litepod-16"
    generation: str  # "v4", "v5e", "v5p", "v6e"
    chips: int  # chips in one slice
    topology: str  # "4x4", "2x2x2"
    hosts: int  # VMs (pods) per slice
    chips_per_host: int
    accelerator: str  # node selector cloud.google.com/gke-tpu-accelerator
    machine_type: str  # GCE machine type of the node pool
    pathways_instance_type: str  # --instance_type of the Pathways resource manager


@dataclasses.dataclass(frozen=True)
class _Family:
    generation: str
    prefix: str  # name prefix, e.g. "v5litepod"
    aliases: tuple[str, ...]
    accelerator: str
    pathways: str  # "tpuv5e"
    cores_per_chip: int  # the number in the name counts cores (v4, v5p) or chips
    chips_per_host: int  # multi-host slices
    machine_type: str  # format with the host's chip count
    topologies: tuple[str, ...]


_FAMILIES = (
    _Family("v4", "v4", (), "tpu-v4-podslice", "tpuv4", 2, 4, "ct4p-hightpu-4t",
            ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8")),
    _Family("v5e", "v5litepod", ("v5e",), "tpu-v5-lite-podslice", "tpuv5e", 1, 4,
            "ct5lp-hightpu-{n}t", ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")),
    _Family("v5p", "v5p", (), "tpu-v5p-slice", "tpuv5", 2, 4, "ct5p-hightpu-4t",
            ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8")),
    _Family("v6e", "v6e", (), "tpu-v6e-slice", "tpuv6e", 1, 4, "ct6e-standard-{n}t",
            ("1x1", "2x2", "2x4", "4x4", "4x8", "8x8", "8x16", "16x16")),
)


def _make(fam: _Family, topology: str) -> TpuType:
    chips = math.prod(int(d) for d in topology.split("x"))
    # Single-host shapes of v5e/v6e put up to 8 chips on one VM; everything else 4 per host.
    per_host = chips if (fam.cores_per_chip == 1 and chips <= 8) else min(chips, fam.chips_per_host)
    return TpuType(
        name=f"{fam.prefix}-{chips * fam.cores_per_chip}",
        generation=fam.generation,
        chips=chips,
        topology=topology,
        hosts=chips // per_host,
        chips_per_host=per_host,
        accelerator=fam.accelerator,
        machine_type=fam.machine_type.format(n=per_host),
        pathways_instance_type=f"{fam.pathways}:{topology}",
    )


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, TpuType]:
    """Every known spelling (canonical, topology, alias) mapped to its type."""
    table: dict[str, TpuType] = {}
    for fam in _FAMILIES:
        for topo in fam.topologies:
            t = _make(fam, topo)
            size = t.name.split("-", 1)[1]
            for prefix in (fam.prefix, *fam.aliases):
                table[f"{prefix}-{size}"] = t
                table[f"{prefix}-{topo}"] = t
    return table


def closest(name: str, n: int = 3) -> list[str]:
    """Canonical names of the known spellings closest to ``name``."""
    table = catalogue()
    out: list[str] = []
    for key in difflib.get_close_matches(name.strip().lower(), list(table), n=4 * n, cutoff=0.5):
        canon = table[key].name
        if canon not in out:
            out.append(canon)
    return out[:n]


def lookup(name: str) -> TpuType:
    """Resolve a TPU type name.

    Raises:
        UsageError: unknown name; the hint lists the closest known names.
    """
    t = catalogue().get(name.strip().lower())
    if t is None:
        raise UsageError(f"unknown TPU type {name!r}", hint=unknown_hint(name))
    return t


def unknown_hint(name: str) -> str:
    """The hint for an unknown TPU type: the closest matches, or the families."""
    near = closest(name)
    if near:
        return "did you mean " + " or ".join(near) + "?"
    return "known families: v4-N, v5litepod-N (v5e), v5p-N, v6e-N, e.g. v5litepod-16"
