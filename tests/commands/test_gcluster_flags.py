"""Cluster Toolkit habits: every flag of ``gcluster job submit``, ``list`` and ``logs`` (the
vendored extract of ``cmd/job/*.go`` @ c765092) is accepted by the elastix command doing the
same job, or gets a one-line exit-2 did-you-mean naming the elastix flag, or saying why there is
none; and the MaxText elastic guide's gcluster command runs with gcluster's spellings."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml
from neighbour_flags import check_flag, command_at, flag_params, flags_of

from elastix.commands import gcluster, xpk
from elastix.main import main

FIXTURES = Path(__file__).parents[1] / "fixtures"
EXTRACT = json.loads((FIXTURES / "gcluster" / "job_flags.json").read_text())
GUIDE = yaml.safe_load((FIXTURES / "neighbours" / "maxtext-elastic-training-gcluster.yaml")
                       .read_text())


def _gcluster_advice(elastix_cmd: str, flag: str, error: str, hint: str) -> None:
    """gcluster's advice names the elastix flag, or points to docs/from-gcluster.md."""
    assert "docs/from-gcluster.md" in hint or "elastix says" in error
    if "elastix says" in error:  # the flag it names exists (NAME: the positional)
        named = error.split("elastix says ", 1)[1].split()[0]
        assert named == "NAME" or named in flags_of(command_at(elastix_cmd)), named


@pytest.mark.parametrize(("elastix_cmd", "flag"), flag_params(EXTRACT))
def test_gcluster_flag_is_accepted_or_gets_a_did_you_mean(elastix_cmd, flag, capsys):
    check_flag(elastix_cmd, flag, gcluster.did_you_mean, capsys, _gcluster_advice)


def test_aliases_are_declared_and_mean_the_flag():
    for (path, flag), spellings in gcluster.ALIASES.items():
        (param,) = [p for p in command_at(path).params if flag in getattr(p, "opts", ())]
        assert set(spellings) <= set(param.opts)
        assert not set(spellings) & set(gcluster.SPELLINGS.get(path, {}))
    submit = EXTRACT["commands"]["job submit"]["flags"]
    assert {s for v in gcluster.ALIASES.values() for s in v} <= set(submit)


def test_every_mapped_flag_is_in_the_extract():
    known = {f for spec in EXTRACT["commands"].values() for f in spec["flags"]}
    assert {f for flags in gcluster.SPELLINGS.values() for f in flags} - known == set()


def test_xpk_and_gcluster_answers_do_not_disagree():
    """A flag both tools spell for one command gets one answer."""
    for cmd, flags in gcluster.SPELLINGS.items():
        assert not set(flags) & set(xpk.SPELLINGS.get(cmd, {})), cmd


def test_the_guide_s_gcluster_command_creates_with_its_spellings(tmp_path, capsys):
    """The MaxText guide's ``gcluster job submit``, its values filled in as the neighbours'
    fixture does: only --name (NAME), --compute-type/--topology (--tpu-type) and --pathways (every
    elastix workload is one) are said otherwise; every other flag is taken as gcluster spells it."""
    (ex,) = GUIDE["examples"]
    text = ex["text"].replace("\\\n", " ")
    for k, v in {"<RUN_NAME>": "elastic-qwen3", "<COMPUTE_TYPE>": "ct5lp-hightpu-4t",
                 "<TOPOLOGY>": "4x4", "<NUM_SLICES>": "3",
                 "<GCS_BUCKET>": "gs://test-bucket/maxtext-runs"}.items():
        text = text.replace(k, v)
    argv = shlex.split(text)[3:]  # after: gcluster job submit
    said_otherwise = {"--name", "--compute-type", "--topology", "--pathways"}
    kept = [a for a in argv if a.split("=")[0] not in said_otherwise]
    assert {a.split("=")[0] for a in kept} == {"--image", "--num-slices", "--pathways-gcs-location",
                                               "--pathways-elastic-slices",
                                               "--pathways-max-slice-restarts", "--command"}
    out = tmp_path / "m.json"
    assert main(["workload", "create", "elastic-qwen3", "--tpu-type", "v5litepod-16", *kept,
                 "--dry-run", "-o", "json", "--output-file", str(out), "--backend",
                 "gke"]) == 0, capsys.readouterr().err
    assert "note: budget: MaxText elastic_max_retries=10" in capsys.readouterr().err
    m = json.loads(out.read_text())
    assert m["metadata"]["annotations"]["elastix.dev/elastic-slices"] == "1"
    assert m["metadata"]["annotations"]["elastix.dev/max-slice-restarts"] == "10"
    head = m["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    assert head["containers"][0]["image"].endswith("tpu_pre_training:latest")
    for gc_flag in said_otherwise - {"--name"}:
        assert main(["workload", "create", "x", gc_flag]) == 2
        assert capsys.readouterr().err.startswith(f"error: {gc_flag} is ")


def test_job_group_is_answered(capsys):
    assert main(["job", "submit"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "error: 'job' is gcluster's command group; elastix's workloads are " \
                     "'elastix workload'"
    assert "'elastix workload create'" in err[1] and "docs/from-gcluster.md" in err[1]
