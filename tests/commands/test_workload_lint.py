"""The elastic lint at the command line: ``workload create`` refuses an error (exit 2, the
manifest not printed), prints warnings as notes; ``workload lint`` on a spec or a manifest."""

from __future__ import annotations

import json

import yaml

from elastix.workload import crd

MT = ("python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml run_name=r "
      "base_output_directory=gs://b/o enable_single_controller=true elastic_enabled=true ")
BASE = ["workload", "create", "lint-demo", "--tpu-type", "v5litepod-16", "--num-slices", "3",
        "--elastic-slices", "3", "--docker-image", "img:1", "--dry-run"]


def test_create_dry_run_refuses_only_what_the_platform_refuses(cli):
    r = cli(*BASE, "--command", MT.replace("enable_single_controller=true ", "")
            + "elastic_max_retries=10 profiler=xplane elastic_timeout_seconds=10")
    assert r.returncode == 2 and r.stdout == ""
    err = " ".join(r.stderr.split())
    # MaxText refuses elastic without a single controller: the one error, one line and a hint.
    assert "error: single-controller: MaxText elastic_enabled=true needs " \
           "enable_single_controller=true (MaxText refuses to start without it) hint: add " \
           "enable_single_controller=true" in err, r.stderr
    # What would run is a note, each with its fix.
    notes = [line.split(":")[1].strip() for line in r.stderr.splitlines()
             if line.startswith("note:")]
    assert notes == ["budget", "wait-timeout", "profiler"]
    assert "(set elastic_max_retries=31, or lower --max-slice-restarts to 3)" in err
    assert "Traceback" not in err


def test_maxtext_s_guide_budget_creates_with_a_note(cli):
    # MaxText's elastic guide runs --max-slice-restarts=10 with elastic_max_retries=10.
    r = cli(*BASE, "--max-slice-restarts", "10", "--command", MT + "elastic_max_retries=10")
    assert r.returncode == 0 and yaml.safe_load(r.stdout)["kind"] == "JobSet", r.stderr
    assert "note: budget: MaxText elastic_max_retries=10 recovers from 9 slice losses" in \
        " ".join(r.stderr.split())


def test_create_dry_run_prints_warnings_as_notes_and_the_manifest(cli):
    r = cli(*BASE, "--command", MT + "elastic_max_retries=31 colocated_python_data_input=true")
    assert r.returncode == 0, r.stderr
    assert crd.problems(yaml.safe_load(r.stdout)) == []
    assert "note: colocated-python: MaxText colocated_python_data_input=true but the workers " \
           "run no colocated-python sidecar" in " ".join(r.stderr.split())


def test_skip_lint_submits_and_says_the_errors(cli):
    r = cli(*BASE, "--command", "elastix-train --max-slice-losses 2", "--skip-lint")
    assert r.returncode == 0 and yaml.safe_load(r.stdout)["kind"] == "JobSet"
    assert "note: budget:" in r.stderr


def test_lint_a_spec_file(cli, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("tpu_type: v5litepod-16\nnum_slices: 2\nelastic_slices: 2\n"
                    "docker_image: img:1\ncommand: elastix-train --max-slice-losses 3\n")
    r = cli("workload", "lint", str(spec))
    assert r.returncode == 0, r.stderr
    assert "warning: budget: elastix-train --max-slice-losses 3 recovers from 3 slice losses, " \
           "but the JobSet replaces 20" in " ".join(r.stdout.split())
    assert "(set --max-slice-losses 20, or lower --max-slice-restarts to 1)" in r.stdout
    assert r.stdout.rstrip().endswith("elastic lint: no errors, 1 warning")
    js = cli("workload", "lint", str(spec), "-o", "json")
    assert js.returncode == 0
    assert [e["rule"] for e in json.loads(js.stdout)["warnings"]] == ["budget"]
    spec.write_text(spec.read_text().replace("elastix-train --max-slice-losses 3",
                                             "python -m maxtext.trainers.pre_train.train "
                                             "base.yml base_output_directory=gs://b/o "
                                             "elastic_enabled=true"))
    r = cli("workload", "lint", str(spec))
    assert r.returncode == 2 and "single-controller" in r.stderr


def test_lint_a_manifest_from_dry_run(cli, tmp_path):
    made = cli(*BASE, "--command", "elastix-train --slice-wait-timeout 60")
    assert made.returncode == 0, made.stderr
    m = tmp_path / "m.yaml"
    m.write_text(made.stdout)
    r = cli("workload", "lint", str(m))
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0].startswith("warning: wait-timeout: elastix-train "
                                               "--slice-wait-timeout 60 s")
    assert r.stdout.splitlines()[-1] == "elastic lint: no errors, 1 warning"
    clean = cli("workload", "lint", str(m), "-o", "json")
    assert json.loads(clean.stdout)["errors"] == []


def test_lint_bad_input_is_one_line_and_exit_2(cli, tmp_path):
    cases = {
        "missing": (tmp_path / "nope.yaml", "cannot read file"),
        "not yaml": (tmp_path / "bad.yaml", "is not valid YAML at line"),
        "a list": (tmp_path / "list.yaml", "is not a workload spec or a JobSet manifest"),
        "another kind": (tmp_path / "pod.yaml", "is a 'Pod', not a JobSet"),
        "a broken JobSet": (tmp_path / "js.yaml", "JobSet"),
    }
    (tmp_path / "js.yaml").write_text("apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\n"
                                      "metadata: {name: x}\nspec: {replicatedJobs: [oops]}\n")
    (tmp_path / "bad.yaml").write_text("a: [1\n")
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    (tmp_path / "pod.yaml").write_text("apiVersion: v1\nkind: Pod\n")
    for what, (path, said) in cases.items():
        r = cli("workload", "lint", str(path))
        assert r.returncode == 2, what
        errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and said in errors[0], (what, r.stderr)
        assert "Traceback" not in r.stderr


def test_lint_knows_the_local_backend_s_defaults(tmp_path, monkeypatch, capsys):
    # The README's spec (no image, no command: the local job's) lints as create --spec runs it
    # where no cluster is configured; on GKE it lacks both, as create would say.
    from pathlib import Path

    from elastix.main import main

    spec = str(Path(__file__).resolve().parents[2] / "docs" / "examples" / "spec.yaml")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("ELASTIX_BACKEND", raising=False)
    assert main(["workload", "lint", spec]) == 0
    assert capsys.readouterr().out == "elastic lint: no errors, 0 warnings\n"
    assert main(["workload", "lint", spec, "--backend", "gke"]) == 2
    err = capsys.readouterr().err
    assert "a docker image is required" in err and "a command is required" in err
