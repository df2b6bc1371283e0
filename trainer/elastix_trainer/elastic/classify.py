"""Is this error a slice loss? pathwaysutils' decision table, and the error's one line."""

from __future__ import annotations

import jax

from elastix_trainer.elastic.health import HealthSource


class SliceLost(RuntimeError):
    """The health source reports a slice of the current mesh down (no XLA error needed)."""


# pathwaysutils' decision (``pathwaysutils/elastic/elastic.py::is_error_due_to_slice_down``,
# pathwaysutils 0.1.13, the pinned version): only a JaxRuntimeError can be a slice loss; its
# message containing DATA_LOSS is one, and so is one containing DEADLINE_EXCEEDED, NOT_FOUND or
# INTERNAL (with a warning that it "may or may not be due to slice down"); nothing else is.
SLICE_DOWN_STATUS = "DATA_LOSS"
MAYBE_SLICE_DOWN_STATUSES = ("DEADLINE_EXCEEDED", "NOT_FOUND", "INTERNAL")


def classify(error: BaseException, mesh_slices, health: HealthSource) -> str:
    """``"slice_lost"`` or ``"other"``: pathwaysutils' decision table, with one exception.

    ================================  ==========================  ================
    error                             a mesh slice probes down    all probe live
    ================================  ==========================  ================
    JaxRuntimeError with DATA_LOSS    slice_lost                  slice_lost
    ... DEADLINE_EXCEEDED, NOT_FOUND  slice_lost                  slice_lost
    ... INTERNAL                      slice_lost                  other (*)
    any other error                   other                       other
    ================================  ==========================  ================

    The probe is fresh (``health.probe``): a cached view can be seconds old, exactly the window
    in which Pathways reports a lost slice as DEADLINE_EXCEEDED. (*) The one departure from
    pathwaysutils: an XLA callback that raises in user code surfaces as INTERNAL, and with every
    slice live retrying it as a slice loss would redo the same failure until the slice-loss
    budget ran out; it counts against the errors budget instead.
    """
    if isinstance(error, SliceLost):
        return "slice_lost"
    if not isinstance(error, jax.errors.JaxRuntimeError):
        return "other"
    text = str(error)
    if SLICE_DOWN_STATUS in text:
        return "slice_lost"
    maybe = [s for s in MAYBE_SLICE_DOWN_STATUSES if s in text]
    if not maybe:
        return "other"
    if frozenset(mesh_slices) - health.probe():
        return "slice_lost"
    return "other" if maybe == ["INTERNAL"] else "slice_lost"


TRACEBACK = "Traceback (most recent call last):"


def error_line(error: BaseException) -> str:
    """The informative line of an error. An XLA callback's error starts with a traceback
    header (``INTERNAL: ... CpuCallback error: Traceback (most recent call last):``) and ends
    with the exception the callback raised: the header's status, then that last line."""
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    for ln in lines:
        if "DATA_LOSS" in ln:
            return ln[:300]
    if not lines:
        return type(error).__name__
    if TRACEBACK in lines[0] and len(lines) > 1:
        head = lines[0].split(TRACEBACK)[0].strip()
        return f"{head} {lines[-1]}"[:300]
    return lines[0][:300]
