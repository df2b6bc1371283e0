"""``workload create`` on GKE refuses what the elastic lint calls an error before it talks to
the cluster: exit 2, every error with its fix, no request made; a warning does not stop it."""

from __future__ import annotations

from fake_cluster import CREATE, elastix
from fake_gke import pool_nodes

from elastix.workload import platform

MT = ("python3 -m maxtext.trainers.pre_train.train src/maxtext/configs/base.yml run_name=r "
      "base_output_directory=gs://b/o elastic_enabled=true ")


def _with_command(command: str) -> list[str]:
    i = CREATE.index("--command")
    return [*CREATE[:i + 1], command, *CREATE[i + 2:]]


def test_create_refuses_lint_errors_and_submits_nothing(fake_cluster):
    fake_cluster.requests(clear=True)
    out = elastix(fake_cluster, *_with_command(MT + "profiler=xplane"), check=False)
    assert out.returncode == 2, out.stderr
    # Only what the platform refuses is an error: MaxText will not start elastic without a
    # single controller. The budget and the profiler would run: they are notes (issue 47).
    error = [line for line in out.stderr.splitlines() if line.startswith("error")]
    assert error == ["error: single-controller: MaxText elastic_enabled=true needs "
                     "enable_single_controller=true (MaxText refuses to start without it)"], \
        out.stderr
    for rule in ("budget", "profiler"):
        assert f"note: {rule}: " in out.stderr
    assert "Traceback" not in out.stderr
    # Not a byte sent: no preflight read, no JobSet, no service account or role.
    assert fake_cluster.requests() == []
    jobsets = fake_cluster.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets")
    assert jobsets["items"] == []


def test_a_lint_warning_is_a_note_and_the_workload_is_created(fake_cluster):
    pools = [{"name": platform.HEAD_POOL, "initialNodeCount": 1,
              "config": {"machineType": platform.HEAD_MACHINE}}]
    pools += [{"name": f"tpu-slice-{i}", "initialNodeCount": 4,
               "config": {"machineType": "ct5lp-hightpu-4t"},
               "placementPolicy": {"type": 1, "tpuTopology": "4x4"}} for i in range(2)]
    for p in pools:
        fake_cluster.add_nodes(*pool_nodes("c", p))
    out = elastix(fake_cluster, *_with_command("elastix-train --slice-wait-timeout 60"),
                  "--no-fit-check")  # the lint's note is the point here, not the compile
    assert "note: wait-timeout: elastix-train --slice-wait-timeout 60 s" in out.stderr
    jobsets = fake_cluster.get("/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets")
    assert [j["metadata"]["name"] for j in jobsets["items"]] == ["demo"]
