"""Train state, optimizer and the pure jitted train step.

State is ``{"params", "opt_state", "step"}``. The step is a pure function of (state, batch):
no dropout and no sampling, so a run resumed from a checkpoint recomputes exactly what an
uninterrupted run computes. Compiled functions are cached per (model, optimizer, mesh, prologue), so
re-entering on a mesh seen before (scale back up, a second recovery) costs no recompile, and
``precompile`` builds them for meshes the run may shrink to, off the critical path (and, where
it is cheap and safe, runs each once on throw-away zeros: ``warm_up``).

The step is compiled ahead of time (``lower().compile()``) and called as that executable: what
was built in the background is exactly what runs, with no retrace and no second compile.

A caller may give a *prologue*: a program run before each step on the step's number, whose
zeros are added to the batch rows (the local backend's fault seam, which fails the step inside
XLA as a lost slice would). It is compiled as a program of its own whose output feeds the step:
a program with a host callback never enters JAX's persistent compilation cache, and the step is
the one worth caching. This module knows nothing of what the prologue checks.
"""

from __future__ import annotations

import atexit
import dataclasses
import functools
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import Future

import jax
import jax.numpy as jnp
import numpy as np
import optax

from elastix_trainer import fit
from elastix_trainer.mesh import batch_sharding, num_devices, state_shardings
from elastix_trainer.model import ModelConfig, init_params, loss_fn
from elastix_trainer.obs.events import log


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
    mu_dtype: str = ""
    """AdamW's first moment's dtype (MaxText's ``mu_dtype``); empty: the parameters' own."""


def make_schedule(opt: OptConfig) -> optax.Schedule:
    """The learning rate as a function of the number of updates applied so far."""
    warmup = max(0, min(opt.warmup_steps, opt.total_steps - 1))
    if opt.schedule == "constant":
        return optax.join_schedules(
            [optax.linear_schedule(0.0, opt.lr, max(warmup, 1)), optax.constant_schedule(opt.lr)],
            [max(warmup, 1)])
    return optax.warmup_cosine_decay_schedule(
        0.0, opt.lr, max(warmup, 1), max(opt.total_steps, warmup + 2), end_value=opt.lr * 0.1)


def make_optimizer(opt: OptConfig) -> optax.GradientTransformation:
    """The AdamW chain for ``opt``."""
    return optax.chain(optax.clip_by_global_norm(opt.clip_norm),
                       optax.adamw(make_schedule(opt), weight_decay=opt.weight_decay,
                                   mu_dtype=opt.mu_dtype or None))


METRICS = ("loss", "grad_norm", "learning_rate")
"""What a step returns besides the state, in this order, as one float32 vector: one transfer
to the host reads all of them (the loss read is the loop's sync point anyway). ``grad_norm`` is
the global norm before clipping; ``learning_rate`` the one this step's update used."""


def init_state(model: ModelConfig, opt: OptConfig, seed: int) -> dict:
    """Fresh state; parameters from ``seed`` only."""
    params = init_params(model, jax.random.key(seed))
    return {"params": params, "opt_state": make_optimizer(opt).init(params),
            "step": jnp.zeros((), jnp.int32)}


@dataclasses.dataclass(frozen=True)
class StepFns:
    """Compiled functions and shardings for one mesh."""

    init: object
    step: Callable  # (state, batch) -> (state, metrics as in METRICS); the state is donated
    abstract: object  # ShapeDtypeStructs with shardings (Orbax restore target)
    shardings: object
    batch_sharding: object
    num_devices: int
    batch: object = None  # the batch's ShapeDtypeStruct (what ``warm_up`` feeds the step)
    warmed: threading.Event = dataclasses.field(default_factory=threading.Event, compare=False)
    """Set once ``warm_up`` has run (or is running) the step."""
    step_copy: Callable | None = None
    """``(state, batch) -> (state, metrics, host copy of the input state, its finiteness)``:
    the step that also copies the state it was given to pinned host memory while it computes
    (built with ``copy="overlap"``; None otherwise, or where it could not be compiled)."""
    stage: Callable | None = None
    """``state -> (a copy of it on the devices, its finiteness)``: the first half of a staged
    host copy, its second half read to host memory in the background while steps run (built
    with ``copy="staged"``, or ``"auto"`` where the devices hold a second state beside the
    step; None otherwise)."""
    model: ModelConfig | None = None
    """The model as compiled: its remat policy resolved (``auto`` made concrete)."""
    peak_bytes: int | None = None
    """The compiled step's device memory per device (its memory analysis), where known."""


