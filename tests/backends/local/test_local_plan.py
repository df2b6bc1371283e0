"""From the rendered JobSet to what the local supervisor runs (pure, no processes)."""

from __future__ import annotations

import json
import os

import pytest

from elastix.backends.local.channel import address as health_address
from elastix.backends.local.plan import Plan, expand, make_plan, resolve_env
from elastix.errors import UsageError
from elastix.workload import labels


@pytest.fixture
def manifest(cli):
    out = cli("workload", "create", "plan-demo", "--tpu-type", "v5litepod-16", "--num-slices", "3",
              "--elastic-slices", "3", "--max-slice-restarts", "5", "--max-restarts", "2",
              "--command", "elastix-train --preset tiny", "--env", "GREETING=hi $(PATHWAYS_HEAD)",
              "--docker-image", "trainer:local", "--dry-run", "-o", "json")
    return json.loads(out.stdout)


def test_plan_follows_the_manifest(manifest, tmp_path):
    plan = make_plan(manifest, tmp_path / "plan-demo", {"ELASTIX_LOCAL_SCHEDULING_DELAY": "0"},
                     "/somewhere")
    assert (plan.num_slices, plan.hosts_per_slice) == (3, 4)
    assert plan.backoff_limit == 5 * 4 and plan.max_restarts == 2
    assert plan.devices_per_slice == 2 and plan.scheduling_delay == 0.0
    assert plan.head_command[-1].endswith("elastix-train --preset tiny")
    assert plan.cwd == "/somewhere" and plan.health_address.startswith("unix:")
    env = resolve_env(plan.head_env, {labels.COORDINATOR: "127.0.0.1"})
    assert env["PATHWAYS_HEAD"] == "127.0.0.1"
    assert env["JAX_BACKEND_TARGET"] == "grpc://127.0.0.1:29000"
    assert env["GREETING"] == "hi 127.0.0.1"


def test_a_head_without_command_or_workers_is_refused(manifest, tmp_path):
    rjobs = manifest["spec"]["replicatedJobs"]
    head = rjobs[0]["template"]["spec"]["template"]["spec"]["containers"][0]
    head.pop("command", None)
    head.pop("args", None)
    with pytest.raises(UsageError, match="has no command"):
        make_plan(manifest, tmp_path / "x", {}, "/")
    manifest["spec"]["replicatedJobs"] = rjobs[:1]
    with pytest.raises(UsageError, match="replicated jobs"):
        make_plan(manifest, tmp_path / "x", {}, "/")


def test_kubernetes_variable_expansion():
    env = {"A": "1", "B": "x"}
    assert expand("$(A)-$(B)-$(C)-$$(A)", env) == "1-x-$(C)-$(A)"
    assert resolve_env([{"name": "A", "value": "a"}, {"name": "B", "value": "$(A)b"},
                        {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}],
                       {}) == {"A": "a", "B": "ab"}


def test_long_state_dirs_get_a_short_socket_address(tmp_path):
    assert health_address(tmp_path / "w") == f"unix:{tmp_path / 'w' / 'hb' / 'health.sock'}"
    long_dir = tmp_path / ("d" * 120)
    addr = health_address(long_dir)
    # Never abstract (unix:@...): a socket file under a per-user directory (test_local_health_strangers).
    assert len(addr) < 70 and addr.startswith(f"unix:/tmp/elastix-{os.geteuid()}/")
    assert health_address(tmp_path / ("e" * 120)) != addr  # one directory per workload


def test_plan_json_round_trips(manifest, tmp_path):
    plan = make_plan(manifest, tmp_path / "plan-demo", {}, "/")
    assert Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


@pytest.mark.parametrize(("needed", "limit", "in_use", "fits"), [
    (100, 4096, 200, True), (100, 300, 200, True), (100, 299, 200, False), (10, 5, 0, False),
])
def test_process_room(needed, limit, in_use, fits):
    from elastix.backends.local.plan import process_room_problem

    problem = process_room_problem(needed, limit, in_use)
    assert (problem is None) == fits
    if not fits:
        assert problem == (f"the local workload needs about {needed} processes and threads, but "
                           f"the process limit (ulimit -u) is {limit} and {in_use} are in use")


def test_more_hosts_need_more_room():
    from elastix.backends.local.plan import tasks_needed

    assert tasks_needed(4, 4, 8) > tasks_needed(1, 4, 8) > tasks_needed(1, 1, 8)


@pytest.mark.skipif(os.geteuid() == 0, reason="RLIMIT_NPROC does not hold root")
def test_a_process_table_too_small_is_refused_before_any_fork(tmp_path):
    """A real child whose RLIMIT_NPROC leaves no room: one line and exit 2, where the supervisor
    used to die mid-fork and the hint carried its traceback."""
    import resource
    import subprocess
    import sys

    from elastix.backends.local.plan import _tasks_of_user

    def small_table() -> None:
        room = _tasks_of_user() + 8  # this child runs; nothing the workload needs fits
        resource.setrlimit(resource.RLIMIT_NPROC, (room, room))

    env = {**os.environ, "NO_COLOR": "1", "ELASTIX_STATE_DIR": str(tmp_path)}
    env.pop("KUBECONFIG", None)
    r = subprocess.run([sys.executable, "-m", "elastix", "workload", "create", "tiny",
                        "--backend", "local", "--tpu-type", "v5litepod-16"],
                       capture_output=True, text=True, env=env, timeout=60,
                       preexec_fn=small_table)  # noqa: PLW1509 - the limit is the test
    assert r.returncode == 2, r.stderr
    assert "the process limit (ulimit -u) is" in r.stderr and "ulimit -u 4096" in r.stderr
    assert not (tmp_path / "tiny").exists()  # nothing was started


def test_the_quickstart_with_dry_run_prints_the_local_job(cli, tmp_path):
    """The README's quickstart command plus --dry-run, on a machine with no cluster: it prints
    what the real create would submit, the local job included, instead of asking for an image
    the local backend never uses."""
    r = cli("workload", "create", "demo", "--tpu-type", "v5litepod-8", "--num-slices", "2",
            "--elastic-slices", "2", "--dry-run", "-o", "json",
            env={"HOME": str(tmp_path), "ELASTIX_STATE_DIR": str(tmp_path / "dry-state")})
    assert r.returncode == 0, r.stderr
    head = json.loads(r.stdout)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    main = head["spec"]["containers"][0]
    assert "elastix-train --preset tiny" in " ".join(main["args"] if "args" in main
                                                      else main["command"])
    assert not (tmp_path / "dry-state").exists()  # a dry run creates nothing
