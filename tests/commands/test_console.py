"""One console rule for every command, and one KEY=VALUE parser for every KEY=VALUE flag."""

from __future__ import annotations

from elastix.views.console import PIPED_WIDTH, console


def test_piped_output_is_wide(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    for stderr in (False, True):
        c = console(stderr=stderr)
        assert not c.is_terminal and c.width == PIPED_WIDTH == 160


def test_columns_wins_when_set_wider_or_narrower(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    assert console().width == 200
    monkeypatch.setenv("COLUMNS", "80")  # piped with COLUMNS=80: 80, not 160
    assert console().width == 80
    assert console(width=100).width == 100


def test_label_and_env_share_the_key_value_parser(cli):
    base = ["workload", "create", "x", "--tpu-type", "v5litepod-4", "--docker-image", "i",
            "--command", "c", "--dry-run"]
    r = cli(*base, "--label", "nokey")
    assert r.returncode == 2
    assert r.stderr.splitlines() == ["error: --label 'nokey' is not KEY=VALUE",
                                     "hint: write --label key=value"]
