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
CORPUS = FIXTURES / "neighbours"
GUIDES = {name: yaml.safe_load((CORPUS / f"maxtext-elastic-training-{name}.yaml").read_text())
          ["examples"][0] for name in ("gcluster", "xpk")}
NEWER = EXTRACT["newer"]["commands"]


def _gcluster_advice(elastix_cmd: str, flag: str, error: str, hint: str) -> None:
    """gcluster's advice names the elastix flag, or points to docs/from-gcluster.md."""
    assert "docs/from-gcluster.md" in hint or "elastix says" in error
    if "elastix says" in error:  # the flag it names exists (NAME: the positional)
        named = error.split("elastix says ", 1)[1].split()[0]
        assert named == "NAME" or named in flags_of(command_at(elastix_cmd)), named


@pytest.mark.parametrize(("elastix_cmd", "flag"), flag_params(EXTRACT)
                         + flag_params(EXTRACT["newer"]))
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
    known = {f for spec in (*EXTRACT["commands"].values(), *NEWER.values())
             for f in spec["flags"]}
    assert {f for flags in gcluster.SPELLINGS.values() for f in flags} - known == set()


def test_xpk_and_gcluster_answers_do_not_disagree():
    """A flag both tools spell for one command gets one answer."""
    for cmd, flags in gcluster.SPELLINGS.items():
        assert not set(flags) & set(xpk.SPELLINGS.get(cmd, {})), cmd


def _pasted(ex: dict, edits: int | None = None) -> list[str]:
    """The guide's command as a user pastes it: its placeholders filled, the first ``edits``
    of its edits made (all by default), split as bash splits it."""
    paste = ex["paste"]
    text = ex["text"]
    for placeholder, value in paste["values"].items():
        assert placeholder in text, placeholder
        text = text.replace(placeholder, value)
    for edit in paste["edits"][:edits]:
        assert edit["from"] in text, edit
        text = text.replace(edit["from"], edit["to"])
    return shlex.split(text.replace("\\\n", ""))  # bash drops a backslash-newline


def _create(argv: list[str], tmp_path, monkeypatch, capsys, kubeconfig: bool = False
            ) -> tuple[int, str, str]:
    # A machine with no cloud: no kubeconfig (or an empty one), nothing but loopback.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("ELASTIX_BACKEND", raising=False)
    # no MaxText environment either: the fit check of a MaxText head is one line, no compile
    monkeypatch.setenv("ELASTIX_MAXTEXT_PYTHON", str(tmp_path / "no-maxtext" / "python"))
    if kubeconfig:
        (tmp_path / ".kube").mkdir()
        (tmp_path / ".kube" / "config").write_text("apiVersion: v1\nkind: Config\n")
    capsys.readouterr()
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, " ".join(err.split())


@pytest.mark.parametrize(("guide", "edits"), [("gcluster", 1), ("xpk", 2)])
def test_the_guides_command_pastes_with_only_its_edits(guide, edits, tmp_path, monkeypatch,
                                                       capsys):
    """MaxText's elastic guide, both versions, pasted as written: the gcluster one with only the
    command word changed, the xpk one with the command word and the guide's own name length
    (which JobSet refuses); each edit counted."""
    ex = GUIDES[guide]
    assert len(ex["paste"]["edits"]) == edits
    argv = _pasted(ex)
    assert argv[:3] == ["elastix", "workload", "create"]
    rc, out, err = _create([*argv[1:], "--dry-run"], tmp_path, monkeypatch, capsys)
    assert rc == 0, err
    m = yaml.safe_load(out)
    assert m["kind"] == "JobSet"
    assert m["metadata"]["annotations"]["elastix.dev/elastic-slices"] == "1"
    assert "note: budget: MaxText elastic_max_retries=10" in err
    if guide == "gcluster":
        assert m["metadata"]["name"] == "elastic-qwen3"  # --name
        assert "--instance_type=tpuv5e:4x4" in out  # v5litepod-16, its 4x4 topology
        assert "note: --compute-type ct5lp-hightpu-4t --topology 4x4 is --tpu-type " \
               "v5litepod-16 in elastix's words" in err
        # the cluster is in gcluster job config, not on the line: past the checks, before
        # anything is sent or started, the backend is said (a server dry run: nothing runs)
        _, _, err = _create([*argv[1:], "--dry-run=server"], tmp_path, monkeypatch, capsys)
        assert "note: no cluster given (--pathways, an image and a gs:// path say GKE): " \
               "this runs on the local backend" in err and "--cluster NAME" in err


def test_the_xpk_guide_needs_its_name_edit(tmp_path, monkeypatch, capsys):
    """Without the name edit JobSet's own rule refuses the xpk version (its expect)."""
    argv = _pasted(GUIDES["xpk"], edits=1)
    rc, _, err = _create([*argv[1:], "--dry-run"], tmp_path, monkeypatch, capsys)
    assert rc == 2 and "JobSet requires <= 63" in err


