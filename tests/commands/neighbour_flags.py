"""What the xpk and gcluster flag tests share: an elastix command's flags, and the check that a
neighbour's flag elastix does not take is answered in one line, exit 2, with a hint."""

from __future__ import annotations

from collections.abc import Callable

import click
import pytest

from elastix.main import command, main


def flags_of(cmd: click.Command) -> set[str]:
    return {o for p in cmd.params if isinstance(p, click.Option)
            for o in (*p.opts, *p.secondary_opts)}


def command_at(path: str) -> click.Command:
    """``workload create`` -> its click command."""
    cmd = command()
    for name in path.split():
        cmd = cmd.commands[name]
    return cmd


def flag_params(extract: dict) -> list:
    """A ``pytest.param(elastix command, flag)`` for every flag of a vendored extract, its id
    the neighbour's command and the flag (``job submit:--image``)."""
    return [pytest.param(spec["elastix"], flag, id=f"{theirs}:{flag}")
            for theirs, spec in extract["commands"].items() for flag in spec["flags"]]


def check_flag(elastix_cmd: str, flag: str, did_you_mean: Callable[[str, str], tuple | None],
               capsys, check_advice: Callable[[str, str, str, str], None]) -> None:
    """A neighbour's flag: taken by the elastix command (then no advice is given against it),
    or :func:`answered`, its two lines then passing the neighbour's own
    ``check_advice(elastix_cmd, flag, error, hint)``."""
    if flag in flags_of(command_at(elastix_cmd)):
        assert did_you_mean(elastix_cmd, flag) is None  # no advice against a real flag
        return
    check_advice(elastix_cmd, flag, *answered(elastix_cmd, flag, did_you_mean, capsys))


def answered(elastix_cmd: str, flag: str, did_you_mean: Callable[[str, str], tuple | None],
             capsys) -> tuple[str, str]:
    """``elastix ELASTIX_CMD FLAG`` exits 2 with the neighbour's advice as its one error line
    and a hint; returns the two lines."""
    assert main([*elastix_cmd.split(), flag]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("hint: "), err
    advice = did_you_mean(elastix_cmd, flag)
    assert advice is not None and lines[0] == f"error: {advice[0]}", err
    return lines[0], lines[1]
