"""A CLI that reads well: every ``--help`` shows every option name whole.

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


LEAVES = {p: c for p, c in COMMANDS.items() if not getattr(c, "commands", None)}
GROUPS = {p: c for p, c in COMMANDS.items() if getattr(c, "commands", None)}


@pytest.mark.parametrize("path", list(LEAVES), ids=" ".join)
def test_every_option_and_argument_is_described_and_an_example_shown(path, monkeypatch, capsys):
    out = _help(path, 80, monkeypatch, capsys)
    cmd = LEAVES[path]
    undescribed = [p.opts[0] for p in cmd.params
                   if not getattr(p, "hidden", False) and not (getattr(p, "help", None) or "")]
    assert undescribed == [], out
    args = out.split("\nArguments:\n", 1)
    for p in cmd.params:
        if isinstance(p, click.Argument):  # listed with its words, not a bare [NAME]
            assert len(args) == 2 and re.search(rf"\[?{p.name.upper()}\]?(\.\.\.)?\s+\w", args[1]), out
    assert "Examples:" in out, out
    examples = out.split("Examples:", 1)[1]
    assert f"elastix {' '.join(path)}" in examples, out


@pytest.mark.parametrize("path", list(LEAVES), ids=" ".join)
def test_every_example_uses_only_options_the_command_has(path):
    from elastix.commands.examples import EXAMPLES

    cmd = LEAVES[path]
    known = {n for p in cmd.params if isinstance(p, click.Option)
             for n in (*p.opts, *p.secondary_opts)}
    used = {m for line in EXAMPLES[" ".join(path)] for m in
            re.findall(r"(?<![\w-])(--?[a-z][\w-]*)",
                       re.sub(r"'[^']*'", "", line.split("#", 1)[0]))}  # not a --command's
    assert used - known == set()


@pytest.mark.parametrize("path", list(GROUPS), ids=lambda p: " ".join(p) or "elastix")
def test_group_listings_show_each_summary_whole_at_80_columns(path, monkeypatch, capsys):
    out = _help(path, 80, monkeypatch, capsys)
    listing = " ".join(out.split("\nCommands:\n", 1)[1].split())
    for name, sub in GROUPS[path].commands.items():
        summary = " ".join(sub.get_short_help_str(1000).split())
        assert f"{name} {summary}" in listing, out


def test_a_duration_default_shows_as_typed(monkeypatch, capsys):
    out = _help(("workload", "delete"), 120, monkeypatch, capsys)
    assert "[default: 5m]" in out and "300.0" not in out