def test_a_gke_shaped_create_says_its_backend_before_anything(tmp_path, monkeypatch, capsys):
    line = ["workload", "create", "w", "--tpu-type", "v5litepod-16", "--docker-image", "img:1",
            "--command", "python3 train.py", "--dry-run=server"]  # checked, nothing started
    rc, _, err = _create(line, tmp_path, monkeypatch, capsys)
    assert rc == 0 and "note: no cluster given (an image says GKE): this runs on the local " \
                       "backend" in err
    # the README's quickstart is not GKE-shaped: no note
    rc, _, err = _create(["workload", "create", "demo", "--tpu-type", "v5litepod-8",
                          "--num-slices", "2", "--dry-run"], tmp_path, monkeypatch, capsys)
    assert rc == 0 and "note:" not in err
    # a client dry run sends nothing: nothing to say
    rc, _, err = _create([*line[:-1], "--dry-run"], tmp_path, monkeypatch, capsys)
    assert rc == 0 and "note:" not in err
    # on GKE (a kubeconfig) the server is asked: said before it is (an empty kubeconfig: exit 1)
    rc, _, err = _create(line, tmp_path, monkeypatch, capsys, kubeconfig=True)
    assert err.startswith("note: no --cluster given: this runs on GKE, on the current "
                          "kubeconfig context's cluster") and "--backend local" in err
    # a backend named: nothing to say
    rc, _, err = _create([*line, "--backend", "local"], tmp_path, monkeypatch, capsys)
    assert rc == 0 and "no cluster given" not in err and "no --cluster" not in err, err


@pytest.mark.parametrize(("compute", "topology", "tpu_type"), [
    ("ct5lp-hightpu-4t", "4x4", "v5litepod-16"), ("ct5lp-hightpu-4t", "2x2", "v5litepod-4"),
    ("ct6e-standard-4t", "2x4", "v6e-8"), ("ct5p-hightpu-4t", "2x2x2", "v5p-16"),
    ("ct4p-hightpu-4t", "2x2x1", "v4-8"), ("v6e-8", None, "v6e-8"),
    ("v5litepod-16", None, "v5litepod-16"), ("v5p-4", None, "v5p-8"), ("v4-8", None, "v4-8")])
def test_compute_type_and_topology_are_the_tpu_type_gcluster_means(compute, topology, tpu_type):
    # gcluster: a machine type sized by --topology, or a size counting chips (TensorCores for
    # v4): cluster-toolkit pkg/config/hardware.go (AcceleratorShorthandMap, parseShorthand)
    name, note = gcluster.tpu_type(compute, topology)
    assert name == tpu_type
    assert (note is None) == (compute == tpu_type and topology is None)


@pytest.mark.parametrize(("line", "says"), [
    (["--compute-type", "ct5lp-hightpu-4t"], "needs --topology"),
    (["--topology", "4x4"], "goes with --compute-type"),
    (["--compute-type", "n2-standard-32"], "is not a TPU"),
    (["--compute-type", "ct5lp-hightpu-4t", "--topology", "3x3"], "no TPU slice elastix can"),
    (["--compute-type", "v6e-8", "--tpu-type", "v6e-8"], "both name the TPU type")])
def test_a_compute_type_elastix_cannot_place_is_one_line(line, says, tmp_path, monkeypatch,
                                                        capsys):
    rc, out, err = _create(["workload", "create", "w", "--docker-image", "i", "--command", "c",
                            *line, "--dry-run"], tmp_path, monkeypatch, capsys)
    assert rc == 2 and out == "" and says in err and err.startswith("error: ")
    assert err.count("error:") == 1 and "hint:" in err


def test_every_unknown_flag_of_a_line_is_answered_at_once(capsys):
    assert main(["workload", "create", "w", "--gke-ttl-after-finished", "1h", "--numslices",
                 "3", "--spot", "--mount", "a:b", "--dry-run"]) == 2
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and lines[0] == "error: 4 problems on the command line"
    assert lines[1].startswith("  - --gke-ttl-after-finished is gcluster's spelling")
    assert lines[2] == "  - no such option --numslices (did you mean --num-slices?)"
    assert lines[3].startswith("  - --spot is an xpk flag")
    assert lines[4].startswith("  - --mount is a gcluster flag")
    assert lines[5] == "hint: see 'elastix workload create --help'" and len(lines) == 6


def test_gclusters_config_and_logs_habits_are_answered_elastixs_way(capsys):
    for line in (["job", "config", "set", "cluster", "c"], ["config", "set", "project", "p"]):
        assert main(line) == 2
        err = capsys.readouterr().err
        assert "is gcluster's; elastix keeps no settings of its own" in err
        assert "--cluster, --project and --location" in err and "kubeconfig" in err
    assert main(["logs", "w", "--main-only=false"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --main-only is a gcluster flag") and "--slice S --host H" in err
