"""Does the compiled step fit? Real compiles on CPU, with the device's memory set by the test
(a CPU device has no limit): the remat ladder, and the one-line refusal before the first step.
The compiler's out-of-memory messages are XLA:TPU's own, as public reports quote them."""

from __future__ import annotations

import dataclasses

import pytest
from trainer_helpers import make_cfg

from elastix_trainer import fit, step
from elastix_trainer.__main__ import main
from elastix_trainer.kernels import loss, remat
from elastix_trainer.obs.events import EventLog
from elastix_trainer.step import STAGE_MARGIN
from elastix_trainer.train import Trainer

# XLA:TPU's words, as LargeWorldModel/LWM#60 and erfanzar/EasyDeL#166 quote them.
HBM = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
       "hbm. Used 21.95G of 15.48G hbm. Exceeded hbm capacity by 6.47G.")
VMEM = ("RESOURCE_EXHAUSTED: XLA:TPU compile permanent error. Ran out of memory in memory space "
        "vmem. Used 32.42M of 16.00M vmem. Exceeded vmem capacity by 16.42M")
# What JAX 0.10.2 raised on a v5e chip compiling splash attention with blocks of 2048 at
# qwen3-0.6b's head_dim 128 (its first line; the rest names the kernel's scratch buffers).
SCOPED_VMEM = "RESOURCE_EXHAUSTED: E1001: CompileTimeScopedVmemOom:"


def test_the_compilers_out_of_memory_is_read_and_a_kernels_is_not():
    assert fit.oom_bytes(RuntimeError(HBM)) == int(21.95 * (1 << 30))
    assert fit.oom_bytes(RuntimeError(VMEM)) is None  # a kernel's scratch: no batch fixes it
    assert fit.oom_bytes(RuntimeError(SCOPED_VMEM)) is None
    assert fit.oom_bytes(RuntimeError("INVALID_ARGUMENT: bad shapes")) is None


def _trainer(monkeypatch, limit, **cfg):
    monkeypatch.setattr(fit, "device_limit", lambda mesh: limit)
    return Trainer(make_cfg(num_slices=1, **cfg), EventLog(None))


def _peak(policy, **cfg) -> int:
    tr = Trainer(make_cfg(num_slices=1, remat_policy=policy, **cfg), EventLog(None))
    return tr.start([0]).fns.peak_bytes


