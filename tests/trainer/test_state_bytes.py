"""``state_bytes``: what the launcher's preflight says a preset's state weighs, without JAX,
against the bytes of the real state ``init_state`` makes (issue 37)."""

from __future__ import annotations

import jax
import pytest

from elastix.protocol.presets import state_bytes
from elastix_trainer.config import preset_names
from elastix_trainer.model import PRESETS
from elastix_trainer.step import OptConfig, init_state


@pytest.mark.parametrize("preset", ["tiny", "small", "bench-1g", "qwen3-0.6b"])
def test_the_estimate_is_the_real_states_bytes(preset):
    shapes = jax.eval_shape(lambda: init_state(PRESETS[preset], OptConfig(), 0))
    real = sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(shapes))
    est = state_bytes(preset)
    # The step counters (a few int32 scalars) are the only bytes the estimate leaves out.
    assert 0 <= real - est <= 64, (preset, real, est)


def test_every_preset_is_sized_and_an_unknown_one_is_not():
    assert all(state_bytes(p) for p in preset_names())
    assert state_bytes("no-such-preset") is None
