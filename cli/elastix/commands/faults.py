"""Reading a chaos schedule file (``chaos run --schedule FILE``): the file is the user's, so it is
read here, bounded and checked, with one-line errors; its faults are
:class:`elastix.measure.schedule.Planned`."""

from __future__ import annotations

from pathlib import Path

from elastix.commands.options import parse_duration_in
from elastix.errors import UsageError
from elastix.measure.schedule import Planned, parse_schedule


def _duration(text: str, what: str, zero_ok: bool) -> float:
    return parse_duration_in(text, what, allow_zero=zero_ok)


def load_schedule(path: str) -> list[Planned]:
    """``--schedule FILE``: a regular file of at most 1 MiB, YAML or JSON, a list of faults
    (:mod:`elastix.measure.schedule`). Nothing of its content is quoted in an error."""
    import yaml

    from elastix.workload.spec import read_user_text

    text = read_user_text(Path(path), "schedule", "--schedule", "write it as UTF-8 YAML")
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise UsageError(f"schedule {path!r} is not YAML{at}",
                         hint="a list of faults, e.g. - {at: 30s, fault: kill}") from None
    return parse_schedule(doc, f"schedule {path!r}", _duration)