_lock = threading.Lock()
_built: dict[tuple, Future] = {}  # one entry per mesh a run has used or prepared: a handful


Prologue = Callable[[object, jax.Array, int], jax.Array]
"""``prologue(mesh, step, rows)``: int32 zeros of shape ``[rows]`` sharded like the batch rows,
computed from ``step`` (the number of the step about to run) before the step's forward pass; a
failure inside it poisons the step on every device. Part of the compile cache key, so give
the same function object every time (a module-level function, not a fresh lambda)."""


def step_fns(model: ModelConfig, opt: OptConfig, mesh, batch_per_device: int, seq_len: int,
             seed: int, prologue: Prologue | None = None, copy: str = "sync") -> StepFns:
    """Compiled step (and jitted init) for ``mesh``, with NamedShardings for every leaf.

    Built once per arguments; a caller that asks while another thread (``precompile``,
    ``build_ahead``) is building the same one waits for it instead of compiling it a second time.
    """
    key = (model, opt, mesh, batch_per_device, seq_len, seed, prologue, copy)
    fut, mine = _claim(key)
    if mine:
        _fulfil(key, fut)
    return fut.result()


def _claim(key: tuple) -> tuple[Future, bool]:
    """The build of ``key``: (its future, whether the caller must build it)."""
    with _lock:
        fut = _built.get(key)
        if fut is not None:
            return fut, False
        fut = _built[key] = Future()
        return fut, True


def _fulfil(key: tuple, fut: Future) -> None:
    try:
        fut.set_result(_build(*key))
    except BaseException as e:
        with _lock:
            _built.pop(key, None)  # the next caller tries again
        fut.set_exception(e)
        raise


def build_ahead(model: ModelConfig, opt: OptConfig, mesh, batch_per_device: int, seq_len: int,
                seed: int, prologue: Prologue | None = None, copy: str = "sync"
                ) -> threading.Thread | None:
    """Start building ``step_fns(...)`` in a thread, claimed before this returns: whoever asks
    for the same step later waits for this build rather than starting a second one. None if it
    is built or being built already. A failure is left for the caller who waits to raise.

    For the start of a run: the step (seconds of compile cold, a trace and a cache read warm)
    is built while the checkpoint is checked and the slices are awaited, not after.
    """
    key = (model, opt, mesh, batch_per_device, seq_len, seed, prologue, copy)
    fut, mine = _claim(key)
    if not mine:
        return None

    def work():
        try:
            _fulfil(key, fut)
        except BaseException:  # noqa: BLE001 - the future holds it for the one who waits
            pass

    # joined at exit like a precompile: XLA aborts under a compile at shutdown
    return _start_tracked(threading.Thread(target=work, name="elastix-build-ahead",
                                           daemon=True), threading.Event())


def precompile(build: Callable[[object], StepFns], meshes: Iterable[object],
               stop: threading.Event, warm: bool = False) -> threading.Thread:
    """Build the step for each of ``meshes`` in a thread (``build(mesh)`` calls ``step_fns``),
    so a resize onto one of them does not compile on the critical path; with ``warm``, also
    run each once (``warm_up``), so the resize does not pay the executable's first run either.

    XLA compiles with the GIL released, so the training loop goes on meanwhile (slower while
    the thread holds a core: precompile after start-up, not during it). ``stop`` ends it
    between meshes; the process joins it at exit. A failure is logged, never raised: the
    resize then compiles as it would have anyway.
    """
    def work():
        for mesh in meshes:
            if stop.is_set():
                return
            try:
                fns = build(mesh)
                if warm and not stop.is_set():
                    warm_up(fns)
            except Exception as e:  # noqa: BLE001 - an optimisation; the resize will compile
                log.info("elastix: precompiling the step for a smaller mesh failed: %s: %s",
                         type(e).__name__, (str(e).splitlines() or [""])[0][:200])
                return

    return _start_tracked(threading.Thread(target=work, name="elastix-precompile", daemon=True),
                          stop)


def _start_tracked(t: threading.Thread, stop: threading.Event) -> threading.Thread:
    """Start ``t``, known to ``_finish_precompiles`` (which sets ``stop`` and joins it)."""
    with _lock:
        _running[:] = [(th, ev) for th, ev in _running if th.is_alive()] + [(t, stop)]
    t.start()
    return t


_running: list[tuple[threading.Thread, threading.Event]] = []


