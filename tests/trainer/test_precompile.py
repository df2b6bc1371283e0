"""replica-resize: the step for the smaller mesh is compiled in the background, so the first
step after a slice loss runs an executable that already exists.

Compilations are counted with ``jax.monitoring`` (JAX's backend-compile event, with the thread
that compiled), not timed. The same scenario with the background compile switched off shows
the compile the fix takes off the critical path, so the counter is known to see it.
"""

from __future__ import annotations

import threading

import jax
from trainer_helpers import make_cfg, run_elastic

from elastix_trainer.health import ManualHealth

_COMPILE = "/jax/core/compile/backend_compile_duration"
_seen: list[tuple[str, str]] = []  # (thread name, function name) while recording
_recording = threading.Event()


def _listener(event: str, duration: float, **kw) -> None:
    if event == _COMPILE and _recording.is_set():
        _seen.append((threading.current_thread().name, str(kw.get("fun_name", ""))))


jax.monitoring.register_event_duration_secs_listener(_listener)


def _resize_run(tmp_path, precompile: bool, lr: float):
    """4 slices, slice 3 lost before step 7; returns (outcome, trainer, runtime, compiles on
    the critical path, i.e. outside the background thread, from the fault to the first step
    after it). Compiled steps are kept per
    process and per config: each test uses its own ``lr`` so that none finds another's."""
    _seen.clear()
    cfg = make_cfg(checkpoint_dir=str(tmp_path / f"ck-{precompile}"), steps=10, lr=lr,
                   elastic_mode="replica-resize", min_slices=3, snapshot_period=2)
    health = ManualHealth(4)
    window: list[tuple[str, str]] = []

    def setup(trainer, runtime):
        runtime.precompile = precompile

        def before(tr, n):
            if n == 7 and not _recording.is_set() and runtime.recoveries == 0:
                if runtime.precompiling is not None:
                    runtime.precompiling.join()  # the test waits; a real run would be unlucky
                _recording.set()
                health.set_down(3)

        def after(tr, n, seconds):
            if _recording.is_set() and runtime.recoveries == 1:
                _recording.clear()
                window.extend(x for x in _seen if x[0] != "elastix-precompile")

        trainer.before_step.append(before)
        trainer.after_step.append(after)

    outcome, trainer, runtime = run_elastic(cfg, health, setup=setup)
    _recording.clear()
    return outcome, trainer, runtime, window


def test_first_step_after_a_resize_does_not_compile(tmp_path):
    outcome, trainer, runtime, window = _resize_run(tmp_path, precompile=True, lr=1.1e-2)
    assert outcome.status == "completed", outcome
    assert [r["to_slices"] for r in trainer.events.of("elastic_resize")] == [3]
    assert runtime.precompiling is not None and not runtime.precompiling.is_alive()
    assert window == []


def test_without_the_background_compile_the_resize_compiles_the_step(tmp_path):
    outcome, trainer, _, window = _resize_run(tmp_path, precompile=False, lr=1.2e-2)
    assert outcome.status == "completed", outcome
    assert any("train_step" in name for _, name in window), window

