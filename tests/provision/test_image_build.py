"""`elastix image build`: Dockerfile and its lint, build plan, engine detection, build, push."""

from __future__ import annotations

import base64
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fake_engine import FakeEngine

from elastix.errors import BackendError, UsageError
from elastix.main import main
from elastix.provision import image

HADOLINT = Path(sys.executable).with_name("hadolint")
TAG = "localhost:5000/team/trainer:v1"


def _hadolint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(HADOLINT), "--no-color", str(path)], capture_output=True,
                          text=True, timeout=60)


@pytest.mark.parametrize("base,uid", [("python:3.11-slim-bookworm", 1000),
                                      ("us-docker.pkg.dev/p/r/py:3.12", 4242)])
def test_rendered_dockerfile_passes_hadolint(tmp_path, base, uid):
    path = tmp_path / "Dockerfile"
    path.write_text(image.render_dockerfile(base, uid))
    res = _hadolint(path)
    assert res.returncode == 0, res.stdout + res.stderr
    text = path.read_text()
    assert f'ARG BASE_IMAGE="{base}"' in text
    assert f"USER {uid}:{uid}" in text  # numeric, so runAsNonRoot can check it


def test_hadolint_really_lints(tmp_path):
    # Guards the test above against a hadolint that passes everything.
    path = tmp_path / "Dockerfile"
    path.write_text("FROM python:latest\nRUN pip install jax\n")
    res = _hadolint(path)
    assert res.returncode != 0 and "DL3007" in res.stdout and "DL3013" in res.stdout


def test_plan_context_holds_project_and_requirements_only():
    plan = image.plan_build(image.ImageRequest(tag=TAG, extra_requirements=("einops==0.8.0",)))
    names = set(plan.files)
    assert {"Dockerfile", "requirements.txt", "extra-requirements.txt",
            "src/pyproject.toml", "src/cli/elastix/main.py", "src/trainer/elastix_trainer/__main__.py",
            "src/templates/Dockerfile.j2"} <= names
    # Allow-listed tree only: no VCS data, caches, dotfiles or tests.
    assert not [n for n in names if "/." in n or "__pycache__" in n or n.startswith("src/tests")]
    reqs = plan.files["requirements.txt"].decode().splitlines()
    assert any(r.startswith("jax") for r in reqs) and any(r.startswith("orbax") for r in reqs)
    assert any(r.startswith("pathwaysutils") for r in reqs)
    assert plan.files["extra-requirements.txt"] == b"einops==0.8.0\n"
    assert plan.dockerfile.startswith("# syntax=docker/dockerfile:1")


@pytest.mark.parametrize("kwargs,needle", [
    ({"tag": "Not A Tag"}, "--tag"),
    ({"tag": "r/x@sha256:" + "a" * 64}, "digest"),
    ({"tag": TAG, "base_image": "py thon"}, "--base-image"),
    ({"tag": TAG, "extra_requirements": ("--index-url=http://evil",)}, "requirement"),
    ({"tag": TAG, "uid": 0}, "--uid"),
])
def test_bad_input_is_rejected_before_any_build(kwargs, needle):
    with pytest.raises(UsageError, match=needle.replace("-", r"\-")):
        image.plan_build(image.ImageRequest(**kwargs))


def test_dry_run_prints_dockerfile_and_plan(capsys, tmp_path):
    ctx = tmp_path / "ctx"
    rc = main(["image", "build", "--tag", "us-docker.pkg.dev/p/r/trainer:v1", "--dry-run",
               "--requirement", "einops==0.8.0", "--context-dir", str(ctx)])
    out = capsys.readouterr().out
    assert rc == 0
    assert "# Dockerfile" in out and 'ENTRYPOINT ["elastix-train"]' in out
    assert "POST /build?t=us-docker.pkg.dev/p/r/trainer:v1" in out
    assert "to us-docker.pkg.dev (credentials: Google application-default credentials)" in out
    assert (ctx / "Dockerfile").read_text() == image.render_dockerfile(
        image.DEFAULT_BASE_IMAGE, image.DEFAULT_UID)
    assert (ctx / "extra-requirements.txt").read_text() == "einops==0.8.0\n"
    assert (ctx / "src" / "pyproject.toml").is_file()


