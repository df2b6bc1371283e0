"""Reading a chaos run's files: a schedule (``chaos run --schedule FILE``) and a plan
(``chaos run --plan FILE``). The files are the user's, so they are read here, bounded and
checked as every user file is (a regular file of at most 1 MiB, UTF-8 YAML or JSON), with
one-line errors that name the field; their faults are :class:`elastix.measure.schedule.Planned`,
their rounds :class:`elastix.measure.plan.Round`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from elastix.commands.options import parse_duration_in
from elastix.errors import load_user_yaml
from elastix.measure.plan import Plan
from elastix.measure.plan_file import parse_plan
from elastix.measure.schedule import Planned, parse_schedule


def duration(text: str, what: str, zero_ok: bool) -> float:
    """The CLI's one duration grammar, as the plan and schedule parsers take it."""
    return parse_duration_in(text, what, allow_zero=zero_ok)


def _yaml(path: str, what: str, flag: str, example: str) -> Any:
    """The document of the user's YAML (or JSON) file ``path``."""
    from elastix.workload.spec import read_user_text

    text = read_user_text(Path(path), what, flag, "write it as UTF-8 YAML")
    return load_user_yaml(text, f"{what} {path!r}", example, too_deep=f" to be a {what}")


def load_schedule(path: str) -> list[Planned]:
    """``--schedule FILE``: a list of faults (:mod:`elastix.measure.schedule`)."""
    doc = _yaml(path, "schedule", "--schedule", "a list of faults, e.g. - {at: 30s, fault: kill}")
    return parse_schedule(doc, f"schedule {path!r}", duration)


def load_plan(path: str) -> Plan:
    """``--plan FILE``: a plan, as ``chaos run --dry-run -o yaml`` writes it
    (:mod:`elastix.measure.plan`)."""
    doc = _yaml(path, "plan", "--plan", "write one with elastix chaos run NAME --dry-run -o yaml")
    return parse_plan(doc, f"plan {path!r}", duration)
