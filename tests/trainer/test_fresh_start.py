"""A fresh start (no checkpoint, no snapshot) compiles the initial state's program beside the
step's, not after it: the two were compiled back to back, the second core idle (on CPU the init
program takes about half as long as the step to compile).

No timing: the step's build is held until the init program's compile has been seen (JAX's
backend-compile event, with the function's name). A fresh start that waited for the step first
would never release it; the hold gives up after a generous timeout and the test says why.
"""

from __future__ import annotations

import threading

import jax
from trainer_helpers import make_cfg

from elastix_trainer import step as step_mod
from elastix_trainer.elastic.health import StaticHealth
from elastix_trainer.obs.events import EventLog
from elastix_trainer.program import build_trainer

_COMPILE = "/jax/core/compile/backend_compile_duration"
_init_compiled = threading.Event()


def _listener(event: str, duration: float, **kw) -> None:
    if event == _COMPILE and "fresh_init" in str(kw.get("fun_name", "")):
        _init_compiled.set()


jax.monitoring.register_event_duration_secs_listener(_listener)


def test_fresh_start_compiles_init_beside_the_step(tmp_path, monkeypatch):
    build = step_mod._build
    held: list[bool] = []

    def held_build(*args):
        held.append(_init_compiled.wait(120))  # released only by the init program's compile
        return build(*args)

    monkeypatch.setattr(step_mod, "_build", held_build)
    _init_compiled.clear()
    # a seed of its own: no other test in this process has built (or cached) these programs
    cfg = make_cfg(checkpoint_dir=str(tmp_path / "ck"), seed=4242, num_slices=2)
    trainer, _ = build_trainer(cfg, EventLog(None), StaticHealth(2))
    try:
        session = trainer.start(range(2))
    finally:
        if trainer.ckpt is not None:
            trainer.ckpt.close()
    assert held == [True], "the init program compiled only after the step's build"
    assert session.step == 0
    assert int(session.state["step"]) == 0
    fresh = jax.jit(lambda: step_mod.init_state(trainer.model, trainer.opt, 4242))()
    assert jax.numpy.array_equal(session.state["params"]["embed"], fresh["params"]["embed"])
