"""A model's shape from a Hugging Face ``config.json``, and its parameter count.

Both halves need the same answer: the trainer builds the model from it
(``elastix-train --model-config``), and the launcher sizes the state a run restores before it
submits anything (``elastix.backends.gke.statesize``), without JAX. So the translation lives
here, in the standard library only (this package's rule), and returns the keyword arguments of
``elastix_trainer.model.ModelConfig``.

The trainer implements the dense decoder of two families (``transformers``' ``Qwen3Config``
and ``LlamaConfig``): RMSNorm, rotary embeddings (Llama 3's frequency scaling included),
grouped-query attention (with per-head RMSNorm on queries and keys in Qwen3), a SwiGLU
feed-forward, tied or untied embeddings. Whatever else a config asks for (experts, sliding
windows, biases, another activation, dropout, another RoPE scaling) is refused by name: a
model that trains but is not the model the file describes is worse than no model.
"""

from __future__ import annotations

import json
import math
from typing import Any

FAMILIES = {"qwen3": True, "llama": False}
"""``model_type`` -> whether the family normalises queries and keys per head (Qwen3 does)."""

MAX_CONFIG_BYTES = 1 << 20
"""A ``config.json`` is a few kilobytes; anything past a megabyte is not one."""


class ModelConfigProblem(ValueError):
    """A config the trainer cannot build: ``field`` names the key, ``hint`` the way out."""

    def __init__(self, field: str, message: str, hint: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field, self.message, self.hint = field, message, hint


def _get(cfg: dict[str, Any], key: str, kind: type, default: Any = None, *,
         required: bool = False) -> Any:
    value = cfg.get(key, default)
    if value is None:
        if required:
            raise ModelConfigProblem(key, "missing", f"a {kind.__name__} is needed; copy the "
                                     "model's own config.json")
        return default
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise ModelConfigProblem(key, f"{value!r} is not a {kind.__name__}",
                                 "copy the model's own config.json")
    if kind in (int, float) and (value <= 0 or not math.isfinite(value)):
        raise ModelConfigProblem(key, f"must be a positive number, got {value!r}",
                                 "copy the model's own config.json")
    return value


def _refuse_if(cond: bool, field: str, value: Any, what: str) -> None:
    if cond:
        raise ModelConfigProblem(field, f"{value!r}: {what}, which elastix-train does not "
                                 "implement", "train a dense Qwen3 or Llama model, or a preset "
                                 "(elastix-train --help lists them)")


def _rope(cfg: dict[str, Any]) -> tuple[float, list[float | int] | None]:
    """(rope_theta, Llama 3's scaling as (factor, low_freq_factor, high_freq_factor,
    original_max_position_embeddings), or None)."""
    params = cfg.get("rope_parameters")  # transformers 5 moves the RoPE keys here
    source = params if isinstance(params, dict) else cfg
    theta = _get(source, "rope_theta", float, 10_000.0)
    scaling = cfg.get("rope_scaling") if not isinstance(params, dict) else params
    if not scaling:
        return theta, None
    if not isinstance(scaling, dict):
        raise ModelConfigProblem("rope_scaling", f"{scaling!r} is not a mapping",
                                 "copy the model's own config.json")
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return theta, None
    _refuse_if(kind != "llama3", "rope_scaling", kind, "a RoPE scaling other than llama3's")
    return theta, [_get(scaling, "factor", float, required=True),
                   _get(scaling, "low_freq_factor", float, required=True),
                   _get(scaling, "high_freq_factor", float, required=True),
                   _get(scaling, "original_max_position_embeddings", int, required=True)]


def from_hf(cfg: dict[str, Any]) -> dict[str, Any]:
    """``ModelConfig``'s keyword arguments for a Hugging Face ``config.json`` of the Qwen3 or
    Llama family (module docstring).

    Raises:
        ModelConfigProblem: the first field the trainer does not implement, or a missing one.
    """
    if not isinstance(cfg, dict):
        raise ModelConfigProblem("config", "not a JSON object", "give a model's config.json")
    family = cfg.get("model_type")
    if family not in FAMILIES:
        moe = isinstance(family, str) and "moe" in family
        raise ModelConfigProblem(
            "model_type", f"{family!r} is " + ("a mixture of experts, which elastix-train does "
                                              "not implement" if moe else
                                              "not a family elastix-train implements"),
            "train a dense Qwen3 or Llama model (model_type qwen3 or llama), or a preset")
    for key in ("num_experts", "num_local_experts", "n_routed_experts"):
        _refuse_if(bool(cfg.get(key)), key, cfg.get(key), "a mixture of experts")
    _refuse_if(bool(cfg.get("use_sliding_window")), "use_sliding_window", True,
               "sliding-window attention")
    if family == "llama":  # Qwen3 names a window it only uses with use_sliding_window
        _refuse_if(bool(cfg.get("sliding_window")), "sliding_window", cfg.get("sliding_window"),
                   "sliding-window attention")
    layer_types = cfg.get("layer_types") or ()
    odd = [t for t in layer_types if t != "full_attention"]
    _refuse_if(bool(odd), "layer_types", odd[:1] and odd[0], "layers other than full attention")
    for key in ("attention_bias", "mlp_bias"):
        _refuse_if(bool(cfg.get(key)), key, cfg.get(key), "biases")
    act = cfg.get("hidden_act", "silu")
    _refuse_if(act != "silu", "hidden_act", act, "an activation other than SwiGLU's silu")
    for key in ("attention_dropout", "hidden_dropout"):
        _refuse_if(bool(cfg.get(key)), key, cfg.get(key), "dropout")
    d = _get(cfg, "hidden_size", int, required=True)
    heads = _get(cfg, "num_attention_heads", int, required=True)
    kv = _get(cfg, "num_key_value_heads", int, heads)
    if heads % kv:
        raise ModelConfigProblem("num_key_value_heads", f"{kv} does not divide "
                                 f"num_attention_heads {heads}", "copy the model's own "
                                 "config.json")
    if "head_dim" not in cfg and d % heads:
        raise ModelConfigProblem("head_dim", f"missing, and hidden_size {d} is no multiple of "
                                 f"num_attention_heads {heads}", "give head_dim")
    head_dim = _get(cfg, "head_dim", int, d // heads)
    if head_dim % 2:
        raise ModelConfigProblem("head_dim", f"{head_dim} is odd: rotary embeddings rotate "
                                 "pairs", "copy the model's own config.json")
    theta, scaling = _rope(cfg)
    return {
        "vocab_size": _get(cfg, "vocab_size", int, required=True),
        "d_model": d,
        "num_layers": _get(cfg, "num_hidden_layers", int, required=True),
        "num_heads": heads,
        "num_kv_heads": kv,
        "head_dim": head_dim,
        "ffn_dim": _get(cfg, "intermediate_size", int, required=True),
        "rope_theta": theta,
        "rope_scaling": tuple(scaling) if scaling else None,
        "tie_embeddings": _get(cfg, "tie_word_embeddings", bool, False),
        "norm_eps": _get(cfg, "rms_norm_eps", float, 1e-6),
        "qk_norm": FAMILIES[family],
    }


def read(text: str, where: str) -> dict[str, Any]:
    """:func:`from_hf` of a ``config.json``'s text (``where``: its path, for the message)."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ModelConfigProblem("config", f"{where} is over 1 MiB: not a config.json",
                                 "give the model's config.json")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ModelConfigProblem("config", f"{where} is not JSON ({e})",
                                 "give the model's config.json") from None
    return from_hf(data)


def param_count(shape: dict[str, Any]) -> int:
    """Parameters of a model of this shape (``ModelConfig``'s fields, as a mapping):
    ``elastix_trainer.model.init_params``'s arithmetic, which is the published models' own."""
    d, n, v, f, hd = (shape["d_model"], shape["num_layers"], shape["vocab_size"],
                      shape["ffn_dim"], shape["head_dim"])
    q, kv = shape["num_heads"] * hd, shape["num_kv_heads"] * hd
    norms = 2 * d + (2 * hd if shape.get("qk_norm", True) else 0)
    layer = norms + d * q + 2 * d * kv + q * d + 3 * d * f
    return v * d + d + n * layer + (0 if shape.get("tie_embeddings", True) else d * v)
