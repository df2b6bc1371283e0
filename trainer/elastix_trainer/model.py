"""A decoder-only transformer in the Qwen3 style, in plain JAX.

RMSNorm, rotary position embeddings, grouped-query attention with per-head RMSNorm on queries and
keys (QK-norm), SwiGLU feed-forward. Layers are stacked on a leading axis and run with
``lax.scan`` so compile time does not grow with depth (it dominates CPU tests).
Parameters are float32; activations use ``ModelConfig.dtype`` (bf16 on TPU).
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    """Shape of the model (hashable, so compiled steps can be cached by it)."""

    vocab_size: int
    """Rows of the embedding table (>= the tokenizer's vocabulary)."""
    d_model: int
    """Width of the residual stream."""
    num_layers: int
    """Number of transformer blocks."""
    num_heads: int
    """Query heads."""
    num_kv_heads: int
    """Key/value heads (grouped-query attention); divides ``num_heads``."""
    head_dim: int
    """Width of one attention head."""
    ffn_dim: int
    """Hidden width of the SwiGLU feed-forward."""
    rope_theta: float = 1_000_000.0
    """RoPE base frequency (Qwen3 uses 1e6)."""
    tie_embeddings: bool = True
    """Use the embedding table as the output projection (Qwen3-0.6B does)."""
    norm_eps: float = 1e-6
    """RMSNorm epsilon."""
    dtype: str = "float32"
    """Activation dtype: ``float32`` or ``bfloat16``."""


PRESETS: dict[str, ModelConfig] = {
    # CI size: compiles in about a second on 2 cores.
    "tiny": ModelConfig(vocab_size=512, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2,
                        head_dim=16, ffn_dim=128),
    "small": ModelConfig(vocab_size=512, d_model=128, num_layers=4, num_heads=4, num_kv_heads=2,
                         head_dim=32, ffn_dim=384),
    # About 108 M parameters: params + AdamW moments ~ 1.3 GB, for checkpoint benchmarks.
    "bench-1g": ModelConfig(vocab_size=32_000, d_model=1024, num_layers=6, num_heads=16,
                            num_kv_heads=8, head_dim=64, ffn_dim=3072),
    # The real Qwen3-0.6B shape.
    "qwen3-0.6b": ModelConfig(vocab_size=151_936, d_model=1024, num_layers=28, num_heads=16,
                              num_kv_heads=8, head_dim=128, ffn_dim=3072),
}


def init_params(cfg: ModelConfig, key: jax.Array) -> dict:
    """Initial parameters (float32), layers stacked on axis 0."""
    d, L = cfg.d_model, cfg.num_layers
    q_dim, kv_dim = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    keys = iter(jax.random.split(key, 9))

    def dense(shape, fan_in):
        return jax.random.normal(next(keys), shape, jnp.float32) / math.sqrt(fan_in)

    params = {
        "embed": jax.random.normal(next(keys), (cfg.vocab_size, d), jnp.float32) * 0.02,
        "final_norm": jnp.ones((d,), jnp.float32),
        "layers": {
            "attn_norm": jnp.ones((L, d), jnp.float32),
            "wq": dense((L, d, q_dim), d),
            "wk": dense((L, d, kv_dim), d),
            "wv": dense((L, d, kv_dim), d),
            "wo": dense((L, q_dim, d), q_dim) / math.sqrt(2 * L),
            "q_norm": jnp.ones((L, cfg.head_dim), jnp.float32),
            "k_norm": jnp.ones((L, cfg.head_dim), jnp.float32),
            "mlp_norm": jnp.ones((L, d), jnp.float32),
            "w_gate": dense((L, d, cfg.ffn_dim), d),
            "w_up": dense((L, d, cfg.ffn_dim), d),
            "w_down": dense((L, cfg.ffn_dim, d), cfg.ffn_dim) / math.sqrt(2 * L),
        },
    }
    if not cfg.tie_embeddings:
        params["lm_head"] = dense((d, cfg.vocab_size), d)
    return params


def _rms_norm(x: jax.Array, scale: jax.Array, eps: float) -> jax.Array:
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (normed * scale).astype(x.dtype)


def _rope(x: jax.Array, theta: float) -> jax.Array:
    """Rotary embedding over the last axis of ``x`` [batch, seq, heads, head_dim]."""
    seq, half = x.shape[1], x.shape[-1] // 2
    freqs = 1.0 / (theta ** (jnp.arange(half, dtype=jnp.float32) / half))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * freqs[None, :]
    sin, cos = jnp.sin(angles)[None, :, None, :], jnp.cos(angles)[None, :, None, :]
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)


