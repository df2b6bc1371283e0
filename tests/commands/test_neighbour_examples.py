"""The neighbours' own examples through what elastix does with them (issue 47).

``tests/fixtures/neighbours/`` holds what MaxText, pathwaysutils, xpk, Kueue and GKE publish,
each quoted from its source with the platform's own verdict (``expect``). Here every command
goes through ``elastix workload create --dry-run`` (render, the CRD check, the elastic lint) or
``elastix cluster create --dry-run``, in process and offline, and every setting through the rule
or the default elastix has for it. An example the platform runs must create (exit 0, notes
allowed); one the platform refuses must be refused in one line, exit 2, naming the platform's
rule. The local MaxText runs of the guide's command and of MaxText on elastix's defaults are the
slow tier's (``tests/backends/local/test_local_maxtext.py``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from elastix.errors import SpecError
from elastix.main import main
from elastix.provision import capacity
from elastix.workload.lint import lint
from elastix.workload.render import render
from elastix.workload.spec import build_spec

CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "neighbours"
SOURCES = {p.name: yaml.safe_load(p.read_text(encoding="utf-8"))
           for p in sorted(CORPUS.glob("*.yaml"))}
REFUSAL_NAMES = {
    # example id -> what elastix's one line must name: the platform's rule, in its words.
    "elastic-submit-xpk": "JobSet requires <= 63",
    "pathways-batch": "JobSet requires <= 63",
    "pathways-headless": "JobSet requires <= 63",
    "flex-tpu-v4-refused": "TPU v3 and v4 are not supported",
}


def _examples(kind: str) -> list:
    out = []
    for name, doc in SOURCES.items():
        for ex in doc["examples"]:
            el = ex["elastix"]
            if (kind == "values") == ("values" in el) and (kind == "values" or
                                                           el["command"] == kind):
                out.append(pytest.param(doc, ex, id=f"{name[:-5]}:{ex['id']}"))
    return out


def _example(example_id: str) -> dict:
    (ex,) = [e for d in SOURCES.values() for e in d["examples"] if e["id"] == example_id]
    return ex


def test_every_source_is_cited():
    assert len(SOURCES) >= 10
    for name, doc in SOURCES.items():
        assert doc["repo"] or doc.get("url"), name
        assert doc["read"] and doc["license"], name
        if doc["repo"]:
            assert doc["path"] and len(doc.get("commit") or "") == 40, name
        for ex in doc["examples"]:
            assert ex["line"] and ex["text"].strip() and ex["expect"] in ("runs", "refused"), ex
            if ex["expect"] == "refused":
                assert ex["rule"]["where"] and ex["rule"]["why"], ex["id"]
    repos = {doc["repo"] for doc in SOURCES.values()}
    assert {"AI-Hypercomputer/maxtext", "AI-Hypercomputer/pathways-utils",
            "AI-Hypercomputer/xpk", "kubernetes-sigs/kueue"} <= repos


def test_the_corpus_has_the_examples_the_issue_names():
    ids = {e["id"] for d in SOURCES.values() for e in d["examples"]}
    assert {"elastic-submit-xpk", "elastic-submit-gcluster", "pathways-batch",
            "pathways-headless", "pathways-checkpoint-format", "persistence-true",
            "pathways-maxtext", "create-pathways", "create-flex",
            "release-config-waitforpodsready"} <= ids


def _run(argv: list[str], tmp_path, monkeypatch, capsys) -> tuple[int, str, str]:
    # No kubeconfig, no cloud: the dry run must need neither.
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    # no MaxText environment either: the fit check of a MaxText head is one line, no compile
    monkeypatch.setenv("ELASTIX_MAXTEXT_PYTHON", str(tmp_path / "no-maxtext" / "python"))
    capsys.readouterr()
    rc = main(argv)
    out, err = capsys.readouterr()
    return rc, out, err


def _judge(ex: dict, rc: int, err: str) -> None:
    assert "Traceback" not in err
    if ex["expect"] == "runs":
        assert rc == 0, f"{ex['id']}: the platform runs it, elastix said: {err}"
        assert not [line for line in err.splitlines() if line.startswith("error")], err
        return
    assert rc == 2, f"{ex['id']}: the platform refuses it ({ex['rule']['where']}); rc {rc}: {err}"
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, err
    assert REFUSAL_NAMES[ex["id"]] in " ".join(err.split()), err


@pytest.mark.parametrize("doc,ex", _examples("workload create"))
def test_a_published_workload_as_elastix_creates_it(doc, ex, tmp_path, monkeypatch, capsys):
    rc, out, err = _run(["workload", "create", *ex["elastix"]["argv"], "--dry-run"], tmp_path,
                        monkeypatch, capsys)
    _judge(ex, rc, err)
    if rc == 0:
        found = lint(yaml.safe_load(out))
        assert found.errors == []
        # Every warning the lint found was said, as a note with its rule.
        for rule, _, _ in found.warnings:
            assert f"note: {rule}:" in err


@pytest.mark.parametrize("doc,ex", _examples("cluster create"))
def test_a_published_cluster_as_elastix_creates_it(doc, ex, tmp_path, monkeypatch, capsys):
    rc, _, err = _run(["cluster", "create", *ex["elastix"]["argv"], "--dry-run"], tmp_path,
                      monkeypatch, capsys)
    _judge(ex, rc, err)


def test_maxtexts_elastic_guide_creates_with_the_budget_note(tmp_path, monkeypatch, capsys):
    # The command the lint used to refuse (exit 2): MaxText's guide, 10 against 10.
    ex = _example("elastic-submit-gcluster")
    rc, out, err = _run(["workload", "create", *ex["elastix"]["argv"], "--dry-run"], tmp_path,
                        monkeypatch, capsys)
    assert rc == 0, err
    said = " ".join(err.split())
    assert "note: budget: MaxText elastic_max_retries=10 recovers from 9 slice losses, but the " \
           "JobSet replaces 30 in-process (10 restarts x 3 slices)" in said
    assert yaml.safe_load(out)["kind"] == "JobSet"


BUDGET = _example("elastic-budget-note")["elastix"]["values"]
MT = ("python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml run_name=r "
      "base_output_directory=gs://b/o enable_single_controller=true elastic_enabled=true ")


def _manifest(command: str, **flags) -> dict:
    return render(build_spec(None, {"name": "nb", "tpu_type": "v5litepod-16",
                                    "docker_image": "img:1", "command": command, **flags}))


def test_the_guides_budget_is_a_warning_with_its_numbers():
    found = lint(_manifest(MT + f"elastic_max_retries={BUDGET['elastic_max_retries']}",
                           num_slices=BUDGET["num_slices"],
                           elastic_slices=BUDGET["elastic_slices"],
                           max_slice_restarts=BUDGET["max_slice_restarts"]))
    assert found.errors == []
    assert [w[0] for w in found.warnings] == ["budget"]


def test_maxtexts_profiler_advice_is_a_warning():
    ex = _example("no-profiler-in-elastic-run")
    assert ex["elastix"]["values"]["profiler"] is None  # the guide: no profiler when elastic
    found = lint(_manifest(MT + "elastic_max_retries=31 profiler=xplane", num_slices=3,
                           elastic_slices=3))
    assert found.errors == [] and [w[0] for w in found.warnings] == ["profiler"]


def test_maxtexts_pathways_checkpoint_format_quiets_the_persistence_warning():
    values = _example("pathways-checkpoint-format")["elastix"]["values"]
    keys = " ".join(f"{k}={str(v).lower()}" for k, v in values.items())
    with_format = lint(_manifest(MT + "elastic_max_retries=31 " + keys, num_slices=3,
                                 elastic_slices=3, pathways_persistence=True))
    assert with_format.warnings == [] and with_format.errors == []
    without = lint(_manifest(MT + "elastic_max_retries=31", num_slices=3, elastic_slices=3,
                             pathways_persistence=True))
    assert [w[0] for w in without.warnings] == ["pathways-persistence"]
    assert keys in without.warnings[0][2]


@pytest.mark.parametrize("doc,ex", [p for p in _examples("values")
                                    if p.values[1]["id"].startswith("persistence-")])
def test_pathwaysutils_persistence_values(doc, ex):
    env = ex["elastix"]["values"]["env"]
    flags = {"name": "nb", "tpu_type": "v5litepod-16", "docker_image": "img:1",
             "command": "elastix-train", "env": env}
    if ex["expect"] == "runs":
        assert build_spec(None, flags).env == env
        return
    with pytest.raises(SpecError) as e:
        build_spec(None, flags)
    ((field, msg, hint),) = e.value.problems
    assert field == "env" and "pathwaysutils accepts only 1, 0 or unset" in msg and hint


def test_flex_start_limits_are_elastixs():
    days = _example("flex-seven-day-limit")["elastix"]["values"]
    assert capacity.FLEX_MAX_DAYS * 86400 == days["max_run_duration_seconds_default"]
    assert capacity.flex_problems("v4") and not capacity.flex_problems("v5e")


@pytest.mark.parametrize("example_id", ["release-config-waitforpodsready",
                                        "waitforpodsready-defaults",
                                        "waitforpodsready-on-by-default"])
def test_kueues_release_defaults_are_what_elastix_reads(example_id):
    # The release's Configuration leaves waitForPodsReady commented out: elastix's reading of an
    # installed Kueue must give the defaults Kueue's own sources give it (30m, 30m).
    from elastix.clients import kueue

    ex = _example(example_id)
    values = ex["elastix"]["values"]
    want = values.get("effective", values)
    # The published lines parsed as published (all comments: nothing set), or nothing.
    given = yaml.safe_load(ex["text"]) if example_id.startswith("release") else None
    release = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
               **(given or {})}
    got = kueue.pods_ready(release, "v0.19.2")
    assert got.enabled is want["enabled"]
    assert got.timeout == kueue.parse_duration(want["timeout"])
    assert got.recovery == kueue.parse_duration(want["recoveryTimeout"])
    # ... which evicts an elastic run that misses a slice for 30 minutes; elastix's install
    # does not.
    assert not got.keeps_elastic_runs and "evicts and requeues" in got.effect()
    ours = kueue.pods_ready({**release, "waitForPodsReady": {
        "timeout": kueue.ELASTIX_TIMEOUT, "recoveryTimeout": kueue.ELASTIX_RECOVERY}}, "v0.19.2")
    assert ours.keeps_elastic_runs and ours.effect() is None
