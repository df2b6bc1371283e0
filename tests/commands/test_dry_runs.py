"""``--dry-run`` on every command that changes something, offline (issue 60): on GKE with no
credentials and no network (every connection refused here), a dry run still answers, exit 0,
with the requests it would send; the README names exactly these commands."""

from __future__ import annotations

import json
import re
import socket
from pathlib import Path

import pytest

from elastix.main import command, main

ROOT = Path(__file__).resolve().parents[2]
GKE = ["--cluster", "c", "--project", "p", "--location", "us-central1"]
CHANGERS = {"workload create", "workload delete", "chaos kill-worker", "chaos run",
            "cluster create", "cluster delete", "image build"}
"""The commands that create, delete, kill or push something."""


@pytest.fixture
def offline(monkeypatch, tmp_path):
    """No cloud: no kubeconfig, no application-default credentials, every connection refused."""
    monkeypatch.setenv("HOME", str(tmp_path))
    for var in ("KUBECONFIG", "GOOGLE_APPLICATION_CREDENTIALS", "ELASTIX_BACKEND",
                "CLOUDSDK_CONFIG"):
        monkeypatch.delenv(var, raising=False)

    def refuse(*args, **kwargs):
        raise AssertionError(f"a dry run connected: {args}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return tmp_path


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_workload_delete_dry_run_says_the_requests_offline(offline, capsys):
    rc, out, err = _run(capsys, "workload", "delete", "demo", "--dry-run", "--wait", "-n", "team",
                        *GKE)
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("DELETE /apis/jobset.x-k8s.io/v1alpha2/namespaces/team/jobsets/"
                               "demo   {\"propagationPolicy\": \"Background\"}")
    assert [line.split()[1].rsplit("/", 2)[1] for line in lines[1:4]] == \
        ["rolebindings", "roles", "serviceaccounts"]
    assert "watch=true" in lines[4]
    rc, out, _ = _run(capsys, "workload", "delete", "-l", "team=a", "--dry-run", *GKE)
    assert rc == 0 and out.startswith("GET ") and "labelSelector=team=a" in out


def test_workload_delete_dry_run_on_the_local_backend_deletes_nothing(offline, capsys):
    rc, out, _ = _run(capsys, "workload", "delete", "demo", "--dry-run", "--backend", "local")
    assert rc == 0 and out.startswith("workload demo: not found in ")
    data = offline / ".local" / "share" / "elastix" / "workloads" / ".data" / "demo"
    data.mkdir(parents=True)
    rc, out, _ = _run(capsys, "workload", "delete", "demo", "--dry-run", "--delete-data",
                      "--backend", "local")
    assert rc == 0 and "remove its data (checkpoints) in " in out and data.is_dir()


@pytest.mark.parametrize(("flags", "says"), [
    ([], "the worker pod of slice S, host H (chosen at random among the running ones)"),
    (["--slice", "1", "--host", "0"], "the worker pod of slice 1, host 0 of workload demo"),
    (["--fault", "slice", "--slice", "0"], "every pod of slice 0"),
    (["--fault", "term", "--grace", "10s"], "\"gracePeriodSeconds\": 10,"),
    (["--fault", "head"], "the head pod")])
def test_kill_worker_dry_run_on_gke_needs_no_credentials(offline, capsys, flags, says):
    rc, out, err = _run(capsys, "chaos", "kill-worker", "demo", "--dry-run", *flags, *GKE)
    assert rc == 0, err
    assert out.startswith("would delete ") and says in out
    assert "DELETE /api/v1/namespaces/default/pods/POD" in out
    rc, out, _ = _run(capsys, "chaos", "kill-worker", "demo", "--dry-run", "-o", "json", *GKE)
    assert rc == 0 and json.loads(out)["offline"] is True


def test_chaos_run_dry_run_on_gke_needs_no_credentials(offline, capsys):
    rc, out, err = _run(capsys, "chaos", "run", "demo", "--kills", "3", "--seed", "7",
                        "--dry-run", "-o", "yaml", *GKE)
    assert rc == 0, err
    assert out.startswith("# elastix chaos plan, made for demo") and "rounds:" in out
    assert "a dry run is offline" in err


def test_the_readme_names_exactly_the_commands_with_a_dry_run():
    def walk(cmd, path=()):
        for name, sub in getattr(cmd, "commands", {}).items():
            yield from walk(sub, (*path, name))
        if not hasattr(cmd, "commands"):
            yield " ".join(path), cmd

    with_dry_run = {path for path, cmd in walk(command())
                    if any("--dry-run" in getattr(p, "opts", ()) for p in cmd.params)}
    assert with_dry_run == CHANGERS
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = [p for p in text.split("\n\n") if "--dry-run` (offline" in p]
    named = set(re.findall(r"`((?:workload|chaos|cluster|image) [a-z-]+)`", line))
    assert named == CHANGERS, line


@pytest.mark.parametrize("argv", [
    ["cluster", "create", "c", "--project", "proj-123", "--zone", "us-central1-a",
     "--tpu-type", "v5litepod-16", "--num-slices", "1"],
    ["cluster", "delete", "c", "--project", "proj-123", "--zone", "us-central1-a"],
    ["image", "build", "--tag", "us-docker.pkg.dev/proj-123/repo/trainer:1"],
    ["workload", "create", "w", "--tpu-type", "v5litepod-16", "--docker-image", "i",
     "--command", "c", *GKE]])
def test_the_other_changers_dry_runs_are_offline_too(offline, capsys, argv):
    rc, out, err = _run(capsys, *argv, "--dry-run")
    assert rc == 0 and out, err
