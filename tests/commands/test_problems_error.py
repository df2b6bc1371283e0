"""ProblemsError: every problem at once, printed one per line by the entry point."""

from __future__ import annotations

from elastix.errors import ProblemsError, SpecError, UsageError
from elastix.main import _print_error


class _Options(ProblemsError):
    subject = "with the options"


def test_one_problem_is_one_line_with_its_hint():
    e = _Options([("size", "must be > 0", "e.g. 3")])
    assert (e.message, e.hint, e.exit_code) == ("size: must be > 0", "e.g. 3", 2)


def test_several_problems_are_counted_and_listed(capsys):
    e = _Options([("size", "must be > 0", "e.g. 3"), ("name", "is required", None)])
    assert isinstance(e, UsageError) and e.hint is None
    assert e.message == "2 problems with the options"
    _print_error(e)
    err = capsys.readouterr().err
    assert "  - size: must be > 0 (e.g. 3)" in err and "  - name: is required" in err


def test_spec_error_is_a_problems_error():
    e = SpecError([("a", "x", None), ("b", "y", None)])
    assert isinstance(e, ProblemsError)
    assert e.message == "2 problems in the workload spec"
    assert e.lines() == ["a: x", "b: y"]
