"""Real MaxText as the local head, its own elastic path rehearsed on the Pathways stand-in.

One MaxText workload for the whole suite (MaxText takes a minute or more to its first step):
a tiny model on one slice with ``elastic_enabled=true enable_single_controller=true``. A real
SIGKILL of its slice host fails MaxText's step with ``DATA_LOSS``; pathwaysutils'
``elastic_retry`` catches it, MaxText cleans up and Orbax restores, in the same process. Every
user step goes through the CLI: ``logs -f``, ``chaos kill-worker --measure``, ``chaos run``,
``workload goodput``, ``delete``. Waits are on log lines, with timeouts.

Needs the MaxText environment (``bash .ci/setup-maxtext``, or ``ELASTIX_MAXTEXT_PYTHON``):
without it the test is skipped, saying so, except under ``CI=true``, where it fails.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import tiers
import yaml
from local_helpers import wait_until

from elastix.backends.base import LogOptions
from elastix.workload.maxtext_env import default_python

MAXTEXT_PYTHON = os.environ.get("ELASTIX_MAXTEXT_PYTHON") or str(default_python())

# The command of docs/maxtext.md: the config path inside the package resolves to the installed
# configs (maxtext 0.2.5 pyconfig), checkpoints every 20 steps into the workload's kept data.
MAXTEXT = (
    "python -u -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml run_name=r1 "
    "base_output_directory=\"$ELASTIX_LOCAL_DATA_DIR/out\" hardware=cpu dataset_type=synthetic "
    "steps=1000000 per_device_batch_size=1 enable_checkpointing=true async_checkpointing=false "
    "checkpoint_period=20 base_emb_dim=64 base_num_query_heads=2 base_num_kv_heads=2 "
    "base_mlp_dim=128 base_num_decoder_layers=2 head_dim=32 vocab_size=256 "
    "max_target_length=64 skip_jax_distributed_system=true "
    "elastic_enabled=true enable_single_controller=true elastic_timeout_seconds=300")
GUIDE = yaml.safe_load((Path(__file__).resolve().parents[2] / "fixtures" / "neighbours" /
                        "maxtext-elastic-training-gcluster.yaml").read_text())["examples"][0]
"""MaxText's elastic guide command (tests/fixtures/neighbours, issue 47)."""


def guide_elastic() -> tuple[list[str], str]:
    """The guide's elastic flags of ``workload create`` and its trainer's elastic keys, to run
    on the tiny CPU model of :data:`MAXTEXT` (its model, sizes and paths cannot run here)."""
    argv = GUIDE["elastix"]["argv"]
    flags = [w for i, w in enumerate(argv) for f in ("--elastic-slices", "--max-slice-restarts")
             if w == f or (i and argv[i - 1] == f)]
    keys = [w for w in argv[argv.index("--command") + 1].split()
            if w.split("=")[0] in ("elastic_enabled", "enable_single_controller",
                                   "elastic_timeout_seconds", "elastic_max_retries")]
    return flags, " ".join(keys)
SAVED = re.compile(r"Saved a checkpoint at step (\d+)")
RESTORING = re.compile(r"restoring from this run's directory step (\d+)")


pytestmark = pytest.mark.maxtext


@pytest.fixture
@tiers.slow
def maxtext() -> str:
    """The MaxText environment's Python (skips without it, fails in CI)."""
    if os.access(MAXTEXT_PYTHON, os.X_OK):
        return MAXTEXT_PYTHON
    why = (f"no MaxText environment at {MAXTEXT_PYTHON}: bash .ci/setup-maxtext makes it "
           "(or set ELASTIX_MAXTEXT_PYTHON)")
    if os.environ.get("CI") == "true":
        pytest.fail(why + "; CI must run this test")
    pytest.skip(why)


def _lines(backend, name: str) -> list[str]:
    return [e.text for e in backend.logs(name, LogOptions()) if not e.notice]


def _count(pattern: re.Pattern[str], lines: list[str]) -> list[int]:
    return [int(m.group(1)) for line in lines if (m := pattern.search(line))]


