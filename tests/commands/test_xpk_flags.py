"""xpk habits: every xpk flag of the Pathways commands (the vendored extract of
xpk's parsers) is accepted by the elastix command that does the same job, or gets a one-line
exit-2 did-you-mean naming the elastix flag, or saying why there is none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from neighbour_flags import check_flag, command_at, flag_params, flags_of

from elastix.commands import xpk
from elastix.main import command, main

EXTRACT = json.loads((Path(__file__).parents[1] / "fixtures" / "xpk_pathways_flags.json")
                     .read_text())


def _xpk_advice(elastix_cmd: str, flag: str, error: str, hint: str) -> None:
    """xpk's advice starts with the flag; the elastix flag it names exists."""
    assert error.startswith(f"error: {flag} is "), error
    if "elastix says" in error:  # the flag it names exists (on this command, or elastix's)
        named = error.rsplit(" ", 1)[1]
        assert named in flags_of(command_at(elastix_cmd)) | flags_of(command()), named


@pytest.mark.parametrize(("elastix_cmd", "flag"), flag_params(EXTRACT))
def test_xpk_flag_is_accepted_or_gets_a_did_you_mean(elastix_cmd, flag, capsys):
    check_flag(elastix_cmd, flag, xpk.did_you_mean, capsys, _xpk_advice)


def test_aliases_are_declared():
    """Each xpk alias is a spelling of its elastix flag on that command."""
    for (path, flag), spellings in xpk.ALIASES.items():
        for p in command_at(path).params:
            if flag in getattr(p, "opts", ()):
                assert set(spellings) <= set(p.opts)
                break
        else:
            pytest.fail(f"{path} has no {flag}")


def test_every_mapped_flag_is_in_the_extract():
    """The mapping names no flag xpk does not have (shared flags count for every command)."""
    known = {f for spec in EXTRACT["commands"].values() for f in spec["flags"]}
    mapped = {f for flags in xpk.SPELLINGS.values() for f in flags if not f.startswith("--no-")}
    mapped |= {f for f in xpk._EVERYWHERE if not f.startswith("--no-")}
    assert mapped - known == set()


def test_unknown_flags_keep_click_s_message(capsys):
    assert main(["workload", "list", "--no-such-flag"]) == 2
    assert "No such option" in capsys.readouterr().err
