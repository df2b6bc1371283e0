"""A decoder-only transformer in the Qwen3 style, in plain JAX.

RMSNorm, rotary position embeddings, grouped-query attention with per-head RMSNorm on queries and
keys (QK-norm), SwiGLU feed-forward. Layers are stacked on a leading axis and run with
``lax.scan`` so compile time does not grow with depth (it dominates CPU tests), or unrolled
(``scan_layers``).
Parameters are float32; activations use ``ModelConfig.dtype`` (bf16 on TPU).

This file is the model; how its heavy parts run is chosen by config from ``kernels/``: the
attention (the plain reference or the TPU kernel), the loss (whole or in vocabulary tiles) and
the rematerialisation policy, over the intermediate values named here with
``checkpoint_name`` (MaxText's names).
"""

from __future__ import annotations

import dataclasses
import math
import os

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

from elastix_trainer.kernels import attention, loss, remat
from elastix_trainer.kernels.attention import BLOCK as SA_BLOCK
from elastix_trainer.kernels.attention import FUSED_BWD as SA_FUSED_BWD


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
    """Use the embedding table as the output projection (Qwen3-0.6B, 1.7B and 4B do; 8B and
    Llama 3.1 8B do not)."""
    norm_eps: float = 1e-6
    """RMSNorm epsilon."""
    qk_norm: bool = True
    """RMSNorm over each query and key head before the rotary embedding (Qwen3; Llama has
    none)."""
    rope_scaling: tuple[float, float, float, int] | None = None
    """Llama 3's RoPE frequency scaling: (factor, low_freq_factor, high_freq_factor,
    original_max_position_embeddings); None: the plain frequencies."""
    dtype: str = "float32"
    """Activation dtype: ``float32`` or ``bfloat16``."""
    attention: str = "dot_product"
    """Resolved attention kernel: ``dot_product`` or ``flash`` (``kernels.attention``)."""
    remat_policy: str = "none"
    """Resolved rematerialisation policy of the layers (``kernels.remat``)."""
    num_vocab_tiling: int = 1
    """Tiles the loss's logits are computed in (``kernels.loss``); 1 (or 0): whole. ``0`` from
    the config means auto, made concrete by ``fit.choose`` before a step is compiled."""
    sa_block: int = SA_BLOCK
    """The splash kernel's block size, every block alike (MaxText's ``sa_block_*``)."""
    sa_fused_bwd: bool = SA_FUSED_BWD
    """The splash kernel's one backward kernel (MaxText's ``sa_use_fused_bwd_kernel``)."""
    scan_layers: bool = True
    """The layers as one ``lax.scan`` (MaxText's ``scan_layers``), or unrolled."""


PRESETS: dict[str, ModelConfig] = {
    # CI size: compiles in about a second on 2 cores.
    "tiny": ModelConfig(vocab_size=512, d_model=64, num_layers=2, num_heads=4, num_kv_heads=2,
                        head_dim=16, ffn_dim=128),
    "small": ModelConfig(vocab_size=512, d_model=128, num_layers=4, num_heads=4, num_kv_heads=2,
                         head_dim=32, ffn_dim=384),
    # About 108 M parameters: params + AdamW moments ~ 1.3 GB, for checkpoint benchmarks.
    # Heads of 128, as Qwen3's and Llama's: a TPU's matrix unit is 128 wide, and at head_dim
    # 64 the splash kernels filled half of it. The same widths and FLOPs as the 16/8x64 it had
    # until 12-07; on a v5e chip (batch 8, layers unrolled) 49.9 -> 61.2 % of peak
    # (docs/benchmarks.md). Its checkpoints from before are refused (their q_norm differs).
    "bench-1g": ModelConfig(vocab_size=32_000, d_model=1024, num_layers=6, num_heads=8,
                            num_kv_heads=4, head_dim=128, ffn_dim=3072),
    # The published models' shapes, from their config.json (huggingface.co/Qwen/Qwen3-*,
    # huggingface.co/meta-llama/Llama-3.1-8B); tests/trainer/test_presets.py checks their
    # parameter counts against the model cards'. MaxText names them alike
    # (src/maxtext/configs/models/<name>.yml).
    "qwen3-0.6b": ModelConfig(vocab_size=151_936, d_model=1024, num_layers=28, num_heads=16,
                              num_kv_heads=8, head_dim=128, ffn_dim=3072),
    "qwen3-1.7b": ModelConfig(vocab_size=151_936, d_model=2048, num_layers=28, num_heads=16,
                              num_kv_heads=8, head_dim=128, ffn_dim=6144),
    # The seed's model: 4.02 B parameters, a 48.3 GB state (parameters and AdamW's moments).
    "qwen3-4b": ModelConfig(vocab_size=151_936, d_model=2560, num_layers=36, num_heads=32,
                            num_kv_heads=8, head_dim=128, ffn_dim=9728),
    "qwen3-8b": ModelConfig(vocab_size=151_936, d_model=4096, num_layers=36, num_heads=32,
                            num_kv_heads=8, head_dim=128, ffn_dim=12288, tie_embeddings=False),
    "llama3.1-8b": ModelConfig(vocab_size=128_256, d_model=4096, num_layers=32, num_heads=32,
                               num_kv_heads=8, head_dim=128, ffn_dim=14336, rope_theta=500_000.0,
                               tie_embeddings=False, norm_eps=1e-5, qk_norm=False,
                               rope_scaling=(8.0, 1.0, 4.0, 8192)),
}


