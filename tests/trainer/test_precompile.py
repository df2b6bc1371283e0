"""replica-resize: the step for the smaller mesh is compiled in the background, so the first
step after a slice loss runs an executable that already exists; on CPU that executable has
also run once, on throw-away zeros, so its first run is not on the critical path either.

Compilations are counted with ``jax.monitoring`` (JAX's backend-compile event, with the thread
that compiled), not timed. The same scenario with the background compile switched off shows
the compile the fix takes off the critical path, so the counter is known to see it. The
warm-up is checked by what it must leave alone: the run's losses and data position, and the
fault seam's verdicts.
"""

from __future__ import annotations

import threading

import jax
from trainer_helpers import losses, make_cfg, on, run_elastic

from elastix_trainer.elastic.health import ManualHealth
from elastix_trainer.elastic.local import fault
from elastix_trainer.elastic.runtime import warm_by_default
from elastix_trainer.mesh import build_mesh
from elastix_trainer.step import warm_up

_COMPILE = "/jax/core/compile/backend_compile_duration"
_seen: list[tuple[str, str]] = []  # (thread name, function name) while recording
_recording = threading.Event()


def _listener(event: str, duration: float, **kw) -> None:
    if event == _COMPILE and _recording.is_set():
        _seen.append((threading.current_thread().name, str(kw.get("fun_name", ""))))


jax.monitoring.register_event_duration_secs_listener(_listener)


def _resize_run(tmp_path, precompile: bool, lr: float, at_fault=None):
    """4 slices, slice 3 lost before step 7; returns (outcome, trainer, runtime, compiles on
    the critical path, i.e. outside the background thread, from the fault to the first step
    after it). ``at_fault(trainer)`` runs just before the fault. Compiled steps are kept per
    process and per config: each test uses its own ``lr`` so that none finds another's."""
    _seen.clear()
    cfg = make_cfg(checkpoint_dir=str(tmp_path / f"ck-{precompile}"), steps=10, lr=lr,
                   elastic_mode="replica-resize", min_slices=3, snapshot_period=2)
    health = ManualHealth(4)
    window: list[tuple[str, str]] = []

    def setup(trainer, runtime):
        runtime.precompile = precompile

        def before(session, n):
            if n == 7 and not _recording.is_set() and runtime.recoveries == 0:
                if runtime.precompiling is not None:
                    runtime.precompiling.join()  # the test waits; a real run would be unlucky
                if at_fault is not None:
                    at_fault(trainer)
                _recording.set()
                health.set_down(3)

        def after(session, n, done_at, seconds):
            if _recording.is_set() and runtime.recoveries == 1:
                _recording.clear()
                window.extend(x for x in _seen if x[0] != "elastix-precompile")

        on(trainer, before_dispatch=before)
        on(trainer, after_complete=after)

    outcome, trainer, runtime = run_elastic(cfg, health, setup=setup)
    _recording.clear()
    return outcome, trainer, runtime, window


def test_without_the_background_compile_the_resize_compiles_the_step(tmp_path):
    outcome, trainer, _, window = _resize_run(tmp_path, precompile=False, lr=1.2e-2)
    assert outcome.status == "completed", outcome
    assert any("train_step" in name for _, name in window), window



def test_the_first_step_after_a_resize_compiles_nothing_and_changes_nothing(tmp_path):
    """The step for the 3-slice mesh was compiled and ran once in the background before the
    fault, while the loop trained, so the first step after the resize compiles nothing on the
    critical path; the run's losses and data position are exactly those of the same run with
    nothing in the background (which reuses the executables: same config)."""
    warmed = {}

    def at_fault(tr):
        smaller = tr.step_fns_for(build_mesh(tr.slices, {0, 1, 2}))
        warmed["before the fault"] = smaller.warmed.is_set()

    outcome, trainer, runtime, window = _resize_run(tmp_path, True, 1.3e-2, at_fault)
    assert outcome.status == "completed", outcome
    assert [r["to_slices"] for r in trainer.events.of("elastic_resize")] == [3]
    assert runtime.precompiling is not None and not runtime.precompiling.is_alive()
    assert warmed == {"before the fault": True}
    assert window == []
    outcome, plain, _, _ = _resize_run(tmp_path / "plain", False, 1.3e-2)
    assert outcome.status == "completed", outcome
    assert [r["to_slices"] for r in plain.events.of("elastic_resize")] == [3]
    assert losses(trainer.events) == losses(plain.events)
    assert trainer.data.state() == plain.data.state()


def test_warm_up_reads_no_fault_verdict_and_runs_once():
    """A verdict armed for step 1 (the step a zero state's counter would name) neither fails
    the warm-up nor is consumed by it; a second warm-up of the same step does nothing."""
    from elastix_trainer.elastic.health import StaticHealth
    from elastix_trainer.obs.events import EventLog
    from elastix_trainer.program import build_trainer

    tr, _ = build_trainer(make_cfg(lr=1.4e-2), EventLog(None), StaticHealth(4))  # with the seam
    fns = tr.step_fns_for(build_mesh(tr.slices, {1, 2, 3}))
    fault.arm(1, {0})
    try:
        assert warm_up(fns) is True
        assert fns.warmed.is_set()
        assert warm_up(fns) is False
        assert fault._verdicts.get(1, "").startswith("DATA_LOSS")
    finally:
        fault.disarm()


def test_the_warm_up_is_for_the_cpu_backend_only(monkeypatch):
    """On Pathways (the IFRT proxy) a throw-away step would need a second copy of the state
    in the slices' memory: off by default there."""
    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    assert warm_by_default() is True
    monkeypatch.setenv("JAX_PLATFORMS", "proxy")
    assert warm_by_default() is False
