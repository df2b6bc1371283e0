"""What the suite's real-MaxText tests share: the run's shape, the Run record, the skip rule."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import mtrun
import pytest

STEPS, PERIOD, SAVED, THEN = 40, 10, 10, 3
"""40 steps, a checkpoint every 10; killed once step 10 is saved and step 13 completed (steps
take milliseconds: the steps after 13 leave the kill room to land before the run ends)."""


@dataclasses.dataclass
class Run:
    """The two processes' stamped log (the second's lines after the first's) and outcomes."""

    argv: list[str]
    log: Path
    first: list[str]  # the killed process's lines
    second: list[str]  # the restarted one's
    second_code: int

    @property
    def lines(self) -> list[str]:
        return self.first + self.second


def require_maxtext() -> None:
    why = mtrun.missing()
    if why is None:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI must run real MaxText: {why}", pytrace=False)
    pytest.skip(why)
