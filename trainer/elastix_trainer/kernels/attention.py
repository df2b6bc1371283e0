"""Causal grouped-query attention: the plain reference and JAX's Pallas TPU splash kernel.

Both take ``q`` ``[batch, heads, seq, head_dim]`` and ``k``, ``v`` ``[batch, kv_heads, seq,
head_dim]`` (heads before the sequence, as the kernel and MaxText's flash path take them), apply
the ``1/sqrt(head_dim)`` scale themselves, and return ``[batch, heads, seq, head_dim]``.

- :func:`dot_product` materialises the ``[batch, heads, seq, seq]`` scores in float32: the
  reference the kernel is tested against, and what runs on CPU.
- :func:`flash` runs ``jax.experimental.pallas.ops.tpu.splash_attention`` (the kernel MaxText's
  ``attention=flash`` runs on TPU: ``maxtext@e591f30:src/maxtext/layers/attention_op.py``),
  vmapped over the batch and, on a mesh of several devices, inside ``shard_map`` over the
  batch's mesh axes (a Pallas call is opaque to XLA's partitioner). Its output is named
  ``context`` for the remat policies, as MaxText names it. On CPU it runs only in Pallas'
  interpreter (``interpret=True``), which the tests use.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

BLOCK = 1024
"""Splash block size (query, key/value, and the backward's), clipped to the sequence. On a v5e
chip (JAX 0.10.2, 2026-12-06, fused backward) 1024 ran qwen3-0.6b at seq 2048 2.4 % faster than
512, MaxText's ``sa_block_*`` default (``base.yml:1159-1166``), seq 1024 alike, bench-1g 0.6 %
slower; 2048 ran out of the kernel's scoped VMEM at compile; 256 ran bench-1g 16 % slower; 128,
the kernel's own default, ran the forward at half the speed of the plain path
(``../shared/tpu/README.md``)."""

FUSED_BWD = True
"""One backward kernel for dq, dk and dv (the kernel's ``use_fused_bwd_kernel``; MaxText's
``sa_use_fused_bwd_kernel``, False in its ``base.yml``, True in its newer configs). On a v5e
chip (JAX 0.10.2, 2026-12-06) it made qwen3-0.6b's step 4.2 % faster (0.7583 → 0.7265 s) and
bench-1g's 4.3 %, with less memory; blocks of 1024 instead of 512 changed under 0.7 %."""


def resolve(name: str, platform: str, seq_len: int, head_dim: int) -> str:
    """``autoselected`` made concrete for ``platform``; an explicit name is returned as given
    (``flash`` off TPU is refused by :func:`check`)."""
    if name != "autoselected":
        return name
    return "flash" if platform == "tpu" and not flash_unfit(seq_len, head_dim) else "dot_product"


def flash_unfit(seq_len: int, head_dim: int) -> str | None:
    """Why the splash kernel cannot take this shape (None: it can)."""
    if seq_len % 128:
        return f"--seq-len {seq_len} is not a multiple of 128 (the kernel's smallest block)"
    if head_dim % 64:
        return f"a head_dim of {head_dim} is not a multiple of 64"
    return None


def check(name: str, platform: str, seq_len: int, head_dim: int) -> str | None:
    """Why ``name`` cannot run here (None: it can): one line for the config error."""
    if name != "flash":
        return None
    if platform != "tpu":
        return (f"--attention flash is a TPU kernel and this run is on {platform}; "
                "use dot_product (or autoselected, which picks per platform)")
    unfit = flash_unfit(seq_len, head_dim)
    return f"--attention flash cannot run: {unfit}" if unfit else None


def dot_product(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
    """Causal attention over materialised float32 scores (the reference)."""
    b, h, s, d = q.shape
    kv = k.shape[1]
    qg = q.reshape(b, kv, h // kv, s, d)
    scores = jnp.einsum("bkgqd,bksd->bkgqs", qg, k, preferred_element_type=jnp.float32)
    scores = scores / math.sqrt(d)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    scores = jnp.where(causal, scores, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(scores, axis=-1).astype(v.dtype)
    out = jnp.einsum("bkgqs,bksd->bkgqd", probs, v)
    return out.reshape(b, h, s, d)


def _splash(heads: int, seq_len: int, block: int, fused: bool, interpret: bool):
    """The splash kernel for one example (``[heads, seq, head_dim]``), causal. Built in each
    trace, never cached across them: the kernel holds its mask's block tables as arrays, and a
    kernel kept from an earlier trace makes them constants closed over from outside, which JAX
    0.10 hoists into extra arguments that an ahead-of-time compiled step is then not called
    with ("compiled for 48 inputs but called with 43", seen on a v5e chip)."""
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_kernel as sk,
    )
    from jax.experimental.pallas.ops.tpu.splash_attention import (
        splash_attention_mask as sm,
    )

    b = min(block, seq_len)
    dq = None if fused else b  # the fused backward computes dq in the dkv kernel
    blocks = sk.BlockSizes(block_q=b, block_kv=b, block_kv_compute=b, block_q_dkv=b,
                           block_kv_dkv=b, block_kv_dkv_compute=b, block_q_dq=dq,
                           block_kv_dq=dq, use_fused_bwd_kernel=fused)
    mask = sm.MultiHeadMask(masks=(sm.CausalMask(shape=(seq_len, seq_len)),) * heads)
    return sk.make_splash_mha(mask=mask, block_sizes=blocks, head_shards=1, q_seq_shards=1,
                              residual_checkpoint_name="context", interpret=interpret)


def flash(q: jax.Array, k: jax.Array, v: jax.Array, *, mesh=None, block: int = BLOCK,
          fused: bool = FUSED_BWD, interpret: bool = False) -> jax.Array:
    """Causal attention with the splash kernel (never materialises the scores).

    Args:
        mesh: the step's mesh; with more than one device the kernel runs per device on its
            rows of the batch (``shard_map``), the batch being split over every mesh axis.
        block: the kernel's block size (clipped to the sequence length).
        fused: one backward kernel for dq, dk and dv.
        interpret: run the kernel in Pallas' interpreter (CPU tests).
    """
    _, h, s, d = q.shape
    kernel = _splash(h, s, block, fused, interpret)
    scale = jnp.asarray(1.0 / math.sqrt(d), q.dtype)

    def per_device(q, k, v):
        return jax.vmap(kernel)(q * scale, k, v)

    if mesh is None or mesh.devices.size == 1:
        return per_device(q, k, v)
    rows = P(tuple(mesh.axis_names))
    return jax.shard_map(per_device, mesh=mesh, in_specs=(rows, rows, rows), out_specs=rows,
                         check_vma=False)(q, k, v)


def attend(name: str, q: jax.Array, k: jax.Array, v: jax.Array, *, mesh=None,
           block: int = BLOCK, fused: bool = FUSED_BWD) -> jax.Array:
    """The one place the model's attention is chosen: ``name`` is a resolved choice (``block``
    and ``fused``: the splash kernel's, ignored by the plain path)."""
    if name == "flash":
        return flash(q, k, v, mesh=mesh, block=block, fused=fused)
    if name == "dot_product":
        return dot_product(q, k, v)
    raise ValueError(f"unknown attention {name!r}")
