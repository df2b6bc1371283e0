"""Habits users bring from gcloud, kubectl and xpk, met by the real CLI."""

from __future__ import annotations

import json

import pytest

from elastix.clients.gcloud_config import read_defaults


def _gcloud_config(root, name="default", **sections):
    (root / "configurations").mkdir(parents=True)
    (root / "active_config").write_text(name + "\n")
    text = "".join(f"[{sec}]\n" + "".join(f"{k} = {v}\n" for k, v in vals.items())
                   for sec, vals in sections.items())
    (root / "configurations" / f"config_{name}").write_text(text)
    return root


def test_gcloud_defaults_follow_the_active_configuration_and_the_environment(tmp_path):
    root = _gcloud_config(tmp_path / "g", "work", core={"project": "proj-a"},
                          compute={"zone": "us-east5-b", "region": "us-east5"})
    env = {"CLOUDSDK_CONFIG": str(root)}
    got = read_defaults(env)
    assert (got.project, got.zone, got.region, got.location) == (
        "proj-a", "us-east5-b", "us-east5", "us-east5-b")
    assert read_defaults({**env, "CLOUDSDK_CORE_PROJECT": "proj-b"}).project == "proj-b"
    assert read_defaults({**env, "CLOUDSDK_ACTIVE_CONFIG_NAME": "other"}).project is None
    assert read_defaults({"CLOUDSDK_CONFIG": str(tmp_path / "none")}).project is None
    (root / "configurations" / "config_work").write_bytes(b"\xff[not ini")
    assert read_defaults(env).project is None  # unreadable: no configuration, no traceback


def test_cluster_create_takes_project_and_zone_from_gcloud(cli, tmp_path):
    root = _gcloud_config(tmp_path / "g", core={"project": "from-gcloud"},
                          compute={"zone": "us-central1-a"})
    r = cli("cluster", "create", "c1", "--tpu-type", "v5litepod-16", "--dry-run",
            env={"CLOUDSDK_CONFIG": str(root)})
    assert r.returncode == 0, r.stderr
    assert "projects/from-gcloud/locations/us-central1-a" in r.stdout
    r = cli("cluster", "create", "c1", "--tpu-type", "v5litepod-16", "--dry-run",
            "--project", "flag-wins", env={"CLOUDSDK_CONFIG": str(root)})
    assert "projects/flag-wins/locations/us-central1-a" in r.stdout


def test_the_local_backend_says_which_cloud_flags_it_ignores(cli, tmp_path):
    env = {"ELASTIX_STATE_DIR": str(tmp_path), "HOME": str(tmp_path)}
    r = cli("workload", "list", "-n", "team-a", "--zone", "us-central1-a", "-o", "json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == []
    (note,) = [ln for ln in r.stderr.splitlines() if ln.startswith("elastix: note:")]
    assert "--namespace team-a" in note and "--location us-central1-a" in note
    r = cli("workload", "list", "-o", "json", env=env)
    assert r.stderr == ""  # nothing given, nothing said


@pytest.mark.parametrize(("args", "says"), [
    (["workload", "create-pathways", "w"], "elastix workload create"),
    (["cluster", "create-pathways", "c"], "elastix cluster create"),
    (["inspector"], "elastix workload status"),
])
def test_xpk_commands_get_the_elastix_command(cli, args, says):
    r = cli(*args)
    assert r.returncode == 2
    assert says in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 2  # one error line, one hint


def test_logs_tail_minus_one_means_every_line(cli, tmp_path):
    r = cli("logs", "nosuch", "--tail", "-1", env={"ELASTIX_STATE_DIR": str(tmp_path),
                                                   "HOME": str(tmp_path)})
    assert "--tail" not in r.stderr  # accepted; the missing workload is the only complaint
    assert "nosuch" in r.stderr
