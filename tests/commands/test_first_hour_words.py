"""Words a newcomer met in the first hour (issue 49, item 5), and the exit codes a script reads."""

from __future__ import annotations

import pytest

from elastix.errors import NotFoundError
from elastix.main import main


def test_debug_after_the_subcommand_is_elastixs_own_option(tmp_path, capsys):
    # the hints say "run again with --debug": where a user adds it, it is taken, not refused
    args = ["workload", "status", "nope", "--state-dir", str(tmp_path)]
    assert main(args) == 1  # not found: a runtime error
    with pytest.raises(NotFoundError):  # --debug: the traceback, not "No such option" (2)
        main([*args, "--debug"])
    assert main([*args, "--", "--debug"]) == 2  # after `--` it is an argument like any


def test_a_mistyped_command_is_suggested_once(capsys):
    assert main(["workload", "stat"]) == 2
    err = capsys.readouterr().err
    assert err.count("Did you mean 'status'?") == 1, err


def test_the_readmes_placeholder_tag_says_capitals_are_why(capsys):
    assert main(["image", "build", "--tag", "us-docker.pkg.dev/PROJECT/REPO/trainer:TAG"]) == 2
    err = capsys.readouterr().err
    assert "must be lowercase, and PROJECT, REPO are not" in err, err


def test_brackets_in_an_error_are_printed_as_written(capsys):
    # Rich read `[trainer]` as markup and dropped it from the install command
    from elastix.errors import UsageError
    from elastix.main import _print_error

    _print_error(UsageError("add it with pip install 'elastix[trainer]'", hint="see [bold]x"))
    err = capsys.readouterr().err
    assert "pip install 'elastix[trainer]'" in err and "see [bold]x" in err, err