def test_maxtext_elastic_recovery_in_the_same_process(cli, backend, tmp_path, maxtext):
    cli.env["ELASTIX_MAXTEXT_PYTHON"] = MAXTEXT_PYTHON
    name = "mt"
    # MaxText's elastic guide: --elastic-slices=1 --max-slice-restarts=10 with its trainer's
    # elastic_max_retries=10, which the lint used to refuse. It creates, with a budget note.
    flags, keys = guide_elastic()
    assert flags == ["--elastic-slices", "1", "--max-slice-restarts", "10"], flags
    assert "elastic_max_retries=10" in keys, keys
    command = MAXTEXT.replace("elastic_enabled=true enable_single_controller=true "
                              "elastic_timeout_seconds=300", keys)
    made = cli("workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "1",
               *flags, "--command", command, timeout=300)
    assert "note: budget: MaxText elastic_max_retries=10 recovers from 9 slice losses" in \
        " ".join(made.stderr.split()), made.stderr
    follow_out = tmp_path / "follow.txt"
    follower = cli.popen("logs", name, "-f", out=follow_out)
    try:
        # MaxText (not elastix's trainer) is the head, on the stand-in, and has checkpointed.
        wait_until(lambda: _count(SAVED, _lines(backend, name)), 900, "MaxText's first save")
        head_pid = json.loads(cli("workload", "status", name, "-o", "json").stdout)["head"]["pid"]
        saved = set(_count(SAVED, _lines(backend, name)))

        report = json.loads(cli("chaos", "kill-worker", name, "--slice", "0", "--measure",
                                "--timeout", "10m", "-o", "json", timeout=900).stdout)
        assert report["ok"] and report["violations"] == [], report
        (m,) = report["kills"]  # the one report chaos run gives
        r = m["recovery"]
        assert m["source"].startswith("log"), m["source"]  # MaxText's own lines, no events
        assert m["in_process"] and m["pid_same"] and m["jobset_restarts"] == 0, m
        assert r["kind"] == "in-process" and r["complete"], r
        # Every phase, from MaxText's, pathwaysutils' and Orbax 0.12's own lines.
        for phase in ("detection", "cleanup", "waiting_for_slices", "restore", "first_step"):
            assert r["phases"][phase] is not None, (phase, r)
        assert r["restored_step"] in set(_count(SAVED, _lines(backend, name))), r
        assert r["steps_lost"] == r["last_step"] - r["restored_step"], r
        assert r["first_step"] is not None and r["downtime_seconds"] > 0, r

        lines = _lines(backend, name)
        text = "\n".join(lines)
        assert "DATA_LOSS" in text and "Elastic event detected" in text
        # pathwaysutils' retry, MaxText's cleanup and Orbax's restore ran, in that order.
        after = text[text.index("Elastic event detected"):]
        order = ["Elastic utils: Checking for incomplete checkpoint", "Elastic attempt 2",
                 "Sufficient slices active: 1 >= 1", "restoring from this run's directory step",
                 "[sync] Finished load in", "completed step: "]
        at = [after.find(s) for s in order]
        assert -1 not in at and at == sorted(at), dict(zip(order, at, strict=True))
        (restored,) = _count(RESTORING, lines)  # Orbax restored a step MaxText had saved
        assert restored in saved | set(_count(SAVED, lines))
        st = json.loads(cli("workload", "status", name, "-o", "json").stdout)
        assert st["head"]["pid"] == head_pid and st["jobset_restarts"] == 0

        # A soak of one kill and the goodput, both from the same log.
        run = cli("chaos", "run", name, "--kills", "1", "--interval", "0s", "--timeout", "10m",
                  "-o", "json", timeout=900, check=False)
        assert run.returncode == 0, run.stdout + run.stderr
        assert len(_count(RESTORING, _lines(backend, name))) == 2
        g = json.loads(cli("workload", "goodput", name, "-o", "json").stdout)
        assert 0 < g["goodput"] < 1 and len(g["recoveries"]) == 2, g

        cli("workload", "delete", name, "--delete-data")
        assert follower.wait(timeout=60) == 0  # logs -f ends with the workload
        followed = follow_out.read_text()
        assert "Elastic event detected" in followed and "completed step: " in followed
        assert not re.search(r"^\d{4}-\d\d-\d\dT", followed, re.M)  # times only with -t
    finally:
        if follower.poll() is None:
            follower.kill()
            follower.wait()