def from_file(path: str) -> ModelConfig:
    """The model a Hugging Face ``config.json`` describes (local or ``gs://``), Qwen3 or Llama
    (``elastix.protocol.modelconfig``: anything else is refused by name).

    Raises:
        UsageError: unreadable, not a config.json, or a field the trainer does not implement.
    """
    from elastix.errors import UsageError
    from elastix.protocol import modelconfig
    from elastix_trainer import storage

    try:
        root = storage.epath(path)
        if not storage.is_gcs(path) and not os.path.isfile(path):
            raise FileNotFoundError(path)
        text = root.read_bytes()[:modelconfig.MAX_CONFIG_BYTES + 1].decode("utf-8", "replace")
    except Exception as e:  # noqa: BLE001 - any reason: one line
        why = "not found" if isinstance(e, FileNotFoundError) else \
            f"cannot read it ({type(e).__name__}: {(str(e).splitlines() or [''])[0][:120]})"
        raise UsageError(f"--model-config {path}: {why}",
                         hint="give a model's config.json (a local path or gs:// URL)") from None
    try:
        return ModelConfig(**modelconfig.read(text, path))
    except modelconfig.ModelConfigProblem as e:
        raise UsageError(f"--model-config {path}: {e.field}: {e.message}", hint=e.hint) from None


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
            "mlp_norm": jnp.ones((L, d), jnp.float32),
            "w_gate": dense((L, d, cfg.ffn_dim), d),
            "w_up": dense((L, d, cfg.ffn_dim), d),
            "w_down": dense((L, cfg.ffn_dim, d), cfg.ffn_dim) / math.sqrt(2 * L),
        },
    }
    if cfg.qk_norm:
        params["layers"]["q_norm"] = jnp.ones((L, cfg.head_dim), jnp.float32)
        params["layers"]["k_norm"] = jnp.ones((L, cfg.head_dim), jnp.float32)
    if not cfg.tie_embeddings:
        params["lm_head"] = dense((d, cfg.vocab_size), d)
    return params


def _rms_norm(x: jax.Array, scale: jax.Array, eps: float) -> jax.Array:
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (normed * scale).astype(x.dtype)


def rope_frequencies(head_dim: int, theta: float,
                     scaling: tuple[float, float, float, int] | None = None) -> jax.Array:
    """The rotary embedding's [head_dim / 2] frequencies (float32); with ``scaling``, Llama 3's
    (``transformers``' ``_compute_llama3_parameters``): wavelengths longer than the original
    context / low_freq_factor slowed by ``factor``, shorter than / high_freq_factor kept, those
    between blended."""
    half = head_dim // 2
    freqs = 1.0 / (theta ** (jnp.arange(half, dtype=jnp.float32) / half))
    if scaling is None:
        return freqs
    factor, low, high, original = scaling
    wavelen = 2 * math.pi / freqs
    smooth = (original / wavelen - low) / (high - low)
    blended = (1 - smooth) * freqs / factor + smooth * freqs
    return jnp.where(wavelen < original / high, freqs,
                     jnp.where(wavelen > original / low, freqs / factor, blended))


def _rope_tables(seq: int, head_dim: int, theta: float,
                 scaling: tuple[float, float, float, int] | None = None
                 ) -> tuple[jax.Array, jax.Array]:
    """sin and cos [seq, head_dim / 2] (float32), computed once per forward pass."""
    freqs = rope_frequencies(head_dim, theta, scaling)
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * freqs[None, :]
    return jnp.sin(angles), jnp.cos(angles)


