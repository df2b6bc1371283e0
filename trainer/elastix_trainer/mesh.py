"""Slices and meshes.

On TPU (directly or through Pathways) each device knows its ``slice_index``. CPU devices do not,
so a *slice provider* groups them: ``ELASTIX_NUM_SLICES`` x ``ELASTIX_DEVICES_PER_SLICE`` (set by
the local backend), else the trainer's ``--num-slices`` flag. The mesh is ('slice', 'data'):
data parallel across slices, FSDP within a slice, so every slice holds a full replica of the
state and any subset of slices can carry on.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from elastix.errors import UsageError
from elastix.protocol import envvars

MESH_AXES = ("slice", "data")
BATCH_SPEC = P(("slice", "data"))


def _env_int(name: str) -> int | None:
    raw = os.environ.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"{name}={raw!r} is not an integer", hint=f"unset {name} or set a count") from None


def slice_devices(
    num_slices: int | None = None, devices: Sequence[jax.Device] | None = None
) -> dict[int, list[jax.Device]]:
    """Map slice id -> devices of that slice.

    Args:
        num_slices: for devices without ``slice_index`` (CPU): how many slices to make, used when
            ``ELASTIX_NUM_SLICES`` is not set. Defaults to 1.
        devices: defaults to ``jax.devices()``.
    """
    devices = list(jax.devices() if devices is None else devices)
    if all(hasattr(d, "slice_index") and d.slice_index is not None for d in devices):
        groups: dict[int, list[jax.Device]] = {}
        for d in devices:
            groups.setdefault(int(d.slice_index), []).append(d)
        # One machine's chips under the local backend (ELASTIX_LOCAL_PLATFORM): one physical
        # slice, divided among the workload's slices as CPU devices are.
        local = os.environ.get(envvars.LOCAL_HEALTH) and len(groups) == 1 and \
            (_env_int(envvars.NUM_SLICES) or 1) > 1
        if not local:
            return {k: sorted(v, key=lambda d: d.id) for k, v in sorted(groups.items())}
    n = _env_int(envvars.NUM_SLICES) or num_slices or 1
    per = _env_int(envvars.DEVICES_PER_SLICE) or len(devices) // max(n, 1)
    if n < 1 or per < 1 or n * per > len(devices):
        cpu = all(d.platform == "cpu" for d in devices)
        raise UsageError(
            f"cannot make {n} slices x {per} devices from {len(devices)} devices",
            hint="set XLA_FLAGS=--xla_force_host_platform_device_count=<slices x devices>"
            if cpu else f"this machine has {len(devices)} {devices[0].platform} chips: give "
            f"--num-slices {len(devices)} or fewer (a slice is at least one chip)",
        )
    devices = sorted(devices, key=lambda d: d.id)
    return {s: devices[s * per:(s + 1) * per] for s in range(n)}


def build_mesh(slices: Mapping[int, Sequence[jax.Device]], use: Iterable[int]) -> Mesh:
    """A ('slice', 'data') mesh over the slices ``use`` (any subset, in id order)."""
    ids = sorted(set(use))
    if not ids:
        raise ValueError("a mesh needs at least one slice")
    rows = [list(slices[i]) for i in ids]
    if len({len(r) for r in rows}) != 1:
        raise ValueError("all slices of a mesh must have the same number of devices")
    return Mesh(np.array(rows, dtype=object), MESH_AXES)


def param_spec(shape: tuple[int, ...], data_size: int) -> P:
    """FSDP within a slice: shard the largest axis divisible by the 'data' size, replicate across
    slices (so a lost slice never takes the only copy of a shard with it)."""
    if data_size == 1 or not shape:
        return P()
    candidates = [i for i, n in enumerate(shape) if n % data_size == 0 and n >= data_size]
    if not candidates:
        return P()
    axis = max(candidates, key=lambda i: (shape[i], -i))
    spec = [None] * len(shape)
    spec[axis] = "data"
    return P(*spec)


def state_shardings(mesh: Mesh, abstract_state) -> object:
    """NamedShardings for every leaf of a state pytree (of ShapeDtypeStructs or arrays)."""
    data_size = mesh.shape["data"]
    return jax.tree.map(
        lambda x: NamedSharding(mesh, param_spec(tuple(x.shape), data_size)), abstract_state
    )


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Batch rows split over every device of the mesh."""
    return NamedSharding(mesh, BATCH_SPEC)


def num_devices(mesh: Mesh) -> int:
    """Devices in the mesh."""
    return math.prod(mesh.devices.shape)


def on_pathways() -> bool:
    """True when JAX talks to Pathways through the IFRT proxy."""
    return "proxy" in os.environ.get("JAX_PLATFORMS", "")
