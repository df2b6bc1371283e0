"""What a TPU chip offers a program, by the ``device_kind`` JAX reports for it (stdlib: the
launcher judges MaxText's compile by it, the trainer its own).

A real chip says how much memory a program may take (``memory_stats()["bytes_limit"]``); the
abstract devices of a topology compiled for without a chip (``jax.experimental.topologies``)
do not. The fit check (``fitcheck``) needs that figure to judge a step, and ``fit.device_limit``
reads it from here when the device cannot say. Each figure says where it comes from: read on a
chip, or the generation's published HBM less the share v5e's runtime keeps for itself.

The peak (dense bf16) and the HBM bandwidth are Cloud TPU's published figures (its system
architecture pages, cloud.google.com/tpu/docs/v4, v5e, v5p, v6e); a step's TFLOP/s are measured
against the peak, and ``predict`` paces the optimizer's update by the bandwidth.
"""

from __future__ import annotations

import dataclasses

GIB = 1 << 30


@dataclasses.dataclass(frozen=True)
class Chip:
    """One TPU generation as a program sees a chip of it."""

    generation: str
    """The generation's short name, as TPU types spell it (``v5e``)."""
    device_kind: str
    """What ``jax.Device.device_kind`` says (``TPU v5 lite``)."""
    hbm: int
    """The chip's HBM, as published."""
    limit: int
    """Bytes a program may take (the runtime keeps the rest)."""
    limit_source: str
    """Where :attr:`limit` comes from."""
    peak_flops: float
    """Dense bf16 FLOP/s a chip."""
    hbm_bandwidth: float
    """HBM bytes a second a chip, as published."""
    topology_prefix: str
    """The generation's name in a topology string (``v5e:4x4``)."""


V5E_LIMIT = 16_909_336_064
"""``bytes_limit`` of a v5e chip's 16 GiB, read on a chip (JAX 0.10.2, libtpu 0.0.42.1,
2026-12-07): 15.75 GiB, 1.6 % kept by the runtime."""
_KEPT = 1 - V5E_LIMIT / (16 * GIB)


def _unread(hbm_gib: int) -> int:
    return int(hbm_gib * GIB * (1 - _KEPT))


CHIPS: dict[str, Chip] = {c.device_kind: c for c in (
    Chip("v5e", "TPU v5 lite", 16 * GIB, V5E_LIMIT, "read on a v5e chip", 197e12, 819e9,
         "v5e"),
    Chip("v6e", "TPU v6 lite", 32 * GIB, _unread(32),
         "32 GiB less v5e's runtime share (not read on a chip)", 918e12, 1640e9, "v6e"),
    Chip("v5p", "TPU v5", 95 * GIB, _unread(95),
         "95 GiB less v5e's runtime share (not read on a chip)", 459e12, 2765e9, "v5p"),
    Chip("v4", "TPU v4", 32 * GIB, _unread(32),
         "32 GiB less v5e's runtime share (not read on a chip)", 275e12, 1200e9, "v4"),
)}
BY_GENERATION = {c.generation: c for c in CHIPS.values()}


def by_kind(device_kind: str) -> Chip | None:
    """The chip JAX calls ``device_kind``; None for one not listed (CPU, an unknown TPU)."""
    return CHIPS.get(device_kind)
