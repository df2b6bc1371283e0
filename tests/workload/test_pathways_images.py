"""The Pathways images: named in one place, pinnable with one flag, pulled by tag kind.

Rendered through the real render path (and the CLI's --dry-run), so what is checked is what a
cluster would receive: the proxy and resource-manager sidecars of the head and every worker.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from elastix.main import main
from elastix.workload import pathways_images, render
from elastix.workload.spec import SpecError, build_spec

CLI = Path(__file__).resolve().parents[2] / "cli"
BASE = {"name": "demo", "tpu_type": "v5litepod-16", "num_slices": 2, "docker_image": "img:1",
        "command": "python train.py"}


def _pathways_containers(manifest: dict) -> dict[str, dict]:
    """proxy, rm (the head's sidecars) and worker, by role."""
    jobs = {j["name"]: j["template"]["spec"]["template"]["spec"]
            for j in manifest["spec"]["replicatedJobs"]}
    head = jobs["pathways-head"]
    sidecars = {c["name"]: c for c in head.get("initContainers", []) + head["containers"]}
    return {"proxy": sidecars["pathways-proxy"], "rm": sidecars["pathways-rm"],
            "worker": jobs["worker"]["containers"][0]}


def _images(**flags) -> dict[str, tuple[str, str]]:
    manifest = render.render(build_spec(None, {**BASE, **flags}))
    return {role: (c["image"], c["imagePullPolicy"])
            for role, c in _pathways_containers(manifest).items()}


def test_the_default_is_latest_pulled_always_as_xpk_and_pathways_job():
    repo = pathways_images.REPOSITORY
    assert _images() == {"proxy": (f"{repo}/proxy_server:latest", "Always"),
                         "rm": (f"{repo}/server:latest", "Always"),
                         "worker": (f"{repo}/server:latest", "Always")}


def test_one_flag_pins_every_pathways_image_and_they_are_then_taken_from_the_node_cache(
        capsys):
    assert main(["workload", "create", "demo", "--tpu-type", "v5litepod-16", "--docker-image",
                 "img:1", "--command", "python train.py", "--pathways-tag", "jax-0.10.0",
                 "--dry-run"]) == 0
    manifest = yaml.safe_load(capsys.readouterr().out)
    got = {role: (c["image"].rsplit(":", 1)[1], c["imagePullPolicy"])
           for role, c in _pathways_containers(manifest).items()}
    assert got == {role: ("jax-0.10.0", "IfNotPresent") for role in ("proxy", "rm", "worker")}


def test_an_explicit_image_wins_over_the_tag_and_a_digest_is_pinned():
    digest = "us-docker.pkg.dev/x/y/server@sha256:" + "a" * 64
    got = _images(pathways_tag="jax-0.10.0", server_image=digest)
    assert got["rm"] == got["worker"] == (digest, "IfNotPresent")
    assert got["proxy"] == (pathways_images.image(pathways_images.PROXY, "jax-0.10.0"),
                            "IfNotPresent")
    assert _images(proxy_image="mirror.example/pathways/proxy_server")["proxy"][1] == "Always"


@pytest.mark.parametrize("tag", ["jax 0.10", "-x", ":latest", "a" * 129])
def test_a_bad_tag_is_a_spec_error(tag):
    with pytest.raises(SpecError, match="pathways_tag"):
        build_spec(None, {**BASE, "pathways_tag": tag})


def test_the_pathways_repository_is_named_in_one_place():
    named = [p.relative_to(CLI).as_posix() for p in CLI.rglob("*.py")
             if re.search(r"cloud-tpu-v2-images/pathways", p.read_text(encoding="utf-8"))]
    assert named == ["elastix/workload/pathways_images.py"]
