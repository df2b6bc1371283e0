"""One duration grammar for every duration flag (--since, --timeout, --interval, ...)."""

from __future__ import annotations

import pytest

from elastix.commands.options import parse_duration
from elastix.errors import UsageError


@pytest.mark.parametrize(("text", "seconds"), [
    ("90", 90), ("90s", 90), ("5m", 300), ("1.5h", 5400), ("1h30m", 5400), ("1m30s", 90),
    ("2d", 172800), (" 2M ", 120), ("0", 0), (".5s", 0.5),
])
def test_durations(text, seconds):
    assert parse_duration(text, "--timeout") == seconds


@pytest.mark.parametrize("text", ["", "h", "1h 30m", "30m1h", "-5", "inf", "1e3", "5x"])
def test_not_durations(text):
    with pytest.raises(UsageError, match="is not a duration") as e:
        parse_duration(text, "--interval")
    assert e.value.message == f"--interval {text!r} is not a duration"


def test_chaos_run_takes_compound_durations(cli, tmp_path):
    """`chaos run --timeout 1h30m --interval 1m30s` parses (it used to be a usage error); the
    run then stops at the missing workload."""
    r = cli("chaos", "run", "nope", "--backend", "local", "--state-dir", str(tmp_path),
            "--timeout", "1h30m", "--interval", "1m30s", "--max-downtime", "1m30s")
    assert "is not a duration" not in r.stderr, r.stderr
    assert r.returncode == 1 and "not found" in r.stderr


def test_logs_since_takes_fractions(cli, tmp_path):
    r = cli("logs", "nope", "--backend", "local", "--state-dir", str(tmp_path), "--since", "1.5h")
    assert "is not a duration" not in r.stderr, r.stderr
    assert r.returncode == 1 and "not found" in r.stderr


@pytest.mark.parametrize(("text", "minimum"), [("0", 0.1), ("0.05s", 0.1), ("0s", 1.0)])
def test_below_the_minimum(text, minimum):
    with pytest.raises(UsageError) as e:
        parse_duration(text, "--interval", minimum=minimum)
    assert e.value.message == f"--interval {text!r} is below the minimum of {minimum:g} s"

