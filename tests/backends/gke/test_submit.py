"""Submit semantics against the fake API server: strict server dry run, --replace, missing CRD,
and `status --watch` ending on Ctrl-C."""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from fake_cluster import CREATE, elastix, interrupt, start_fake, stop, wait_for

from elastix.backends.gke.backend import GKEBackend
from elastix.backends.gke.preflight import PreflightError
from elastix.errors import ManifestError, NotFoundError

# Vendored: see tests/fixtures/PROVENANCE.md.
REFERENCE = Path(__file__).resolve().parents[2] / "fixtures" / "xpk-1.16.0-pathways-elastic.yaml"


def backend(fake) -> GKEBackend:
    from elastix.clients.kube import api_client_from_kubeconfig

    api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
    return GKEBackend(api, "default", where)


@pytest.fixture
def manifest() -> dict:
    return yaml.safe_load(REFERENCE.read_text())


def _priority_class(fake, name: str = "medium") -> None:
    """xpk's manifest names PriorityClass medium, which preflight looks for (xpk's cluster
    create makes it)."""
    fake.post("/apis/scheduling.k8s.io/v1/priorityclasses",
              {"metadata": {"name": name}, "value": 500})


def test_server_dry_run_is_strict_and_persists_nothing(fake_cluster, manifest):
    _priority_class(fake_cluster)
    b = backend(fake_cluster)
    assert b.submit(manifest, dry_run="server") == "elastic-demo"
    assert b.list() == []
    bad = copy.deepcopy(manifest)
    bad["spec"]["replicatedJobs"][1]["template"]["spec"]["backofLimit"] = 3  # a typo
    with pytest.raises(ManifestError) as err:
        b.submit(bad, dry_run="server")
    assert 'unknown field "spec.replicatedJobs[1].template.spec.backofLimit"' in err.value.message
    assert b.list() == []


def test_replace_deletes_then_submits(fake_cluster, manifest):
    _priority_class(fake_cluster)
    b = backend(fake_cluster)
    b.submit(manifest)
    first = b.get_jobset("elastic-demo")["metadata"]["uid"]
    b.submit(manifest, replace=True)
    assert b.get_jobset("elastic-demo")["metadata"]["uid"] != first
    wait_for(lambda: b.status("elastic-demo").state == "Running", what="running")
    assert {p.name for s in b.status("elastic-demo").slices for p in s.pods}


def test_jobset_crd_not_installed(tmp_path, manifest):
    fake = start_fake(tmp_path, crd=False)
    try:
        _priority_class(fake)
        with pytest.raises(PreflightError) as err:  # preflight sees it first, exit 1
            backend(fake).submit(manifest)
        assert "JobSet CRD is not installed" in err.value.message
        assert "jobset" in err.value.hint and err.value.exit_code == 1
        with pytest.raises(NotFoundError) as err:  # and without preflight, the create's 404
            backend(fake).submit(manifest, preflight=False)
        assert "JobSet CRD is not installed" in err.value.message
        assert "jobset" in err.value.hint
        out = elastix(fake, *CREATE, check=False)
        assert out.returncode == 1 and "JobSet CRD is not installed" in out.stderr
    finally:
        stop(fake)


def test_status_watch_stops_on_ctrl_c(fake_cluster):
    import threading

    elastix(fake_cluster, *CREATE)
    proc = subprocess.Popen([sys.executable, "-m", "elastix", "workload", "status", "demo",
                             "--watch", "--interval", "0.2"], env=fake_cluster.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    err: list[str] = []
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True).start()
    try:
        # two frames drawn: the watch refreshes
        wait_for(lambda: sum("namespace default" in x for x in lines) >= 2, timeout=120,
                 what="two frames")
    finally:
        code = interrupt(proc, lambda: "".join(err))
    proc.wait()
    assert code == 130 and "Traceback" not in "".join(err)
