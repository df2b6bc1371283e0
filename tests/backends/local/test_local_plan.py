"""From the rendered JobSet to what the local supervisor runs (pure, no processes)."""

from __future__ import annotations

import json

import pytest

from elastix.backends.local.plan import Plan, expand, health_address, make_plan, resolve_env
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
    assert health_address(tmp_path / "w") == f"unix:{tmp_path / 'w' / 'health.sock'}"
    long_dir = tmp_path / ("d" * 120)
    addr = health_address(long_dir)
    assert len(addr) < 60 and addr.startswith(("unix:@elastix-", "unix:/tmp/elastix-"))


def test_plan_json_round_trips(manifest, tmp_path):
    plan = make_plan(manifest, tmp_path / "plan-demo", {}, "/")
    assert Plan.from_json(json.loads(json.dumps(plan.to_json()))) == plan
