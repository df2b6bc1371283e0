"""The training loop's seams: what it hands and asks at fixed points of each step.

:class:`Session` is one attempt on one mesh; :class:`Hooks` is what is attached to a run (the
elastic runtime, tests, benchmarks) and told at each step's fixed points; :class:`Devices` is
what the loop asks only because a slice's devices may fail mid-step (the local backend's
stand-in answers it; real chips need none of it). The loop itself is
:class:`elastix_trainer.train.Trainer`.
"""

from __future__ import annotations

import dataclasses

from elastix_trainer.step import Prologue, StepFns


@dataclasses.dataclass
class Session:
    """One attempt on one mesh."""

    slice_ids: frozenset[int]
    mesh: object
    fns: StepFns
    state: object
    step: int  # the step whose result `state` holds (dispatched, maybe not yet completed)
    global_batch: int
    restored: dict | None = None  # {"source", "step", "bytes", "seconds", "path"} or None
    recovery: int | None = None
    """The elastic recovery this session resumes, if any (said by whoever started it, for its
    hooks; the loop never reads it)."""

    @property
    def first_step(self) -> int:
        """The first step this session runs: one past the state it started from."""
        return (self.restored["step"] if self.restored else 0) + 1


class Hooks:
    """What the loop tells what is attached to a run at fixed points of each step, and the one
    thing it asks of it (levanter's hooks, MaxText's explicit handler): the elastic runtime,
    tests and benchmarks attach this way. Nothing here is about devices: what the loop asks
    the devices themselves is :class:`Devices`.

    Every method does nothing by default; override the ones needed. Hooks run in ascending
    ``order``, then in the order attached. A hook that raises fails the step, as a failed
    step would: the elastic runtime classifies the error.
    """

    order: int = 0
    """Run before (lower) or after (higher) the other hooks at each point."""

    def before_dispatch(self, session: Session, n: int) -> None:
        """Step ``n`` is about to take its batch and be dispatched."""

    def after_complete(self, session: Session, n: int, done_at: float, seconds: float) -> None:
        """Step ``n`` completed at monotonic ``done_at``, ``seconds`` after the previous one,
        and its ``step`` event is written."""

    def after_save(self, session: Session, n: int) -> None:
        """The checkpoint of step ``n`` was started (async: maybe not yet committed)."""

    def after_restore(self, source: str, step: int) -> None:
        """The run now holds ``step``, from ``source`` (``checkpoint``, ``snapshot``, or
        ``init``: step 0, before its fresh state is made), and the data iterator is at it."""

    def scale_up_wanted(self, session: Session) -> bool:
        """At a step boundary: end this session for a bigger mesh (the state goes to a host
        snapshot first)."""
        return False


class Devices:
    """The seam for devices that can fail: every call the loop and the elastic runtime make
    only because a slice's devices may be lost mid-step, mid-copy or mid-restore.

    Real chips need none of it: on TPU under Pathways a lost slice fails the step (or the
    copy) by itself with ``JaxRuntimeError``, so the default answers every call with
    "nothing to say" and is what a run there has. The local backend's stand-in devices
    (:class:`elastix_trainer.elastic.local.standin.LocalStandIn`: this process's CPUs standing
    in for the slices' chips) implement it, so that they fail *in time* as the chips would.
    A run has one ``Devices`` (``Trainer.devices``).
    """

    step_prologue: Prologue | None = None
    """A program the compiled step runs first (``step.Prologue``): the stand-in's fault seam,
    the one extra input of the compiled step."""

    def on_mesh(self, slice_ids: frozenset[int]) -> None:
        """A session starts on ``slice_ids``, before any state is placed on its devices."""

    def before_dispatch(self, session: Session, n: int) -> None:
        """Step ``n`` is about to be dispatched, after every hook's ``before_dispatch`` (a
        test that fails a slice there is seen by this step)."""

    def verify_complete(self, session: Session, n: int, done_at: float) -> None:
        """Step ``n``'s result was read at monotonic ``done_at`` and is finite: raise to say it
        did not complete (it is then neither logged nor counted), as a device that needed a
        lost host would have failed it."""

    def verify_transfer(self, slice_ids: frozenset[int], what: str) -> None:
        """A copy between the devices of ``slice_ids`` and host memory just ended (``what``: a
        host snapshot's or a checkpoint's copy of a step, a restore): raise to say it failed.
        A failed copy is never kept: no snapshot, no save, no restored state."""

    def verify_read_ended(self, slice_ids: frozenset[int], what: str, ended_at: float) -> None:
        """After the steps failed, a staged copy whose read ended at monotonic ``ended_at`` is
        about to be kept: raise if a host of ``slice_ids`` was lost before then. On a chip a
        read from a dead slice fails; a stand-in that learns of a loss late must not keep what
        it could not have read."""

    def check_transfer(self, slice_ids: frozenset[int], what: str) -> None:
        """A copy between the devices of ``slice_ids`` and host memory (``what``) is under
        way: raise if it can no longer complete, so the loop stops waiting for it. Asked
        between its parts; never blocks. On TPU the copy itself fails; the stand-in's devices
        would copy on to the end."""

    def loss_details(self, slice_ids: frozenset[int]) -> dict:
        """Extra fields for the detection event of a slice loss on ``slice_ids`` (the local
        stand-in's ``since_loss``); measurement only."""
        return {}

    def after_failure(self) -> None:
        """A step failed and the runtime cleans up: what was dispatched is over."""