def test_auto_takes_the_first_policy_whose_compiled_step_fits(monkeypatch):
    """With TPU's ladder and a memory between what ``full`` and ``minimal_with_context`` need,
    ``auto`` goes down the ladder and runs a leaner policy whose compiled step fits."""
    shape = dict(preset="small", batch_per_device=8, seq_len=128)
    lean, rich = _peak("full", **shape), _peak("minimal_with_context", **shape)
    assert lean < rich
    monkeypatch.setattr(remat, "candidates", lambda platform: (
        "minimal_with_context", "minimal", "save_dot_except_mlp", "save_qkv_proj", "full"))
    tr = _trainer(monkeypatch, (lean + rich) // 2, remat_policy="auto", **shape)
    fns = tr.start([0]).fns
    assert fns.model.remat_policy in ("minimal", "save_dot_except_mlp", "save_qkv_proj", "full")
    assert fns.peak_bytes <= (lean + rich) // 2


def _fixed(**cfg) -> int:
    """The state and its gradients per device: below it no step fits, whatever its batch."""
    from elastix_trainer.mesh import build_mesh

    tr = Trainer(make_cfg(num_slices=1, **cfg), EventLog(None))
    abstract = step.abstract_state(tr.model, tr.opt, build_mesh(tr.slices, [0]), tr.cfg.seed)
    return fit.state_bytes(abstract) + fit.state_bytes(abstract["params"])


def test_a_step_that_cannot_fit_is_refused_before_the_first_step(monkeypatch):
    shape = dict(preset="small", batch_per_device=8, seq_len=128, remat_policy="none")
    tr = _trainer(monkeypatch, _fixed(**shape) + (1 << 20), **shape)
    with pytest.raises(fit.DoesNotFit) as e:
        tr.start([0])
    assert "of device memory per device at --batch-per-device 8" in e.value.message
    assert "a device has 0.0" in e.value.message
    assert "--remat-policy full" in e.value.hint
    assert not tr.events.of("step")


def test_a_state_larger_than_the_device_is_refused_without_a_compile(monkeypatch):
    # a shape no other test compiles: step_fns keeps what it built for the process
    shape = dict(preset="small", batch_per_device=5, seq_len=96)
    tr = _trainer(monkeypatch, _fixed(**shape) - 1, **shape)
    compiled = []
    real = fit.choose

    def counting(model, compile_with, *args):
        return real(model, lambda m, **kw: compiled.append(m) or compile_with(m, **kw), *args)

    monkeypatch.setattr(fit, "choose", counting)
    with pytest.raises(fit.DoesNotFit) as e:
        tr.start([0])
    assert "gradients alone need" in e.value.message and "more devices" in e.value.hint
    assert compiled == []


def test_the_refusal_is_one_line_and_exit_2(monkeypatch, capsys, tmp_path):
    limit = _fixed(preset="small", batch_per_device=4) + (1 << 20)
    monkeypatch.setattr(fit, "device_limit", lambda mesh: limit)
    code = main(["--preset", "small", "--steps", "2", "--batch-per-device", "4",
                 "--num-slices", "1", "--events-file", str(tmp_path / "ev.jsonl")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[0].startswith("error: the step needs ") and "a device has" in err[0]
    assert err[1].startswith("hint: try ")
    assert len(err) == 2, err


def test_unknown_kernel_choices_name_the_choices(capsys):
    code = main(["--remat-policy", "fulll", "--attention", "splash"])
    err = capsys.readouterr().err
    assert code == 2
    assert "did you mean full?" in err and "autoselected, dot_product, flash" in err



@pytest.mark.parametrize("said", [SCOPED_VMEM, VMEM])
def test_a_splash_block_over_the_cores_memory_is_one_line_naming_the_flag(said):
    from elastix_trainer.model import PRESETS

    model = PRESETS["tiny"].__class__(**{**PRESETS["tiny"].__dict__, "attention": "flash",
                                         "remat_policy": "full", "sa_block": 2048})

    def compile_with(m):
        raise RuntimeError(said)

    with pytest.raises(fit.DoesNotFit) as e:
        fit.choose(model, compile_with, _cpu_mesh(), 8, 2048, {"params": {}})
    assert "blocks of 2048" in e.value.message and "VMEM" in e.value.message
    assert "--sa-block 512" in e.value.hint
    # the plain path never reads it as the kernel's: an unknown error stays the compiler's
    plain = PRESETS["tiny"].__class__(**{**model.__dict__, "attention": "dot_product"})
    with pytest.raises(RuntimeError, match="CompileTimeScopedVmemOom|vmem"):
        fit.choose(plain, compile_with, _cpu_mesh(), 8, 2048, {"params": {}})


def _cpu_mesh():
    import jax
    import numpy as np
    from jax.sharding import Mesh

    return Mesh(np.array(jax.devices()[:1]), ("data",))


def test_the_splash_flags_reach_the_model_and_a_bad_block_is_refused(capsys):
    tr = Trainer(make_cfg(num_slices=1, sa_block=512, sa_use_fused_bwd_kernel=False),
                 EventLog(None))
    assert (tr.model.sa_block, tr.model.sa_fused_bwd) == (512, False)
    tr = Trainer(make_cfg(num_slices=1), EventLog(None))
    assert (tr.model.sa_block, tr.model.sa_fused_bwd) == (1024, True)
    code = main(["--sa-block", "100"])
    err = capsys.readouterr().err
    assert code == 2 and "sa_block" in err.replace("-", "_") and "multiple of 128" in err


@pytest.mark.parametrize(("room", "staged"), [(None, False), ("two states", True),
                                               ("one state", False)])
def test_auto_copies_stage_only_where_a_second_state_fits(monkeypatch, tmp_path, room, staged):
    """``--snapshot-copy auto``: staged where the device's memory holds the compiled step and a
    second state (the copy read to the host beside the next steps), else at the boundary; on a
    device that does not say its memory (CPU), always at the boundary."""
    cfg = dict(preset="small", batch_per_device=2, seq_len=64, snapshot_period=2,
               checkpoint_dir=str(tmp_path / "ck"))
    fns = Trainer(make_cfg(num_slices=1, seed=7001, **cfg), EventLog(None)).start([0]).fns
    assert fns.stage is None  # CPU: no memory limit known
    state = fit.state_bytes(fns.abstract)
    limit = {None: None, "two states": int((fns.peak_bytes + state) / STAGE_MARGIN) + 1,
             "one state": fns.peak_bytes + state // 2}[room]
    # another seed: the same shapes and memory, a step of its own (builds are kept per key)
    seed = 7002 + ["two states", "one state", None].index(room)
    got = _trainer(monkeypatch, limit, seed=seed, **cfg).start([0]).fns
    assert got.peak_bytes == fns.peak_bytes
    assert (got.stage is not None) == staged


def test_the_ladder_tries_the_whole_loss_first_on_tpu_only():
    """``--num-vocab-tiling 0`` (auto): on TPU the logits whole before tiles, for each remat
    policy in order; off TPU, or with tiles given, only the one tiling."""
    from elastix_trainer.model import PRESETS

    qwen = dataclasses.replace(PRESETS["qwen3-0.6b"], remat_policy="auto", num_vocab_tiling=0)
    tpu = fit.ladder(qwen, "tpu", 16, 1024)
    assert tpu[:2] == [("minimal_with_context", 1), ("minimal_with_context", 38)]
    assert tpu[-2:] == [("full", 1), ("full", 38)]
    assert fit.ladder(qwen, "cpu", 16, 1024) == [("none", 38)]
    given = dataclasses.replace(qwen, remat_policy="full", num_vocab_tiling=4)
    assert fit.ladder(given, "tpu", 16, 1024) == [("full", 4)]
    small = dataclasses.replace(qwen, remat_policy="full")
    assert fit.ladder(small, "tpu", 1, 128) == [("full", 1)]  # one tile is already whole


@pytest.mark.parametrize("room", ["whole", "tiles"])
def test_auto_tiles_keep_the_logits_whole_only_where_that_fits(monkeypatch, room):
    """The TPU ladder on CPU devices, with the device's memory set between what the tiled
    and the whole loss's compiled steps need: the whole loss where it fits, else the tiles."""
    shape = dict(preset="small", batch_per_device=8, seq_len=128)
    tiled, whole = _peak("none", num_vocab_tiling=4, **shape), _peak(
        "none", num_vocab_tiling=1, **shape)
    assert tiled < whole
    real = fit.ladder
    monkeypatch.setattr(step, "_built", {})  # the other case's choice is not this memory's
    monkeypatch.setattr(loss, "default_tiles", lambda *a: 4)
    monkeypatch.setattr(fit, "ladder", lambda m, platform, b, s: real(m, "tpu", b, s))
    limit = whole + (1 << 20) if room == "whole" else (tiled + whole) // 2
    fns = _trainer(monkeypatch, limit, remat_policy="none", num_vocab_tiling=0,
                   **shape).start([0]).fns
    assert fns.model.num_vocab_tiling == (1 if room == "whole" else 4)
    assert fns.peak_bytes <= limit


def test_a_refusal_without_the_compilers_figure_reads_whole_and_names_scan_layers():
    """On a v5e chip qwen3-0.6b unrolled (``--no-scan-layers``) at batch 16 ran out of memory
    with no ``Used X of Y hbm`` to quote: the line still reads whole, and names the flag."""
    from elastix_trainer.model import PRESETS

    model = dataclasses.replace(PRESETS["qwen3-0.6b"], scan_layers=False)
    e = fit._refusal(model, [("full", -1, "compiler")], 15 << 30, 7 << 30, 2 << 30, 16, 1024)
    assert e.message.startswith("the step does not fit a device's memory (the compiler named "
                                "no figure) at --batch-per-device 16, --seq-len 1024")
    assert e.message.endswith("and a device has 15.00 GiB")
    assert e.hint.startswith("try --scan-layers")
