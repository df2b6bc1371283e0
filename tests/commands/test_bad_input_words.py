"""Bad input said in elastix's words: one ``error:`` line with a ``hint:``, exit 2, never a
library's wording, a Python tuple or an interrupt code. The CLI runs as a real subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest


def run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``python -m elastix ARGS`` with no terminal on stdin, no kubeconfig of this machine."""
    full = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "ELASTIX_BACKEND")}
    full.update({"NO_COLOR": "1", "COLUMNS": "200", **env})
    return subprocess.run([sys.executable, "-m", "elastix", *args], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, env=full, timeout=60)


def _lines(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.strip()]


def _one_error(proc: subprocess.CompletedProcess[str], fragment: str, hint: str) -> None:
    lines = _lines(proc.stderr)
    assert proc.returncode == 2, proc.stderr
    assert [ln.split(":")[0] for ln in lines] == ["error", "hint"], proc.stderr
    assert fragment in lines[0] and hint in lines[1], proc.stderr
    assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr


@pytest.fixture
def env(tmp_path):
    return {"HOME": str(tmp_path / "home"), "ELASTIX_STATE_DIR": str(tmp_path / "state")}


def _kubeconfig(path) -> str:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "a",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "contexts": [{"name": "a", "context": {"cluster": "c", "user": "u"}}],
        "users": [{"name": "u", "user": {"token": "t"}}]}))
    return str(path)


def test_a_kubeconfig_that_does_not_exist(tmp_path, env):
    proc = run_cli("workload", "list", "--backend", "gke",
                   env={**env, "KUBECONFIG": str(tmp_path / "nonexistent")})
    _one_error(proc, f"no kubeconfig at {tmp_path / 'nonexistent'}", "--kubeconfig FILE")


def test_a_context_the_kubeconfig_does_not_have(tmp_path, env):
    kc = _kubeconfig(tmp_path / "kc")
    proc = run_cli("workload", "list", "--backend", "gke", "--kubeconfig", kc,
                   "--context", "nope", env=env)
    _one_error(proc, f"--context 'nope' is not in kubeconfig {kc} (its contexts: a)",
               "pass --context with one of them")


def _local_workload(tmp_path, name: str = "good") -> None:
    """A local workload as submit leaves it (a plan.json), no processes: 2 slices x 2 hosts."""
    from elastix.backends.local.plan import make_plan
    from elastix.backends.local.state import write_json_atomic
    from elastix.workload.render import render
    from elastix.workload.spec import build_spec

    spec = build_spec(None, {"name": name, "tpu_type": "v5litepod-8", "num_slices": 2,
                             "docker_image": "img:1", "command": "true"})
    d = tmp_path / "state" / name
    d.mkdir(parents=True)
    plan = make_plan(render(spec), d, {}, str(tmp_path)).to_json()
    assert (plan["num_slices"], plan["hosts_per_slice"]) == (2, 2)
    write_json_atomic(d / "plan.json", plan)


@pytest.mark.parametrize(("flag", "value", "fragment"), [
    ("--slice", "5", "--slice 5 is out of range: good has 2 slices (0-1)"),
    ("--host", "9", "--host 9 is out of range: good has 2 hosts per slice (0-1)"),
])
def test_logs_of_a_pod_out_of_range(tmp_path, env, flag, value, fragment):
    _local_workload(tmp_path)
    proc = run_cli("logs", "good", "--backend", "local", flag, value, env=env)
    _one_error(proc, fragment, "elastix workload status good")


def test_creating_a_workload_that_exists_is_bad_input(tmp_path, env):
    _local_workload(tmp_path)
    proc = run_cli("workload", "create", "good", "--backend", "local", "--tpu-type",
                   "v5litepod-8", "--num-slices", "2", "--command", "true", env=env)
    _one_error(proc, "workload 'good' already exists", "pass --replace")


def test_a_state_dir_that_is_a_file(tmp_path, env):
    f = tmp_path / "passwd"
    f.write_text("root:x:0:0::/root:/bin/sh\n")
    proc = run_cli("workload", "list", "--backend", "local", "--state-dir", str(f), env=env)
    _one_error(proc, f"--state-dir {f} is not a directory", "give a directory")


def test_cluster_delete_with_no_terminal_to_answer(env):
    proc = run_cli("cluster", "delete", "c", "--project", "pppppp", "--location",
                   "us-central1-a", env=env)  # stdin: /dev/null
    _one_error(proc, "no answer to the confirmation: stdin is not a terminal", "pass --yes")


@pytest.mark.parametrize(("content", "fragment"), [
    ("{}", "does not have a valid type"),
    ("not json", "is not a valid json file"),
    (None, "was not found"),
])
def test_bad_application_credentials(tmp_path, env, content, fragment):
    creds = tmp_path / "key.json"
    if content is not None:
        creds.write_text(content)
    proc = run_cli("cluster", "describe", "c", "--project", "pppppp", "--location",
                   "us-central1-a", env={**env, "GOOGLE_APPLICATION_CREDENTIALS": str(creds)})
    _one_error(proc, f"GOOGLE_APPLICATION_CREDENTIALS={creds} is unusable", "unset it")
    assert fragment in proc.stderr
    assert "('" not in proc.stderr and "Error" not in proc.stderr.replace("error:", "")


def test_files_that_are_not_what_they_should_be_are_refused_unread(tmp_path, env):
    """Issue 34: --spec /dev/zero and --env-file /dev/urandom were read whole (2.6 GB, then a
    MemoryError or the OOM killer); a spec error quoted the first line of any readable file."""
    secret = tmp_path / "shadow"
    secret.write_text("root:*:19000:0:99999:7:::\nadmin:$6$saltsalt$hashhash:19000::::::\n")
    mapping = tmp_path / "creds.yaml"
    mapping.write_text("password: hunter2\ntoken: abc\n")
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * (2 << 20) + b"\n")
    cases = [
        (["--spec", "/dev/zero"], "is not a regular file"),
        (["--env-file", "/dev/urandom"], "is not a regular file"),
        (["--spec", str(tmp_path)], "Is a directory"),
        (["--spec", str(big)], "is larger than 1 MiB"),
        (["--env-file", str(secret)], "expected KEY=VALUE"),
        (["--spec", str(mapping)], "is not a workload spec"),
    ]
    for flags, fragment in cases:
        proc = run_cli("workload", "create", "demo", "--backend", "local", "--tpu-type",
                       "v5litepod-8", "--command", "true", *flags, env=env)
        _one_error(proc, fragment, "hint:")
        for leaked in ("root:", "$6$", "hunter2", "password", "token"):
            assert leaked not in proc.stderr + proc.stdout, (flags, proc.stderr)
