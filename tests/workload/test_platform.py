"""Platform facts: the head pod's requests, what a GKE node leaves to pods, machine sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from elastix.workload import platform

GOLDEN = Path(__file__).parent / "golden"


def _head_pod(golden: str) -> dict:
    jobset = yaml.safe_load((GOLDEN / golden).read_text())
    (head,) = [r for r in jobset["spec"]["replicatedJobs"] if r["name"] == "pathways-head"]
    return head["template"]["spec"]["template"]["spec"]


def test_head_pod_requests_add_up_sidecars_and_main():
    # Only limits are set, so requests equal limits; native sidecars add to the main container:
    # proxy 16 + RM 8 + trainer 24 CPU, 100G + 32G + 100G (xpk's sizes, the audit's sum).
    req = platform.pod_requests(_head_pod("v5litepod-16-elastic.yaml"))
    assert req == platform.Resources(48.0, 232e9)


def test_plain_init_containers_run_before_not_beside():
    spec = {"containers": [{"resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
            "initContainers": [{"resources": {"limits": {"cpu": "3", "memory": "512Mi"}}}]}
    assert platform.pod_requests(spec) == platform.Resources(3.0, 2**30)


@pytest.mark.parametrize("machine,fits", [("n2-standard-64", True), ("n2-standard-48", False),
                                          ("n2-standard-32", False), ("n2-highmem-64", True)])
def test_head_fits_machines_as_xpk_requires(machine, fits):
    # xpk accepts a head machine with >= 49 vCPUs and >= 233 GiB: n2-standard-64 and larger.
    head = platform.pod_requests(_head_pod("v5litepod-16-elastic.yaml"))
    assert head.fits_in(platform.allocatable(platform.machine_capacity(machine))) is fits


def test_allocatable_follows_gke_reservations():
    # A 4-core, 16 GiB node: CPU 6 % + 1 % + 2 x 0.5 % = 0.08 reserved; memory 1 + 0.8 + 0.8 GiB
    # + 100 MiB eviction threshold.
    a = platform.allocatable(platform.Resources(4.0, 16 * 2**30))
    assert a.cpu == pytest.approx(3.92)
    assert a.memory == pytest.approx(16 * 2**30 - 2.6 * 2**30 - 100 * 2**20)


def test_unknown_machine_is_none_and_bad_quantity_raises():
    assert platform.machine_capacity("a2-ultragpu-8g") is None
    with pytest.raises(ValueError):
        platform.quantity("lots")


def _xpk() -> dict:
    import json

    return json.loads((Path(__file__).parents[1] / "fixtures" / "xpk_pathways_head.json").read_text())


def test_head_sizes_and_defaults_match_xpk():
    from elastix.workload.spec import WorkloadSpec

    ref = _xpk()["head_pod"]
    assert platform.HEAD_SIZES["proxy"] == tuple(ref["pathways-proxy"]["limits"].values())
    assert platform.HEAD_SIZES["rm"] == tuple(ref["pathways-rm"]["limits"].values())
    assert platform.HEAD_SIZES["main"] == tuple(ref["main (user workload)"]["limits"].values())
    spec = WorkloadSpec()  # the spec's defaults are the catalogue's, not copies
    assert (spec.proxy_cpu, spec.rm_memory, spec.head_cpu) == ("16", "32G", "24")
    assert spec.head_node_pool == platform.HEAD_POOL == ref["job"]["nodeSelector"][
        platform.NODEPOOL_LABEL] == _xpk()["node_pools"]["cpu_pool_name"]
    assert platform.HEAD_MACHINE == _xpk()["cpu_machine_default"]["value"]


def test_node_scopes_cover_xpk_storage_and_cloud_platform():
    pools = _xpk()["node_pools"]
    assert "https://www.googleapis.com/auth/cloud-platform" in pools["tpu_pool"]["scopes"]
    assert platform.CLOUD_PLATFORM_SCOPE in platform.NODE_SCOPES
    assert platform.STORAGE_FULL_SCOPE.endswith("devstorage.full_control")  # gcloud storage-full
    assert set(platform.NODE_SCOPES) <= platform.STORAGE_SCOPES


def test_xpk_minimum_rejects_what_the_head_does_not_fit():
    # xpk: guestCpus >= 49 and memoryMb >= 233 * 1024. The head (48 CPU, 232G) needs the same
    # side of that line on the families elastix knows.
    floor = _xpk()["cpu_machine_minimum"]
    head = platform.pod_requests(_head_pod("v5litepod-16-elastic.yaml"))
    for machine in ("n2-standard-32", "n2-standard-48", "n2-standard-64", "n2-standard-80"):
        cap = platform.machine_capacity(machine)
        xpk_ok = cap.cpu >= floor["guest_cpus_min"] and cap.memory >= floor["memory_mb_min"] * 2**20
        assert head.fits_in(platform.allocatable(cap)) is xpk_ok, machine
