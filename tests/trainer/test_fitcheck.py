"""The fit check's trainer half (``elastix_trainer.fitcheck``): the trainer's own step compiled
for TPU topologies on this CPU machine with libtpu (no chip), for every mesh the elastic policy
can train on; the kernels' TPU lowering (splash attention, the tiled loss) compiled on the way
(issue 73)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import os

import pytest
import tiers

from elastix.errors import UsageError
from elastix_trainer import fit, fitcheck, train
from elastix_trainer.config import from_mapping


@pytest.fixture
@tiers.process
def libtpu() -> None:
    """JAX's TPU compiler (``elastix[tpu]``, which .ci/setup installs); skips without it, fails
    in CI."""
    if importlib.util.find_spec("libtpu") is None:
        why = "libtpu is not installed: pip install 'elastix[tpu]' (.ci/setup installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; CI must compile for TPU")
        pytest.skip(why)


def _cfg(**values):
    return from_mapping({"steps": 10, **values})


def test_every_mesh_replica_resize_can_train_on_is_compiled(libtpu):
    cfg = _cfg(preset="tiny", batch_per_device=2, seq_len=128, elastic_mode="replica-resize",
               min_slices=1, checkpoint_dir="gs://bucket/run", snapshot_period=5)
    report = fitcheck.check(cfg, "v5e:2x2", 3, progress=lambda _: None)
    assert [m["slices"] for m in report["meshes"]] == [3, 2, 1]
    assert [m["chips"] for m in report["meshes"]] == [12, 8, 4]
    chip = report["chip"]
    assert chip["generation"] == "v5e" and chip["limit"] == 16_909_336_064
    for m in report["meshes"]:
        assert m["fits"] and 0 < m["hbm"] <= m["limit"] == chip["limit"]
        # TPU's ladder, not CPU's: the first policy (its compiled step fits)
        assert m["remat_policy"] == "minimal_with_context" and m["loss_tiles"] == 1
        assert m["global_batch"] == 2 * m["chips"]
        assert m["prediction"]["tflops"] > 0 and "measured on a v5e chip" in \
            m["prediction"]["basis"]
        assert m["snapshot_copies"] == "staged on the chips"  # a second state fits beside
    # two snapshots in host memory on the head, as hostmem counts them
    assert report["host_copies"]["count"] == 2
    assert report["host_copies"]["bytes"] == 2 * report["state_bytes"]
    assert report["versions"]["libtpu"]
    json.dumps(report)  # what the launcher reads


def test_pause_resume_compiles_the_full_mesh_only(libtpu):
    report = fitcheck.check(_cfg(preset="tiny", batch_per_device=2, seq_len=128), "v5e:2x2", 2,
                            progress=lambda _: None)
    assert [m["slices"] for m in report["meshes"]] == [2]


def test_the_kernels_lower_for_tpu(libtpu, tmp_path):
    """Heads 64 wide and a sequence of 256: the splash kernel (Pallas, Mosaic) and the loss in
    vocabulary tiles, compiled for a v5e chip's TPU core without one."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({
        "model_type": "llama", "hidden_size": 256, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 64, "num_hidden_layers": 2,
        "intermediate_size": 512, "vocab_size": 1024, "tie_word_embeddings": False,
        "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}))
    cfg = _cfg(model_config=str(config), batch_per_device=2, seq_len=256, num_vocab_tiling=4,
               remat_policy="full")
    m = fitcheck.check(cfg, "v5e:2x2", 1, progress=lambda _: None)["meshes"][0]
    assert m["fits"] and m["attention"] == "flash" and m["loss_tiles"] == 4
    assert m["remat_policy"] == "full"


def test_what_is_compiled_is_what_the_trainer_compiles(libtpu, monkeypatch):
    """The same model (TPU's choices), optimizer and copy mode as a Trainer on TPU makes: the
    check calls the trainer's own functions, so a flag that changes the step changes both."""
    cfg = _cfg(preset="bench-1g", batch_per_device=4, seq_len=1024, lr=1e-4, warmup_steps=3,
               snapshot_period=10)
    monkeypatch.setattr(train, "loop_platform", lambda: "tpu")
    model = train.model_config(cfg)
    assert model == train.model_config(cfg, "tpu")
    assert model.attention == "flash" and model.dtype == "bfloat16"
    assert train.opt_config(cfg).lr == 1e-4 and train.copy_mode(cfg) == "auto"


def test_a_state_no_chip_can_hold_is_in_the_report_in_a_second(libtpu):
    report = fitcheck.check(_cfg(preset="qwen3-8b", batch_per_device=1, seq_len=2048),
                            "v5e:2x2", 1, progress=lambda _: None)
    m = report["meshes"][0]
    assert not m["fits"] and "alone need" in m["error"] and "more devices" in m["hint"]
    assert m["seconds"] < 30  # refused by arithmetic, not after a compile


def test_an_unknown_topology_is_one_line(libtpu):
    with pytest.raises(UsageError) as e:
        fitcheck.check(_cfg(preset="tiny"), "v5e:3x7", 1, progress=lambda _: None)
    assert "v5e:3x7" in e.value.message and "\n" not in e.value.message and e.value.hint


def test_the_min_slices_are_the_runtimes(libtpu):
    cfg = _cfg(preset="tiny", elastic_mode="replica-resize")
    assert fitcheck.slice_counts(cfg, 3) == [3, 2]
    assert fitcheck.slice_counts(dataclasses.replace(cfg, min_slices=1), 3) == [3, 2, 1]
    with pytest.raises(UsageError):
        fitcheck.slice_counts(dataclasses.replace(cfg, min_slices=4), 3)
    assert fit.GIB == 1 << 30


def test_fit_check_cli_prints_json_and_progress(libtpu, capsys):
    from elastix_trainer.__main__ import main

    code = main(["fit-check", "--topology", "v5e:2x2", "--slices", "1", "--", "--preset",
                 "tiny", "--batch-per-device", "2", "--seq-len", "128"])
    out, err = capsys.readouterr()
    assert code == 0
    assert json.loads(out)["meshes"][0]["fits"]
    assert "fit check: 1 slice (4 chips): compiled in" in err
    assert main(["fit-check", "--topology", "v5e:2x2", "--slices", "0", "--", "--preset",
                 "tiny"]) == 2
    assert main(["fit-check", "--topology", "v5e:2x2", "--slices", "1", "--", "--preset",
                 "nope"]) == 2