@pytest.mark.parametrize("content,needle", [
    (b"einops==0.8.0\n# caf\xe9\n", "is not UTF-8 text"),  # Latin-1, not UTF-8
    (None, "cannot read requirements file"),
])
def test_requirements_file_problems_are_one_usage_line(capsys, tmp_path, content, needle):
    req = tmp_path / "requirements.txt"
    if content is not None:
        req.write_bytes(content)
    rc = main(["image", "build", "--tag", TAG, "--dry-run", "--requirements-file", str(req)])
    err = capsys.readouterr().err
    assert rc == 2
    assert needle in err and str(req) in err and "hint:" in err


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("kind", ["tcp", "unix"])
def test_no_engine_is_a_clear_error_naming_alternatives(tmp_path, kind):
    host = (f"tcp://127.0.0.1:{_closed_port()}" if kind == "tcp"
            else f"unix://{tmp_path}/docker.sock")
    env = {**os.environ, "DOCKER_HOST": host}
    env.pop("DOCKER_TLS_VERIFY", None)
    res = subprocess.run([sys.executable, "-m", "elastix", "image", "build", "--tag", TAG],
                         capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 1, res.stderr
    assert f"no Docker engine is reachable at {host}" in res.stderr
    for alternative in ("DOCKER_HOST", "--dry-run", "Cloud Build", "gcloud builds submit"):
        assert alternative in res.stderr
    assert "Traceback" not in res.stderr


def test_unsupported_docker_host_is_usage_error(monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", "ssh://me@builder")
    assert main(["image", "build", "--tag", TAG]) == 2
    assert "not an address elastix can use" in capsys.readouterr().err


def test_build_and_push_through_engine_api(tmp_path, monkeypatch):
    sock = str(tmp_path / "d.sock")
    docker_cfg = tmp_path / "dockercfg"
    docker_cfg.mkdir()
    cred = base64.b64encode(b"me:s3cret").decode()
    (docker_cfg / "config.json").write_text(json.dumps({"auths": {"localhost:5000":
                                                                  {"auth": cred}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(docker_cfg))
    plan = image.plan_build(image.ImageRequest(tag=TAG, base_image="python:3.12-slim"))
    lines: list[str] = []
    with FakeEngine(sock) as engine:
        image_id, digest = image.build(plan, lines.append, env={"DOCKER_HOST": f"unix://{sock}"})
    assert image_id == "sha256:" + "ab" * 32 and digest == "sha256:" + "cd" * 32
    ping, build, push = engine.requests
    assert (ping.method, ping.path) == ("GET", "/_ping")
    assert (build.method, build.path, build.query["t"]) == ("POST", "/build", TAG)
    assert json.loads(build.query["buildargs"]) == {"BASE_IMAGE": "python:3.12-slim"}
    assert build.files == plan.files  # exactly the planned context, nothing more
    assert b"s3cret" not in b"".join(build.files.values())
    assert (push.path, push.query) == ("/images/localhost:5000/team/trainer/push", {"tag": "v1"})
    auth = json.loads(base64.urlsafe_b64decode(push.headers["X-Registry-Auth"]))
    assert auth == {"auth": cred, "serveraddress": "localhost:5000"}
    assert "Step 1/12 : ARG BASE_IMAGE" in lines and "5f70bf18a086 Pushed" in lines


@pytest.mark.parametrize("stage", ["build", "push"])
def test_engine_errors_become_backend_errors(tmp_path, monkeypatch, stage):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))  # no credentials: anonymous push
    sock = str(tmp_path / "d.sock")
    plan = image.plan_build(image.ImageRequest(tag=TAG))
    with FakeEngine(sock) as engine:
        setattr(engine, f"fail_{stage}", "denied: requested access is refused")
        with pytest.raises(BackendError, match="denied: requested access") as err:
            image.build(plan, lambda s: None, env={"DOCKER_HOST": f"unix://{sock}"})
    assert err.value.hint
    assert [r.path.rsplit("/", 1)[-1] for r in engine.requests][-1] == stage


def test_no_push_skips_push(tmp_path):
    sock = str(tmp_path / "d.sock")
    plan = image.plan_build(image.ImageRequest(tag=TAG, push=False))
    with FakeEngine(sock) as engine:
        _, digest = image.build(plan, lambda s: None, env={"DOCKER_HOST": f"unix://{sock}"})
    assert digest == "" and [r.path for r in engine.requests] == ["/_ping", "/build"]
