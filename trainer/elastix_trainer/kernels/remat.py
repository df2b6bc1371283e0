"""Rematerialisation policies for the layer scan, by MaxText's ``remat_policy`` names.

A policy says which of a layer's named intermediate values (``kernels.SAVED_NAMES``, given by
``model.py`` with ``checkpoint_name``) the forward pass keeps for the backward pass; the rest
are computed again. ``none`` keeps everything (no ``jax.checkpoint``), ``full`` keeps only the
layer's input. The lists are MaxText's (``maxtext@e591f30:src/maxtext/layers/decoders.py:
346-433``), for the names this model has; its host-offloading policies
(``minimal_offloaded``, ``qkv_proj_offloaded``) are left out: on one chip they move the saved
activations over PCIe every step.

Recomputation is not useful work: the trainer's TFLOP/s count the model's FLOPs only, whatever
the policy (``model.flops_per_step``).
"""

from __future__ import annotations

import jax

_SAVES: dict[str, tuple[str, ...]] = {
    "minimal_with_context": ("query_proj", "key_proj", "value_proj", "out_proj", "mlpwi_0",
                             "mlpwi_1", "mlpwo", "context"),
    "minimal": ("query_proj", "key_proj", "value_proj", "out_proj", "mlpwi_0", "mlpwi_1",
                "mlpwo"),
    "save_dot_except_mlpwi": ("query_proj", "key_proj", "value_proj", "out_proj", "mlpwo"),
    "save_dot_except_mlp": ("query_proj", "key_proj", "value_proj", "out_proj"),
    "save_qkv_proj": ("query_proj", "key_proj", "value_proj"),
    "save_out_proj": ("out_proj",),
    "full": (),
}


def saved_names(policy: str) -> tuple[str, ...] | None:
    """The names ``policy`` keeps (None: everything, ``none``)."""
    if policy == "none":
        return None
    return _SAVES[policy]


def wrap(fn, policy: str):
    """``fn`` (a layer) under ``policy``."""
    names = saved_names(policy)
    if names is None:
        return fn
    return jax.checkpoint(fn, policy=jax.checkpoint_policies.save_only_these_names(*names),
                          prevent_cse=False)


def candidates(platform: str) -> tuple[str, ...]:
    """What ``auto`` tries, in order, until one fits the device's memory: off TPU only ``none``
    (host memory is not the limit; speed is), on TPU from the fastest to ``full``. On TPU
    ``none`` is not first: it also keeps the float32 intermediates of the norms and the rotary
    embedding, whose traffic ``minimal_with_context`` (bf16 matmul outputs only) saves."""
    if platform != "tpu":
        return ("none",)
    return ("minimal_with_context", "minimal", "save_dot_except_mlp", "save_qkv_proj", "full")


def saved_bytes_per_token(policy: str, *, d_model: int, q_dim: int, kv_dim: int, ffn_dim: int,
                          heads: int, seq_len: int, attention: str, itemsize: int = 2) -> int:
    """What one layer keeps per token between the passes under ``policy`` (an estimate: the
    named values' widths, the layer input, and for ``none`` what the compiler keeps besides)."""
    width = {"query_proj": q_dim, "key_proj": kv_dim, "value_proj": kv_dim, "out_proj": d_model,
             "mlpwi_0": ffn_dim, "mlpwi_1": ffn_dim, "mlpwo": d_model, "context": q_dim + 2 * heads}
    names = saved_names(policy)
    if names is None:
        # everything: the norms' outputs, rotated q/k, the context, the SwiGLU product, and
        # for dot_product the float32 scores and probabilities per head
        total = (2 * d_model + 2 * q_dim + 3 * kv_dim + q_dim + 3 * ffn_dim + d_model) * itemsize
        if attention == "dot_product":
            total += heads * seq_len * (4 + itemsize)
        return total
    return (d_model + sum(width[n] for n in names)) * itemsize
