"""A step's speed on a chip, predicted before any chip runs it: a prediction, said as one.

A step on one chip spends its time in three kinds of work, each at its own pace:

- the matmuls: the model's FLOPs (MaxText's count, ``model.flops_per_step``) outside
  attention, plus what the step computes again (a remat policy's recomputed projections, the
  logits again in every vocabulary tile: :func:`recomputed`);
- attention: the causal attention's FLOPs as the splash kernel executes them (it computes
  every block of the square a causal mask touches: at blocks of 1024 and a sequence of 1024
  the whole square, twice the causal count), twice over for heads narrower than the matrix
  unit's 128 (64-wide heads fill half of it);
- AdamW's update: memory-bound, proportional to the parameters a chip holds.

The pace of each is fitted (least squares) to the steps measured on a chip
(:data:`MEASURED`, ``bench/bench_chip.py``), then scaled for the preset at hand by how its own
measured steps sat against the fit (where it has any). On a v5e chip the three paces came out
at about 79 % of peak for the matmuls, 40 % for attention, and 29 % of HBM's bandwidth for the
update (docs/benchmarks.md). Another generation is predicted at v5e's paces relative to its
own peak and bandwidth, which is said beside the figure.

Not modelled, and said: collectives (a mesh of many chips gathers the FSDP-sharded parameters
over the chips' interconnect, which XLA overlaps with compute, and all-reduces gradients
across slices over the data-centre network), splash blocks other than the default, and the
layers unrolled (``--no-scan-layers``, 10-18 % faster on a v5e chip).
"""

from __future__ import annotations

import dataclasses
import math

from elastix.protocol import chips as chip_table
from elastix_trainer.kernels import remat

BLOCK = 1024
"""The splash kernel's default block (``kernels.attention.BLOCK``): the calibrated one."""


@dataclasses.dataclass(frozen=True)
class Measured:
    """One step measured on a chip (``bench/bench_chip.py``, the trainer's own compile)."""

    generation: str
    name: str
    """The preset, or what the model is (a config file's name, a preset's heads reshaped)."""
    shape: tuple[int, int, int, int, int, int, int, bool]
    """d_model, layers, heads, kv heads, head_dim, ffn, vocab, tied embeddings."""
    seq_len: int
    batch: int
    remat_policy: str
    loss_tiles: int
    step_s: float
    when: str


_BENCH_1G = (1024, 6, 8, 4, 128, 3072, 32_000, True)
_BENCH_1G_64 = (1024, 6, 16, 8, 64, 3072, 32_000, True)  # its heads as before 12-07
_QWEN3_06B = (1024, 28, 16, 8, 128, 3072, 151_936, True)
_SMOLLM2 = (960, 32, 15, 5, 64, 2560, 49_152, True)  # tests/fixtures/hf/smollm2-360m.json
_D = "2026-12-07"
MEASURED: tuple[Measured, ...] = (
    # v5e, JAX 0.10.2, libtpu 0.0.42.1, splash blocks of 1024, fused backward, layers scanned;
    # docs/benchmarks.md, "Compiled without a chip, checked on one" (the three calls' rows).
    Measured("v5e", "bench-1g", _BENCH_1G, 1024, 16, "minimal_with_context", 1, 0.0959, _D),
    Measured("v5e", "bench-1g", _BENCH_1G, 1024, 8, "minimal_with_context", 1, 0.0497, _D),
    Measured("v5e", "bench-1g", _BENCH_1G, 2048, 8, "minimal_with_context", 1, 0.1008, _D),
    Measured("v5e", "bench-1g", _BENCH_1G, 1024, 4, "minimal_with_context", 1, 0.0286, _D),
    Measured("v5e", "bench-1g", _BENCH_1G, 1024, 2, "minimal_with_context", 1, 0.0181, _D),
    Measured("v5e", "bench-1g heads 16/8x64", _BENCH_1G_64, 1024, 16, "minimal_with_context",
             1, 0.1303, _D),
    Measured("v5e", "qwen3-0.6b", _QWEN3_06B, 1024, 16, "full", 38, 0.7248, _D),
    Measured("v5e", "qwen3-0.6b", _QWEN3_06B, 2048, 8, "full", 38, 0.7886, _D),
    Measured("v5e", "qwen3-0.6b", _QWEN3_06B, 1024, 8, "save_dot_except_mlp", 19, 0.3560, _D),
    Measured("v5e", "qwen3-0.6b", _QWEN3_06B, 1024, 4, "minimal_with_context", 10, 0.1812, _D),
    Measured("v5e", "qwen3-0.6b", _QWEN3_06B, 1024, 2, "minimal_with_context", 1, 0.1050, _D),
    Measured("v5e", "qwen3-0.6b", _QWEN3_06B, 2048, 1, "minimal_with_context", 1, 0.1109, _D),
    Measured("v5e", "smollm2-360m.json", _SMOLLM2, 2048, 8, "save_dot_except_mlp", 12,
             0.6072, _D),
    Measured("v5e", "smollm2-360m.json", _SMOLLM2, 1024, 16, "save_dot_except_mlp", 12,
             0.5396, _D),
    Measured("v5e", "smollm2-360m.json", _SMOLLM2, 2048, 4, "minimal_with_context", 6,
             0.2554, _D),
    Measured("v5e", "smollm2-360m.json", _SMOLLM2, 1024, 8, "minimal_with_context", 6,
             0.2381, _D),
    Measured("v5e", "smollm2-360m.json", _SMOLLM2, 2048, 2, "minimal_with_context", 1,
             0.1374, _D),
)


