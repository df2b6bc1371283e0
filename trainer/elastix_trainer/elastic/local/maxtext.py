"""A Pathways stand-in for MaxText's own elastic path, on the local backend's CPU devices.

MaxText's ``elastic_enabled=true`` wraps training in pathwaysutils' ``elastic_retry``, which
needs three things a CPU backend lacks. This module stands in for exactly those, in the head
process, and nothing else (pathwaysutils' retry loop, its waiting, MaxText's cleanup and its
Orbax restore run unchanged):

1. **"Is this Pathways?"** MaxText asks ``pathwaysutils.is_pathways_backend_used()``
   (``maxtext/utils/elastic_utils.py`` in maxtext 0.2.5: ``elastic_enabled``), which reads
   ``jax_platforms`` for ``proxy``. Locally JAX runs on ``cpu``, so the package attribute
   answers True. pathwaysutils' own ``initialize()`` keeps its private check (``_initialize``):
   no proxy backend is registered.
2. **Slices.** pathwaysutils groups ``jax.devices()`` by ``device.slice_index``
   (``pathwaysutils/elastic/elastic.py``, ``get_slice_to_devices``), which CPU devices do not
   have. The local plan's groups stand in: ``ELASTIX_DEVICES_PER_SLICE`` devices per slice, in
   device-id order, as elastix's own trainer groups them.
3. **A lost slice, in time.** On Pathways a device operation that needs a dead TPU host fails
   with a ``jax.errors.JaxRuntimeError`` carrying ``DATA_LOSS`` (a hung host holds it until
   Pathways declares the host lost), and pathwaysutils' probe (``get_active_slice_indices``)
   finds the slice down until its replacement is up. Here both come from the health source
   elastix's trainer uses (the local slice-host processes,
   :class:`elastix_trainer.elastic.local.health.LocalHeartbeatHealth`), with the same contract
   as elastix's own stand-in: an operation counts only once every host has *answered* after
   it (``answer``). Two operations ask:

   - MaxText's step, on entering its ``jax.profiler.StepTraceAnnotation("train",
     step_num=step)`` block (maxtext 0.2.5 ``trainers/pre_train/train.py``,
     ``training_loop_iteration``): the step before it was dispatched, so the hosts answer in
     its shadow; the error reaches MaxText's loop where a device error would;
   - MaxText's set-up of the training state, at start-up and after each elastic event
     (``maxtext_utils.setup_initial_state``, maxtext 0.2.5: a restore, or the jitted init),
     once its arrays exist: a loss during start-up or a restore is raised there, not at the
     first step entry (which may come a compile later). The module is patched as it is first
     imported (an import hook: the stand-in is installed before MaxText imports anything);
   - Orbax's device-to-host copy of a checkpoint (``replica_slices.transfer_arrays_to_host``,
     orbax-checkpoint 0.12.8, the blocking half of every save, sync or async): once the copy
     ends, every host must answer, or the save raises ``DATA_LOSS`` before anything is
     written. So the checkpoint of a step in flight at a kill never commits (its
     ``<step>.orbax-checkpoint-tmp`` directory is never renamed), as on Pathways, where the
     copy needs the dead host's memory; a save whose copy ended before the kill commits.

Item 3 is active for every MaxText head the local backend runs (with elastic off the error
ends the head, and the workload restarts it only while ``--max-restarts`` allows: its default,
0, ends the workload, as JobSet's ``failurePolicy.maxRestarts: 0`` does); items 1 and 2
only with ``elastic_enabled=true``. Activation: ``sitecustomize`` in the head's ``PYTHONPATH``
(the local backend puts it there, ``elastix.backends.local.maxtext``) calls
:func:`activate_from_env` when ``ELASTIX_MAXTEXT_STANDIN`` is set; the variable is removed so
that processes MaxText starts do not stand in a second time.

The stand-in is written against the versions in :data:`SUPPORTED`, the attributes it replaces
are checked to exist, and on anything else it refuses with one line (``python -m
elastix_trainer.elastic.local.maxtext --check`` is what the launcher runs before it submits). This
module imports only the standard library at the top: the check runs in the MaxText environment
(Python 3.12) without elastix's dependencies; JAX and pathwaysutils are imported on activation.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import importlib.util
import json
import os
import sys
import threading

from elastix.protocol import envvars

SUPPORTED = {"maxtext": "0.2.5", "pathwaysutils": "0.1.13", "jax": "0.12.0.1",
             "orbax-checkpoint": "0.12.8"}
"""Distribution -> the version the stand-in was written against and tested with."""

REFUSED_EXIT = 2
"""The head's exit code when it refuses (a spec problem, as the CLI's exit 2)."""


def installed() -> dict[str, str | None]:
    """The installed version of each distribution of :data:`SUPPORTED` (None: missing)."""
    versions: dict[str, str | None] = {}
    for dist in SUPPORTED:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = None
    return versions


def version_problem(versions: dict[str, str | None]) -> str | None:
    """Why ``versions`` are not the ones the stand-in knows, or None."""
    wrong = [f"{d} {versions.get(d) or 'missing'}" for d, v in SUPPORTED.items()
             if versions.get(d) != v]
    if not wrong:
        return None
    return ("the local Pathways stand-in for MaxText knows "
            + ", ".join(f"{d} {v}" for d, v in SUPPORTED.items()) + "; this environment has "
            + ", ".join(wrong))


def slice_groups(devices, devices_per_slice: int) -> dict[int, list]:
    """The local plan's slices: consecutive groups of ``devices_per_slice`` devices by id."""
    ordered = sorted(devices, key=lambda d: d.id)
    out: dict[int, list] = {}
    for i, d in enumerate(ordered):
        out.setdefault(i // max(1, devices_per_slice), []).append(d)
    return out


class StandIn:
    """The health-fed parts: the slice probe and the ``DATA_LOSS`` of an operation that needs
    a lost host.

    ``roll`` is the hosts (their pids) the run's devices live on: taken once every slice is
    first up, and again when a recovery finds every slice back. An operation asks them all to
    answer (``require``); a host that exited or was replaced fails it at once, a hung one once
    its heartbeats are a timeout old. ``raised`` marks that a loss has reached MaxText: from
    then on a probe is pathwaysutils waiting for slices, so it asks the health source to count
    replacements (``wait_for`` with no wait), and takes the new roll once all are back.
    """

    def __init__(self, health, num_slices: int, kill_at: str | None = None) -> None:
        self.health = health
        self.all = frozenset(range(num_slices))
        self.raised = False
        self.kill_at = kill_at
        """An operation (``"checkpoint copy of step 10"``) at which to SIGKILL slice 0's host 0
        once, just before asking (``ELASTIX_MAXTEXT_STANDIN_KILL_AT``): a kill aimed inside an
        operation that takes milliseconds, for tests and chaos."""
        self._lock = threading.Lock()
        self._roll: dict | None = None
        self._rolled = threading.Event()

    def take_roll(self, timeout: float) -> None:
        """Once every slice is up (or after ``timeout`` s): the hosts the run now needs."""
        from elastix_trainer.elastic.health import SliceWaitTimeout

        try:
            self.health.wait_for(len(self.all), timeout)
        except SliceWaitTimeout:
            pass  # the first operation finds the missing host and says so
        with self._lock:
            if self._roll is None:
                self._roll = self.health.roll(self.all)
        self._rolled.set()

    def require(self, what: str) -> None:
        """Raise what an operation that needs a lost host raises on Pathways (``DATA_LOSS``)."""
        if not self._rolled.wait(self.health.timeout * 30):
            return  # no host ever came up: the probe, not the operation, says so
        if self.kill_at is not None and what == self.kill_at:
            self._kill_aimed()
        with self._lock:
            roll = dict(self._roll or {})
        gone = self.health.answer(self.all, roll)
        if not gone:
            return
        import jax

        with self._lock:
            self.raised = True
        raise jax.errors.JaxRuntimeError(
            f"DATA_LOSS: slice(s) {sorted(gone)} lost a host {what} "
            f"({'; '.join(gone[s] for s in sorted(gone))}; elastix local Pathways stand-in)")

    def _kill_aimed(self) -> None:
        import signal

        self.kill_at = None
        pid = self.health.host_pids().get((0, 0))
        if pid is not None:
            sys.stderr.write(f"elastix: aimed kill: SIGKILL slice 0 host 0 (pid {pid})\n")
            os.kill(pid, signal.SIGKILL)

    def check_step(self, step) -> None:
        """Entering step ``step``: the hosts answer, or the step fails with ``DATA_LOSS``."""
        self.require(f"before step {step}")

    def active(self, slice_to_devices=None, checker=None) -> frozenset[int]:
        """pathwaysutils' ``get_active_slice_indices``, answered by the health source."""
        from elastix_trainer.elastic.health import SliceWaitTimeout

        del checker  # its pmap probe cannot fail on CPU: the health source decides
        wanted = self.all if slice_to_devices is None else frozenset(slice_to_devices)
        with self._lock:
            if self.raised:
                try:
                    live = self.health.wait_for(len(self.all), 0.0)
                    self.raised = False
                    self._roll = self.health.roll(self.all)  # the attempt to come needs these
                except SliceWaitTimeout:
                    live = self.health.live_slices()
            else:
                live = self.health.live_slices()
        return wanted & live


def _patch_step(standin: StandIn) -> None:
    import jax.profiler

    base = jax.profiler.StepTraceAnnotation

    class StepTraceAnnotation(base):
        """jax's step annotation; a ``train`` step first asks whether a slice was lost."""

        def __init__(self, name: str, **kwargs) -> None:
            if name == "train":
                standin.check_step(kwargs.get("step_num"))
            super().__init__(name, **kwargs)

    jax.profiler.StepTraceAnnotation = StepTraceAnnotation


def _patch_copy(standin: StandIn) -> None:
    """Orbax's device-to-host copy of a save: once it ends, every host must answer."""
    from orbax.checkpoint._src.serialization import replica_slices

    base = replica_slices.transfer_arrays_to_host
    if not callable(base):
        raise RuntimeError("orbax replica_slices.transfer_arrays_to_host is missing")

    def transfer_arrays_to_host(arrays, *args, **kwargs):
        out = base(arrays, *args, **kwargs)
        standin.require(f"during the checkpoint copy of step {_saving_step()}")
        return out

    replica_slices.transfer_arrays_to_host = transfer_arrays_to_host


class _PatchOnImport(importlib.abc.MetaPathFinder):
    """Run ``patch(module)`` right after module ``name`` is first imported (once)."""

    def __init__(self, name: str, patch) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once; and find_spec below must not find this finder
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run, patch = spec.loader.exec_module, self.patch

        def exec_module(module) -> None:
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module  # this module's own loader instance
        return spec


def _patch_state_setup(standin: StandIn) -> None:
    """MaxText's training-state set-up (a restore or the init) must end with every host
    answering, once its arrays exist."""
    def patch(module) -> None:
        base = getattr(module, "setup_initial_state", None)
        if not callable(base):
            return  # another MaxText: the step entry still asks

        def setup_initial_state(*args, **kwargs):
            out = base(*args, **kwargs)
            import jax

            jax.block_until_ready(out[0] if isinstance(out, tuple) else out)
            standin.require("while setting up the training state")
            return out

        module.setup_initial_state = setup_initial_state

    sys.meta_path.insert(0, _PatchOnImport("maxtext.utils.maxtext_utils", patch))


def _saving_step() -> object:
    """The step MaxText is saving, from its ``save_checkpoint(checkpoint_manager, step, ...)``
    frame on this thread's stack (maxtext 0.2.5 ``common/checkpointing.py``), else ``?``: for
    the error's words and an aimed kill only."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "save_checkpoint" and "step" in frame.f_locals:
            return frame.f_locals["step"]
        frame = frame.f_back
    return "?"


def _patch_pathways(standin: StandIn, devices_per_slice: int) -> None:
    import pathwaysutils
    from pathwaysutils.elastic import elastic

    for owner, name in ((pathwaysutils, "is_pathways_backend_used"),
                        (elastic, "get_slice_to_devices"), (elastic, "get_active_slice_indices")):
        if not callable(getattr(owner, name, None)):
            raise RuntimeError(f"{owner.__name__}.{name} is missing")
    pathwaysutils.is_pathways_backend_used = lambda: True
    elastic.get_slice_to_devices = lambda devices: slice_groups(devices, devices_per_slice)
    elastic.get_active_slice_indices = standin.active


def _refuse(message: str) -> None:
    sys.stderr.write(f"elastix: {message}\n")
    sys.stderr.flush()
    os._exit(REFUSED_EXIT)  # from sitecustomize: no traceback, no half-started MaxText


def activate(env: dict[str, str]) -> StandIn:
    """Install the stand-in in this process (see the module docstring)."""
    problem = version_problem(installed())
    if problem:
        _refuse(problem + "; run MaxText without the stand-in on GKE, or install those "
                          "versions (bash .ci/setup-maxtext)")
    from elastix_trainer.elastic.local.health import LocalHeartbeatHealth

    num_slices = int(env.get(envvars.NUM_SLICES, "1"))
    devices_per_slice = int(env.get(envvars.DEVICES_PER_SLICE, "1"))
    standin = StandIn(LocalHeartbeatHealth.from_env(num_slices, env), num_slices,
                      kill_at=env.get(envvars.MAXTEXT_STANDIN_KILL_AT) or None)
    threading.Thread(target=standin.take_roll, args=(600.0,), daemon=True,
                     name="elastix-standin-roll").start()
    try:
        _patch_step(standin)
        _patch_copy(standin)
        _patch_state_setup(standin)
        if env.get(envvars.MAXTEXT_STANDIN) == "elastic":
            _patch_pathways(standin, devices_per_slice)
    except (ImportError, AttributeError, RuntimeError) as err:
        _refuse(f"the local Pathways stand-in cannot patch this environment: {err}")
    print(f"elastix: local Pathways stand-in active ({env.get(envvars.MAXTEXT_STANDIN)}; "
          f"{num_slices} slice(s) of {devices_per_slice} CPU device(s), health from "
          f"{env.get(envvars.LOCAL_HEALTH)})", file=sys.stderr, flush=True)
    return standin


def activate_from_env() -> StandIn | None:
    """``sitecustomize``'s entry: stand in when the local backend asked for it, once."""
    mode = os.environ.pop(envvars.MAXTEXT_STANDIN, None)
    if not mode:
        return None
    env = dict(os.environ)
    env[envvars.MAXTEXT_STANDIN] = mode
    return activate(env)


def main(argv: list[str] | None = None) -> int:
    """``--check``: print the versions and the stand-in's verdict on them, as one JSON line
    (what the launcher reads before it submits a MaxText workload)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv != ["--check"]:
        sys.stderr.write("usage: python -m elastix_trainer.elastic.local.maxtext --check\n")
        return 2
    versions = installed()
    print(json.dumps({"versions": versions, "problem": version_problem(versions)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
