"""Issue #16, "a CLI that reads well": every ``--help`` shows every option name whole.

The walk covers every command and group of the real tree, at 80 and at 120 columns, through
the real entry point.
"""

from __future__ import annotations

import re

import click
import pytest

from elastix.main import command, main


def _walk(cmd: click.Command, path: tuple[str, ...] = ()):
    yield path, cmd
    for name, sub in getattr(cmd, "commands", {}).items():
        yield from _walk(sub, (*path, name))


COMMANDS = dict(_walk(command()))


def _help(path: tuple[str, ...], columns: int, monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    assert main([*path, "--help"]) == 0
    return capsys.readouterr().out


def _whole(name: str, text: str) -> bool:
    """``name`` appears with no name character glued to either side (not cut, not a prefix)."""
    return re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text) is not None


@pytest.mark.parametrize("columns", [80, 120])
@pytest.mark.parametrize("path", list(COMMANDS), ids=lambda p: " ".join(p) or "elastix")
def test_every_option_name_appears_whole(path, columns, monkeypatch, capsys):
    out = _help(path, columns, monkeypatch, capsys)
    cmd = COMMANDS[path]
    names = [n for p in cmd.params if isinstance(p, click.Option) and not p.hidden
             for n in (*p.opts, *p.secondary_opts)]
    names += list(getattr(cmd, "commands", {}))
    assert [n for n in names if not _whole(n, out)] == [], out
    lines = out.splitlines()
    assert [ln for ln in lines if len(ln) > columns] == [], out
    # No word is broken at a hyphen ("--dry-" / "run=server"), and no Rich escape shows.
    assert [ln for ln in lines if re.search(r"\w-$", ln)] == [], out
    assert "\\[" not in out


def test_help_uses_the_width_it_is_given(monkeypatch, capsys):
    """At 120 columns a long help line is not wrapped at 80 (the width is the terminal's)."""
    wide = _help(("workload", "create"), 120, monkeypatch, capsys)
    assert max(len(ln) for ln in wide.splitlines()) > 80
