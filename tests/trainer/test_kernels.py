"""The model's kernels against their plain references, on CPU: the Pallas splash kernel in
Pallas' interpreter (alone and sharded over a mesh's batch), the vocabulary-tiled loss, and
every remat policy. Tolerances: float32 within 1e-4 (values and gradients, relative to the
largest value), bfloat16 within 3e-2 (its 8-bit mantissa); the tiled loss and the remat
policies reorder no float32 sum that matters, so within 1e-5.
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from elastix.errors import UsageError
from elastix_trainer import model as m
from elastix_trainer.fit import peak_bytes
from elastix_trainer.kernels import REMAT_POLICIES, attention, loss


def _close(got, want, tol):
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    scale = max(float(np.max(np.abs(want))), 1e-6)
    assert float(np.max(np.abs(got - want))) <= tol * scale, \
        (float(np.max(np.abs(got - want))), scale)


def _qkv(dtype, b=2, h=4, kv=2, s=256, d=64):
    keys = jax.random.split(jax.random.key(0), 3)
    return (jax.random.normal(keys[0], (b, h, s, d), jnp.float32).astype(dtype),
            jax.random.normal(keys[1], (b, kv, s, d), jnp.float32).astype(dtype),
            jax.random.normal(keys[2], (b, kv, s, d), jnp.float32).astype(dtype))


def _flash(q, k, v, mesh=None, fused=False):
    return attention.flash(q, k, v, mesh=mesh, block=128, fused=fused, interpret=True)


@pytest.mark.parametrize("dtype,tol,fused", [(jnp.float32, 1e-4, False),
                                             (jnp.bfloat16, 3e-2, False),
                                             (jnp.float32, 1e-4, True)])
def test_flash_matches_dot_product_in_values_and_gradients(dtype, tol, fused):
    """Both backward kernels (dq apart from dk/dv, or fused into one) give the gradients."""
    q, k, v = _qkv(dtype)
    _close(_flash(q, k, v, fused=fused), attention.dot_product(q, k, v), tol)

    def grads(fn):
        return jax.grad(lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32) ** 2),
                        argnums=(0, 1, 2))(q, k, v)

    for got, want in zip(grads(lambda q, k, v: _flash(q, k, v, fused=fused)),
                         grads(attention.dot_product), strict=True):
        _close(got, want, tol)


def test_flash_sharded_over_the_batch_matches():
    """On a mesh of several devices the kernel runs per device on its rows (shard_map)."""
    mesh = Mesh(np.array(jax.devices()[:4]).reshape(2, 2), ("slice", "data"))
    q, k, v = _qkv(jnp.float32, b=4)
    rows = NamedSharding(mesh, P(("slice", "data")))
    q, k, v = (jax.device_put(x, rows) for x in (q, k, v))
    out = jax.jit(lambda q, k, v: _flash(q, k, v, mesh))(q, k, v)
    _close(out, attention.dot_product(q, k, v), 1e-4)


def test_attention_is_chosen_per_platform_and_refused_where_it_cannot_run():
    assert attention.resolve("autoselected", "tpu", 1024, 128) == "flash"
    assert attention.resolve("autoselected", "cpu", 1024, 128) == "dot_product"
    assert attention.resolve("autoselected", "tpu", 1000, 128) == "dot_product"
    assert "TPU kernel" in attention.check("flash", "cpu", 1024, 128)
    assert "multiple of 128" in attention.check("flash", "tpu", 1000, 128)
    assert attention.check("dot_product", "cpu", 1000, 128) is None


@pytest.mark.parametrize("tiles", [2, 3, 7])
def test_the_tiled_loss_matches_the_whole_one(tiles):
    """Tiles that do not divide the vocabulary (1000 = 3 x 333.3) are padded and masked."""
    keys = jax.random.split(jax.random.key(1), 3)
    h = jax.random.normal(keys[0], (2, 64, 32), jnp.float32)
    head = jax.random.normal(keys[1], (32, 1000), jnp.float32) / 4
    targets = jax.random.randint(keys[2], (2, 64), 0, 1000)

    def value_and_grads(t):
        return jax.value_and_grad(lambda h, w: loss.cross_entropy(h, w, targets, t),
                                  argnums=(0, 1))(h, head)

    (got, (gh, gw)), (want, (wh, ww)) = value_and_grads(tiles), value_and_grads(1)
    _close(got, want, 1e-5)
    _close(gh, wh, 1e-5)
    _close(gw, ww, 1e-5)


def test_the_tiled_loss_never_holds_the_whole_logits():
    """The compiled tiled loss (values and gradients) needs a fraction of the whole one's
    temporaries: one tile's logits, not all of them."""
    h = jax.ShapeDtypeStruct((4096, 64), jnp.float32)
    head = jax.ShapeDtypeStruct((64, 8192), jnp.float32)
    targets = jax.ShapeDtypeStruct((4096,), jnp.int32)

    def temp(tiles):
        fn = jax.jit(jax.value_and_grad(
            lambda h, w, t: loss.cross_entropy(h[None], w, t[None], tiles), argnums=(0, 1)))
        return fn.lower(h, head, targets).compile().memory_analysis().temp_size_in_bytes

    whole = 4096 * 8192 * 4  # 128 MiB of float32 logits
    assert temp(1) >= whole
    assert temp(8) < whole / 2


