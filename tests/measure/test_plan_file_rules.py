"""A plan file is checked as the flags are, before any fault (issue 59, item 11).

Two rounds aimed at the run's start, or steps going backwards, passed the dry run and failed
in the real run after a kill; ``pinned: true`` silently ignored ``count``; ``at`` times out of
order ran in file order; a plan saved by a dry run without ``--seed`` held ``seed: null``, so
its replay hit other victims. The commands run in process against test_plan's stand-in
backend, which records each fault asked of it and kills nothing.
"""

from __future__ import annotations

import pytest
import yaml
from test_plan import _local, _planned, stand  # noqa: F401 - stand is a fixture

from elastix.main import main

RULES = [
    pytest.param("rounds:\n- {during: startup}\n- {during: startup}\n",
                 "round 2: during startup again (round 1 aims at it): the run's start comes "
                 "once", id="startup-twice"),
    pytest.param("rounds:\n- {during: compile}\n- {fault: term, during: compile}\n",
                 "round 2: during compile again (round 1 aims at it)", id="compile-twice"),
    pytest.param("rounds:\n- {step: 40}\n- {step: 20}\n",
                 "round 2: step 20 is not after round 1's step 40: steps must increase",
                 id="steps-backwards"),
    pytest.param("rounds:\n- {step: 40}\n- {interval: 5}\n- {step: 40}\n",
                 "round 3: step 40 is not after round 1's step 40", id="step-again"),
    pytest.param("pinned: true\nrounds:\n- {fault: kill, count: 2}\n",
                 "round 1: count 2 with pinned: a pinned fault is kill-worker's one fault",
                 id="pinned-count"),
    pytest.param("rounds:\n- {at: 30}\n- {at: 10}\n",
                 "round 2: at 10 s is before round 1's 30 s: rounds run in order",
                 id="at-unsorted"),
]


@pytest.mark.parametrize(("text", "message"), RULES)
def test_a_plan_breaking_a_rule_of_the_flags_is_refused_before_any_fault(
        stand, tmp_path, capsys, text, message):  # noqa: F811
    path = tmp_path / "p.yaml"
    path.write_text(text)
    for extra in (["--dry-run"], []):
        capsys.readouterr()
        code = main(["chaos", "run", "demo", "--plan", str(path), *extra, *_local(tmp_path)])
        lines = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(lines) == 2, lines
        assert lines[0] == f"error: plan '{path}', {message}" or \
            lines[0].startswith(f"error: plan '{path}', {message}"), lines
        assert lines[1].startswith("hint: ")
    assert stand.injected == []


def test_head_faults_may_each_aim_at_the_start_they_restart(stand, tmp_path, capsys):  # noqa: F811
    path = tmp_path / "p.yaml"
    path.write_text("rounds:\n- {fault: head, during: compile}\n- {fault: head, during: "
                    "compile}\n")
    assert main(["chaos", "run", "demo", "--plan", str(path), "--dry-run",
                 *_local(tmp_path)]) == 0


def test_a_dry_run_without_a_seed_writes_the_seed_a_replay_uses(stand, tmp_path, capsys):  # noqa: F811
    assert main(["chaos", "run", "demo", "--kills", "2", "--dry-run", "-o", "yaml",
                 *_local(tmp_path)]) == 0
    text = capsys.readouterr().out
    seed = yaml.safe_load(text)["seed"]
    assert isinstance(seed, int), text
    path = tmp_path / "p.yaml"
    path.write_text(text)
    assert _planned(tmp_path, "chaos", "run", "demo", "--plan", str(path)).seed == seed
    # a plan file saved with none (by an older elastix): the run draws one, and reports it
    path.write_text(text.replace(f"seed: {seed}", "seed: null"))
    assert isinstance(_planned(tmp_path, "chaos", "run", "demo", "--plan", str(path)).seed, int)
