"""`cluster create` sends nothing that no Pathways source needs, unless asked.

Every field of every request body is checked against :data:`NEEDED`: the field and the source
that asks for it (xpk 1.16.0's node-pool and cluster commands, read into
``tests/fixtures/xpk_pathways_head.json``, or the GKE rule that a sent field depends on). The
requests are the ones ``google-cloud-container``'s REST transport sends to the fake GKE API
(``tests/fakes/fake_gke.py``) over real HTTP, and the ones ``--dry-run`` prints.
"""

from __future__ import annotations

import json
import re

import pytest
from fake_gke import FakeGke

from elastix.main import main

ARGS = ["cluster", "create", "c1", "--project", "my-proj-1", "--zone", "us-central1-a",
        "--tpu-type", "v5litepod-16", "--num-slices", "2", "--skip-jobset"]
_XPK = "xpk src/xpk/core/nodepool.py @ 367c838"
NEEDED = {  # field path (lists as []) -> who needs it
    "cluster.name": "the request itself",
    "cluster.releaseChannel.channel": "xpk cluster.py L402-404 (RAPID by default)",
    "cluster.ipAllocationPolicy.useIpAliases": "GKE: maxPodsConstraint needs a VPC-native "
                                               "cluster",
    "nodePool.name": "the request itself",
    "nodePool.initialNodeCount": f"{_XPK} L330-400 (vms_per_slice); L406-420 (cpu-np: 1)",
    "nodePool.config.machineType": f"{_XPK} L330-420",
    "nodePool.config.oauthScopes[]": f"{_XPK} L330-420 (storage-full, cloud-platform)",
    "nodePool.config.gvnic.enabled": f"{_XPK} L340 (--enable-gvnic, TPU pools)",
    "nodePool.autoscaling.enabled": f"{_XPK} L415-416 (cpu-np 1..20)",
    "nodePool.autoscaling.minNodeCount": f"{_XPK} L415-416",
    "nodePool.autoscaling.maxNodeCount": f"{_XPK} L415-416",
    "nodePool.management.autoUpgrade": "GKE: release channels require it (xpk: gcloud's "
                                       "default, cluster.py L1350-1351)",
    "nodePool.management.autoRepair": "gcloud's default for node pools",
    "nodePool.placementPolicy.type": f"{_XPK} L358-367 (COMPACT, multi-host)",
    "nodePool.placementPolicy.tpuTopology": f"{_XPK} L358-367",
    "nodePool.maxPodsConstraint.maxPodsPerNode": f"{_XPK} L358-367 (15, multi-host)",
}
OPT_IN = {  # flag -> fields it adds
    "--maintenance-exclusion": {"nodePool.maintenancePolicy.exclusionUntilEndOfSupport.enabled"},
    "--enable-workload-identity": {"cluster.workloadIdentityConfig.workloadPool",
                                   "nodePool.config.workloadMetadataConfig.mode"},
}


def _paths(obj, prefix: str = "") -> set[str]:
    if isinstance(obj, dict):
        return set().union(*(_paths(v, f"{prefix}.{k}" if prefix else k)
                             for k, v in obj.items())) if obj else {prefix}
    if isinstance(obj, list):
        return set().union(*(_paths(v, f"{prefix}[]") for v in obj)) if obj else {prefix}
    return {prefix}


def _normal(paths: set[str]) -> set[str]:
    """A pool inside the cluster body is checked as a pool of its own."""
    return {re.sub(r"^cluster\.nodePools\[\]\.", "nodePool.", p) for p in paths}


def _sent(tmp_path, monkeypatch, *flags: str) -> list[dict]:
    """The bodies the CLI POSTs to the fake GKE API for ``cluster create`` with ``flags``."""
    with FakeGke() as gke:
        monkeypatch.setenv("ELASTIX_GKE_API_ENDPOINT", gke.url)
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS",
                           str(gke.adc_file(tmp_path / "adc.json")))
        assert main([*ARGS, *flags]) == 0
    return [body for method, path, body in gke.requests
            if method == "POST" and path.startswith("/v1/")]


def _printed(capsys, *flags: str) -> list[dict]:
    assert main([*ARGS, *flags, "--dry-run"]) == 0
    out = capsys.readouterr().out
    return [json.loads(block) for block in re.findall(r"^\{\n.*?^\}$", out, re.S | re.M)]


def test_create_sends_only_fields_a_pathways_source_needs(tmp_path, monkeypatch, capsys):
    sent = _sent(tmp_path, monkeypatch)
    assert len(sent) == 3  # the cluster (with cpu-np), then one pool per slice
    fields = _normal(set().union(*(_paths(b) for b in sent)))
    assert fields - set(NEEDED) == set(), "sent without a Pathways source"
    printed = _normal(set().union(*(_paths(b) for b in _printed(capsys))))
    assert printed == fields  # --dry-run shows exactly what is sent


@pytest.mark.parametrize("flag", sorted(OPT_IN))
def test_each_extra_is_sent_only_when_asked(tmp_path, monkeypatch, flag):
    fields = _normal(set().union(*(_paths(b) for b in _sent(tmp_path, monkeypatch, flag))))
    assert fields - set(NEEDED) == OPT_IN[flag]


def test_maintenance_exclusion_goes_on_the_tpu_pools_only(tmp_path, monkeypatch):
    cluster, *pools = _sent(tmp_path, monkeypatch, "--maintenance-exclusion")
    assert "maintenancePolicy" not in cluster["cluster"]["nodePools"][0]
    assert [p["nodePool"]["maintenancePolicy"] for p in pools] == [
        {"exclusionUntilEndOfSupport": {"enabled": True}}] * 2
