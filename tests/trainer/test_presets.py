"""The presets of the sizes people train on slices and ``--model-config`` (a Hugging Face
``config.json``): the trainer's model has the published parameter counts, Llama's differences
(no QK-norm, untied embeddings, Llama 3's RoPE scaling) run, and a bad config is one line with
exit 2 (issue 73)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from elastix.errors import UsageError
from elastix.protocol.modelconfig import param_count
from elastix_trainer import model as m
from elastix_trainer.config import from_mapping, preset_names
from elastix_trainer.train import model_config

HF = Path(__file__).resolve().parents[1] / "fixtures" / "hf"


def _count(cfg: m.ModelConfig) -> int:
    shapes = jax.eval_shape(lambda: m.init_params(cfg, jax.random.key(0)))
    return sum(math.prod(x.shape) for x in jax.tree.leaves(shapes))


@pytest.mark.parametrize("preset", sorted(m.PRESETS))
def test_every_presets_parameters_are_the_counted_ones(preset):
    cfg = m.PRESETS[preset]
    assert _count(cfg) == param_count(dataclasses.asdict(cfg))


def test_the_help_lists_the_new_presets():
    assert {"qwen3-1.7b", "qwen3-4b", "qwen3-8b", "llama3.1-8b"} <= set(preset_names())


@pytest.mark.parametrize("name,preset", [("qwen3-4b", "qwen3-4b"),
                                         ("llama3.1-8b", "llama3.1-8b")])
def test_model_config_builds_the_presets_model(name, preset):
    cfg = from_mapping({"model_config": str(HF / f"{name}.json"), "steps": 1})
    assert model_config(cfg, "cpu") == model_config(from_mapping({"preset": preset, "steps": 1}),
                                                    "cpu")
    assert cfg.model_name.endswith(f"{name}.json")


def test_a_llama_shaped_model_trains_a_step_without_qk_norm():
    cfg = dataclasses.replace(m.PRESETS["tiny"], qk_norm=False, tie_embeddings=False,
                              rope_scaling=(8.0, 1.0, 4.0, 64))
    params = m.init_params(cfg, jax.random.key(0))
    assert "q_norm" not in params["layers"] and "lm_head" in params
    batch = jax.random.randint(jax.random.key(1), (2, 17), 0, cfg.vocab_size)
    loss, grads = jax.value_and_grad(lambda p: m.loss_fn(cfg, p, batch))(params)
    assert np.isfinite(float(loss))
    assert float(jnp.abs(grads["lm_head"]).sum()) > 0


def test_llama3_rope_scaling_slows_only_the_long_wavelengths():
    plain = np.asarray(m.rope_frequencies(128, 500_000.0))
    scaled = np.asarray(m.rope_frequencies(128, 500_000.0, (8.0, 1.0, 4.0, 8192)))
    wavelen = 2 * np.pi / plain
    short, long = wavelen < 8192 / 4, wavelen > 8192 / 1
    assert short.any() and long.any() and (~short & ~long).any()
    np.testing.assert_allclose(scaled[short], plain[short])
    np.testing.assert_allclose(scaled[long], plain[long] / 8, rtol=1e-6)
    mid = ~short & ~long  # blended: between the two, never outside
    assert np.all(scaled[mid] <= plain[mid]) and np.all(scaled[mid] >= plain[mid] / 8)


@pytest.mark.parametrize("change,words", [
    ({"model_type": "qwen3_moe", "num_experts": 128}, "model_type"),
    ({"use_sliding_window": True}, "use_sliding_window"),
    ({"mlp_bias": True}, "mlp_bias"),
])
def test_a_config_the_trainer_does_not_implement_is_one_line_exit_2(tmp_path, change, words):

    data = json.loads((HF / "qwen3-4b.json").read_text())
    data.update(change)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError) as e:
        from_mapping({"model_config": str(path)})
    assert words in str(e.value.message)


def test_a_missing_or_garbled_model_config_exits_2(tmp_path, capsys):
    from elastix_trainer.__main__ import main

    assert main(["--model-config", str(tmp_path / "none.json"), "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "not found" in err and "Traceback" not in err
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert main(["--model-config", str(bad), "--steps", "1"]) == 2
    assert "not JSON" in capsys.readouterr().err
