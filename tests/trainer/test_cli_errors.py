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
