"""elastix-train's bad input: one ``error:`` line, a hint that is true, exit 2 (no usage block,
no second error)."""

from __future__ import annotations

import pytest
from trainer_helpers import run_cli


@pytest.mark.parametrize("argv,error,hint", [
    (["--stepz", "3"], "error: flags: unrecognized arguments: --stepz 3",
     "hint: did you mean --steps?"),
    (["--lr"], "error: flags: argument --lr: expected one argument",
     "hint: see elastix-train --help"),
    (["--config", "."], "error: config: . is a directory, not a file",
     "hint: give --config a YAML or JSON file"),
    (["--step-delay", "nan"], "error: step_delay: must be a finite number of seconds, 0 or "
     "more, got nan", None),
])
def test_bad_command_lines(argv, error, hint):
    proc = run_cli(argv)  # the default bound: a loaded machine has taken 60 s to start JAX
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [error] + ([hint] if hint else [])
    assert "usage:" not in proc.stderr


@pytest.mark.parametrize("how", ["flag", "env"])
def test_an_events_path_that_is_a_fifo_is_refused_at_once(tmp_path, how):
    """Issue 59, item 8: appending to a FIFO waits for a reader for ever (an ordinary open
    blocks); the trainer refuses it in one line, exit 2, before it trains. The bound is the
    JAX start-up's, not the hang's: on the old code the run never ends."""
    import os

    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo)
    args = ["--preset", "tiny", "--steps", "2", "--compilation-cache-dir", "off"]
    if how == "flag":
        proc = run_cli([*args, "--events-file", str(fifo)], timeout=180)
    else:
        proc = run_cli(args, timeout=180, ELASTIX_EVENTS_FILE=str(fifo))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[-2:] == [
        f"error: the events file {fifo} is not a regular file (a FIFO): the trainer appends "
        "its events to a file of its own",
        "hint: give --events-file (or ELASTIX_EVENTS_FILE) the path of a regular file, "
        "created if missing"]
    assert "Traceback" not in proc.stderr
