"""The real entry point, run as a subprocess (and once in-process with the network cut)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
import yaml

from elastix.workload import crd

DEMO = ["workload", "create", "elastic-demo", "--tpu-type", "v5litepod-16", "--num-slices", "3",
        "--elastic-slices", "3", "--max-slice-restarts", "10", "--docker-image",
        "us-docker.pkg.dev/demo-project/elastix/trainer:latest", "--command", "python3 train.py",
        "--dry-run"]
HEAVY = ("kubernetes", "google.cloud", "google.auth", "jax", "jinja2", "jsonschema", "yaml",
         "orbax", "matplotlib")


@pytest.mark.parametrize("args", [["--help"], ["workload", "create", "--help"], ["version"]])
def test_light_commands_do_not_import_heavy_modules(args):
    code = (f"import sys, json\nfrom elastix.main import main\nrc = main({args!r})\n"
            "sys.stdout.flush()\nprint('\\nMODULES=' + json.dumps(sorted(sys.modules)))\n"
            "sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    modules = json.loads(r.stdout.rsplit("MODULES=", 1)[1])
    loaded = [m for m in modules if m.split(".")[0] in HEAVY or m.startswith(HEAVY)]
    assert loaded == []


def test_help_lists_commands(cli):
    r = cli("--help")
    assert r.returncode == 0
    for word in ("workload", "logs", "chaos", "image", "cluster", "version"):
        assert word in r.stdout


def test_version(cli):
    r = cli("version")
    assert r.returncode == 0 and r.stdout.startswith("elastix ")


def test_dry_run_yaml_is_a_valid_jobset(cli):
    r = cli(*DEMO)
    assert r.returncode == 0, r.stderr
    m = yaml.safe_load(r.stdout)
    assert crd.problems(m) == []
    assert m["metadata"]["name"] == "elastic-demo"
    assert r.stderr == ""


def test_dry_run_json_and_output_file(cli, tmp_path):
    out = tmp_path / "m.json"
    r = cli(*DEMO, "-o", "json", "--output-file", str(out))
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    assert json.loads(out.read_text())["kind"] == "JobSet"
    r2 = cli(*DEMO, "--dry-run=client", "-o", "json")
    assert json.loads(r2.stdout) == json.loads(out.read_text())


def test_spec_file_with_flag_override(cli, tmp_path):
    f = tmp_path / "spec.yaml"
    f.write_text("name: from-file\ntpu_type: v6e-8\nnum_slices: 2\ndocker_image: img:1\n"
                 "command: python3 train.py\n")
    r = cli("workload", "create", "--spec", str(f), "--num-slices", "4", "--dry-run", "-o", "json")
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert m["metadata"]["name"] == "from-file"
    assert m["spec"]["replicatedJobs"][1]["replicas"] == 4


def test_env_flags_reach_the_main_container(cli, tmp_path):
    envf = tmp_path / "e.env"
    envf.write_text("FROM_FILE=1\nBOTH=file\n")
    r = cli(*DEMO, "--env", "BOTH=flag", "--env", "Q=a: b # c", "--env-file", str(envf),
            "-o", "json")
    assert r.returncode == 0, r.stderr
    main = json.loads(r.stdout)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in main["env"]}
    assert (env["FROM_FILE"], env["BOTH"], env["Q"]) == ("1", "flag", "a: b # c")


@pytest.mark.parametrize(("extra", "message", "hint"), [
    (["--elastic-slices", "4"], "elastic_slices: must be between 0 and --num-slices (3), got 4",
     "--elastic-slices 3"),
    (["--tpu-type", "v5lite-16"], "tpu_type: unknown TPU type 'v5lite-16'", "v5litepod-16"),
    (["--max-slice-restarts", "-1"], "max_slice_restarts: must be 0 or more", None),
    (["--env", "NOEQ"], "--env 'NOEQ' is not KEY=VALUE", "--env NAME=value"),
    (["--dry-run=maybe"], "--dry-run='maybe' is not client or server", "--dry-run=server"),
    (["--no-such-flag"], "No such option", "--help"),
    (["-o", "xml"], "--output 'xml' is not yaml or json", None),
    (["--spec", "/nonexistent/spec.yaml"], "cannot read spec file", "--spec"),
    (["--template", "/nonexistent/t.j2"], "cannot read template", "--template"),
])
def test_bad_input_is_one_line_and_exit_2(cli, extra, message, hint):
    r = cli(*DEMO, *extra)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error: ") and message in lines[0], r.stderr
    if hint:
        assert lines[-1].startswith("hint: ") and hint in lines[-1], r.stderr
    assert r.stdout == ""


def test_many_problems_listed_at_once(cli):
    # GKE has no default trainer (the local backend's default job would fill command and image).
    r = cli("workload", "create", "Bad_Name", "--tpu-type", "v9", "--num-slices", "0",
            "--dry-run", "--backend", "gke")
    assert r.returncode == 2
    assert r.stderr.startswith("error: ")
    for field in ("name:", "tpu_type:", "num_slices:", "command:", "docker_image:"):
        assert field in r.stderr


def test_debug_shows_the_traceback(cli):
    r = cli("--debug", *DEMO, "--tpu-type", "nope")
    assert r.returncode != 0 and "Traceback" in r.stderr


def test_dry_run_makes_no_network_access(monkeypatch, capsys):
    """In-process, with every socket connection refused: the dry run still succeeds."""
    from elastix.main import main

    def refuse(*a, **k):
        raise AssertionError("dry run tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    assert main([*DEMO, "--cluster", "c", "--project", "p", "--location", "us-central1"]) == 0
    assert "kind: JobSet" in capsys.readouterr().out


CREATE_FLAGS = {
    "--backend", "--cluster", "--colocated-python-sidecar-image", "--command", "--context",
    "--custom-proxy-arg", "--custom-rm-arg", "--custom-worker-arg", "--device-type",
    "--docker-image", "--dry-run", "--elastic-slices", "--env", "--env-file", "--events-path",
    "--head-cpu", "--head-memory", "--head-node-pool", "--headless", "--kubeconfig", "--label",
    "--location", "--max-restarts", "--max-slice-restarts", "--namespace", "--no-pathways-persistence",
    "--num-slices", "--output", "--output-file", "--pathways-gcs-location", "--pathways-persistence",
    "--pathways-tag",
    "--priority", "--project", "--proxy-cpu", "--proxy-memory", "--proxy-server-image", "--queue",
    "--replace", "--fresh", "--rm-cpu", "--rm-memory", "--server-dry-run", "--server-image",
    "--skip-lint", "--skip-preflight", "--no-fit-check", "--slice-restart", "--smoke", "--spec",
    "--state-dir", "--template", "--termination-grace-period", "--tpu-type", "--workload", "--zone",
    "--ttl-after-finished", "--ttl-seconds-after-finished",
    "--termination-grace-period-seconds", "-tgps", "--output-manifest-file",
    "-n", "-o",
    # gcluster job submit's spellings (elastix.commands.gcluster.ALIASES)
    "--image", "--pathways-elastic-slices", "--pathways-max-slice-restarts", "--restarts",
    "--pathways-proxy-server-image", "--pathways-server-image", "--pathways-head-np",
    "--pathways-headless",
    # gcluster's flags taken as it means them (elastix.commands.gcluster: NameOpt...)
    "--name", "--pathways", "--compute-type", "--topology",
}


def test_create_accepts_exactly_these_flags():
    """The spec-derived options keep every spelling (a renamed field must not rename a flag)."""
    import typer.main

    from elastix.main import app

    create = typer.main.get_command(app).commands["workload"].commands["create"]
    flags = {o for p in create.params if p.param_type_name == "option"
             for o in (*p.opts, *p.secondary_opts)}
    assert flags == CREATE_FLAGS
    assert [p.name for p in create.params if p.param_type_name == "argument"] == ["name"]
