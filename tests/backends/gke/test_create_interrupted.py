"""Ctrl-C during ``workload create`` on GKE (issue 39): either the JobSet exists and create
said so (exit 0), or nothing elastix made is left on the API server. The real CLI against the
fake API server through a fault proxy that holds one request in flight: the Ctrl-C lands while
the API server has the request and the client waits for its answer, where the answer alone says
what was made."""

from __future__ import annotations

import subprocess
import sys
import threading

from fake_cluster import CREATE, HEAD_ACCESS_KINDS, interrupt, wait_for, write_kubeconfig
from fault_proxy import Rule, fault_proxy

NONE = {k: [] for k in HEAD_ACCESS_KINDS}
DEMO = {k: ["demo-head"] for k in HEAD_ACCESS_KINDS}
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"


def _ctrl_c_while_held(fake, tmp_path, method: str, path: str) -> tuple[int, str]:
    """Create through a proxy that holds the first ``method`` ``path`` request; Ctrl-C the
    create once that request is in flight, and only then let it go on to the API server; the
    create's exit code and stderr, once the held request has reached it (whatever it made is
    made by then)."""
    release = threading.Event()
    with fault_proxy(fake.url) as (url, proxy):
        proxy.add(Rule(method, path, "stall", until=release))
        env = {**fake.env(), "KUBECONFIG": str(write_kubeconfig(tmp_path / "proxied", url))}
        err = tmp_path / "stderr.txt"
        with open(err, "w") as f:
            proc = subprocess.Popen([sys.executable, "-m", "elastix", *CREATE], env=env,
                                    stdout=subprocess.DEVNULL, stderr=f, text=True)
        try:
            wait_for(lambda: proxy.matching(method, path) or proc.poll() is not None, 60,
                     f"create to send {method} {path}")
            assert proc.poll() is None, err.read_text()
            code = interrupt(proc, err.read_text, timeout=60, then=release.set)
        finally:
            release.set()
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        wait_for(lambda: all(s.done for s in proxy.matching(method, path)), 30,
                 "the held request to be forwarded")
    return code, err.read_text()


def _jobsets(fake) -> list[str]:
    return [j["metadata"]["name"] for j in fake.get(JOBSETS)["items"]]


def test_ctrl_c_while_the_jobset_is_being_created_waits_for_it_and_says_created(fake_cluster,
                                                                               tmp_path):
    """The POST is with the API server: it makes the JobSet whatever the client does. The
    Ctrl-C waits for its answer; the JobSet is made, so create reports it (exit 0) and says the
    workload is left running, its head's objects owned by it."""
    code, err = _ctrl_c_while_held(fake_cluster, tmp_path, "POST", r"/jobsets")
    assert code == 0, err
    assert "created workload demo" in err and "it is left running" in err, err
    assert "interrupted" not in err and "Traceback" not in err, err
    assert _jobsets(fake_cluster) == ["demo"]
    assert fake_cluster.head_access() == DEMO
    uid = fake_cluster.get(f"{JOBSETS}/demo")["metadata"]["uid"]
    for kind, prefix in HEAD_ACCESS_KINDS.items():
        [owner] = fake_cluster.get(f"{prefix}/namespaces/default/{kind}/demo-head")[
            "metadata"]["ownerReferences"]
        assert owner["uid"] == uid


def test_ctrl_c_while_the_head_is_granted_access_leaves_nothing(fake_cluster, tmp_path):
    """Before the JobSet is asked for: the RoleBinding's apply is in flight (the account and
    its Role are made). The Ctrl-C waits for it, then every object is deleted, no JobSet is
    sent, and create says interrupted (130)."""
    code, err = _ctrl_c_while_held(fake_cluster, tmp_path, "PATCH", r"/rolebindings/")
    assert code == 130 and "interrupted" in err and "Traceback" not in err, err
    assert fake_cluster.head_access() == NONE
    assert _jobsets(fake_cluster) == []