def test_default_tiles_keep_a_tile_near_256_mib():
    assert loss.default_tiles(2, 64, 512) == 1
    tiles = loss.default_tiles(16, 1024, 151_936)
    assert 16 * 1024 * -(-151_936 // tiles) * 4 <= (256 << 20) * 1.01


@pytest.mark.parametrize("policy", [p for p in REMAT_POLICIES if p != "auto"])
def test_every_remat_policy_computes_the_same_gradients(policy):
    cfg = m.PRESETS["tiny"]
    params = m.init_params(cfg, jax.random.key(0))
    batch = jax.random.randint(jax.random.key(1), (2, 33), 0, cfg.vocab_size)

    def grads(c):  # one compiled program a policy (op by op, remat's recomputation crawls)
        return jax.jit(jax.value_and_grad(lambda p: m.loss_fn(c, p, batch)))(params)

    (got, g), (want, w) = grads(dataclasses.replace(cfg, remat_policy=policy)), grads(cfg)
    _close(got, want, 1e-5)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(w), strict=True):
        _close(a, b, 1e-5)


@pytest.mark.parametrize("policy", ["none", "full"])
def test_unrolled_layers_compute_what_the_scan_computes(policy):
    """``--no-scan-layers`` runs the same stacked parameters layer by layer: the same loss and
    gradients, so a checkpoint of either restores into the other."""
    cfg = dataclasses.replace(m.PRESETS["tiny"], remat_policy=policy)
    params = m.init_params(cfg, jax.random.key(0))
    batch = jax.random.randint(jax.random.key(1), (2, 33), 0, cfg.vocab_size)

    def grads(c):
        return jax.jit(jax.value_and_grad(lambda p: m.loss_fn(c, p, batch)))(params)

    unrolled = dataclasses.replace(cfg, scan_layers=False)
    (got, g), (want, w) = grads(unrolled), grads(cfg)
    _close(got, want, 1e-5)
    for a, b in zip(jax.tree.leaves(g), jax.tree.leaves(w), strict=True):
        _close(a, b, 1e-5)
    text = jax.jit(lambda p: m.loss_fn(unrolled, p, batch)).lower(params).as_text()
    assert "while" not in text and "stablehlo.while" not in text  # no loop over the layers


def test_full_remat_keeps_less_than_none():
    cfg = dataclasses.replace(m.PRESETS["small"], num_layers=4)
    params = jax.eval_shape(lambda: m.init_params(cfg, jax.random.key(0)))
    batch = jax.ShapeDtypeStruct((8, 257), jnp.int32)

    def peak(policy):
        c = dataclasses.replace(cfg, remat_policy=policy)
        fn = jax.jit(jax.grad(lambda p, b: m.loss_fn(c, p, b)))
        return peak_bytes(fn.lower(params, batch).compile())

    assert peak("full") < peak("none")


def test_flash_off_tpu_is_one_line_naming_the_choices():
    from trainer_helpers import make_cfg

    from elastix_trainer.train import model_config

    with pytest.raises(UsageError) as e:
        model_config(make_cfg(attention="flash"))
    assert "TPU kernel" in e.value.message and "dot_product" in e.value.hint


def test_flops_are_maxtexts_causal_count():
    """6 x weights per token, plus causal attention: 6 x layers x q_dim x seq per token (half
    the non-causal 12, as MaxText counts since July 2025)."""
    cfg = m.PRESETS["qwen3-0.6b"]
    d, L, q, kv = cfg.d_model, cfg.num_layers, 16 * 128, 8 * 128
    weights = L * (d * q + 2 * d * kv + q * d + 3 * d * cfg.ffn_dim) + d * cfg.vocab_size
    tokens = 16 * 1024
    assert m.flops_per_step(cfg, 16, 1024) == tokens * (6 * weights + 6 * L * q * 1024)
