"""A live events file and ``--events FILE`` read by one rule: a torn line (half a record, a
run of NUL bytes) is skipped wherever it is and said once, with how many (issue 48: it was
bad input, exit 2, and a run whose head was killed on a full disk could not be measured
again); a line that is JSON but no event is bad input (exit 2), said once, either way.

The CLI as a real subprocess on a real local workload's files (plan.json, events.jsonl)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

FIXTURE = Path(__file__).parent / "fixtures" / "real_run2.events.jsonl"


def _workload(tmp_path: Path) -> Path:
    """A local workload as submit leaves it, no processes; returns its events file."""
    from elastix.backends.local.plan import make_plan
    from elastix.backends.local.state import write_json_atomic
    from elastix.workload.render import render
    from elastix.workload.spec import build_spec

    spec = build_spec(None, {"name": "run", "tpu_type": "v5litepod-8", "num_slices": 2,
                             "docker_image": "img:1", "command": "true"})
    d = tmp_path / "state" / "run"
    d.mkdir(parents=True)
    plan = make_plan(render(spec), d, {}, str(tmp_path)).to_json()
    write_json_atomic(d / "plan.json", plan)
    return Path(plan["events_file"])


def _goodput(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    env.update(NO_COLOR="1", COLUMNS="200", HOME=str(tmp_path / "home"),
               ELASTIX_STATE_DIR=str(tmp_path / "state"))
    return subprocess.run([sys.executable, "-m", "elastix", "workload", "goodput", *args],
                          capture_output=True, text=True, env=env, timeout=120,
                          stdin=subprocess.DEVNULL)


def _both(tmp_path: Path, text: str):
    events = _workload(tmp_path)
    events.write_text(text)
    return (_goodput(tmp_path, "run", "--backend", "local"),
            _goodput(tmp_path, "--events", str(events)))


@pytest.mark.parametrize("torn", ["#garbage", '{"ts": "2026-11-29T10:4', "\x00" * 40])
def test_a_torn_line_in_the_middle_is_skipped_and_said_live_and_from_a_file(tmp_path, torn):
    lines = FIXTURE.read_text().splitlines(keepends=True)
    middle = len(lines) // 2
    damaged = "".join(lines[:middle] + [torn + "\n"] + lines[middle:])
    live, given = _both(tmp_path, damaged)
    clean = _goodput(tmp_path, "--events", str(FIXTURE))
    for proc in (live, given):
        assert proc.returncode == 0, proc.stderr
        # the caption's second line names the source (its first, the goodput: issue 49)
        head, source = proc.stdout.splitlines()[:2]
        assert f"skipped 1 line elastix could not read (first: line {middle + 1}, not JSON)" \
            in source, proc.stdout
        # the same measurement as the undamaged file's
        assert head == clean.stdout.splitlines()[0]
    assert "skipped" not in clean.stdout


def test_a_line_that_is_no_event_in_the_middle_is_bad_input_live_and_from_a_file(tmp_path):
    lines = FIXTURE.read_text().splitlines(keepends=True)
    middle = len(lines) // 2
    damaged = "".join(lines[:middle] + ['{"not": "an event"}\n'] + lines[middle:])
    live, given = _both(tmp_path, damaged)
    for proc in (live, given):
        assert proc.returncode == 2, proc.stderr
        err = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert len(err) == 2 and err[1].startswith("hint: "), proc.stderr
        assert (f"1 of {len(lines) + 1} lines unreadable (first: line {middle + 1}, not an "
                "object with an 'event')") in err[0]
        assert "a torn line, half a record, is skipped" in err[1]


@pytest.mark.parametrize("torn", ['{"ts": "2026-11-29T10:4', ""])
def test_a_torn_last_line_is_what_a_file_being_written_looks_like(tmp_path, torn):
    live, given = _both(tmp_path, FIXTURE.read_text() + torn)
    assert live.returncode == given.returncode == 0, live.stderr + given.stderr
    assert "goodput" in live.stdout.lower() and "goodput" in given.stdout.lower()
