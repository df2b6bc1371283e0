"""`elastix image build` builds for the cluster nodes' platform, on a Python the trainer runs.

The build goes to the fake Docker engine over its unix socket (``fake_engine``), which records
the Engine API requests: what matters is the ``platform`` query parameter of ``POST /build``.
"""

from __future__ import annotations

import importlib.metadata
import re

import pytest
from fake_engine import FakeEngine

from elastix.errors import UsageError
from elastix.main import main
from elastix.provision import image

TAG = "localhost:5000/team/trainer:v1"


def _build_request(engine: FakeEngine):
    (build,) = [r for r in engine.requests if r.path == "/build"]
    return build


@pytest.mark.parametrize("extra,platform", [([], "linux/amd64"),
                                            (["--platform", "linux/arm64"], "linux/arm64")])
def test_build_names_the_nodes_platform_unless_overridden(tmp_path, monkeypatch, capsys, extra,
                                                          platform):
    sock = str(tmp_path / "d.sock")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    with FakeEngine(sock) as engine:
        assert main(["image", "build", "--tag", TAG, "--no-push", *extra]) == 0
    assert _build_request(engine).query["platform"] == platform
    assert f"built {TAG}" in capsys.readouterr().out


def test_dry_run_shows_the_platform(capsys):
    assert main(["image", "build", "--tag", TAG, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "platform: linux/amd64" in out and "&platform=linux/amd64" in out


def test_bad_platform_is_exit_2_before_any_request(tmp_path, monkeypatch, capsys):
    sock = str(tmp_path / "d.sock")
    monkeypatch.setenv("DOCKER_HOST", f"unix://{sock}")
    with FakeEngine(sock) as engine:
        assert main(["image", "build", "--tag", TAG, "--platform", "Linux AMD64"]) == 2
    assert engine.requests == []
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "error: --platform 'Linux AMD64' is not a platform", err


@pytest.mark.parametrize("base", ["python:3.10-slim", "docker.io/library/python:3.9",
                                  "mirror.gcr.io/python:3.10.14-bookworm"])
def test_base_image_with_an_old_python_is_refused(base, capsys):
    assert main(["image", "build", "--tag", TAG, "--base-image", base, "--dry-run"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2 and "the trainer needs 3.11+" in lines[0], err
    assert lines[1].startswith("hint: use a Python 3.11+ image")


@pytest.mark.parametrize("base", ["python:3.11-slim-bookworm", "python:3.12", "python:3.13.1",
                                  "us-docker.pkg.dev/p/r/py:3.10",  # not the python image
                                  "python", "python:slim", "ubuntu:22.04"])
def test_base_images_whose_tag_does_not_say_an_old_python_pass(base):
    assert image.base_python_problem(base) is None
    image.validate_request(image.ImageRequest(tag=TAG, base_image=base))


def test_minimum_python_is_the_trainers_requirement():
    """MIN_PYTHON is what the pinned pathwaysutils declares (its installed metadata)."""
    try:
        requires = importlib.metadata.metadata("pathwaysutils")["Requires-Python"]
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("pathwaysutils (the trainer extra) is not installed")
    m = re.fullmatch(r">=\s*(\d+)\.(\d+)", requires.strip())
    assert m, requires
    assert (int(m.group(1)), int(m.group(2))) == image.MIN_PYTHON


def test_help_states_the_python_the_trainer_needs(capsys):
    assert main(["image", "build", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "3.10" not in text and "Python 3.11+" in text


def test_request_default_platform_is_amd64():
    with pytest.raises(UsageError):
        image.validate_request(image.ImageRequest(tag=TAG, platform=""))
    assert image.ImageRequest(tag=TAG).platform == "linux/amd64"
