"""``chaos run --verify``: its flags, checked before the first fault, and the verification,
made once the last recovery was measured (:mod:`elastix.measure.verify`)."""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Annotated, Any

import typer

from elastix.errors import ElastixError, NotFoundError, UsageError

if TYPE_CHECKING:
    from elastix.backends.base import Backend
    from elastix.measure.report import ChaosReport

Verify = Annotated[bool, typer.Option(
    "--verify", help="Prove the recoveries lost nothing: run the same job uninterrupted to "
                     "the last step reached (local: a copy, deleted after) and compare the "
                     "losses step by step; a difference fails (exit 3).")]
Reference = Annotated[str | None, typer.Option(
    "--reference", help="--verify against this workload (the same job, run uninterrupted); "
                        "only its events are read (any backend).")]
LossTolerance = Annotated[float | None, typer.Option(
    "--loss-tolerance", help="--verify: largest absolute loss difference allowed [0: "
                             "bitwise equal].")]
AllowUnverified = Annotated[bool, typer.Option(
    "--allow-unverified-steps", help="--verify: pass where some steps were not compared (a "
                                     "recovery's skipped steps, never logged); they are named "
                                     "either way [default: such a gap fails].")]
KeepReference = Annotated[bool, typer.Option(
    "--keep-reference", help="--verify: keep the reference it made (and its data).")]


@dataclasses.dataclass(frozen=True)
class Plan:
    """What ``--verify`` will do: compare with ``reference`` (None: a copy it makes)."""

    reference: str | None
    tolerance: float
    keep: bool
    allow_gaps: bool = False


def check(backend: Backend, name: str, *, verify: bool, reference: str | None,
          tolerance: float | None, keep: bool, allow_gaps: bool = False) -> Plan | None:
    """The verification asked for, checked before anything is killed; None: none asked.

    Raises:
        UsageError: a flag without --verify, a tolerance out of range or too fine for losses
            read from a log, a --reference that does not exist, or (without --reference) a
            reference this backend cannot make.
    """
    if not verify and reference is None:
        given = [f for f, v in (("--loss-tolerance", tolerance is not None),
                                ("--keep-reference", keep),
                                ("--allow-unverified-steps", allow_gaps)) if v]
        if given:
            raise UsageError(f"{given[0]} is for --verify", hint="add --verify (or --reference "
                             "NAME), or drop it")
        return None
    tol = 0.0 if tolerance is None else tolerance
    if not 0 <= tol < math.inf:  # False for nan too
        raise UsageError(f"--loss-tolerance {tolerance:g} is out of range: 0 or more, finite",
                         hint="e.g. --loss-tolerance 1e-6 (0: bitwise-equal losses)")
    if reference is not None:
        if keep:
            raise UsageError("--keep-reference is for the reference --verify makes: "
                             f"--reference {reference} is never deleted",
                             hint="drop --keep-reference")
        if reference == name:
            raise UsageError(f"--reference {reference} is the workload under test",
                             hint="name a workload that runs the same job uninterrupted")
        try:
            backend.status(reference)
        except NotFoundError:
            raise UsageError(f"--reference {reference}: no such workload ({backend.where()})",
                             hint=f"create it with elastix workload create {reference} and "
                                  f"{name}'s spec, or drop --reference to have --verify make "
                                  "one (local)") from None
        _check_source(backend, reference, tol, f"--reference {reference}")
    else:
        try:
            backend.clone(name, dry_run=True)
        except UsageError as err:
            raise UsageError(f"--verify without --reference: {err.message}",
                             hint=err.hint) from None
    _check_source(backend, name, tol, name)
    return Plan(reference, tol, keep, allow_gaps)


def _check_source(backend: Backend, who: str, tol: float, what: str) -> None:
    """Refuse a tolerance finer than the losses ``who`` logs (log lines: 4 decimals)."""
    from elastix.measure.verify import check_tolerance, trajectory

    got = backend.trainer_events(who)
    if got is None or got.records is not None:
        return  # nothing yet (checked again when compared), or an events file: every digit
    t = trajectory(got)
    if not t.losses:
        return  # no step yet: the events file may still come (locally it comes first)
    why = check_tolerance(tol, t)
    if why is not None:
        raise UsageError(f"--loss-tolerance {tol:g} is too fine for {what}: {why}",
                         hint=f"e.g. --loss-tolerance {max(t.resolution, 5e-5):g}")


def finish(backend: Backend, name: str, res: ChaosReport, plan: Plan | None, timeout: float,
           err: Any) -> None:
    """Verify the run that was just measured and put the verdict in ``res``: nothing when no
    verification was asked, or the run was interrupted, failed to make a fault, or died (its
    exit code says so already; a deleted workload has no events left to compare)."""
    from elastix.measure.verify import attach, verify

    if plan is None or res.interrupted or res.error is not None or res.died:
        return
    from elastix.measure.progress import Phase
    from elastix.views.waiting import WaitLine

    try:
        # The reference's run can be most of the command's time: a wait line says where it is.
        with WaitLine(err, f"{name}: waiting for the reference run") as line:
            v = verify(backend, name, reference=plan.reference, tolerance=plan.tolerance,
                       timeout=timeout, keep=plan.keep, allow_gaps=plan.allow_gaps,
                       say=lambda s: err.print(f"{name}: {s}", style="dim", markup=False),
                       progress=lambda what: line.update(Phase(what)))
    except KeyboardInterrupt:
        res.interrupted = True  # reported, then exit 130; a reference it made was deleted
        return
    except ElastixError as e:  # e.g. the reference could not be started
        res.error = f"verify: {e.message}"
        return
    attach(res, v)
