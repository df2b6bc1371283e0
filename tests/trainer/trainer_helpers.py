"""Helpers shared by the trainer tests (kept out of conftest.py so they import by a unique name)."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

from polling import wait_until as _wait_until

REPO = pathlib.Path(__file__).resolve().parents[2]


_SUBPROCESS_JAX_CACHE: str | None = None


def _subprocess_jax_cache() -> dict[str, str]:
    """JAX's own settings for one compilation cache shared by this session's trainer
    subprocesses (a temp dir, not the in-process one: two processes writing one entry can leave
    it half written for a third). The trainer turns its own cache on only when a flag or the
    local backend asks, and then that one wins; otherwise each process compiled the same tiny
    programs from scratch. ``ELASTIX_TEST_NO_SHARED_JAX_CACHE=1`` turns it off."""
    global _SUBPROCESS_JAX_CACHE
    if os.environ.get("ELASTIX_TEST_NO_SHARED_JAX_CACHE") == "1":
        return {}
    if _SUBPROCESS_JAX_CACHE is None:
        import atexit
        import shutil
        import tempfile

        _SUBPROCESS_JAX_CACHE = tempfile.mkdtemp(prefix="elastix-test-jax-cache-sub-")
        atexit.register(shutil.rmtree, _SUBPROCESS_JAX_CACHE, ignore_errors=True)
    return {"JAX_COMPILATION_CACHE_DIR": _SUBPROCESS_JAX_CACHE,
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "-1"}


def cli_env(**extra: str) -> dict:
    """Environment for a trainer subprocess on 8 CPU devices."""
    env = dict(os.environ)
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=8",
               PYTHONUNBUFFERED="1")
    env.update(_subprocess_jax_cache())
    env.update(extra)
    return env


def run_cli(args: list[str], timeout: float = 240, **env: str) -> subprocess.CompletedProcess:
    """Run ``python -m elastix_trainer`` to completion. A run given ``--compilation-cache-dir``
    gets no shared cache beside it: what it does with its own (or without one) is the test."""
    full = cli_env(**env)
    if "--compilation-cache-dir" in args:
        full.pop("JAX_COMPILATION_CACHE_DIR", None)
    return subprocess.run([sys.executable, "-m", "elastix_trainer", *args], capture_output=True,
                          text=True, timeout=timeout, env=full, cwd=REPO)


def wait_until(cond, timeout: float, what: str, interval: float = 0.002):
    """Poll ``cond`` (fast: the trainer tests race a process's save)."""
    return _wait_until(cond, timeout, what, interval)


BASE = dict(preset="tiny", steps=8, batch_per_device=1, seq_len=32, lr=1e-2, warmup_steps=2,
            num_slices=4, checkpoint_period=4, max_to_keep=10)


def make_cfg(**overrides):
    """A validated tiny TrainConfig (4 slices x 2 devices)."""
    from elastix_trainer.config import from_mapping

    return from_mapping({**BASE, **overrides})


def losses(events) -> dict[int, float]:
    """step -> loss; a step run twice (after a recovery) keeps its last value."""
    return {r["step"]: r["loss"] for r in events.of("step")}


def make_trainer(cfg, events=None):
    """A trainer built as ``elastix-train`` builds one (``program.build_trainer``: on CPU with
    the local stand-in attached), with no runtime driving it: it compiles the same step a run
    does, so its losses are bit-for-bit those of ``run_elastic``."""
    from elastix_trainer.elastic.health import StaticHealth
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.program import build_trainer

    events = EventLog(None) if events is None else events
    return build_trainer(cfg, events, StaticHealth(cfg.num_slices))[0]


def on(trainer, **fns):
    """Attach hooks made of plain functions, named as ``seams.Hooks``' methods (tests flip
    health at exact steps): ``on(trainer, before_dispatch=lambda session, n: ...)``."""
    from elastix_trainer.seams import Hooks

    hooks = Hooks()
    for name, fn in fns.items():
        if not callable(getattr(Hooks, name, None)):
            raise TypeError(f"seams.Hooks has no method {name}")
        setattr(hooks, name, fn)
    trainer.add_hooks(hooks)
    return hooks


def tap(trainer, *, first=None, then=None):
    """Wrap the trainer's devices (``seams.Devices``: the local stand-in) so that plain
    functions run at its calls: ``first`` before the devices' own method of that name (a kill
    during a copy, before the stand-in's verdict on it), ``then`` after it (a kill once the
    session's hosts are taken). Returns the wrapper, now ``trainer.devices``."""
    from elastix_trainer.seams import Devices

    inner = trainer.devices
    first, then = first or {}, then or {}
    for name in (*first, *then):
        if not callable(getattr(Devices, name, None)):
            raise TypeError(f"seams.Devices has no method {name}")

    class Tapped(Devices):
        step_prologue = (staticmethod(inner.step_prologue) if inner.step_prologue is not None
                         else None)

        def __getattribute__(self, name):
            if name.startswith("_") or not callable(getattr(Devices, name, None)):
                return object.__getattribute__(self, name)
            own = getattr(inner, name)

            def call(*args):
                if name in first:
                    first[name](*args)
                out = own(*args)
                if name in then:
                    then[name](*args)
                return out
            return call

    trainer.devices = Tapped()
    return trainer.devices


def run_elastic(cfg, health=None, events_path=None, setup=None):
    """Run the elastic runtime in-process, assembled as ``elastix-train`` assembles it.
    Returns (outcome, trainer, runtime)."""
    from elastix_trainer.elastic.health import StaticHealth
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.program import assemble

    events = EventLog(events_path)
    health = health or StaticHealth(cfg.num_slices)
    runtime = assemble(cfg, events, health)
    trainer = runtime.trainer
    if setup is not None:
        setup(trainer, runtime)
    try:
        outcome = runtime.run()
    finally:
        events.close()
    return outcome, trainer, runtime


def shards_on_gcs(tmp_path, dest: str, shards: int):
    """ArrayRecord shards made from a small text in ``tmp_path/shards`` and copied to ``dest``
    (a ``gs://`` directory); returns the local directory, to compare batches with."""
    from elastix_trainer.data import prepare_data
    from elastix_trainer.storage import epath

    (tmp_path / "a.txt").write_text("The quick brown fox jumps over the lazy dog. " * 40)
    local = tmp_path / "shards"
    prepare_data([str(tmp_path / "a.txt")], str(local), 32, shards)
    for f in sorted(local.iterdir()):
        (epath(dest) / f.name).write_bytes(f.read_bytes())
    return local



def assert_restores(ck, step: int, want: dict, data) -> None:
    """``ck`` (a ``Checkpointer``) restores ``step`` as the arrays ``want`` and the data
    ``data``, then is closed."""
    import jax
    import numpy as np

    abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), want)
    state, got, _ = ck.restore(step, abstract)
    ck.close()
    assert got == data
    for k in want:
        np.testing.assert_array_equal(np.asarray(state[k]), want[k])
