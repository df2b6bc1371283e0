"""Train state, optimizer and the pure jitted train step.

State is ``{"params", "opt_state", "step"}``. The step is a pure function of (state, batch):
no dropout and no sampling, so a run resumed from a checkpoint recomputes exactly what an
uninterrupted run computes. Compiled functions are cached per (model, optimizer, mesh, seam), so
re-entering on a mesh seen before (scale back up, a second recovery) costs no recompile.
"""

from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import optax

from elastix_trainer import fault
from elastix_trainer.mesh import batch_sharding, num_devices, state_shardings
from elastix_trainer.model import ModelConfig, init_params, loss_fn


@dataclasses.dataclass(frozen=True)
class OptConfig:
    """AdamW with linear warm-up and a cosine (or constant) schedule."""

    lr: float = 3e-3
    """Peak learning rate."""
    warmup_steps: int = 10
    """Linear warm-up length."""
    total_steps: int = 100
    """Schedule length (the run's ``--steps``)."""
    schedule: str = "cosine"
    """``cosine`` (decay to 10 % of peak) or ``constant``."""
    weight_decay: float = 0.01
    """AdamW decoupled weight decay."""
    clip_norm: float = 1.0
    """Global gradient-norm clip."""


def make_optimizer(opt: OptConfig) -> optax.GradientTransformation:
    """The AdamW chain for ``opt``."""
    warmup = max(0, min(opt.warmup_steps, opt.total_steps - 1))
    if opt.schedule == "constant":
        sched = optax.join_schedules(
            [optax.linear_schedule(0.0, opt.lr, max(warmup, 1)), optax.constant_schedule(opt.lr)],
            [max(warmup, 1)])
    else:
        sched = optax.warmup_cosine_decay_schedule(
            0.0, opt.lr, max(warmup, 1), max(opt.total_steps, warmup + 2), end_value=opt.lr * 0.1)
    return optax.chain(optax.clip_by_global_norm(opt.clip_norm),
                       optax.adamw(sched, weight_decay=opt.weight_decay))


def init_state(model: ModelConfig, opt: OptConfig, seed: int) -> dict:
    """Fresh state; parameters from ``seed`` only."""
    params = init_params(model, jax.random.key(seed))
    return {"params": params, "opt_state": make_optimizer(opt).init(params),
            "step": jnp.zeros((), jnp.int32)}


@dataclasses.dataclass(frozen=True)
class StepFns:
    """Compiled functions and shardings for one mesh."""

    init: object
    step: object
    abstract: object  # ShapeDtypeStructs with shardings (Orbax restore target)
    shardings: object
    batch_sharding: object
    num_devices: int


@functools.lru_cache(maxsize=16)
def step_fns(model: ModelConfig, opt: OptConfig, mesh, batch_per_device: int, seed: int,
             with_seam: bool) -> StepFns:
    """Jitted init and train step for ``mesh``, with NamedShardings for every leaf."""
    tx = make_optimizer(opt)
    shapes = jax.eval_shape(lambda: init_state(model, opt, seed))
    shardings = state_shardings(mesh, shapes)
    bsh = batch_sharding(mesh)
    rows = batch_per_device * num_devices(mesh)

    def train_step(state, batch):
        if with_seam:
            # Runs on every device before any collective; see fault.py.
            batch = batch + fault.seam(mesh, state["step"] + 1, rows)[:, None]
        loss, grads = jax.value_and_grad(lambda p: loss_fn(model, p, batch))(state["params"])
        updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        return {"params": params, "opt_state": opt_state, "step": state["step"] + 1}, loss

    init = jax.jit(lambda: init_state(model, opt, seed), out_shardings=shardings)
    step = jax.jit(train_step, in_shardings=(shardings, bsh), out_shardings=(shardings, None),
                   donate_argnums=0)
    abstract = jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
                            shapes, shardings)
    return StepFns(init, step, abstract, shardings, bsh, num_devices(mesh))