def _create_aimed(cli, name: str, aim: str) -> str:
    """The elastic MaxText workload of this module, its slice host killed by the stand-in at
    the operation ``aim`` (``ELASTIX_MAXTEXT_STANDIN_KILL_AT``)."""
    cli.env["ELASTIX_MAXTEXT_PYTHON"] = MAXTEXT_PYTHON
    # MaxText on elastix's defaults (10 slice restarts, MaxText's elastic_max_retries 10): it
    # creates, with the budget note, where the lint used to refuse it (issue 47).
    made = cli("workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "1",
               "--elastic-slices", "1", "--command", MAXTEXT,
               "--env", f"ELASTIX_MAXTEXT_STANDIN_KILL_AT={aim}", timeout=300)
    assert "note: budget:" in made.stderr, made.stderr
    return name


def test_maxtext_save_in_flight_at_a_kill_never_commits(cli, backend, maxtext):
    """The stand-in fails MaxText's checkpoint when a slice host dies during its device-to-host
    copy, as Pathways does: killed (SIGKILL, aimed by the stand-in at the copy of step 40,
    which lasts milliseconds), the save of 40 raises DATA_LOSS before anything is written,
    pathwaysutils recovers in the same process, Orbax restores step 20 (the newest whose copy
    ended before the kill), and step 40 is never restored. Before, the step in flight finished
    on the CPU devices, its save committed after the host was dead and was restored: 0 steps
    lost where a TPU run loses them."""
    name = _create_aimed(cli, "mt-save", "during the checkpoint copy of step 40")
    try:
        wait_until(lambda: _count(RESTORING, _lines(backend, name)), 900, "the recovery")
        lines = _lines(backend, name)
        text = "\n".join(lines)
        kill = next(i for i, ln in enumerate(lines) if "elastix: aimed kill" in ln)
        restore = next(i for i, ln in enumerate(lines) if RESTORING.search(ln))
        assert "Waiting for step 40 to finish before checkpoint" in "\n".join(lines[:kill])
        assert "lost a host during the checkpoint copy of step 40" in text
        assert _count(SAVED, lines[:restore]) == [0, 20]  # 40 never saved before the restore
        assert _count(RESTORING, lines) == [20]
        # The last step completed before the kill is 40 (its metrics are written a step
        # late, if at all): MaxText starts over from 20, so the lost steps count from there.
        done = [int(m.group(1)) for ln in lines[:kill]
                if (m := re.search(r"completed step: (\d+),", ln))]
        assert max(done) <= 40
        wait_until(lambda: 40 in _count(SAVED, _lines(backend, name)), 600,
                   "step 40 saved again, after the recovery")
    finally:
        cli("workload", "delete", name, "--delete-data")


def test_maxtext_loss_while_setting_up_its_state_is_raised_there(cli, backend, maxtext):
    """A slice host killed while MaxText sets up its training state at start-up (aimed by the
    stand-in at the end of ``setup_initial_state``, once the state's arrays exist) fails that
    set-up with DATA_LOSS, before any step and before the first step's compile, as Pathways
    fails the first device operation that needs the dead host; pathwaysutils recovers in the
    same process and training starts."""
    name = _create_aimed(cli, "mt-setup", "while setting up the training state")
    try:
        wait_until(lambda: "completed step: " in "\n".join(_lines(backend, name)), 900,
                   "the first step after the recovery")
        lines = _lines(backend, name)
        kill = next(i for i, ln in enumerate(lines) if "elastix: aimed kill" in ln)
        detected = next(i for i, ln in enumerate(lines) if "Elastic event detected" in ln)
        first = next(i for i, ln in enumerate(lines) if "completed step: " in ln)
        assert kill < detected < first
        assert "lost a host while setting up the training state" in "\n".join(lines)
        assert "Elastic attempt 2" in "\n".join(lines[detected:first])
    finally:
        cli("workload", "delete", name, "--delete-data")
