"""The fake cluster's controllers: JobSet -> Jobs -> Pods, pod lifecycle, logs, Deployments.

Semantics kept from the real controllers (JobSet v0.12, Job, kubelet), in miniature:
- a JobSet creates one Job per replicated-job replica and one pod per completion index, with the
  real ``jobset.sigs.k8s.io/*`` and ``batch.kubernetes.io/job-completion-index`` labels;
- a deleted or failed pod counts against its Job's ``backoffLimit``; within the limit the pod is
  recreated with the same index (new name, new UID); past it the Job fails and the JobSet restarts
  every Job (``restart-attempt`` + 1) while ``failurePolicy.maxRestarts`` allows, else it fails;
- pods whose nodeSelector matches ``Config.unschedulable`` stay Pending with an Unschedulable
  condition and a FailedScheduling event;
- when the cluster has Nodes (``POST /api/v1/nodes``), pods are placed by the scheduler model of
  ``k8s_scheduler`` (selector, taints, resources, JobSet exclusive placement): a pod that fits
  nowhere stays Pending with the real scheduler's message and is placed when a Node is added or
  a pod goes away. With no Nodes at all every pod runs, on a made-up node name: the behaviour
  every test written before Nodes existed relies on;
- running containers log a line on start; the head's main container logs a step line every
  ``Config.log_interval`` seconds. Followers of a log are woken on every new line and when the pod
  goes away.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import datetime as dt
import hashlib
import uuid

from k8s_admission import invalid_status, object_meta, pod_and_job
from k8s_scheduler import occupying, schedule
from k8s_store import Resource, Store, now, ts

JS = "jobset.sigs.k8s.io/"
HEAD_JOB = "pathways-head"


@dataclasses.dataclass
class Config:
    """Timings and scripted faults; changed at run time through ``POST /_fake/config``."""

    start_delay: float = 0.05  # Pending -> Running
    recreate_delay: float = 0.0  # a failed pod's replacement appears after this
    terminate_delay: float = 0.2  # graceful deletes and JobSet deletion: Terminating for this long
    log_interval: float = 0.5  # the head's main container logs a step line this often
    unschedulable: dict = dataclasses.field(default_factory=dict)  # nodeSelector key -> value


@dataclasses.dataclass
class LogBuffer:
    lines: list = dataclasses.field(default_factory=list)  # (datetime, text)
    cond: asyncio.Condition = dataclasses.field(default_factory=asyncio.Condition)
    closed: bool = False
    cut: bool = False


class Cluster:
    """Controllers over a ``Store``. Reacts to store events; never blocks the event loop."""

    def __init__(self, store: Store, config: Config) -> None:
        self.store, self.config = store, config
        self.logs: dict[tuple[str, str, str], LogBuffer] = {}
        self.previous_logs: dict[tuple[str, str, str], LogBuffer] = {}
        self.pods = store.resource("", "v1", "pods")
        self.jobs = store.resource("batch", "v1", "jobs")
        self.events = store.resource("", "v1", "events")
        self.nodes = store.resource("", "v1", "nodes")
        self.deleting: set[str] = set()  # JobSet uids being torn down: pod deletions are expected
        self.node_seq = 0
        self.suspended: set[str] = set()  # uids of JobSets created suspended, not yet resumed
        store.listeners.append(self.on_event)

    # --- reactions --------------------------------------------------------------------------

    def on_event(self, event: str, res: Resource, obj: dict) -> None:
        key = (res.group, res.plural)
        if key == ("jobset.x-k8s.io", "jobsets"):
            # A suspended JobSet has no Jobs until it is resumed (Kueue admits it): JobSet
            # creates them once resumed (spec.suspend, jobset_types.go).
            uid = obj["metadata"].get("uid")
            suspended = bool((obj.get("spec") or {}).get("suspend"))
            if event == "ADDED" and suspended:
                self.suspended.add(uid)
            elif event == "MODIFIED" and suspended and uid not in self.suspended:
                # suspended while running (Kueue evicted it): its Jobs and pods go
                self.suspended.add(uid)
                self.teardown(obj, delay=0.0)
            elif event == "ADDED" or (event == "MODIFIED" and uid in self.suspended
                                      and not suspended):
                self.suspended.discard(uid)
                self.deleting.discard(uid)
                self.create_jobs(obj, attempt=0)
            elif event == "DELETED":
                self.suspended.discard(uid)
                self.teardown(obj, delay=self.config.terminate_delay)
        elif key == ("", "pods") and event == "DELETED":
            for buf in self._buffers(obj):
                buf.closed = True
                self._wake(buf)
            self.pod_gone(obj)
            asyncio.get_running_loop().call_soon(self.retry_pending)
        elif key == ("", "nodes") and event != "DELETED":
            asyncio.get_running_loop().call_soon(self.retry_pending)
        elif key == ("apps", "deployments") and event != "DELETED":
            self.deployment_ready(obj)

    def deployment_ready(self, dep: dict) -> None:
        n = dep.get("spec", {}).get("replicas", 1)
        want = {
            "observedGeneration": dep["metadata"].get("generation", 1),
            "replicas": n,
            "readyReplicas": n,
            "availableReplicas": n,
            "updatedReplicas": n,
            "conditions": [{"type": "Available", "status": "True", "reason": "Fake"}],
        }
        if dep.get("status") != want:
            dep["status"] = want
            self.store.put(self.store.resource("apps", "v1", "deployments"), dep)

    # --- JobSet -> Jobs -> Pods -------------------------------------------------------------

    def create_jobs(self, js: dict, attempt: int, only: tuple[str, int] | None = None) -> None:
        """Create the JobSet's Jobs (``only``: the one Job of that replicated job and index)."""
        md, spec = js["metadata"], js.get("spec", {})
        name, ns = md["name"], md["namespace"]
        subdomain = spec.get("network", {}).get("subdomain") or name
        coord = spec.get("coordinator", {})
        coordinator = None
        if coord.get("replicatedJob"):
            coordinator = (
                f"{name}-{coord['replicatedJob']}-{coord.get('jobIndex', 0)}-"
                f"{coord.get('podIndex', 0)}.{subdomain}"
            )
        gidx = 0
        for rj in spec.get("replicatedJobs", []):
            for j in range(rj.get("replicas", 1)):
                if only is not None and only != (rj["name"], j):
                    gidx += 1
                    continue
                job_name = f"{name}-{rj['name']}-{j}"
                labels = {
                    JS + "jobset-name": name,
                    JS + "replicatedjob-name": rj["name"],
                    JS + "replicatedjob-replicas": str(rj.get("replicas", 1)),
                    JS + "job-index": str(j),
                    JS + "job-global-index": str(gidx),
                    JS + "restart-attempt": str(attempt),
                    JS + "job-key": hashlib.sha1(f"{ns}/{job_name}".encode()).hexdigest(),
                }
                if coordinator:
                    labels[JS + "coordinator"] = coordinator
                gidx += 1
                tmpl = copy.deepcopy(rj.get("template", {}))
                job = {
                    "apiVersion": "batch/v1",
                    "kind": "Job",
                    "metadata": {
                        "name": job_name,
                        "namespace": ns,
                        "labels": {**((tmpl.get("metadata") or {}).get("labels") or {}), **labels},
                        "annotations": {
                            **((tmpl.get("metadata") or {}).get("annotations") or {}),
                            **labels,
                        },
                        "ownerReferences": [_owner(js)],
                    },
                    "spec": tmpl.get("spec", {}),
                    "status": {"active": 0, "failed": 0, "succeeded": 0},
                }
                refused = _job_refused(job)
                if refused:  # the real controller's create fails the same way, and it says so
                    self.event(js, "Warning", "JobCreationFailed", refused)
                    continue
                job = self.store.put(self.jobs, job)
                for c in range(job["spec"].get("completions") or job["spec"].get("parallelism", 1)):
                    self.create_pod(
                        job,
                        c,
                        subdomain if spec.get("network", {}).get("enableDNSHostnames") else None,
                    )

    def create_pod(self, job: dict, index: int, subdomain: str | None) -> None:
        jmd = job["metadata"]
        tmpl = copy.deepcopy(job["spec"].get("template", {}))
        labels = {
            **((tmpl.get("metadata") or {}).get("labels") or {}),
            **{k: v for k, v in jmd["labels"].items() if k.startswith(JS)},
            "batch.kubernetes.io/job-completion-index": str(index),
            "batch.kubernetes.io/job-name": jmd["name"],
            "job-name": jmd["name"],
            "batch.kubernetes.io/controller-uid": jmd["uid"],
        }
        pod_spec = tmpl.get("spec", {})
        if subdomain:
            pod_spec.setdefault("hostname", f"{jmd['name']}-{index}")
            pod_spec.setdefault("subdomain", subdomain)
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"{jmd['name']}-{index}-{uuid.uuid4().hex[:5]}",
                "namespace": jmd["namespace"],
                "labels": labels,
                "annotations": {
                    **((tmpl.get("metadata") or {}).get("annotations") or {}),
                    **jmd.get("annotations", {}),
                    "batch.kubernetes.io/job-completion-index": str(index),
                },
                "ownerReferences": [_owner(job)],
            },
            "spec": pod_spec,
            "status": {"phase": "Pending", "qosClass": "BestEffort"},
        }
        msg = self._place(pod, pod_spec)
        if msg:
            pod["status"]["conditions"] = [_unschedulable(msg)]
        pod = self.store.put(self.pods, pod)
        self.set_active(job, +1)
        if msg:
            self.event(pod, "Warning", "FailedScheduling", msg)
            return
        self._start_later(pod)

    def _place(self, pod: dict, pod_spec: dict) -> str | None:
        """Bind the pod (set ``nodeName``) or return why it cannot run (a FailedScheduling text).

        ``Config.unschedulable`` wins; then, when the cluster has Nodes, the scheduler model.
        """
        blocked = {
            k: v
            for k, v in pod_spec.get("nodeSelector", {}).items()
            if self.config.unschedulable.get(k) == v
        }
        if blocked:
            return (
                f"0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector "
                f"({', '.join(f'{k}={v}' for k, v in blocked.items())})."
            )
        nodes = self.store.list(self.nodes)
        if not nodes:
            return None  # no Nodes at all: every pod runs (the behaviour tests without nodes use)
        node, msg = schedule(pod, nodes, occupying(self.store.list(self.pods)))
        if node is None:
            return msg
        pod_spec["nodeName"] = node
        return None

    def _start_later(self, pod: dict) -> None:
        md = pod["metadata"]
        asyncio.get_running_loop().call_later(
            self.config.start_delay, self.start_pod, md["namespace"], md["name"], md["uid"]
        )

    def retry_pending(self) -> None:
        """Try again to place the pods the scheduler left Pending (a Node came, a pod left)."""
        if not self.store.list(self.nodes):
            return
        for pod in self.store.list(self.pods):
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            waiting = any(c.get("reason") == "Unschedulable" for c in status.get("conditions") or [])
            if spec.get("nodeName") or not waiting or pod["metadata"].get("deletionTimestamp"):
                continue
            if self._place(pod, spec) is None:
                status["conditions"] = []
                self.store.put(self.pods, pod)
                self._start_later(pod)

    def start_pod(self, ns: str, name: str, uid: str) -> None:
        pod = self.store.get(self.pods, ns, name)
        if pod is None or pod["metadata"]["uid"] != uid or pod["metadata"].get("deletionTimestamp"):
            return
        self.node_seq += 1
        spec, t = pod["spec"], ts()
        spec["nodeName"] = spec.get("nodeName") or f"fake-node-{self.node_seq}"

        def cstatus(c: dict) -> dict:
            return {
                "name": c["name"],
                "image": c.get("image", ""),
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": t}},
            }

        pod["status"] = {
            "phase": "Running",
            "startTime": t,
            "hostIP": "10.0.0.1",
            "podIP": f"10.1.0.{self.node_seq % 250}",
            "qosClass": "BestEffort",
            "conditions": [
                {"type": c, "status": "True", "lastTransitionTime": t}
                for c in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
            "initContainerStatuses": [cstatus(c) for c in spec.get("initContainers", [])],
            "containerStatuses": [cstatus(c) for c in spec.get("containers", [])],
        }
        self.store.put(self.pods, pod)
        self.event(pod, "Normal", "Started", "Started containers")
        for c in spec.get("initContainers", []) + spec.get("containers", []):
            self.log(ns, name, c["name"], f"fake {c['name']} started on {spec['nodeName']}")
        labels = pod["metadata"]["labels"]
        if labels.get(JS + "replicatedjob-name") == HEAD_JOB and spec.get("containers"):
            asyncio.get_running_loop().create_task(
                self.tick(ns, name, uid, spec["containers"][-1]["name"])
            )

    async def tick(self, ns: str, name: str, uid: str, container: str) -> None:
        step = 0
        while True:
            await asyncio.sleep(self.config.log_interval)
            pod = self.store.get(self.pods, ns, name)
            if (
                pod is None
                or pod["metadata"]["uid"] != uid
                or pod["metadata"].get("deletionTimestamp")
            ):
                return
            step += 1
            self.log(ns, name, container, f"fake-trainer step {step} on pod {name}")

    def pod_gone(self, pod: dict) -> None:
        md = pod["metadata"]
        owner = (md.get("ownerReferences") or [{}])[0]
        js_uid = None
        job = self.store.get(self.jobs, md["namespace"], owner.get("name", ""))
        if job is None or job["metadata"]["uid"] != owner.get("uid"):
            return
        self.set_active(job, -1)
        js_uid = job["metadata"]["ownerReferences"][0]["uid"]
        if js_uid in self.deleting or pod["status"].get("phase") == "Succeeded":
            return
        job["status"]["failed"] = job["status"].get("failed", 0) + 1
        self.store.put(self.jobs, job)
        if job["status"]["failed"] <= job["spec"].get("backoffLimit", 6):
            index = int(md["labels"]["batch.kubernetes.io/job-completion-index"])
            sub = pod["spec"].get("subdomain")
            asyncio.get_running_loop().call_later(
                self.config.recreate_delay,
                self._recreate,
                job["metadata"]["uid"],
                md["namespace"],
                job["metadata"]["name"],
                index,
                sub,
            )
        else:
            self.job_failed(job)

    def _recreate(self, job_uid: str, ns: str, job_name: str, index: int, sub: str | None) -> None:
        job = self.store.get(self.jobs, ns, job_name)
        if job is not None and job["metadata"]["uid"] == job_uid:
            self.create_pod(job, index, sub)

    def job_failed(self, job: dict) -> None:
        """JobSet's failure policy (v0.12.0 ``pkg/controllers/failure_policy.go``): the first
        rule whose targets (and reasons) match the failed Job decides (L87-120), else
        RestartJobSet (L45). Every restart that counts towards the maximum is checked against
        ``maxRestarts`` as one total, JobSet restarts and per-Job restarts alike (L226, L350,
        ``totalRestartsCountTowardsMax`` L548). Message patterns are not matched."""
        jsres = self.store.resource("jobset.x-k8s.io", "v1alpha2", "jobsets")
        md = job["metadata"]
        js = self.store.get(jsres, md["namespace"], md["labels"][JS + "jobset-name"])
        if js is None:
            return
        status = js.setdefault("status", {})
        fp = js["spec"].get("failurePolicy", {})
        rj_name = md["labels"][JS + "replicatedjob-name"]
        rule = next((r for r in fp.get("rules") or []
                     if rj_name in (r.get("targetReplicatedJobs") or [rj_name])
                     and "BackoffLimitExceeded" in (r.get("onJobFailureReasons")
                                                    or ["BackoffLimitExceeded"])), None)
        action = (rule or {}).get("action", "RestartJobSet")
        rj_status = next((x for x in status.get("replicatedJobsStatus") or []
                          if x.get("name") == rj_name), None)
        total = status.get("restartsCountTowardsMax", 0) + sum(
            sum(x.get("jobRestartsCountTowardsMax") or []) for x in
            status.get("replicatedJobsStatus") or [])
        counts = not action.endswith("IgnoreMaxRestarts")
        if action == "FailJobSet" or (counts and total >= fp.get("maxRestarts", 0)):
            self.teardown(js, delay=0.0)
            # constants.go L51-52, L109: the reasons and messages the real controller writes
            reason, why = (("FailJobSetFailurePolicyAction", "failure policy rule FailJobSet")
                           if action == "FailJobSet" else
                           ("ReachedMaxRestarts", "jobset failed due to reaching max number of "
                            "restarts"))
            status["terminalState"] = "Failed"
            status["conditions"] = [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": reason,
                    "message": f"{why}: job {md['name']} failed: backoffLimit reached",
                    "lastTransitionTime": ts(),
                }
            ]
            self.store.put(jsres, js)
        elif action.startswith("RestartJobSet"):
            self.teardown(js, delay=0.0)
            status["restarts"] = status.get("restarts", 0) + 1
            status["restartsCountTowardsMax"] = status.get("restartsCountTowardsMax", 0) + counts
            self.store.put(jsres, js)
            self.deleting.discard(js["metadata"]["uid"])
            self.create_jobs(js, attempt=status["restarts"])
        else:  # RestartJob, RestartJobAndIgnoreMaxRestarts: this Job alone (L300-342)
            index = int(md["labels"][JS + "job-index"])
            replicas = int(md["labels"][JS + "replicatedjob-replicas"])
            if rj_status is None:
                rj_status = {"name": rj_name, "ready": 0, "succeeded": 0, "failed": 0,
                             "active": 0, "suspended": 0}
                status.setdefault("replicatedJobsStatus", []).append(rj_status)
            for key, add in (("jobRestarts", 1), ("jobRestartsCountTowardsMax", int(counts))):
                per = list(rj_status.get(key) or [0] * replicas)
                per[index] += add
                rj_status[key] = per
            ns = md["namespace"]
            self.store.remove(self.jobs, ns, md["name"])
            for p in self.store.list(self.pods, ns):
                if (p["metadata"].get("ownerReferences") or [{}])[0].get("uid") == md["uid"]:
                    self.delete_pod(p, 0.0)
            self.store.put(jsres, js)
            self.create_jobs(js, attempt=status.get("restarts", 0), only=(rj_name, index))

    def teardown(self, js: dict, delay: float) -> None:
        """Delete a JobSet's Jobs, and its pods after ``delay`` (shown as Terminating meanwhile)."""
        uid = js["metadata"]["uid"]
        self.deleting.add(uid)
        ns = js["metadata"]["namespace"]
        jobs = [
            j
            for j in self.store.list(self.jobs, ns)
            if j["metadata"].get("ownerReferences", [{}])[0].get("uid") == uid
        ]
        job_uids = {j["metadata"]["uid"] for j in jobs}
        pods = [
            p
            for p in self.store.list(self.pods, ns)
            if p["metadata"].get("ownerReferences", [{}])[0].get("uid") in job_uids
        ]
        for p in pods:
            self.delete_pod(p, delay)
        for j in jobs:
            self.store.remove(self.jobs, ns, j["metadata"]["name"])

    def delete_pod(self, pod: dict, grace: float) -> dict:
        """Delete now (grace 0) or mark Terminating and delete after ``grace`` seconds."""
        md = pod["metadata"]
        if grace <= 0:
            return self.store.remove(self.pods, md["namespace"], md["name"])
        if not md.get("deletionTimestamp"):
            md["deletionTimestamp"] = ts(now() + dt.timedelta(seconds=grace))
            md["deletionGracePeriodSeconds"] = int(grace) or 1
            self.store.put(self.pods, pod)
            asyncio.get_running_loop().call_later(
                grace, self._finish_delete, md["namespace"], md["name"], md["uid"]
            )
        return pod

    def _finish_delete(self, ns: str, name: str, uid: str) -> None:
        pod = self.store.get(self.pods, ns, name)
        if pod is not None and pod["metadata"]["uid"] == uid:
            self.store.remove(self.pods, ns, name)

    def set_active(self, job: dict, delta: int) -> None:
        job["status"]["active"] = max(0, job["status"].get("active", 0) + delta)
        if self.store.get(self.jobs, job["metadata"]["namespace"], job["metadata"]["name"]) is job:
            self.store.put(self.jobs, job)

    # --- events and logs --------------------------------------------------------------------

    def event(self, pod: dict, kind: str, reason: str, message: str) -> None:
        md = pod["metadata"]
        self.store.put(
            self.events,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{md['name']}.{uuid.uuid4().hex[:12]}",
                    "namespace": md["namespace"],
                },
                "involvedObject": {
                    "kind": pod.get("kind", "Pod"),
                    "name": md["name"],
                    "namespace": md["namespace"],
                    "uid": md["uid"],
                },
                "type": kind,
                "reason": reason,
                "message": message,
                "count": 1,
                "firstTimestamp": ts(),
                "lastTimestamp": ts(),
                "source": {"component": "fake-scheduler" if kind == "Warning" else "fake-kubelet"},
            },
        )

    def buffer(self, ns: str, pod: str, container: str, previous: bool = False) -> LogBuffer:
        """A container's log; ``previous``: its instance before the last in-place restart."""
        if previous:
            return self.previous_logs.setdefault((ns, pod, container), LogBuffer())
        return self.logs.setdefault((ns, pod, container), LogBuffer())

    def restart_container(self, ns: str, pod: str, container: str) -> bool:
        """Restart one container in place: restartCount + 1, a fresh log, the old one previous."""
        obj = self.store.get(self.pods, ns, pod)
        statuses = [c for c in (obj or {}).get("status", {}).get("containerStatuses", [])
                    if c["name"] == container]
        if not statuses:
            return False
        statuses[0]["restartCount"] = statuses[0].get("restartCount", 0) + 1
        self.store.put(self.pods, obj)
        old = self.logs.pop((ns, pod, container), LogBuffer())
        self.previous_logs[(ns, pod, container)] = LogBuffer(lines=old.lines)
        old.closed = True
        self._wake(old)
        self.log(ns, pod, container, f"fake {container} restarted in place")
        return True

    def _buffers(self, pod: dict) -> list[LogBuffer]:
        md = pod["metadata"]
        return [
            b for (ns, p, _), b in self.logs.items() if (ns, p) == (md["namespace"], md["name"])
        ]

    def log(self, ns: str, pod: str, container: str, text: str) -> None:
        buf = self.buffer(ns, pod, container)
        buf.lines.append((now(), text))
        self._wake(buf)

    def rotate_log(self, ns: str, pod: str, container: str) -> None:
        """The kubelet rotating a container's log file: the API serves only the new, empty
        file from now on (kubernetes.io, "Logging Architecture", "Log rotation")."""
        self.buffer(ns, pod, container).lines.clear()

    def cut_logs(self, ns: str, pod: str) -> int:
        """Make every follower of the pod's logs drop its connection mid-stream."""
        bufs = [b for (n, p, _), b in self.logs.items() if (n, p) == (ns, pod)]
        for b in bufs:
            b.cut = True
            self._wake(b)
        return len(bufs)

    @staticmethod
    def _wake(buf: LogBuffer) -> None:
        async def notify() -> None:
            async with buf.cond:
                buf.cond.notify_all()

        asyncio.get_running_loop().create_task(notify())


def _job_refused(job: dict) -> str | None:
    """What the API server answers the JobSet controller creating ``job``, when it refuses it:
    the Job's metadata, its pod template's labels and an Indexed Job's last hostname
    (kubernetes pkg/apis/batch/validation ValidateJob). JobSet v0.12.0 records the error as a
    Warning event ``JobCreationFailed`` on the JobSet (pkg/controllers/jobset_controller.go
    L711, pkg/constants/constants.go L66). The webhook does not check pod template labels, so a
    JobSet can be admitted and still make no Jobs."""
    tmpl = (job["spec"].get("template") or {}).get("metadata") or {}
    causes = object_meta("jobs", job["metadata"], creating=True) + pod_and_job("jobs", job)
    causes += object_meta("pods", tmpl, creating=False, path="spec.template.metadata")
    if not causes:
        return None
    return invalid_status("Job", "batch", job["metadata"]["name"], causes)["message"]


def _unschedulable(msg: str) -> dict:
    return {
        "type": "PodScheduled",
        "status": "False",
        "reason": "Unschedulable",
        "message": msg,
        "lastTransitionTime": ts(),
    }


def _owner(obj: dict) -> dict:
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