@atexit.register
def _finish_precompiles() -> None:
    """At exit, after the run has written its last event: stop every precompile thread between
    meshes and wait for the compile in flight (XLA aborts a process whose interpreter shuts
    down under a compile). Here rather than when the run ends, so that a SIGTERM's last events
    and exit code never wait behind a compile."""
    with _lock:
        running = list(_running)
    for _, stop in running:
        stop.set()
    for thread, _ in running:
        thread.join()


WARM_STEP = -2
"""The step counter of ``warm_up``'s throw-away state: a prologue then sees step -1, which no
real step is (steps count from 1), so nothing it keeps per step is read or consumed."""


def warm_up(fns: StepFns) -> bool:
    """Run the compiled step once on throw-away zeros; False if it already ran here.

    On XLA:CPU an executable's first run costs about two more steps' time than later ones
    (per executable: measured in docs/benchmarks.md), and the first step after a resize is
    exactly such a first run. Running it here, off the critical path, moves that cost off it.
    It changes nothing the run owns: a fresh zero state (donated, then dropped) and a zero
    batch, no RNG, no data read, and a step counter no real step has (``WARM_STEP``). Run by a
    background thread while the loop steps: the CPU client launches programs with
    collectives one at a time, so the two cannot deadlock; the cost is one step's compute.
    Not for TPU/Pathways: it needs a second copy of the state in the slices' memory.
    """
    with _lock:
        if fns.warmed.is_set():
            return False
        fns.warmed.set()
    state = jax.tree.map(lambda a: jax.device_put(np.zeros(a.shape, a.dtype), a.sharding),
                         fns.abstract)
    state["step"] = jax.device_put(np.array(WARM_STEP, np.int32), fns.abstract["step"].sharding)
    batch = jax.device_put(np.zeros(fns.batch.shape, fns.batch.dtype), fns.batch_sharding)
    jax.block_until_ready(fns.step(state, batch))
    return True


def abstract_state(model: ModelConfig, opt: OptConfig, mesh, seed: int):
    """The state's ShapeDtypeStructs with their shardings on ``mesh`` (a restore target), with
    no compile: a restore can start while the step is still being built."""
    shapes = jax.eval_shape(lambda: init_state(model, opt, seed))
    shardings = state_shardings(mesh, shapes)
    return jax.tree.map(lambda s, sh: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=sh),
                        shapes, shardings)


@functools.lru_cache(maxsize=16)
def init_fn(model: ModelConfig, opt: OptConfig, mesh, seed: int):
    """The jitted fresh-state program for ``mesh`` (one per arguments, so one compile each)."""
    shardings = jax.tree.map(lambda a: a.sharding, abstract_state(model, opt, mesh, seed))

    def fresh_init():
        return init_state(model, opt, seed)

    return jax.jit(fresh_init, out_shardings=shardings)


def fresh_state(model: ModelConfig, opt: OptConfig, mesh, seed: int) -> dict:
    """A fresh state on ``mesh``, compiled and run in the caller's thread.

    It needs only shapes and shardings, not the step: a fresh start calls it while the step
    compiles in another thread. Called as ``StepFns.init`` instead, it waited for the step's
    compile and then compiled on its own (half as long again, on CPU), the second core idle.
    """
    return init_fn(model, opt, mesh, seed)()