def _rope(x: jax.Array, sin: jax.Array, cos: jax.Array) -> jax.Array:
    """Rotary embedding over the last axis of ``x`` [batch, heads, seq, head_dim]."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half].astype(jnp.float32), x[..., half:].astype(jnp.float32)
    out = jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
    return out.astype(x.dtype)


def _heads(x: jax.Array, w: jax.Array, heads: int, name: str) -> jax.Array:
    """``x`` [b, s, d] projected by ``w`` [d, heads * head_dim] to [b, heads, s, head_dim]."""
    w = w.reshape(w.shape[0], heads, -1).astype(x.dtype)
    return checkpoint_name(jnp.einsum("bsd,dhk->bhsk", x, w), name)


def _block(cfg: ModelConfig, h: jax.Array, p: dict, rope: tuple, mesh) -> jax.Array:
    dt = h.dtype
    b, s, _ = h.shape
    x = _rms_norm(h, p["attn_norm"], cfg.norm_eps)
    q = _heads(x, p["wq"], cfg.num_heads, "query_proj")
    k = _heads(x, p["wk"], cfg.num_kv_heads, "key_proj")
    v = _heads(x, p["wv"], cfg.num_kv_heads, "value_proj")
    if cfg.qk_norm:
        q, k = _rms_norm(q, p["q_norm"], cfg.norm_eps), _rms_norm(k, p["k_norm"], cfg.norm_eps)
    q, k = _rope(q, *rope), _rope(k, *rope)
    ctx = attention.attend(cfg.attention, q, k, v, mesh=mesh, block=cfg.sa_block,
                           fused=cfg.sa_fused_bwd)  # [b, heads, s, head_dim]
    wo = p["wo"].reshape(cfg.num_heads, cfg.head_dim, -1).astype(dt)
    h = h + checkpoint_name(jnp.einsum("bhsk,hkd->bsd", ctx, wo), "out_proj")
    x = _rms_norm(h, p["mlp_norm"], cfg.norm_eps)
    gate = checkpoint_name(x @ p["w_gate"].astype(dt), "mlpwi_0")
    up = checkpoint_name(x @ p["w_up"].astype(dt), "mlpwi_1")
    return h + checkpoint_name((jax.nn.silu(gate) * up) @ p["w_down"].astype(dt), "mlpwo")


def hidden_states(cfg: ModelConfig, params: dict, tokens: jax.Array, mesh=None) -> jax.Array:
    """The final normed hidden states [batch, seq, d_model] for ``tokens`` [batch, seq].

    ``mesh``: the step's mesh, for the kernels that run per device (``kernels.attention``).
    """
    dt = jnp.dtype(cfg.dtype)
    h = params["embed"][tokens].astype(dt)  # gather in float32: its gradient scatters there
    rope = _rope_tables(tokens.shape[1], cfg.head_dim, cfg.rope_theta, cfg.rope_scaling)

    def layer(carry, layer_params):
        return _block(cfg, carry, layer_params, rope, mesh), None

    step = remat.wrap(layer, cfg.remat_policy)
    if cfg.scan_layers:
        h, _ = jax.lax.scan(step, h, params["layers"])
    else:  # the same layers, the same parameters (stacked), one after another
        for i in range(cfg.num_layers):
            h, _ = step(h, jax.tree.map(lambda x, i=i: x[i], params["layers"]))
    return _rms_norm(h, params["final_norm"], cfg.norm_eps)


def output_head(cfg: ModelConfig, params: dict) -> jax.Array:
    """The output projection [d_model, vocab] in the activation dtype."""
    head = params["embed"].T if cfg.tie_embeddings else params["lm_head"]
    return head.astype(jnp.dtype(cfg.dtype))


def forward(cfg: ModelConfig, params: dict, tokens: jax.Array, mesh=None) -> jax.Array:
    """Logits (float32) [batch, seq, vocab] for ``tokens`` [batch, seq], whole: for tests and
    inspection; training never materialises them (``loss_fn``)."""
    h = hidden_states(cfg, params, tokens, mesh)
    return jnp.dot(h, output_head(cfg, params), preferred_element_type=jnp.float32)


def loss_fn(cfg: ModelConfig, params: dict, batch: jax.Array, mesh=None) -> jax.Array:
    """Mean next-token cross-entropy of ``batch`` [batch, seq + 1], the logits in
    ``cfg.num_vocab_tiling`` tiles (``kernels.loss``)."""
    inputs, targets = batch[:, :-1], batch[:, 1:]
    h = hidden_states(cfg, params, inputs, mesh)
    return loss.cross_entropy(h, output_head(cfg, params), targets, cfg.num_vocab_tiling)


def flops_per_step(cfg: ModelConfig, global_batch: int, seq_len: int) -> float:
    """Training FLOPs of one step (forward + backward = 3 x forward), MaxText's accounting.

    Matmul FLOPs: 6 x (weights touched per token) x tokens, plus causal attention: 6 x layers x
    heads x head_dim x seq per token, half the non-causal count, as MaxText has counted it
    since July 2025 (``maxtext@e591f30:src/maxtext/utils/maxtext_utils.py``,
    ``calculate_tflops_training_per_device``: ``causal_attention_flops = noncausal / 2``).
    The model's FLOPs only: what a remat policy computes again is not counted.
    """
    d, L = cfg.d_model, cfg.num_layers
    q_dim, kv_dim = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    per_layer = d * q_dim + 2 * d * kv_dim + q_dim * d + 3 * d * cfg.ffn_dim
    weights = L * per_layer + d * cfg.vocab_size  # the output projection
    tokens = global_batch * seq_len
    causal_attention = 6 * L * q_dim * seq_len
    return float(tokens) * (6 * weights + causal_attention)
