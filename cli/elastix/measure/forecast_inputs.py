"""What a forecast needs from a run, in one place: read from its events (``NAME``, ``--events``)
or from a saved chaos report (``--report``), so a forecast works after the run is gone.

A chaos report (:mod:`elastix.measure.report`) carries these numbers under ``forecast_inputs``;
the events themselves are not in it (a long soak's would be megabytes).
"""

from __future__ import annotations

import dataclasses
import json
import math
from typing import Any

from elastix.errors import UsageError, shown
from elastix.measure.advise import Measured, measure
from elastix.measure.events import Event, recoveries

REPORT_HINT = "save one with: elastix chaos run NAME --kills 3 -o json > report.json"


@dataclasses.dataclass(frozen=True)
class MeasuredRecovery:
    """One complete recovery's cost, in seconds, split where the simulation needs it."""

    kind: str  # "in-process" or "restart"
    downtime: float | None
    before_wait: float  # detection + cleanup
    wait: float  # waiting for slices (the platform's replacement)
    after_wait: float  # restore + first step


@dataclasses.dataclass(frozen=True)
class RunInputs:
    """The run's measurements a forecast is calibrated by (:func:`inputs_of`)."""

    measured: Measured
    recoveries: tuple[MeasuredRecovery, ...]
    startup: float | None  # seconds from the first run_start to its first step
    slices: int | None  # the full mesh's

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RunInputs:
        """The inputs of a report's ``forecast_inputs``, every number checked: a finite number,
        not negative (a period a whole number, the slices 1 or more).

        Raises:
            InputError: a value that is none of that, its field named.
            TypeError, KeyError or ValueError: a malformed dict.
        """
        m = d["measured"]
        _known(m, "measured", _MEASURED)
        for key, kind in _MEASURED.items():
            _check(m.get(key), f"measured.{key}", kind)
        recs = d["recoveries"]
        if not isinstance(recs, list):
            raise InputError("recoveries", "is not a list")
        for i, r in enumerate(recs):
            _known(r, f"recoveries[{i}]", _RECOVERY)
            if not isinstance(r.get("kind"), str):
                raise InputError(f"recoveries[{i}].kind", f"{shown(r.get('kind'))} is not text")
            for key in ("downtime", "before_wait", "wait", "after_wait"):
                _check(r.get(key), f"recoveries[{i}].{key}",
                       "seconds?" if key == "downtime" else "seconds")
        _check(d.get("startup"), "startup", "seconds?")
        _check(d.get("slices"), "slices", "count1?")
        return cls(Measured(**m), tuple(MeasuredRecovery(**r) for r in recs), d.get("startup"),
                   d.get("slices"))


class InputError(ValueError):
    """A number of a report's ``forecast_inputs`` that no run measures: NaN, infinite,
    negative, or not a number; ``field`` names it."""

    def __init__(self, field: str, why: str) -> None:
        super().__init__(f"{field} {why}")
        self.field = field


_MEASURED = {"wall": "seconds", "step": "seconds", "checkpoint_period": "count1?",
             "snapshot_period": "count", "checkpoint_stall": "seconds?",
             "snapshot_stall": "seconds?", "downtime": "seconds?", "failures": "count",
             "restarts": "count", "saves": "count", "snapshots": "count"}
"""Each ``measured`` field and what it must be: ``seconds`` (a finite number, 0 or more),
``count`` (a whole number, 0 or more), ``count1`` (1 or more); ``?``: or null."""


_RECOVERY = {f.name for f in dataclasses.fields(MeasuredRecovery)}


def _known(d: Any, field: str, keys: Any) -> None:
    """``d`` a mapping of ``keys`` only (a report of another elastix may have more)."""
    if not isinstance(d, dict):
        raise InputError(field, f"{shown(d)} is not a mapping")
    unknown = sorted(set(map(str, d)) - set(keys))
    if unknown:
        raise InputError(field, f"has an unknown key {shown(unknown[0])}")


