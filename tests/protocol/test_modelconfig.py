"""A model from a Hugging Face ``config.json`` (``elastix.protocol.modelconfig``), and the
presets' parameter counts against the published ones, without JAX (issue 73)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastix.protocol import modelconfig
from elastix.protocol.modelconfig import ModelConfigProblem, from_hf, param_count
from elastix.protocol.presets import state_bytes

HF = Path(__file__).resolve().parents[1] / "fixtures" / "hf"

# The model cards' counts, at the precision they publish (huggingface.co/Qwen/Qwen3-*: "Number
# of Parameters" and "(Non-Embedding)"; meta-llama/Llama-3.1-8B: 8.03 B, and its safetensors
# index's total of 16,060,522,496 bytes in bfloat16, i.e. 8,030,261,248 parameters).
PUBLISHED = {
    "qwen3-0.6b": (0.6e9, 0.44e9),
    "qwen3-1.7b": (1.7e9, 1.4e9),
    "qwen3-4b": (4.0e9, 3.6e9),
    "qwen3-8b": (8.2e9, 6.95e9),
}


def _preset_shape(name: str) -> dict:
    import ast

    text = (Path(__file__).resolve().parents[2] / "trainer" / "elastix_trainer" /
            "model.py").read_text()
    for node in ast.parse(text).body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "PRESETS":
            for k, v in zip(node.value.keys, node.value.values, strict=True):
                if k.value == name:
                    return {kw.arg: ast.literal_eval(kw.value) for kw in v.keywords}
    raise KeyError(name)


@pytest.mark.parametrize("preset", sorted(PUBLISHED))
def test_the_qwen3_presets_have_the_model_cards_counts(preset):
    total, non_embedding = PUBLISHED[preset]
    shape = _preset_shape(preset)
    n = param_count(shape)
    embeddings = shape["vocab_size"] * shape["d_model"] * (1 if shape.get(
        "tie_embeddings", True) else 2)
    # the cards round to one decimal of a billion (0.44 B and 6.95 B to two)
    digits = 2 if preset in ("qwen3-0.6b", "qwen3-8b") else 1
    assert round(n / 1e9, 1) == round(total / 1e9, 1), (preset, n)
    assert round((n - embeddings) / 1e9, digits) == round(non_embedding / 1e9, digits), preset


def test_llama_3_1_8b_has_exactly_its_published_count():
    assert param_count(_preset_shape("llama3.1-8b")) == 8_030_261_248
    assert param_count(modelconfig.read((HF / "llama3.1-8b.json").read_text(), "x")) == \
        8_030_261_248


def test_qwen3_4b_is_the_seeds_size():
    assert param_count(_preset_shape("qwen3-4b")) == 4_022_468_096
    assert state_bytes("qwen3-4b") == 4_022_468_096 * 12  # 48.3 GB: 135 GiB on 3 slices


@pytest.mark.parametrize("name,preset", [("qwen3-4b", "qwen3-4b"),
                                         ("llama3.1-8b", "llama3.1-8b")])
def test_a_published_config_is_the_presets_shape(name, preset):
    shape = modelconfig.read((HF / f"{name}.json").read_text(), name)
    want = _preset_shape(preset)
    defaults = {"tie_embeddings": True, "qk_norm": True, "rope_scaling": None,
                "norm_eps": 1e-6, "rope_theta": 1_000_000.0}
    for key, value in {**defaults, **want}.items():
        assert shape[key] == value, key


def test_heads_64_wide_and_a_head_dim_derived_from_the_width():
    shape = modelconfig.read((HF / "smollm2-360m.json").read_text(), "smollm2")
    assert (shape["head_dim"], shape["num_heads"], shape["num_kv_heads"]) == (64, 15, 5)
    assert not shape["qk_norm"] and shape["tie_embeddings"]
    assert round(param_count(shape) / 1e6) == 362  # the card's 362 M


def _base() -> dict:
    return json.loads((HF / "qwen3-4b.json").read_text())


@pytest.mark.parametrize("change,field", [
    ({"model_type": "qwen3_moe", "num_experts": 128}, "model_type"),
    ({"model_type": "mistral"}, "model_type"),
    ({"num_experts": 8}, "num_experts"),
    ({"use_sliding_window": True}, "use_sliding_window"),
    ({"attention_bias": True}, "attention_bias"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, "rope_scaling"),
    ({"attention_dropout": 0.1}, "attention_dropout"),
    ({"layer_types": ["sliding_attention"]}, "layer_types"),
    ({"num_key_value_heads": 7}, "num_key_value_heads"),
    ({"hidden_size": None}, "hidden_size"),
    ({"vocab_size": -3}, "vocab_size"),
    ({"intermediate_size": "big"}, "intermediate_size"),
])
def test_what_the_trainer_does_not_implement_is_refused_by_name(change, field):
    cfg = {**_base(), **change}
    with pytest.raises(ModelConfigProblem) as e:
        from_hf(cfg)
    assert e.value.field == field
    assert e.value.hint and "\n" not in str(e.value)


def test_transformers_5_rope_parameters_are_read():
    cfg = _base()
    del cfg["rope_theta"], cfg["rope_scaling"]
    cfg["rope_parameters"] = {"rope_theta": 5e5, "rope_type": "default"}
    assert from_hf(cfg)["rope_theta"] == 5e5


def test_not_json_and_too_large_are_one_line():
    with pytest.raises(ModelConfigProblem, match="not JSON"):
        modelconfig.read("{", "f.json")
    with pytest.raises(ModelConfigProblem, match="over 1 MiB"):
        modelconfig.read(" " * (2 << 20), "f.json")
