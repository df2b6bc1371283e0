"""Tests that need a TPU chip: the kernels against their references there, and the memory fit.

Skipped unless ``ELASTIX_CHIP_TESTS=1``, which only the TPU machine's command sets (the check
never starts JAX's backend here: the trainer tests start it with 8 CPU devices of their own).
On a machine with the chip (the trainer's dependencies beside its JAX: ``pip install
'.[trainer]'``, or the wheels carried in ``.whl-tpu/``), in one process:

    . .whl-tpu/install.sh && ELASTIX_CHIP_TESTS=1 python3 -m pytest -q --noconftest \\
        -o addopts="" -p no:cacheprovider tests/chip

``docs/contributing.md`` says when they last ran there.
"""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.skipif(
    os.environ.get("ELASTIX_CHIP_TESTS") != "1",
    reason="needs a TPU chip: run on the TPU machine with ELASTIX_CHIP_TESTS=1 (module docstring)")


def _close(got, want, tol):
    import numpy as np

    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert float(np.max(np.abs(got - want))) <= tol * max(float(np.max(np.abs(want))), 1e-6)


def test_the_splash_kernel_matches_the_reference_on_the_chip():
    import jax
    import jax.numpy as jnp

    from elastix_trainer.kernels import attention

    assert jax.default_backend() == "tpu"
    keys = jax.random.split(jax.random.key(0), 3)
    q = jax.random.normal(keys[0], (2, 16, 1024, 128), jnp.bfloat16)
    k = jax.random.normal(keys[1], (2, 8, 1024, 128), jnp.bfloat16)
    v = jax.random.normal(keys[2], (2, 8, 1024, 128), jnp.bfloat16)
    _close(jax.jit(attention.flash)(q, k, v), jax.jit(attention.dot_product)(q, k, v), 3e-2)

    def grads(fn):
        return jax.jit(jax.grad(lambda q, k, v: jnp.sum(fn(q, k, v).astype(jnp.float32) ** 2),
                                argnums=(0, 1, 2)))(q, k, v)

    for got, want in zip(grads(attention.flash), grads(attention.dot_product), strict=True):
        _close(got, want, 5e-2)


def test_a_batch_that_cannot_fit_is_refused_before_the_first_step():
    from elastix_trainer import fit
    from elastix_trainer.config import from_mapping
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.train import Trainer

    tr = Trainer(from_mapping(dict(preset="qwen3-0.6b", seq_len=1024, batch_per_device=64,
                                   remat_policy="full", steps=2)), EventLog(None))
    with pytest.raises(fit.DoesNotFit) as e:
        tr.start([0])
    assert "a device has 15.7" in e.value.message and "--batch-per-device" in e.value.hint


def test_the_default_qwen_batch_fits_and_steps():
    from elastix_trainer.config import from_mapping
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.train import Trainer

    tr = Trainer(from_mapping(dict(preset="qwen3-0.6b", seq_len=1024, batch_per_device=16,
                                   steps=3)), EventLog(None))
    s = tr.start([0])
    assert s.fns.model.attention == "flash"
    tr.train(s)
    assert len(tr.events.of("step")) == 3
