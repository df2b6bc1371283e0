"""Each read of a many-host workload costs one list, not one request per pod.

``workload status``, ``workload list``, ``chaos kill-worker`` (the real CLI, in-process),
``logs -f`` and the head's pod watch (``elastix_trainer.elastic.podwatch``) against the fake API server,
each counted from the fake's request log (``GET /_fake/requests``): what each makes is a fixed
set of requests whatever the number of pods. Times are in ``bench/bench_gke_scale.py``.
"""

from __future__ import annotations

import itertools

import pytest
from fake_cluster import start_fake, stop, wait_for

from elastix.backends.base import LogOptions
from elastix.backends.gke.backend import GKEBackend
from elastix.clients.kube import api_client_from_kubeconfig
from elastix.main import main
from elastix_trainer.elastic.podwatch import PodWatch

NAME = "scale"
SHAPES = {"small": ("v5litepod-16", 2, 4), "large": ("v5litepod-64", 4, 16)}  # type, slices, hosts
JOBSET = f"/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets/{NAME}"
PODS = "/api/v1/namespaces/default/pods"
POD, LOG = PODS + "/<pod>", PODS + "/<pod>/log"  # any one pod, as ``_calls`` spells it


def _calls(log: list[dict]) -> list[tuple[str, str, str]]:
    """(method, path, what a pods list selects) of each request: the shape, not the values."""
    out = []
    for r in log:
        q = r["query"]
        what = "watch" if q.get("watch") in ("true", "1") else q.get("labelSelector", "")
        path = r["path"]
        if path.startswith(PODS + "/"):
            path = LOG if path.endswith("/log") else POD
        out.append((r["method"], path, what if path == PODS else ""))
    return out


def _selector(job: str | None = None) -> str:
    """The label selector that lists this workload's pods, or those of one replicated job."""
    sel = f"jobset.sigs.k8s.io/jobset-name={NAME}"
    return sel if job is None else f"{sel},jobset.sigs.k8s.io/replicatedjob-name={job}"


def _reads(job: str | None, *then: tuple[str, str, str]) -> list[tuple[str, str, str]]:
    """The requests of a command that reads the workload: its JobSet, then one list of its pods
    (of replicated job ``job``'s only, if given), then ``then``."""
    return [("GET", JOBSET, ""), ("GET", PODS, _selector(job)), *then]


def _all_running(fake, pods: int) -> None:
    sel = _selector()
    wait_for(lambda: len([p for p in fake.pods(sel) if p["status"].get("phase") == "Running"
                          and not p["metadata"].get("deletionTimestamp")]) == pods + 1,
             timeout=60, what="every pod Running")


@pytest.fixture(scope="module", params=sorted(SHAPES))
def world(request, tmp_path_factory):
    """One workload per shape, every pod Running before each test (a kill is replaced)."""
    tpu, slices, hosts = SHAPES[request.param]
    fake = start_fake(tmp_path_factory.mktemp(request.param),
                      {"log_interval": 0.05, "recreate_delay": 0.05})
    mp = pytest.MonkeyPatch()
    mp.setenv("KUBECONFIG", str(fake.kubeconfig))
    mp.delenv("ELASTIX_BACKEND", raising=False)
    try:
        assert main(["workload", "create", NAME, "--tpu-type", tpu, "--num-slices", str(slices),
                     "--docker-image", "img:1", "--command", "python train.py"]) == 0
        yield fake, slices * hosts
    finally:
        mp.undo()
        stop(fake)


@pytest.fixture
def settled(world):
    fake, pods = world
    _all_running(fake, pods)
    fake.requests(clear=True)
    return world


def _run(fake, *argv: str) -> list[tuple[str, str, str]]:
    fake.requests(clear=True)
    assert main(list(argv)) == 0
    return _calls(fake.requests(clear=True))


def test_status_is_one_jobset_get_and_one_list_each(settled):
    fake, _ = settled
    assert _run(fake, "workload", "status", NAME) == _reads(
        None, ("GET", "/apis/batch/v1/namespaces/default/jobs", ""),
        ("GET", LOG, ""))  # the head's, for the training line


def test_list_is_one_list_per_kind(settled):
    """And one read of the head's log per workload (its training columns), not per pod."""
    fake, _ = settled
    calls = _run(fake, "workload", "list")
    assert [c[:2] for c in calls] == [
        ("GET", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"),
        ("GET", PODS), ("GET", "/apis/batch/v1/namespaces/default/jobs"),
        ("GET", LOG)]


def test_kill_worker_lists_workers_once_and_deletes_one_pod(settled):
    fake, _ = settled
    assert _run(fake, "chaos", "kill-worker", NAME, "--seed", "3") == _reads(
        "worker", ("DELETE", POD, ""))


def test_logs_follow_lists_the_head_only(settled):
    fake, _ = settled
    api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
    backend = GKEBackend(api, "default", where)
    fake.requests(clear=True)
    stream = backend.logs(NAME, LogOptions(follow=True))
    assert len(list(itertools.islice(stream, 3))) == 3
    stream.close()
    assert _calls(fake.requests(clear=True)) == _reads("pathways-head", ("GET", LOG, ""))


def test_pod_watch_is_one_list_then_one_watch_whatever_happens(settled):
    fake, _ = settled
    api, where = api_client_from_kubeconfig(str(fake.kubeconfig), None)
    sel = _selector("worker")
    hints: list[tuple] = []
    w = PodWatch(api, "default", NAME, lambda s, gone: hints.append((s, gone))).start()
    try:
        wait_for(lambda: len(fake.requests()) >= 2, what="the watch's list and watch")
        assert _calls(fake.requests(clear=True)) == [("GET", PODS, sel), ("GET", PODS, "watch")]
        assert main(["chaos", "kill-worker", NAME, "--seed", "5"]) == 0
        wait_for(lambda: any(gone for _, gone in hints), what="the kill seen by the watch")
        _all_running(fake, settled[1])
        wait_for(lambda: any(not gone for _, gone in hints[1:]), what="the replacement seen")
        # The watch saw the deletion and the replacement on its open stream: no request of its
        # own (the one list of workers is kill-worker's; the fake's own reads select by name).
        assert [c for c in _calls(fake.requests()) if c[2] in (sel, "watch")] == [
            ("GET", PODS, sel)]
    finally:
        w.close()