def model_of(m: Measured):
    """The ``ModelConfig`` a measurement ran (its remat policy and tiles as resolved)."""
    from elastix_trainer.model import ModelConfig

    d, layers, heads, kv, hd, ffn, vocab, tied = m.shape
    return ModelConfig(vocab_size=vocab, d_model=d, num_layers=layers, num_heads=heads,
                       num_kv_heads=kv, head_dim=hd, ffn_dim=ffn, tie_embeddings=tied,
                       qk_norm=True, remat_policy=m.remat_policy, num_vocab_tiling=m.loss_tiles)


def _named(model, seq_len: int) -> dict[str, float]:
    """Forward FLOPs per token of each named value of a layer (``model.py``'s names)."""
    d, f = model.d_model, model.ffn_dim
    q, kv = model.num_heads * model.head_dim, model.num_kv_heads * model.head_dim
    return {"query_proj": 2 * d * q, "key_proj": 2 * d * kv, "value_proj": 2 * d * kv,
            "context": 2 * q * seq_len, "out_proj": 2 * q * d, "mlpwi_0": 2 * d * f,
            "mlpwi_1": 2 * d * f}


def recomputed(model, seq_len: int) -> tuple[float, float]:
    """(matmul, attention) FLOPs per token computed again beyond the model's: each named value
    a layer's remat policy does not keep (the last projection's output is never needed), and
    the logits again in every vocabulary tile but a whole one."""
    saved = remat.saved_names(model.remat_policy)
    per = _named(model, seq_len)
    again = {} if saved is None else {k: v for k, v in per.items() if k not in saved}
    attention = model.num_layers * again.pop("context", 0.0)
    tiles = model.num_vocab_tiling
    logits = 2 * model.d_model * model.vocab_size if tiles and tiles > 1 else 0
    return model.num_layers * sum(again.values()) + logits, attention


def features(model, seq_len: int, batch_per_chip: int, chips_per_slice: int, chip
             ) -> tuple[float, float, float]:
    """Seconds a chip would spend at full pace on (matmuls, attention, the update)."""
    from elastix_trainer.model import flops_per_step

    tokens = batch_per_chip * seq_len
    flops = flops_per_step(model, batch_per_chip, seq_len)
    attention = tokens * 6 * model.num_layers * model.num_heads * model.head_dim * seq_len
    again_mm, again_att = recomputed(model, seq_len)
    blocks = math.ceil(seq_len / min(BLOCK, seq_len))
    executed_att = (attention + tokens * again_att) * (blocks + 1) / blocks \
        * max(1.0, 128 / model.head_dim)
    matmuls = flops - attention + tokens * again_mm
    params = _params(model) / chips_per_slice
    return (matmuls / chip.peak_flops, executed_att / chip.peak_flops,
            params * 16 / chip.hbm_bandwidth)


