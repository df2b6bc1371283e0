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
from elastix.errors import NotFoundError

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
        """The workload's JobSet. Raises NotFoundError (ApiUnavailable: no JobSet API)."""
        return self.get(f"reading workload {name}", "jobsets", name)

    def jobset_exists(self, name: str) -> bool:
        """Whether the JobSet is there.

        Raises:
            ApiUnavailable: the cluster serves no JobSet API at all.
        """
        try:
            self.jobset(name)
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
