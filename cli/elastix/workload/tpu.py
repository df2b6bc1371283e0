"""The TPU catalogue: accelerator types elastix can place, with their GKE and Pathways names.

Names follow Cloud TPU's: ``v5litepod-16`` (chip count) for v5e and v6e, ``v4-16`` and
``v5p-16`` (TensorCore count, two per chip) for v4 and v5p. The topology spelling
(``v5litepod-4x4``, ``v4-2x2x2``) names the same types. Aliases ``v5e-16`` and ``v6e-16`` work too.

The table is data: every shape names the reference that maps it (machine type, hosts, chips per
host, accelerator label, Pathways instance type). tests/workload/test_tpu_sources.py checks each
row against the vendored extracts in tests/fixtures/ (xpk's system characteristics, pathways-job's
and pathways-utils' machine-type maps). Sources, at the commits the extracts name:

* XPK: AI-Hypercomputer/xpk ``src/xpk/core/system_characteristics.py`` @ 367c838 (L696-859);
  the instance type is ``<pathways_tpu_version>:<topology>`` (``src/xpk/commands/workload.py``
  L292-296).
* PJ: google/pathways-job ``internal/controller/pathwaysjob_controller.go`` @ c0cc759:
  ``MachineTypeToTPUVersionMap`` L71-84, ``ValidTpuTopologiesMap`` L103-157, 4 chips per VM on
  the ``*-4t`` types (L469-472).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import math

from elastix.errors import UsageError

XPK = "xpk system_characteristics.py@367c838"
PJ = "pathways-job pathwaysjob_controller.go@c0cc759"


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
    source: str = XPK  # the reference that maps this shape this way


@dataclasses.dataclass(frozen=True)
class _Family:
    generation: str
    prefix: str  # name prefix, e.g. "v5litepod"
    aliases: tuple[str, ...]
    accelerator: str  # XPK gke_accelerator; PJ MachineTypeToGKEAcceleratorTypeMap agrees
    pathways: str  # XPK pathways_tpu_version; PJ MachineTypeToTPUVersionMap for the 4t machine
    cores_per_chip: int  # the number in the name counts cores (v4, v5p) or chips
    machine_type: str  # the 4-chip machine: every multi-host shape uses it (XPK, PJ)
    # (topology, source): the shapes elastix supports, each with the reference that maps it.
    shapes: tuple[tuple[str, str], ...]


_CUBES = ("2x2x1", "2x2x2", "2x2x4", "2x4x4", "4x4x4", "4x4x8", "4x8x8", "8x8x8")
_PLANES = ("2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
_FAMILIES = (
    # XPK L835-859: v4, TensorCores 2 per chip; each topology is xpk's alias for its size.
    _Family("v4", "v4", (), "tpu-v4-podslice", "tpuv4", 2, "ct4p-hightpu-4t",
            tuple((t, XPK) for t in _CUBES)),
    # XPK L825-834 has 2x4..16x16 on ct5lp-hightpu-4t (so v5litepod-8 is 2 hosts x 4 chips).
    # 2x2 (v5litepod-4) is in PJ's ValidTpuTopologiesMap for ct5lp-hightpu-4t only; xpk has none.
    _Family("v5e", "v5litepod", ("v5e",), "tpu-v5-lite-podslice", "tpuv5e", 1, "ct5lp-hightpu-4t",
            (("2x2", PJ), *((t, XPK) for t in _PLANES))),
    # XPK L717-824: v5p; PJ's ct5p-hightpu-4t topologies are the same set.
    _Family("v5p", "v5p", (), "tpu-v5p-slice", "tpuv5", 2, "ct5p-hightpu-4t",
            tuple((t, XPK) for t in _CUBES)),
    # XPK L706-716: 2x2..16x16 on ct6e-standard-4t (v6e-8 is 2 hosts x 4 chips, tpuv6e:2x4).
    _Family("v6e", "v6e", (), "tpu-v6e-slice", "tpuv6e", 1, "ct6e-standard-4t",
            (("2x2", XPK), *((t, XPK) for t in _PLANES))),
)

# XPK L696-705 is the only reference for a 1-chip v6e slice: ct6e-standard-1t, 1 chip on 1 VM,
# ``tpuv6e:1x1``. PJ would run 1x1 on ct6e-standard-4t asking for 4 chips; pathways-utils has no
# 1t machine. Which instance type the (closed-source) Pathways server wants here is unverified.
_V6E_1 = TpuType("v6e-1", "v6e", 1, "1x1", 1, 1, "tpu-v6e-slice", "ct6e-standard-1t",
                 "tpuv6e:1x1", source=XPK + " (only xpk maps v6e 1x1)")

UNSUPPORTED = {
    # No Pathways reference maps a v5e 1x1 slice: xpk defines no v5e 1x1, pathways-job accepts no
    # ct5lp-hightpu-1t and pathways-utils' map has none (tests/fixtures/*machine_types.json).
    "v5litepod-1": ("v5litepod-1 (v5e 1x1) has no Pathways mapping in xpk, pathways-job or "
                    "pathways-utils, so elastix cannot place it",
                    "use v5litepod-4 (2x2, one host), the smallest v5e shape Pathways supports"),
}
_UNSUPPORTED_SPELLINGS = {"v5litepod-1": "v5litepod-1", "v5litepod-1x1": "v5litepod-1",
                          "v5e-1": "v5litepod-1", "v5e-1x1": "v5litepod-1"}


def _make(fam: _Family, topology: str, source: str) -> TpuType:
    chips = math.prod(int(d) for d in topology.split("x"))
    per_host = min(chips, 4)  # the *-4t machines carry 4 chips (XPK L285-286, PJ L469-472)
    return TpuType(
        name=f"{fam.prefix}-{chips * fam.cores_per_chip}",
        generation=fam.generation,
        chips=chips,
        topology=topology,
        hosts=chips // per_host,
        chips_per_host=per_host,
        accelerator=fam.accelerator,
        machine_type=fam.machine_type,
        pathways_instance_type=f"{fam.pathways}:{topology}",
        source=source,
    )


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, TpuType]:
    """Every known spelling (canonical, topology, alias) mapped to its type."""
    table: dict[str, TpuType] = {}
    for fam in _FAMILIES:
        types = [_make(fam, topo, src) for topo, src in fam.shapes]
        if fam.generation == "v6e":
            types.insert(0, _V6E_1)
        for t in types:
            size = t.name.split("-", 1)[1]
            for prefix in (fam.prefix, *fam.aliases):
                table[f"{prefix}-{size}"] = t
                table[f"{prefix}-{t.topology}"] = t
    return table


def types() -> list[TpuType]:
    """Each supported type once, in catalogue order."""
    return list({t.name: t for t in catalogue().values()}.values())


def closest(name: str, n: int = 3) -> list[str]:
    """Canonical names of the known spellings closest to ``name``."""
    table = catalogue()
    out: list[str] = []
    for key in difflib.get_close_matches(name.strip().lower(), list(table), n=4 * n, cutoff=0.5):
        canon = table[key].name
        if canon not in out:
            out.append(canon)
    return out[:n]


def problem(name: str) -> tuple[str, str] | None:
    """(message, hint) when ``name`` is not a type elastix can place; None when it is."""
    key = name.strip().lower()
    if key in catalogue():
        return None
    if key in _UNSUPPORTED_SPELLINGS:
        return UNSUPPORTED[_UNSUPPORTED_SPELLINGS[key]]
    return f"unknown TPU type {name!r}", unknown_hint(name)


def lookup(name: str) -> TpuType:
    """Resolve a TPU type name.

    Raises:
        UsageError: unknown or unsupported name; the hint names the closest supported types.
    """
    err = problem(name)
    if err is not None:
        raise UsageError(err[0], hint=err[1])
    return catalogue()[name.strip().lower()]


def unknown_hint(name: str) -> str:
    """The hint for an unknown TPU type: the closest matches, or the families."""
    near = closest(name)
    if near:
        return "did you mean " + " or ".join(near) + "?"
    return "known families: v4-N, v5litepod-N (v5e), v5p-N, v6e-N, e.g. v5litepod-16"