def _params(model) -> int:
    from elastix.protocol.modelconfig import param_count

    return param_count(dataclasses.asdict(model))


def fit(rows: tuple[Measured, ...] | list[Measured]) -> tuple[float, float, float]:
    """Seconds per second-at-full-pace of each kind of work (the inverse of its pace), fitted
    to ``rows``."""
    import numpy as np

    x = np.array([features(model_of(m), m.seq_len, m.batch, 1,
                           chip_table.BY_GENERATION[m.generation]) for m in rows])
    y = np.array([m.step_s for m in rows])
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    return tuple(float(c) for c in coef)  # type: ignore[return-value]


def step_seconds(model, seq_len: int, batch_per_chip: int, chips_per_slice: int, chip,
                 coef: tuple[float, float, float]) -> float:
    return sum(c * f for c, f in zip(coef, features(model, seq_len, batch_per_chip,
                                                      chips_per_slice, chip), strict=True))


def _same_model(m: Measured, model) -> bool:
    d, layers, heads, kv, hd, ffn, vocab, tied = m.shape
    return (d, layers, heads, kv, hd, ffn, vocab, tied) == (
        model.d_model, model.num_layers, model.num_heads, model.num_kv_heads, model.head_dim,
        model.ffn_dim, model.vocab_size, model.tie_embeddings)


def tflops(cfg, model, chip, flops: float, chips: int, chips_per_slice: int | None = None,
           rows: tuple[Measured, ...] | list[Measured] = MEASURED) -> dict:
    """The predicted model TFLOP/s per chip of ``model``'s step on a mesh of ``chips`` chips
    (``flops`` for the whole mesh; ``chips_per_slice``: the chips the state is sharded over),
    with what it rests on (module docstring)."""
    calibrated = chip.generation if any(m.generation == chip.generation for m in rows) \
        else "v5e"
    basis_rows = [m for m in rows if m.generation == calibrated]
    if not basis_rows:
        return {"tflops": None, "basis": "no step measured on a chip to predict from"}
    coef = fit(basis_rows)
    per_slice = chips_per_slice or chips
    seconds = step_seconds(model, cfg.seq_len, cfg.batch_per_device, per_slice, chip, coef)
    own = [m for m in basis_rows if _same_model(m, model)]
    scale = 1.0
    if own:  # how this model's own steps sat against the fit: its correction
        logs = [math.log(m.step_s / step_seconds(model_of(m), m.seq_len, m.batch, 1,
                                                  chip_table.BY_GENERATION[m.generation],
                                                  coef)) for m in own]
        scale = math.exp(sum(logs) / len(logs))
    seconds *= scale
    predicted = flops / chips / seconds / 1e12
    basis = (f"fitted to {len(basis_rows)} steps measured on a {calibrated} chip"
             + (f", {len(own)} of them this model's" if own else ", none of this model"))
    notes = []
    if calibrated != chip.generation:
        notes.append(f"no {chip.generation} chip measured: v5e's paces")
    if chips > 1:
        notes.append("collectives not modelled")
    if not model.scan_layers:
        notes.append("layers unrolled: predicted as scanned")
    if model.attention == "flash" and model.sa_block != BLOCK:
        notes.append(f"splash blocks of {model.sa_block} not calibrated")
    if notes:
        basis += "; " + "; ".join(notes)
    return {"tflops": round(predicted, 1), "of_peak": round(predicted * 1e12 / chip.peak_flops,
                                                            3),
            "step_seconds": seconds, "basis": basis}
