"""The local fault seam: make a training step fail *inside XLA*, as a lost slice does on Pathways.

Each step starts with an ``io_callback`` shard_mapped over every device of the mesh, before any
collective. Its verdict for a step is fixed in Python when the step is dispatched (from the
health source: is a slice of this mesh down?), so every device's callback agrees: raising on
only some devices makes the others wait at the next collective until XLA aborts the whole
process (after about 40 s on CPU). A failing callback poisons the step's outputs and surfaces as a real
``jax.errors.JaxRuntimeError`` at the next sync point, with ``DATA_LOSS`` in its text, as on
Pathways. Measured overhead on CPU: none (docs/benchmarks.md).
"""

from __future__ import annotations

import logging
import threading

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback
from jax.sharding import PartitionSpec as P

from elastix_trainer.mesh import BATCH_SPEC

_lock = threading.Lock()
_verdicts: dict[int, str] = {}  # step -> error text, only for steps that must fail


class InjectedSliceLoss(RuntimeError):
    """Raised inside the callback; XLA wraps it into a JaxRuntimeError."""


class _QuietInjected(logging.Filter):
    """JAX logs every failing io_callback with a traceback, once per device: keep the log
    readable by dropping the injected ones (the runtime logs the event once)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, InjectedSliceLoss)


logging.getLogger("jax._src.callback").addFilter(_QuietInjected())


def arm(step: int, lost: frozenset[int] | set[int]) -> None:
    """Fix the verdict for ``step`` (called just before the step is dispatched).

    The common case (nothing lost, nothing armed) takes no lock: it runs every step, and single
    dict operations are atomic under the GIL.
    """
    if not lost and not _verdicts:
        return
    with _lock:
        for old in [s for s in _verdicts if s < step - 16]:
            del _verdicts[old]
        if lost:
            _verdicts[step] = (f"DATA_LOSS: slice(s) {sorted(lost)} of the mesh are down "
                               f"(elastix local fault seam, step {step})")
        else:
            _verdicts.pop(step, None)


def disarm() -> None:
    """Forget every verdict (after an elastic event), once no device can still read one.

    The failed step's error reaches Python as soon as one device's callback raised; the other
    devices' callbacks may not have run yet. Clearing the verdicts under them would let a
    late device pass its check and wait at the step's first collective for peers that already
    failed, and XLA aborts the whole process after 40 s (seen once in the local end-to-end
    test). So wait for every dispatched computation with side effects to finish first.
    """
    _wait_for_dispatched()
    with _lock:
        _verdicts.clear()


def _wait_for_dispatched() -> None:
    """Block until every device has finished (or failed) what was dispatched to it.

    ``jax.effects_barrier()`` stops at the first device whose token carries the failed step's
    error, so each device's token is awaited on its own (jax's per-device runtime tokens: a
    private structure, hence the pin on jax in pyproject.toml), then the barrier runs to clear
    them.
    """
    from jax._src import dispatch

    tokens = getattr(dispatch.runtime_tokens, "output_runtime_tokens", {})
    for token in list(tokens.values()):
        try:
            token.block_until_ready()
        except Exception:  # noqa: BLE001 - the failed step's own error
            pass
    try:
        jax.effects_barrier()
    except Exception:  # noqa: BLE001 - likewise
        pass
    # The barrier keeps a token that failed (it raises before clearing), and JAX's own atexit
    # handlers (``wait_for_tokens``, ``clean_up``) would raise it again at exit: two "Exception
    # ignored in atexit" tracebacks after the run's error line. Every token was awaited above.
    clear = getattr(dispatch.runtime_tokens, "clear", None)
    if clear is not None:
        clear()


def drain() -> None:
    """Await and drop what the steps dispatched (a failed step's error included): at the end
    of a run, so the process exits on its own last line."""
    _wait_for_dispatched()


def _check(step: np.ndarray, rows: int) -> np.ndarray:
    msg = _verdicts.get(int(step))
    if msg is not None:
        raise InjectedSliceLoss(msg)
    return np.zeros((rows,), np.int32)


def seam(mesh, step: jax.Array, global_rows: int) -> jax.Array:
    """Zeros [global_rows] sharded like the batch rows; raises on every device if ``step`` is armed.

    Callers add the result to the batch, so the check runs before the forward pass.
    """
    rows = global_rows // mesh.devices.size

    def per_device(s):
        return io_callback(lambda x: _check(x, rows), jax.ShapeDtypeStruct((rows,), jnp.int32), s)

    return jax.shard_map(per_device, mesh=mesh, in_specs=P(), out_specs=BATCH_SPEC,
                         check_vma=False)(step)