def _check(v: Any, field: str, kind: str) -> None:
    if kind.endswith("?"):
        if v is None:
            return
        kind = kind[:-1]
    elif v is None:
        raise InputError(field, "is missing")
    whole = kind.startswith("count")
    if isinstance(v, bool) or not isinstance(v, int if whole else (int, float)):
        raise InputError(field, f"{shown(v)} is not {'a whole number' if whole else 'a number'}")
    if isinstance(v, float) and not math.isfinite(v):
        raise InputError(field, f"is {v}, not a number a run measures")
    if v > 1e12:  # seconds: 30,000 years; and a float still holds it
        raise InputError(field, f"{shown(v)} is too large")
    low = 1 if kind == "count1" else 0
    if v < low:
        raise InputError(field, f"{v:g} is {'negative' if v < 0 else 'below 1'}")


def _phase(secs: dict[str, float | None], *names: str) -> float:
    return sum(secs.get(n) or 0.0 for n in names)


def _startup(events: list[Event]) -> float | None:
    """Seconds from the run's first ``run_start`` to its first step (its start-up)."""
    start = next((e.t for e in events if e.name == "run_start"), None)
    step = next((e.t for e in events if e.name == "step" and start is not None
                 and e.t >= start), None)
    return (step - start) / 1000 if start is not None and step is not None else None


def inputs_of(events: list[Event], records: list[dict[str, Any]] | None = None) -> RunInputs:
    """The forecast's inputs that ``events`` measured.

    Raises:
        UsageError: fewer than 2 steps were measured (:func:`elastix.measure.advise.measure`).
    """
    from elastix.measure.goodput import full_mesh_slices

    recs = []
    for r in recoveries(events):
        if not r.complete:
            continue
        secs = r.phase_seconds()
        recs.append(MeasuredRecovery(r.kind, r.downtime, _phase(secs, "detection", "cleanup"),
                                     _phase(secs, "waiting for slices"),
                                     _phase(secs, "restore", "first step")))
    return RunInputs(measure(events, records), tuple(recs), _startup(events),
                     full_mesh_slices(events))


def report_inputs(events: list[Event]) -> dict[str, Any] | None:
    """``forecast_inputs`` of a chaos report: None when the run has too few steps."""
    try:
        return inputs_of(events).to_json()
    except UsageError:
        return None


def from_report(text: str, where: str, version: int) -> RunInputs:
    """The inputs a saved chaos report (``chaos run ... -o json``) carries; ``version`` is the
    report schema this elastix writes (:data:`elastix.measure.report.SCHEMA_VERSION`, passed
    in: the report imports this module).

    Raises:
        UsageError: not JSON, not a chaos report, another schema version, or no inputs in it.
    """
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"report {where!r} is not JSON ({e.msg}, line {e.lineno})",
                         hint=REPORT_HINT) from None
    except ValueError:  # json reads an integer of over 4,300 digits as no JSON error does
        raise UsageError(f"report {where!r} has a number of over 4,300 digits: not a chaos "
                         "report", hint=REPORT_HINT) from None
    except RecursionError:  # json's decoder recurses once per nesting level
        raise UsageError(f"report {where!r} is nested too deeply to be a chaos report",
                         hint=REPORT_HINT) from None
    if not isinstance(d, dict) or "kills" not in d or "schema_version" not in d:
        raise UsageError(f"report {where!r} is not a chaos report (no schema_version or kills)",
                         hint=REPORT_HINT)
    if d["schema_version"] != version:
        raise UsageError(f"report {where!r} has schema_version {shown(d['schema_version'])}; this "
                         f"elastix reads {version}", hint="forecast from the run's "
                         "events instead: --events FILE (docs/events.md)")
    got = d.get("forecast_inputs")
    if got is None:
        why = ("was written by an elastix without forecast inputs" if "forecast_inputs"
               not in d else "measured too few steps to forecast from")
        raise UsageError(f"report {where!r} {why}",
                         hint="forecast from the run's events instead: --events FILE")
    try:
        return RunInputs.from_json(got)
    except InputError as e:
        raise UsageError(f"report {where!r}: forecast_inputs.{e}",
                         hint="a run measures finite times, 0 or more: save the report again "
                              "with elastix chaos run NAME -o json, or forecast from --events "
                              "FILE") from None
    except (TypeError, KeyError, ValueError, AttributeError) as e:
        raise UsageError(f"report {where!r}: its forecast_inputs are malformed ({e})",
                         hint=REPORT_HINT) from None