def _block(cfg: ModelConfig, h: jax.Array, p: dict) -> jax.Array:
    dt = h.dtype
    b, s, _ = h.shape
    x = _rms_norm(h, p["attn_norm"], cfg.norm_eps)
    q = (x @ p["wq"].astype(dt)).reshape(b, s, cfg.num_heads, cfg.head_dim)
    k = (x @ p["wk"].astype(dt)).reshape(b, s, cfg.num_kv_heads, cfg.head_dim)
    v = (x @ p["wv"].astype(dt)).reshape(b, s, cfg.num_kv_heads, cfg.head_dim)
    q = _rope(_rms_norm(q, p["q_norm"], cfg.norm_eps), cfg.rope_theta)
    k = _rope(_rms_norm(k, p["k_norm"], cfg.norm_eps), cfg.rope_theta)
    group = cfg.num_heads // cfg.num_kv_heads
    q = q.reshape(b, s, cfg.num_kv_heads, group, cfg.head_dim)
    logits = jnp.einsum("bqkgd,bskd->bkgqs", q, k).astype(jnp.float32)
    logits = logits / math.sqrt(cfg.head_dim)
    causal = jnp.tril(jnp.ones((s, s), dtype=bool))
    logits = jnp.where(causal, logits, jnp.finfo(jnp.float32).min)
    probs = jax.nn.softmax(logits, axis=-1).astype(dt)
    attn = jnp.einsum("bkgqs,bskd->bqkgd", probs, v).reshape(b, s, -1)
    h = h + attn @ p["wo"].astype(dt)
    x = _rms_norm(h, p["mlp_norm"], cfg.norm_eps)
    gated = jax.nn.silu(x @ p["w_gate"].astype(dt)) * (x @ p["w_up"].astype(dt))
    return h + gated @ p["w_down"].astype(dt)


def forward(cfg: ModelConfig, params: dict, tokens: jax.Array) -> jax.Array:
    """Logits (float32) for ``tokens`` [batch, seq]."""
    dt = jnp.dtype(cfg.dtype)
    h = params["embed"].astype(dt)[tokens]

    def body(carry, layer_params):
        return _block(cfg, carry, layer_params), None

    h, _ = jax.lax.scan(body, h, params["layers"])
    h = _rms_norm(h, params["final_norm"], cfg.norm_eps)
    head = params["embed"].T if cfg.tie_embeddings else params["lm_head"]
    return (h @ head.astype(dt)).astype(jnp.float32)


def loss_fn(cfg: ModelConfig, params: dict, batch: jax.Array) -> jax.Array:
    """Mean next-token cross-entropy of ``batch`` [batch, seq + 1]."""
    inputs, targets = batch[:, :-1], batch[:, 1:]
    logits = forward(cfg, params, inputs)
    logp = jax.nn.log_softmax(logits, axis=-1)
    picked = jnp.take_along_axis(logp, targets[..., None], axis=-1)[..., 0]
    return -jnp.mean(picked)


def flops_per_step(cfg: ModelConfig, global_batch: int, seq_len: int) -> float:
    """Training FLOPs of one step (forward + backward = 3 x forward), MaxText's accounting.

    Matmul FLOPs: 6 x (weights touched per token) x tokens, plus causal-agnostic attention
    12 x layers x heads x head_dim x seq per token, as MaxText counts it.
    """
    d, L = cfg.d_model, cfg.num_layers
    q_dim, kv_dim = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    per_layer = d * q_dim + 2 * d * kv_dim + q_dim * d + 3 * d * cfg.ffn_dim
    weights = L * per_layer + d * cfg.vocab_size  # the output projection
    tokens = global_batch * seq_len
    attention = 12 * L * q_dim * seq_len
    return float(tokens) * (6 * weights + attention)
