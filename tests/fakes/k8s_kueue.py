"""Kueue for the fake API server: its kinds, its JobSet webhook, Workloads and visibility API.

What the fake does, each with the Kueue v0.19.2 source it follows (kubernetes-sigs/kueue):

- **Kinds.** ResourceFlavor, ClusterQueue, LocalQueue, Workload, WorkloadPriorityClass and
  AdmissionCheck, served as ``kueue.x-k8s.io`` ``v1beta2`` (stored) and ``v1beta1`` (still
  served): ``config/components/crd/bases/kueue.x-k8s.io_workloads.yaml`` L44, L9454-9455,
  L9479, L19141-19142. Served once Kueue is installed: ``POST /_fake/kueue {"installed": true}``
  or the release manifest's CRDs applied through the API.
- **Suspend at creation.** A JobSet labelled ``kueue.x-k8s.io/queue-name`` is created suspended:
  the JobSet webhook's ``Default`` (``pkg/controller/jobs/jobset/jobset_webhook.go`` L75-84) calls
  ``ApplyDefaultForSuspend`` (``pkg/controller/jobframework/defaults.go`` L36-47).
- **The Workload.** Created for it in its namespace, named ``jobset-<name>-<hash5>``
  (``pkg/controller/jobframework/workload_names.go`` L64-118: sha1 of kind, group, name, uid),
  labelled ``kueue.x-k8s.io/job-uid`` and owned by the JobSet as its controller
  (``reconciler.go`` L1606-1635), ``spec.queueName`` the label's value. With no such LocalQueue
  its ``QuotaReserved`` is False, reason ``Misconfigured``, "LocalQueue Q doesn't exist"
  (``pkg/controller/core/workload_controller.go`` L2084); else the test sets its status.
- **Status by the test.** ``POST /_fake/kueue_workload`` (``jobset``, ``namespace``,
  ``status``): merges ``status`` into the Workload (conditions ``QuotaReserved``/``Admitted``,
  ``admissionChecks``: ``apis/kueue/v1beta2/workload_types.go`` L662, L796-830, L931-939). An
  ``Admitted`` True condition resumes the JobSet (``spec.suspend`` false), as Kueue's job
  reconciler does on admission.
- **WaitForPodsReady** as v0.19.2 runs it, on a fake clock (``POST /_fake/kueue_clock
  {"advance": seconds}`` moves it and reconciles every admitted Workload). Its settings are the
  ConfigMap ``kueue-system/kueue-manager-config`` (``controller_manager_config.yaml``) as
  applied through the API, defaulted as ``apis/config/v1beta2/defaults.go`` L48, L99-117 does:
  no ``waitForPodsReady`` block, or no ConfigMap at all, is a 30-minute timeout and a
  30-minute ``recoveryTimeout`` (``CHANGELOG/CHANGELOG-0.19.md`` L215); ``recoveryTimeout:
  0s`` is off (``pkg/controller/core/core.go`` L151-153). An older release (the tag of the
  ``kueue-controller-manager`` Deployment's image) runs it as that release does
  (:meth:`Kueue.pods_ready_settings`): before v0.19 an absent block is off; before v0.16 an
  unset ``recoveryTimeout`` is off and ``0s`` evicts at once (``core.go`` L110-112 @ v0.15.8,
  where v0.16.0's L113 keeps only a positive one); a ``config.kueue.x-k8s.io/v1beta1`` file is
  on only with ``enable: true``, with a 5-minute default timeout and ``blockAdmission``
  defaulting to true (``apis/config/v1beta1/defaults.go`` L95-98 @ v0.15.8; v1beta2's L95
  defaults it to false). With ``blockAdmission`` on, a Workload the test admits while another
  admitted one is not PodsReady is not admitted: its ``QuotaReserved`` is False, reason
  ``Waiting``, "waiting for all admitted workloads to be in PodsReady condition"
  (``pkg/scheduler/scheduler.go`` L335-342 @ v0.15.8). A JobSet is ready when every Job of
  every replicated job is (``pkg/controller/jobs/jobset/jobset_controller.go`` L185-195), a Job
  when its ready pods reach ``min(parallelism, completions)`` (jobset v0.12.0
  ``pkg/controllers/jobset_controller.go`` L484-491). The ``PodsReady`` condition follows
  ``pkg/controller/jobframework/reconciler.go`` L1846-1905 (``WaitForStart`` until first ready,
  ``WaitForRecovery`` after); past ``timeout`` since ``Admitted`` or ``recoveryTimeout`` since
  ``WaitForRecovery`` (``workload_controller.go`` L1657-1682) the Workload is evicted:
  ``Evicted`` True reason ``PodsReadyTimeout``, quota released, ``requeueState.count`` + 1
  (L1229-1277), and the JobSet suspended, which deletes its Jobs and pods. Conditions set by a
  test without a ``lastTransitionTime`` get the fake clock's.
- **Visibility API.** ``GET /apis/visibility.kueue.x-k8s.io/v1beta1/namespaces/NS/localqueues/
  Q/pendingworkloads`` answers a ``PendingWorkloadsSummary`` (``apis/visibility/v1beta1/types.go``
  L66-90): the LocalQueue's Workloads without a quota reservation (those Kueue's queue manager
  still holds), by priority then age, with
  ``positionInLocalQueue`` and ``positionInClusterQueue`` from 0
  (``pkg/visibility/storage/storage.go`` L28-30 registers the route). Off with
  ``POST /_fake/kueue {"visibility": false}``: the API server then answers 404, as for any
  group it does not serve.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re

import yaml
from k8s_store import Resource, Store, now, ts

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")
QUEUE_NAME = "kueue.x-k8s.io/queue-name"
JOB_UID = "kueue.x-k8s.io/job-uid"
VISIBILITY = ("visibility.kueue.x-k8s.io", "v1beta1")
# (plural, kind, namespaced)
RESOURCES = (
    ("resourceflavors", "ResourceFlavor", False),
    ("clusterqueues", "ClusterQueue", False),
    ("localqueues", "LocalQueue", True),
    ("workloads", "Workload", True),
    ("workloadpriorityclasses", "WorkloadPriorityClass", False),
    ("admissionchecks", "AdmissionCheck", False),
)


def workload_name(jobset: str, uid: str) -> str:
    """Kueue's name for a JobSet's Workload (workload_names.go L64-118)."""
    h = hashlib.sha1("\n".join(("JobSet", "jobset.x-k8s.io", jobset, uid)).encode()).hexdigest()
    return f"{('jobset-' + jobset)[:57]}-{h[:5]}"


class Kueue:
    """The fake's Kueue: registers its kinds, makes Workloads, serves the visibility API."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.visibility = True
        # Workload uid -> creation order: timestamps have whole seconds, so two Workloads made
        # in one second would tie; Kueue's queue keeps them in arrival order.
        self.arrival: dict[str, int] = {}
        self.time = now()  # Kueue's clock (WaitForPodsReady); moved only by advance()
        store.listeners.append(self.on_event)

    @property
    def installed(self) -> bool:
        return self.served is not None

    @property
    def served(self) -> str | None:
        """The newest Kueue API version served (v1beta1 alone: a release before v0.15)."""
        return next((v for v in VERSIONS
                     if self.store.resource(GROUP, v, "workloads") is not None), None)

    def install(self) -> None:
        for version in VERSIONS:
            for plural, kind, namespaced in RESOURCES:
                self.store.register(Resource(GROUP, version, plural, kind, namespaced))

    def res(self, plural: str) -> Resource:
        return self.store.resource(GROUP, self.served or "v1beta2", plural)

    # --- the JobSet webhook and the job reconciler --------------------------------------------

    def admit_jobset(self, obj: dict) -> None:
        """Kueue's mutating webhook: suspend a JobSet that names a queue (defaults.go L36-47)."""
        if self.installed and ((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_NAME):
            obj.setdefault("spec", {})["suspend"] = True

    def on_event(self, event: str, res: Resource, obj: dict) -> None:
        if (res.group, res.plural) != ("jobset.x-k8s.io", "jobsets") or event != "ADDED":
            return
        md = obj["metadata"]
        queue = (md.get("labels") or {}).get(QUEUE_NAME)
        if not queue or not self.installed:
            return
        wl = {
            "apiVersion": f"{GROUP}/{self.served}", "kind": "Workload",
            "metadata": {
                "name": workload_name(md["name"], md["uid"]), "namespace": md["namespace"],
                "labels": {JOB_UID: md["uid"]},
                "ownerReferences": [{"apiVersion": obj.get("apiVersion", "jobset.x-k8s.io/v1alpha2"),
                                     "kind": "JobSet", "name": md["name"], "uid": md["uid"],
                                     "controller": True, "blockOwnerDeletion": True}]},
            "spec": {"queueName": queue, "priority": 0,
                     "podSets": [{"name": rj.get("name"), "count": rj.get("replicas", 1)}
                                 for rj in (obj.get("spec") or {}).get("replicatedJobs") or []]},
            "status": {},
        }
        if self.store.get(self.res("localqueues"), md["namespace"], queue) is None:
            wl["status"]["conditions"] = [{
                "type": "QuotaReserved", "status": "False", "reason": "Misconfigured",
                "message": f"LocalQueue {queue} doesn't exist",
                "lastTransitionTime": md.get("creationTimestamp")}]
        stored = self.store.put(self.res("workloads"), wl, "ADDED")
        self.arrival[stored["metadata"]["uid"]] = len(self.arrival)

    def workload_of(self, namespace: str, jobset: str) -> dict | None:
        js = self.store.get(self.store.resource("jobset.x-k8s.io", "v1alpha2", "jobsets"),
                            namespace, jobset)
        if js is None:
            return None
        uid = js["metadata"]["uid"]
        found = self.store.list(self.res("workloads"), namespace, f"{JOB_UID}={uid}")
        return found[0] if found else None

    def set_status(self, namespace: str, jobset: str, status: dict) -> dict | None:
        """Merge ``status`` into the JobSet's Workload; Admitted resumes the JobSet."""
        wl = self.workload_of(namespace, jobset)
        if wl is None:
            return None
        for c in status.get("conditions") or []:
            c.setdefault("lastTransitionTime", ts(self.time))
        if _admits(status) and self._admission_blocked(wl):
            status = {**status, "conditions": [{
                "type": "QuotaReserved", "status": "False", "reason": "Waiting",
                "message": "waiting for all admitted workloads to be in PodsReady condition",
                "lastTransitionTime": ts(self.time)}]}
        wl.setdefault("status", {}).update(status)
        self.store.put(self.res("workloads"), wl)
        admitted = any(c.get("type") == "Admitted" and c.get("status") == "True"
                       for c in wl["status"].get("conditions") or [])
        jres = self.store.resource("jobset.x-k8s.io", "v1alpha2", "jobsets")
        js = self.store.get(jres, namespace, jobset)
        if admitted and js is not None and (js.get("spec") or {}).get("suspend"):
            js["spec"]["suspend"] = False
            js["metadata"]["generation"] = js["metadata"].get("generation", 1) + 1
            self.store.put(jres, js)
        return wl

    # --- WaitForPodsReady ---------------------------------------------------------------------

    def release(self) -> tuple[int, int]:
        """(major, minor) of the installed controller's image tag; the newest when unknown."""
        dep = self.store.get(self.store.resource("apps", "v1", "deployments"), "kueue-system",
                             "kueue-controller-manager")
        image = ((((dep or {}).get("spec") or {}).get("template") or {}).get("spec") or {}).get(
            "containers", [{}])[0].get("image", "")
        m = re.search(r":v(\d+)\.(\d+)", image)
        return (int(m.group(1)), int(m.group(2))) if m else (99, 0)

    def pods_ready_settings(self) -> tuple[float, float | None, bool] | None:
        """(timeout, recoveryTimeout or None, blockAdmission) in seconds from the ConfigMap, as
        the installed release reads it (the module's docstring); None when it is off."""
        cm = self.store.get(self.store.resource("", "v1", "configmaps"), "kueue-system",
                            "kueue-manager-config")
        text = ((cm or {}).get("data") or {}).get("controller_manager_config.yaml") or ""
        cfg = yaml.safe_load(text) or {}
        ver = self.release()
        v1beta1 = str(cfg.get("apiVersion", "")).endswith("/v1beta1")
        block = cfg.get("waitForPodsReady")
        if v1beta1 and not (block or {}).get("enable"):
            return None
        if block is None and ver < (0, 19):
            return None
        block = block or {}
        timeout = _seconds(block.get("timeout")) or (300.0 if v1beta1 else 1800.0)
        rec = block.get("recoveryTimeout")
        if ver >= (0, 16):
            recovery = timeout if rec is None else _seconds(rec)  # defaults.go L112
            recovery = recovery or None  # core.go L113 @ v0.16.0: only a positive one counts
        else:
            recovery = None if rec is None else _seconds(rec)  # 0s: at once
        blocks = block.get("blockAdmission", v1beta1)
        return timeout, recovery, bool(blocks)

    def _admission_blocked(self, wl: dict) -> bool:
        """blockAdmission on and another admitted Workload not PodsReady (scheduler.go)."""
        settings = self.pods_ready_settings()
        if settings is None or not settings[2]:
            return False
        for other in self.store.list(self.res("workloads")):
            if other["metadata"]["uid"] == wl["metadata"]["uid"]:
                continue
            conds = {c["type"]: c for c in (other.get("status") or {}).get("conditions") or []}
            if ((conds.get("Admitted") or {}).get("status") == "True"
                    and (conds.get("PodsReady") or {}).get("status") != "True"):
                return True
        return False

    def advance(self, seconds: float) -> None:
        """Move Kueue's clock and reconcile every admitted Workload."""
        self.time += dt.timedelta(seconds=seconds)
        for wl in self.store.list(self.res("workloads")):
            self.reconcile_pods_ready(wl)

    def _jobset_ready(self, js: dict) -> bool:
        ns, name = js["metadata"]["namespace"], js["metadata"]["name"]
        jobs = self.store.resource("batch", "v1", "jobs")
        pods = self.store.list(self.store.resource("", "v1", "pods"), ns)
        for rj in (js.get("spec") or {}).get("replicatedJobs") or []:
            for j in range(rj.get("replicas", 1)):
                job = self.store.get(jobs, ns, f"{name}-{rj['name']}-{j}")
                if job is None:
                    return False
                spec = job.get("spec") or {}
                need = min(spec.get("parallelism", 1), spec.get("completions") or 10**9)
                ready = sum(1 for p in pods
                            if (p["metadata"].get("ownerReferences") or [{}])[0].get("uid")
                            == job["metadata"]["uid"] and not p["metadata"].get(
                                "deletionTimestamp") and any(
                                c.get("type") == "Ready" and c.get("status") == "True"
                                for c in (p.get("status") or {}).get("conditions") or []))
                if ready < need:
                    return False
        return True

    def reconcile_pods_ready(self, wl: dict) -> None:
        conds = {c["type"]: c for c in (wl.get("status") or {}).get("conditions") or []}
        if (conds.get("Admitted") or {}).get("status") != "True":
            return
        owner = (wl["metadata"].get("ownerReferences") or [{}])[0]
        jres = self.store.resource("jobset.x-k8s.io", "v1alpha2", "jobsets")
        js = self.store.get(jres, wl["metadata"]["namespace"], owner.get("name", ""))
        if js is None:
            return
        old = conds.get("PodsReady")
        if self._jobset_ready(js):
            reason = "Recovered" if old and old["reason"] in ("WaitForRecovery", "Recovered") \
                else "Started"
            status = "True"
        else:
            status = "False"
            reason = ("WaitForRecovery" if old and (old["status"] == "True"
                                                   or old["reason"] == "WaitForRecovery")
                      else "WaitForStart")
        since = old["lastTransitionTime"] if old and old["status"] == status else ts(self.time)
        conds["PodsReady"] = {"type": "PodsReady", "status": status, "reason": reason,
                              "message": "", "lastTransitionTime": since}
        settings = self.pods_ready_settings()
        timeout, recovery = (settings or (None, None, False))[:2]
        elapsed = None
        if settings is None:
            pass
        elif status == "False" and reason == "WaitForStart":
            elapsed, limit = self._since(conds["Admitted"]), timeout
        elif status == "False" and recovery is not None:
            elapsed, limit = self._since(conds["PodsReady"]), recovery
        if elapsed is not None and elapsed >= limit:
            t = ts(self.time)
            conds["Evicted"] = {"type": "Evicted", "status": "True", "reason": "PodsReadyTimeout",
                                "message": "Exceeded the PodsReady timeout "
                                           f"{wl['metadata']['namespace']}/{wl['metadata']['name']}",
                                "lastTransitionTime": t}
            for kind in ("QuotaReserved", "Admitted"):
                conds[kind] = {"type": kind, "status": "False", "reason": "Pending",
                               "message": "evicted", "lastTransitionTime": t}
            conds["PodsReady"] = {**conds["PodsReady"], "reason": "WaitForStart"}
            rs = wl["status"].setdefault("requeueState", {})
            rs["count"] = rs.get("count", 0) + 1
            js["spec"]["suspend"] = True  # the job reconciler stops an evicted job
            js["metadata"]["generation"] = js["metadata"].get("generation", 1) + 1
            self.store.put(jres, js)
        wl["status"]["conditions"] = list(conds.values())
        self.store.put(self.res("workloads"), wl)

    def _since(self, cond: dict) -> float:
        t = dt.datetime.fromisoformat(cond["lastTransitionTime"].replace("Z", "+00:00"))
        return (self.time - t).total_seconds()

    # --- the visibility API -------------------------------------------------------------------

    def pending_workloads(self, namespace: str, queue: str) -> dict:
        """The PendingWorkloadsSummary of one LocalQueue (types.go L66-90)."""
        def waiting(wl: dict) -> bool:  # in the queue: no quota reserved (nor admitted)
            return not any(c.get("type") in ("QuotaReserved", "Admitted")
                           and c.get("status") == "True"
                           for c in (wl.get("status") or {}).get("conditions") or [])

        def order(wl: dict):
            return (-(wl.get("spec") or {}).get("priority", 0),
                    wl["metadata"].get("creationTimestamp") or "",
                    self.arrival.get(wl["metadata"].get("uid"), 0))

        lq = self.store.get(self.res("localqueues"), namespace, queue) or {}
        cq = (lq.get("spec") or {}).get("clusterQueue")
        queues = {(q["metadata"]["namespace"], q["metadata"]["name"])
                  for q in self.store.list(self.res("localqueues"))
                  if (q.get("spec") or {}).get("clusterQueue") == cq}
        in_cq = sorted((w for w in self.store.list(self.res("workloads"))
                        if waiting(w) and (w["metadata"]["namespace"],
                                           (w.get("spec") or {}).get("queueName")) in queues),
                       key=order)
        in_lq = [w for w in in_cq if w["metadata"]["namespace"] == namespace
                 and w["spec"].get("queueName") == queue]
        items = [{"metadata": {"name": w["metadata"]["name"], "namespace": namespace,
                               "creationTimestamp": w["metadata"].get("creationTimestamp")},
                  "priority": w["spec"].get("priority", 0), "localQueueName": queue,
                  "positionInClusterQueue": in_cq.index(w), "positionInLocalQueue": i}
                 for i, w in enumerate(in_lq)]
        return {"kind": "PendingWorkloadsSummary",
                "apiVersion": "visibility.kueue.x-k8s.io/v1beta1", "metadata": {},
                "items": items}

    def visibility_path(self, parts: list[str]) -> tuple[str, str] | None:
        """(namespace, queue) when ``parts`` is the LocalQueue pendingworkloads path."""
        if (len(parts) == 8 and parts[:3] == ["apis", *VISIBILITY] and parts[3] == "namespaces"
                and parts[5] == "localqueues" and parts[7] == "pendingworkloads"):
            return parts[4], parts[6]
        return None


def _admits(status: dict) -> bool:
    return any(c.get("type") == "Admitted" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def _seconds(text) -> float | None:
    """A Go duration ("30m", "1h30m", "0s") in seconds."""
    if text is None:
        return None
    units = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3}
    parts = re.findall(r"([\d.]+)(ms|h|m|s)", str(text))
    return sum(float(n) * units[u] for n, u in parts)
