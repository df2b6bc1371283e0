"""One namespace of the Kubernetes API: the handle the GKE backend's readers share.

As kr8s's resource classes hold their ``api``, the log streamer (:mod:`elastix.backends.gke.
logs`) and the head's training log (:mod:`elastix.backends.gke.training`) take a
:class:`Namespace`, which owns the HTTP client, the error translator and the namespace, and
reads JobSets and pods; :class:`~elastix.backends.gke.backend.GKEBackend` builds one and
delegates to it. So those modules never reach back into the backend, and the package's imports
go one way.
"""

from __future__ import annotations

from typing import Any

from elastix.clients.kube import (
    JOBSET_GROUP,
    JOBSET_PLURAL,
    JOBSET_VERSION,
    ApiUnavailable,
    Http,
    Translator,
    api_path,
    close_stream,
)
from elastix.errors import ElastixError, NotFoundError, UsageError

TIMEOUT = (10.0, 20.0)  # (connect, read) seconds for ordinary requests: an API server
# answers a GET, a create or a delete in well under a second; 20 s of silence is already a fault.

_API_VERSIONS = {"pods": "v1", "events": "v1", "jobs": "batch/v1",
                 "jobsets": f"{JOBSET_GROUP}/{JOBSET_VERSION}"}


class Namespace:
    """Requests to one namespace, each bounded by :data:`TIMEOUT` unless it names its own, and
    every API error translated (``elastix.clients.kube.Translator``)."""

    def __init__(self, http: Http, namespace: str, tr: Translator) -> None:
        self.http = http
        self.name = namespace
        self.tr = tr
        self._read: set[str] = set()  # JobSets read once: gone later means deleted

    def path(self, kind: str, name: str | None = None, sub: str | None = None) -> str:
        """API path of a namespaced collection or object: kind is pods, jobs, events, jobsets."""
        plural = JOBSET_PLURAL if kind == "jobsets" else kind
        return api_path(_API_VERSIONS[kind], plural, name, self.name, sub)

    def request(self, method: str, path: str, query: dict | None = None, *,
                body: Any = None, stream: bool = False, timeout: Any = None,
                content_type: str = "application/json") -> Any:
        """One request (errors are the caller's to translate: it knows what was being done)."""
        return self.http.request(method, path, query, body=body, stream=stream,
                                 timeout=TIMEOUT if timeout is None else timeout,
                                 content_type=content_type)

    def get(self, what: str, kind: str, name: str | None = None,
            query: dict | None = None) -> Any:
        """GET an object or collection of this namespace, errors translated for ``what``."""
        with self.tr(what, namespace=self.name):
            return self.request("GET", self.path(kind, name), query)

    def jobset(self, name: str) -> dict:
        """The workload's JobSet, whoever made it, once it is seen to be a Pathways workload
        (:mod:`elastix.backends.gke.foreign`).

        Raises:
            NotFoundError: no JobSet of that name here or in any namespace the credentials
                may list (ApiUnavailable: no JobSet API).
            UsageError: it is not a Pathways workload; or it is not here but in another
                namespace (or several): the namespace to pass is named.
        """
        from elastix.backends.gke import foreign

        try:
            js = self.get(f"reading workload {name}", "jobsets", name)
        except ApiUnavailable:
            raise
        except NotFoundError:
            if name in self._read:  # it was here: deleted since, not misnamed
                raise
            others = self._elsewhere(name)
            if len(others) == 1:
                raise UsageError(f"workload {name} is not in namespace {self.name}: it is in "
                                 f"namespace {others[0]}", hint=f"pass -n {others[0]}") from None
            if others:
                raise UsageError(f"workload {name} is not in namespace {self.name}, and "
                                 f"namespaces {', '.join(others)} each have one",
                                 hint="pass -n NAMESPACE to say which") from None
            raise
        why = foreign.not_pathways(js)
        if why is not None:
            raise UsageError(f"JobSet {name} in namespace {self.name} is not a Pathways "
                             f"workload: {why}", hint=foreign.PATHWAYS_SHAPE)
        self._read.add(name)
        return js

    def _elsewhere(self, name: str) -> list[str]:
        """The other namespaces with a JobSet called ``name`` (one list across the cluster);
        [] when there is none, or the credentials may not list JobSets cluster-wide."""
        from elastix.backends.gke import foreign

        try:
            with self.tr(f"looking for workload {name} in other namespaces"):
                out = self.request("GET", api_path(f"{JOBSET_GROUP}/{JOBSET_VERSION}",
                                                   JOBSET_PLURAL),
                                   {"fieldSelector": f"metadata.name={name}"})
        except ElastixError:  # 403 (a namespaced identity) or anything else: not known
            return []
        return foreign.elsewhere(out.get("items") or [], self.name)

    def jobset_exists(self, name: str) -> bool:
        """Whether the JobSet is there (of any shape: delete removes what it names).

        Raises:
            ApiUnavailable: the cluster serves no JobSet API at all.
        """
        try:
            self.get(f"reading workload {name}", "jobsets", name)
        except ApiUnavailable:
            raise  # no JobSet API at all is not "no such workload"
        except NotFoundError:
            return False
        return True

    def pods(self, selector: str) -> tuple[list[dict], str]:
        """Pods matching a label selector, and the list's resourceVersion (to watch from)."""
        out = self.get("listing pods", "pods", query={"labelSelector": selector})
        return out.get("items") or [], (out.get("metadata") or {}).get("resourceVersion", "")

    def jobs(self, selector: str) -> list[dict]:
        """Jobs matching a label selector."""
        return self.get("listing jobs", "jobs", query={"labelSelector": selector}).get(
            "items") or []

    def wait_pod_change(self, selector: str, rv: str, timeout: float) -> None:
        """Block until a pod matching ``selector`` changes after ``rv``, or ``timeout`` passes."""
        with self.tr("watching pods", namespace=self.name):
            resp = self.request(
                "GET", self.path("pods"),
                {"labelSelector": selector, "watch": True, "resourceVersion": rv or None,
                 "timeoutSeconds": max(1, int(timeout))},
                stream=True, timeout=(TIMEOUT[0], timeout + 10))
            try:
                resp.readline()  # the first event (or the server closing the watch) is enough
            finally:
                close_stream(resp)
