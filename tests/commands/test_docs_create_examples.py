"""Every ``elastix workload create`` the docs show passes the elastic lint: each command line in
a code block of README.md and docs/**/*.md (continuation lines joined) is run with
``--dry-run``, and its manifest linted: no error, and no warning either (a copied example
should not start with a note)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import yaml

from elastix.workload.lint import lint

ROOT = Path(__file__).resolve().parents[2]
SKIP = {
    # (file, a word of the command): why it is not run
    ("docs/from-xpk.md", "--custom-pathways-worker-args=--a=1 --b=2"):
        "a transcript of the error an xpk flag gets, not a workload",
    ("docs/from-xpk.md", "--spot"): "a transcript of the error an xpk flag gets, not a workload",
    ("docs/from-gcluster.md", "--name=elastic-qwen3"):
        "MaxText's guide pasted as written, its command cut short here: its budget note is the "
        "point, and tests/commands/test_gcluster_flags.py pastes it whole",
}
_FENCE = re.compile(r"^\s*```")
_COMMAND = re.compile(r"^(?:\s*(?:\$\s+)?|.*&&\s*)(elastix workload create .*)$")


def _commands(text: str) -> list[tuple[int, str]]:
    """(line number, command line) of each shell line in a fenced code block, its
    continuation lines joined."""
    out, in_block, pending, start = [], False, "", 0
    for n, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            in_block, pending = not in_block, ""
            continue
        if not in_block:
            continue
        if not pending:
            start = n
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        out.append((start, pending + line))
        pending = ""
    return out


def examples() -> list:
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        rel = str(path.relative_to(ROOT))
        for n, line in _commands(path.read_text(encoding="utf-8")):
            m = _COMMAND.match(line)
            if not m:  # not there, or an output line that names the command
                continue
            words = shlex.split(m.group(1), comments=True)[1:]
            why = next((w for (f, word), w in SKIP.items() if f == rel and word in words), None)
            marks = [pytest.mark.skip(reason=why)] if why else []
            found.append(pytest.param(words, id=f"{rel}:{n}", marks=marks))
    return found


EXAMPLES = examples()


def test_the_docs_have_create_examples():
    names = {(p.id.split(":")[0], p.values[0][2]) for p in EXAMPLES}
    assert {("README.md", "demo"), ("docs/maxtext.md", "mt")} <= names
    # The README's spec-file create runs the sample spec it names.
    assert any("docs/examples/spec.yaml" in p.values[0] for p in EXAMPLES
               if p.id.startswith("README.md"))


@pytest.mark.parametrize("words", EXAMPLES)
def test_a_docs_create_example_passes_the_elastic_lint(cli, words, tmp_path):
    # No kubeconfig: an example without --cluster runs on the local backend, as the README says.
    # The fit check (compiling a GKE example's step for its slices: a minute each) has tests of
    # its own (tests/commands/test_fit_check.py); its one skipped line is not a lint note.
    r = cli(*words, "--dry-run", "--no-fit-check", env={"HOME": str(tmp_path)}, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    found = lint(yaml.safe_load(r.stdout))
    assert (found.errors, found.warnings) == ([], [])
    assert "note:" not in "\n".join(line for line in r.stderr.splitlines()
                                    if "fit check skipped" not in line)