def _build(model: ModelConfig, opt: OptConfig, mesh, batch_per_device: int, seq_len: int,
           seed: int, prologue: Prologue | None, copy: str = "sync") -> StepFns:
    """Compile the step; with ``remat_policy="auto"``, the first candidate policy whose compiled
    step fits the device's memory (``fit.choose``). A step that cannot fit is refused before
    the first step (``fit.DoesNotFit``), never an out-of-memory error mid-run. With
    ``copy_state``, also the variant that copies its input state to host memory
    (``StepFns.step_copy``)."""
    abstract = abstract_state(model, opt, mesh, seed)
    shardings = jax.tree.map(lambda a: a.sharding, abstract)
    bsh = batch_sharding(mesh)
    rows = batch_per_device * num_devices(mesh)
    batch = jax.ShapeDtypeStruct((rows, seq_len + 1), jnp.int32, sharding=bsh)
    init = init_fn(model, opt, mesh, seed)
    pro_c = None
    if prologue is not None:
        pro = jax.jit(lambda step: prologue(mesh, step + 1, rows), out_shardings=bsh)
        pro_c = pro.lower(abstract["step"]).compile()
    offset = jax.ShapeDtypeStruct((rows,), jnp.int32, sharding=bsh)
    host = jax.tree.map(lambda sh: sh.with_memory_kind("pinned_host"), shardings)

    def compile_with(m: ModelConfig, copy: bool = False):
        train_step = _train_step(m, opt, mesh)
        outs = (shardings, None)
        if copy:
            inner = train_step

            def train_step(state, batch, offset=None):  # noqa: F811 - the copying variant
                new_state, metrics = inner(state, batch, offset)
                return new_state, metrics, state, finite_tree(state)

            outs = (shardings, None, host, None)
        args = (abstract, batch) if pro_c is None else (abstract, batch, offset)
        core = jax.jit(train_step, in_shardings=(shardings, bsh, bsh)[:len(args)],
                       out_shardings=outs, donate_argnums=0)
        return core.lower(*args).compile()

    chosen, core_c, peak = fit.choose(model, compile_with, mesh, batch_per_device, seq_len,
                                      abstract)
    copy_c = None
    if copy == "overlap":
        try:
            copy_c = compile_with(chosen, copy=True)
        except Exception as e:  # noqa: BLE001 - the snapshots then copy at the boundary
            log.info("elastix: the step that copies the state while it computes did not "
                     "compile (%s): snapshots copy at step boundaries",
                     (str(e).splitlines() or [type(e).__name__])[0][:200])
    if pro_c is None:
        step, step_copy = core_c, copy_c
    else:
        def step(state, batch):
            return core_c(state, batch, pro_c(state["step"]))

        step_copy = None if copy_c is None else (
            lambda state, batch: copy_c(state, batch, pro_c(state["step"])))
    stage = _stage(abstract, shardings, mesh, peak, copy) if copy in ("staged", "auto") else None
    return StepFns(init, step, abstract, shardings, bsh, num_devices(mesh), batch,
                   step_copy=step_copy, stage=stage, model=chosen, peak_bytes=peak)


STAGE_MARGIN = 0.95
"""``auto`` stages a copy only where the step's memory and a second state fit in this share of
a device's memory (the rest: the allocator's fragmentation, the batch)."""


def _stage(abstract, shardings, mesh, peak: int | None, copy: str) -> Callable | None:
    """The compiled device-side copy of the state (and its finiteness), or None where ``auto``
    finds no room for it: it lives beside the steps that run while it is read to the host."""
    need, limit = fit.state_bytes(abstract), fit.device_limit(mesh)
    if copy == "auto":
        if limit is None or peak is None:
            return None  # CPU: the host copy at the boundary is a memcpy
        if peak + need > STAGE_MARGIN * limit:
            log.info("elastix: host copies of the state are taken at step boundaries: a "
                     "second state (%.2f GiB) does not fit beside the step (%.2f GiB of "
                     "%.2f GiB)", need / fit.GIB, peak / fit.GIB, limit / fit.GIB)
            return None

    def stage(state):
        return jax.tree.map(jnp.copy, state), finite_tree(state)

    compiled = jax.jit(stage, in_shardings=(shardings,), out_shardings=(shardings, None)) \
        .lower(abstract).compile()
    log.info("elastix: host copies of the state are staged on the devices (%.2f GiB beside "
             "the step's %s) and read to the host while the steps run", need / fit.GIB,
             "?" if peak is None else f"{peak / fit.GIB:.2f} GiB")
    return compiled


def finite_tree(state) -> jax.Array:
    """Whether every float array of ``state`` is free of NaN and inf (one device scalar)."""
    flags = [jnp.isfinite(x).all() for x in jax.tree.leaves(state)
             if jnp.issubdtype(x.dtype, jnp.inexact)]
    return jnp.stack(flags).all() if flags else jnp.array(True)


def _train_step(model: ModelConfig, opt: OptConfig, mesh):
    """The pure step for ``model`` (a resolved remat policy) on ``mesh``."""
    tx = make_optimizer(opt)
    schedule = make_schedule(opt)

    def train_step(state, batch, offset=None):
        if offset is not None:
            # Zeros from the prologue: a failed prologue poisons them, and with them the
            # whole step, on every device before any collective.
            batch = batch + offset[:, None]
        loss, grads = jax.value_and_grad(lambda p: loss_fn(model, p, batch, mesh))(
            state["params"])
        updates, opt_state = tx.update(grads, state["opt_state"], state["params"])
        params = optax.apply_updates(state["params"], updates)
        metrics = jnp.stack([loss, optax.global_norm(grads), schedule(state["step"])])
        return ({"params": params, "opt_state": opt_state, "step": state["step"] + 1},
                metrics.astype(jnp.float32))

    return train_step
