"""The GKE backend: JobSets on a Kubernetes cluster through the official ``kubernetes`` client.

Cluster access is the current kubeconfig context (or ``--context``), or a GKE cluster looked up
with ``google-cloud-container`` (``--cluster/--project/--location``). Responses are read as plain
JSON (``elastix.clients.kube.Http``) so that new or unusual fields never break deserialisation.
Every API error becomes an ``elastix.errors`` type through ``elastix.clients.kube.Translator``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from elastix import interrupts
from elastix.backends import Target
from elastix.backends.base import (
    EVENTS_FILE,
    HEAD_LOG,
    Backend,
    Fault,
    KillRecord,
    LogEvent,
    LogOptions,
    TrainerEvents,
    WorkloadStatus,
)
from elastix.backends.gke import deletion, head_access
from elastix.backends.gke.api import Namespace
from elastix.backends.gke.lost import LostSlices
from elastix.clients.kube import (
    JOBSET_GROUP,
    JOBSET_VERSION,
    Forbidden,
    Http,
    Translator,
    api_path,
)
from elastix.clients.retry import RetryPolicy
from elastix.errors import AlreadyExists, BackendError, ConflictError, NotFoundError, UsageError
from elastix.workload import labels, rbac

if TYPE_CHECKING:
    from elastix.backends.gke.training import HeadLogReader
    from elastix.workload.selector import Selector


class GKEBackend(Backend):
    """Runs workloads as JobSets on a GKE (or any Kubernetes) cluster."""

    name = "gke"

    def __init__(self, api_client: Any, namespace: str = "default", where: str = "cluster",
                 gke_cluster: Any = None, cluster_name: str | None = None,
                 retry: RetryPolicy | None = None) -> None:
        """Args:
        api_client: a ``kubernetes.client.ApiClient`` (tests point it at a fake server).
        namespace: where workloads live.
        where: a label naming the cluster and credential, used in error messages.
        gke_cluster: the ``container_v1.Cluster`` looked up for ``--cluster`` (its node pools
            are what preflight reads); None to read the Kubernetes API's Nodes instead.
        cluster_name: the cluster's name, for the fixes preflight suggests.
        retry: how 429 and 503 answers are retried (``elastix.clients.retry``; tests inject
            one with a recording sleep).
        """
        self.api = api_client
        self.http = Http(api_client, retry)
        self.namespace = namespace
        self.tr = Translator(where)
        self.gke_cluster = gke_cluster
        self.cluster_name = cluster_name
        self.notices: list[str] = []
        self.lost = LostSlices()  # the trainer's view, read incrementally from gs://
        self.ns = Namespace(self.http, namespace, self.tr)  # what the readers below share
        self._training: HeadLogReader | None = None  # made when first asked

    @staticmethod
    def storage() -> Any:
        """A Cloud Storage client (application-default credentials; the emulator's when
        ``STORAGE_EMULATOR_HOST`` is set): preflight lists the newest checkpoint with it."""
        from elastix.clients.gcs import client

        return client()

    @classmethod
    def from_target(cls, target: Target) -> GKEBackend:
        """Build from a ``Target``: a GKE cluster lookup, or a kubeconfig context."""
        if target.cluster:
            from elastix.clients.gke import cluster_and_api_client

            api, where, found = cluster_and_api_client(target.project, target.location,
                                                       target.cluster)
            return cls(api, target.namespace, where, found, target.cluster)
        from elastix.clients.kube import api_client_from_kubeconfig

        api, where = api_client_from_kubeconfig(target.kubeconfig, target.context)
        return cls(api, target.namespace, where)

    # --- the namespace's reads (on :class:`~elastix.backends.gke.api.Namespace`) -------------

    def path(self, kind: str, name: str | None = None, sub: str | None = None) -> str:
        """API path of a namespaced collection or object: kind is pods, jobs, events, jobsets."""
        return self.ns.path(kind, name, sub)

    def get_jobset(self, name: str) -> dict:
        return self.ns.jobset(name)

    def pods(self, selector: str) -> tuple[list[dict], str]:
        """Pods matching a label selector, and the list's resourceVersion (to watch from)."""
        return self.ns.pods(selector)

    def wait_pod_change(self, selector: str, rv: str, timeout: float) -> None:
        """Block until a pod matching ``selector`` changes after ``rv``, or ``timeout`` passes."""
        self.ns.wait_pod_change(selector, rv, timeout)

    # --- Backend ----------------------------------------------------------------------------

    def preflight(self, manifest: dict[str, Any]) -> None:
        """Check the cluster can run ``manifest`` (see :mod:`elastix.backends.gke.preflight`).

        Raises:
            PreflightError: every problem found, one line each with its fix.
        """
        from elastix.backends.gke import preflight as pf
        from elastix.backends.gke import statesize

        nodes = self._nodes()
        if self.gke_cluster is not None:
            groups = pf.groups_from_pools(self.gke_cluster, nodes)
            if nodes is None:
                self.notices.append("preflight counted nodes from the node pools' initial size "
                                    "(the credentials may not list Nodes): resizes are not seen")
        else:
            groups = pf.groups_from_nodes(nodes or [])
        problems = pf.check(pf.needs(manifest), groups, self._jobset_served(),
                            self.cluster_name or "NAME")
        problems += [(*p, pf.WORKLOAD) for p in self._queue_problems(manifest)]
        state = statesize.check(manifest, storage=self.storage)
        problems += [(*p, pf.WORKLOAD) for p in state.problems]
        self.notices.extend(state.notices)
        pf.raise_if_problems(problems)
        note = pf.identity_note(manifest, groups)
        if note:
            self.notices.append(note)

    def _queue_problems(self, manifest: dict[str, Any]) -> list[tuple[str, str, str]]:
        """A LocalQueue (``--queue``) or PriorityClass (``--priority``) the manifest names
        that the cluster does not have: Kueue would hold the JobSet suspended for ever (no
        queue), the API server refuses its pods (no class). One read each, before creating."""
        from elastix.backends.gke.kueue import KueueReader, queue_name

        prios = set()
        for rj in (manifest.get("spec") or {}).get("replicatedJobs") or []:
            pod = ((rj.get("template") or {}).get("spec") or {}).get("template") or {}
            prios.add((pod.get("spec") or {}).get("priorityClassName"))
        prios.discard(None)
        reader = KueueReader(self.ns)
        problems, notices = reader.missing(queue_name(manifest), None)
        for prio in sorted(prios):  # each pod template's class (elastix: the workers')
            problems += reader.missing(None, prio)[0]
        if queue_name(manifest) and not problems:  # WaitForPodsReady: docs/gke.md
            notices.append(reader.pods_ready_notice() or "")
        self.notices.extend(n for n in notices if n)
        return problems

    def _queue_by_default(self, body: dict[str, Any]) -> None:
        """Without ``--queue``, on a cluster with Kueue: xpk's LocalQueue when it exists, else
        a notice that the workload bypasses Kueue (:meth:`KueueReader.queue_by_default`)."""
        from elastix.backends.gke.kueue import KueueReader

        note = KueueReader(self.ns).queue_by_default(body)
        if note:
            self.notices.append(note)

    def _nodes(self) -> list[dict] | None:
        """Every Node; None when the credentials may not list them."""
        from kubernetes.client.exceptions import ApiException

        try:
            with self.tr("listing nodes"):
                try:
                    out = self.ns.request("GET", api_path("v1", "nodes"))
                except ApiException as err:
                    if err.status == 403:
                        return None
                    raise
        except NotFoundError:
            return None
        return out.get("items") or []

    def fit_to_jobset(self, body: dict[str, Any]) -> None:
        """Fit ``body`` to the installed JobSet controller (:mod:`.jobset_features`): DependsOn
        or startupPolicy by its version; refuse RestartJob rules it would refuse.

        Raises:
            PreflightError: ``--slice-restart job`` the controller cannot run (exit 2).
        """
        from elastix.backends.gke import jobset_features
        from elastix.backends.gke import preflight as pf

        try:
            ctl = jobset_features.read(self._get_or_none)
        except BackendError:  # the API server failing: the create says so, or the webhook
            ctl = jobset_features.Controller()
        self.notices.extend(jobset_features.adapt(body, ctl))
        pf.raise_if_problems([(*p, pf.WORKLOAD) for p in jobset_features.problems(body, ctl)])

    def _get_or_none(self, path: str) -> dict | None:
        """An object, or None when it is absent or the credentials may not read it."""
        from kubernetes.client.exceptions import ApiException

        try:
            with self.tr("reading the JobSet controller"):
                try:
                    return self.ns.request("GET", path)
                except ApiException as err:
                    if err.status in (401, 403):
                        return None
                    raise
        except NotFoundError:
            return None

    def _jobset_served(self) -> bool:
        """Whether the API server serves the JobSet group/version (the CRD is installed)."""
        try:
            with self.tr("looking for the JobSet API"):
                self.ns.request("GET", f"/apis/{JOBSET_GROUP}/{JOBSET_VERSION}")
        except NotFoundError:  # ApiUnavailable included: 404 on the group/version
            return False
        return True

    def submit(self, manifest: dict[str, Any], *, replace: bool = False,
               dry_run: str | None = None, preflight: bool = True) -> str:
        body = json.loads(json.dumps(manifest))  # a private copy
        self._queue_by_default(body)
        if preflight:
            self.preflight(body)
        md = body.setdefault("metadata", {})
        md["namespace"] = self.namespace
        name = md.get("name")
        if not name:
            raise UsageError("the manifest has no metadata.name")
        # What elastix submits carries its labels whatever the template rendered, so that
        # delete and create --replace can tell it from a JobSet another tool made.
        md["labels"] = {**(md.get("labels") or {}), labels.WORKLOAD: name,
                        labels.MANAGED_BY: labels.MANAGED_BY_VALUE}
        self.fit_to_jobset(body)
        if replace and not dry_run and self.exists(name):
            self.delete(name, wait=True)
        applied: list[head_access.Applied] = []
        sent = False
        try:  # a failed or interrupted submit leaves nothing without an owner
            applied = self._grant_head(body, bool(dry_run))
            try:
                # Held from Ctrl-C while in flight: the API server may make the JobSet whatever
                # the client does, so its answer decides: made, it is the commit point and
                # create reports it; refused, a Ctrl-C then undoes the rest below.
                with interrupts.deferred() as held, \
                        self.tr(f"creating workload {name}", namespace=self.namespace):
                    # Sent once, or again only after the API server's own 429/503 (it made
                    # nothing): elastix.clients.retry.
                    sent = True
                    created = self.ns.request("POST", self.path("jobsets"),
                                              {"dryRun": "All" if dry_run == "server" else None,
                                               "fieldValidation": "Strict"}, body=body)
                    if not dry_run:
                        interrupts.commit(held)
            except ConflictError:  # the head's account is the running workload's: keep it
                if dry_run and replace:
                    return name  # the server decoded and validated it before the old one
                raise AlreadyExists(f"workload {name!r} already exists in namespace "
                                    f"{self.namespace}", hint="pass --replace to delete it and "
                                    "submit again, or choose another name") from None
        except AlreadyExists:
            raise
        except BaseException as err:
            with interrupts.deferred():  # a second Ctrl-C must not cut the undo short
                head_access.after_failed_create(self.ns, name, applied, err, self.notices, sent)
            raise
        head_access.own(self.ns, applied, created, self.notices)
        return name

    def _grant_head(self, body: dict[str, Any], dry_run: bool) -> list[head_access.Applied]:
        """The head's objects (:func:`head_access.apply`; what it made is undone if it fails);
        refused, the head polls instead, with a note."""
        try:
            return head_access.apply(self.ns, body, dry_run)
        except Forbidden as e:
            # The watch only speeds recovery up: a user who may not grant it still gets the
            # workload, with a head that polls (the account it would have named is not made).
            rbac.drop_service_account(body)
            self.notices.append(
                f"the head pod will not watch its worker pods ({e}): it probes lost slices "
                "every 10 s instead, so a replacement slice is seen up to 10 s later; to enable "
                "the watch, ask for create on serviceaccounts, roles and rolebindings in "
                f"namespace {self.namespace}")
            return []

    def exists(self, name: str) -> bool:
        """Whether the workload's JobSet is still there (the log follower asks while waiting).

        Raises:
            ApiUnavailable: the cluster serves no JobSet API at all.
        """
        return self.ns.jobset_exists(name)

    def list(self, selector: Selector | None = None, *,
             every: bool = False) -> list[WorkloadStatus]:
        """elastix's workloads; ``every`` (``list --all``): every Pathways JobSet of the
        namespace, whoever made it (:mod:`.foreign`; others, not Pathways, are left out)."""
        from elastix.backends.gke.foreign import not_pathways
        from elastix.backends.gke.status import object_labels, workload_status

        # By default only elastix's workloads. The API server ANDs the requirements of one
        # selector: the user's narrow it further.
        wanted = ",".join(([] if every else [labels.WORKLOAD])
                          + ([selector.text()] if selector else []))
        jobsets = self.ns.get("listing workloads", "jobsets",
                              query={"labelSelector": wanted or None}).get("items") or []
        jobsets = [js for js in jobsets if not_pathways(js) is None]
        if not jobsets:
            return []
        pods, _ = self.pods(labels.JOBSET_NAME)
        jobs = self.ns.jobs(labels.JOBSET_NAME)
        self._head_logs().note_pods([js["metadata"]["name"] for js in jobsets], pods)

        def mine(objs: list[dict], name: str) -> list[dict]:
            return [o for o in objs if object_labels(o).get(labels.JOBSET_NAME) == name]

        out = [workload_status(js, mine(pods, js["metadata"]["name"]),
                               mine(jobs, js["metadata"]["name"])) for js in jobsets]
        return sorted(out, key=lambda s: (s.created is None, s.created, s.name))

    def status(self, name: str) -> WorkloadStatus:
        from elastix.backends.gke.status import workload_status

        js = self.get_jobset(name)
        sel = f"{labels.JOBSET_NAME}={name}"
        pods, _ = self.pods(sel)
        self._head_logs().note_pods([name], pods)
        events: list[dict] = []
        pending = {p["metadata"]["name"] for p in pods
                   if (p.get("status") or {}).get("phase") == "Pending"}
        if pending:
            events = self.ns.get("reading events", "events", query={
                "fieldSelector": "involvedObject.kind=Pod,type=Warning"}).get("items") or []
            events = [e for e in events if (e.get("involvedObject") or {}).get("name") in pending]
        lost, note = self.lost.of(js)
        out = workload_status(js, pods, self.ns.jobs(sel), events, lost)
        if note:
            out.reasons.append(note)
        from elastix.backends.gke import kueue

        out.queue = kueue.KueueReader(self.ns).status(js)
        if out.queue is not None:
            out.reasons[:0] = kueue.reasons(out.queue)
        return out

    def diagnose(self, name: str) -> dict[str, Any]:
        """See :mod:`elastix.backends.gke.diagnose`."""
        from elastix.backends.gke.diagnose import diagnose

        return diagnose(self.ns, name)

    def _head_logs(self) -> HeadLogReader:
        if self._training is None:
            from elastix.backends.gke.training import HeadLogReader

            self._training = HeadLogReader(self.ns)
        return self._training

    def trainer_events(self, name: str, *, tail: bool = False,
                       cheap: bool = False) -> TrainerEvents | None:
        """The events file at the gs:// URI in the JobSet's annotation when it has one and the
        trainer has written it, else the head pod's log (:mod:`elastix.backends.gke.training`).

        A ``cheap`` read is the head's log only: one request, no list when ``list`` or
        ``status`` just listed the pods, and on a refresh only the lines since the last read.
        """
        if tail or cheap:
            log = self._head_logs().read(name, whole=not tail)
            return None if log is None else TrainerEvents(HEAD_LOG, log.from_start,
                                                          lines=log.lines)
        uri = ((self.get_jobset(name).get("metadata") or {}).get("annotations") or {}).get(
            labels.EVENTS_PATH)
        if uri:
            from elastix.clients.gcs import read_jsonl

            records = read_jsonl(uri)
            if records is not None:  # else not written yet: the head's log may say more
                return TrainerEvents(EVENTS_FILE, True, records=records)
        from elastix.backends.gke.training import whole_log

        log = whole_log(self.ns, name)
        return TrainerEvents(HEAD_LOG, log.from_start, lines=log.lines)

    def logs(self, name: str, opts: LogOptions) -> Iterator[LogEvent]:
        from elastix.backends.gke.logs import stream_logs

        return stream_logs(self.ns, name, opts)

    def kill_worker(self, name: str, *, slice: int | None = None, host: int | None = None,
                    seed: int | None = None, dry_run: bool = False) -> KillRecord:
        """Delete one running worker pod with grace 0 (see :mod:`elastix.backends.gke.faults`)."""
        return self.inject(name, Fault("kill"), slice=slice, host=host, seed=seed,
                           dry_run=dry_run)[0]

    def clone(self, name: str, *, suffix: str = "reference", dry_run: bool = False) -> str:
        """Refused before any request: a copy is a second JobSet, holding as many TPU slices
        as the first for as long as it runs; its user makes it, knowing the cost."""
        raise UsageError(f"the gke backend does not copy workload {name}: a second JobSet "
                         "would hold as many TPU slices as the first",
                         hint=f"create the reference yourself (elastix workload create "
                              f"{name}-ref with {name}'s spec) and pass --reference {name}-ref")

    @classmethod
    def fault_support(cls, fault: Fault) -> str | None:
        from elastix.backends.gke import faults

        return faults.support(fault)

    def inject(self, name: str, fault: Fault, *, slice: int | None = None,
               host: int | None = None, seed: int | None = None,
               dry_run: bool = False) -> list[KillRecord]:
        """Delete the victim's pod(s) through the API server, the kubelet doing the rest:
        grace 0 for ``kill``, ``slice`` (every pod of one slice) and ``head``; the fault's or
        the pod's own grace for ``term`` (returning once the delete is accepted: the kubelet
        SIGKILLs the pod when the grace is over). ``hang`` is refused before any request."""
        from elastix.backends.gke import faults

        why = self.fault_support(fault)
        if why is not None:
            raise UsageError(why, hint="see elastix chaos kill-worker --help for the faults")
        return faults.deliver(self.ns, name, fault, slice=slice, host=host, seed=seed,
                              dry_run=dry_run)

    def delete(self, name: str, *, wait: bool = False, timeout: float = 300.0,
               delete_data: bool = False, foreign: bool = False) -> str | None:
        """Delete the workload's JobSet and its head's account, when elastix made them.

        The JobSet must be a Pathways workload (as for every command) whose labels prove it
        elastix's (:func:`~elastix.workload.labels.elastix_made`), or ``foreign`` (``delete
        --foreign``: the user names one another tool made). Its DELETE carries the uid that
        was read as a precondition: a JobSet replaced in between is a 409, and nothing is
        deleted. The head's ServiceAccount, Role and RoleBinding go only when they are
        elastix's, also when no JobSet is left (a create that failed); a name that matches
        nothing deletes nothing (:mod:`elastix.backends.gke.deletion`). Checkpoints on GKE live
        in the user's bucket (``--checkpoint-dir``): never deleted here.

        Raises:
            UsageError: the JobSet is not a Pathways workload, or not elastix's and not
                ``foreign`` (nothing deleted).
            NotFoundError: no JobSet, and no head object of elastix's (nothing deleted).
            ConflictError: the JobSet was replaced while it was being deleted.
        """
        note, deleted = deletion.delete(self.ns, name, foreign)
        if deleted and wait:
            self.wait_gone(name, timeout)
        return note

    def wait_gone(self, name: str, timeout: float) -> None:
        """Return once the JobSet and every pod labelled with its name are gone."""
        deadline = time.monotonic() + timeout
        sel = f"{labels.JOBSET_NAME}={name}"
        while True:
            pods, rv = self.pods(sel)
            if not pods and not self.exists(name):
                return
            left = deadline - time.monotonic()
            if left <= 0:
                raise BackendError(f"timed out after {timeout:.0f} s waiting for workload {name} "
                                   f"to go ({len(pods)} pods left)",
                                   hint=f"check with: elastix workload status {name}")
            self.wait_pod_change(sel, rv, min(left, 5.0))
