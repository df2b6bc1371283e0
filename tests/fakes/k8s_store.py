"""In-memory object store of the fake Kubernetes API server: resources, selectors, watches.

Single-threaded (asyncio): every mutation goes through ``Store.put``/``Store.remove``, which bump
the global resourceVersion, record a watch event and wake the watchers and the controllers.
"""

from __future__ import annotations

import asyncio
import collections
import copy
import dataclasses
import datetime as dt
import re
import uuid
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class Resource:
    """One API resource type (what discovery lists)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    schema: Any = None  # openAPIV3Schema for custom resources (strict field validation)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


_BUILTIN = [
    # (group, version, plural, kind, namespaced, short names)
    ("", "v1", "pods", "Pod", True, ("po",)),
    ("", "v1", "services", "Service", True, ("svc",)),
    ("", "v1", "namespaces", "Namespace", False, ("ns",)),
    ("", "v1", "nodes", "Node", False, ("no",)),
    ("", "v1", "configmaps", "ConfigMap", True, ("cm",)),
    ("", "v1", "secrets", "Secret", True, ()),
    ("", "v1", "serviceaccounts", "ServiceAccount", True, ("sa",)),
    ("", "v1", "events", "Event", True, ("ev",)),
    ("", "v1", "endpoints", "Endpoints", True, ("ep",)),
    ("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("pvc",)),
    ("", "v1", "resourcequotas", "ResourceQuota", True, ("quota",)),
    ("", "v1", "limitranges", "LimitRange", True, ("limits",)),
    ("apps", "v1", "deployments", "Deployment", True, ("deploy",)),
    ("apps", "v1", "statefulsets", "StatefulSet", True, ("sts",)),
    ("apps", "v1", "daemonsets", "DaemonSet", True, ("ds",)),
    ("apps", "v1", "replicasets", "ReplicaSet", True, ("rs",)),
    ("batch", "v1", "jobs", "Job", True, ()),
    ("batch", "v1", "cronjobs", "CronJob", True, ("cj",)),
    ("rbac.authorization.k8s.io", "v1", "roles", "Role", True, ()),
    ("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, ()),
    ("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, ()),
    ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, ()),
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
        (),
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
        (),
    ),
    (
        "apiextensions.k8s.io",
        "v1",
        "customresourcedefinitions",
        "CustomResourceDefinition",
        False,
        ("crd", "crds"),
    ),
    ("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, ("pc",)),
    ("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("pdb",)),
    ("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, ("netpol",)),
    ("coordination.k8s.io", "v1", "leases", "Lease", True, ()),
    ("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, ("sc",)),
    # what Kueue's release manifest registers for its visibility API (k8s_kueue)
    ("apiregistration.k8s.io", "v1", "apiservices", "APIService", False, ()),
    ("flowcontrol.apiserver.k8s.io", "v1", "flowschemas", "FlowSchema", False, ()),
    ("flowcontrol.apiserver.k8s.io", "v1", "prioritylevelconfigurations",
     "PriorityLevelConfiguration", False, ()),
]


def is_builtin(res: Resource) -> bool:
    """A resource the API server itself serves (not a custom resource)."""
    return any((g, p) == (res.group, res.plural) for g, _, p, *_ in _BUILTIN)


def now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def ts(t: dt.datetime | None = None) -> str:
    """RFC 3339 seconds, as Kubernetes writes metadata timestamps."""
    return (t or now()).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- selectors ----------------------------------------------------------------------------------

_SET_RE = re.compile(
    r"^\s*(!?)([\w./-]+)\s*(?:(in|notin)\s*\(([^)]*)\)|(==|=|!=)\s*([\w./-]*))?\s*$"
)


_TOP_COMMA = re.compile(r",(?![^()]*\))")
"""A comma outside a set's ``( )``: no ``)`` ahead of it before a ``(``. A regular expression,
where elastix's own parser (``elastix.workload.selector``) counts parentheses, so that the fake
API server never shares a bug with the code under test."""


def _split_selector(text: str) -> list[str]:
    return [p for p in _TOP_COMMA.split(text) if p.strip()]


def label_matcher(text: str | None) -> Callable[[dict], bool]:
    """A predicate for a label selector (``a=b,c!=d,e in (f,g),!h,i``). Raises ValueError."""
    if not text:
        return lambda labels: True
    reqs = []
    for part in _split_selector(text):
        m = _SET_RE.match(part)
        if not m:
            raise ValueError(f"unable to parse requirement: {part!r}")
        neg, key, setop, setvals, op, val = m.groups()
        reqs.append((neg, key, setop, [v.strip() for v in (setvals or "").split(",")], op, val))

    def match(labels: dict) -> bool:
        for neg, key, setop, setvals, op, val in reqs:
            have = labels.get(key)
            if setop == "in" and have not in setvals:
                return False
            if setop == "notin" and have in setvals:
                return False
            if op in ("=", "==") and have != val:
                return False
            if op == "!=" and have == val:
                return False
            if not setop and not op and (key in labels) == bool(neg):
                return False
        return True

    return match


def field_matcher(text: str | None) -> Callable[[dict], bool]:
    """A predicate for a field selector (``metadata.name=x,status.phase!=Running``)."""
    if not text:
        return lambda obj: True
    reqs = []
    for part in text.split(","):
        m = re.match(r"^\s*([\w.]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise ValueError(f"invalid field selector: {part!r}")
        reqs.append(m.groups())

    def get(obj: dict, path: str) -> str:
        cur: Any = obj
        for k in path.split("."):
            cur = cur.get(k) if isinstance(cur, dict) else None
        return "" if cur is None else str(cur)

    def match(obj: dict) -> bool:
        for path, op, val in reqs:
            if (get(obj, path) == val) != (op != "!="):
                return False
        return True

    return match


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch (also used for strategic-merge and apply patches)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# --- the store ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Watcher:
    res: Resource
    namespace: str | None
    labels: Callable[[dict], bool]
    fields: Callable[[dict], bool]
    queue: asyncio.Queue

    def wants(self, res: Resource, obj: dict) -> bool:
        md = obj.get("metadata", {})
        return (
            (res.group, res.plural) == (self.res.group, self.res.plural)
            and (self.namespace is None or md.get("namespace") == self.namespace)
            and self.labels(md.get("labels") or {})
            and self.fields(obj)
        )


class Store:
    """Objects by (group, plural) and (namespace, name); a bounded event history for watches."""

    def __init__(self) -> None:
        self.resources: dict[tuple[str, str, str], Resource] = {}
        for g, v, p, k, ns, short in _BUILTIN:
            self.register(Resource(g, v, p, k, ns, short))
        self.objects: dict[tuple[str, str], dict[tuple[str, str], dict]] = collections.defaultdict(
            dict
        )
        self.rv = 1
        self.history: collections.deque = collections.deque(maxlen=20000)
        self.watchers: list[Watcher] = []
        self.listeners: list[Callable[[str, Resource, dict], None]] = []
        for ns in ("default", "kube-system", "kube-public"):
            self.put(
                self.resource("", "v1", "namespaces"),
                {
                    "apiVersion": "v1",
                    "kind": "Namespace",
                    "metadata": {"name": ns},
                    "status": {"phase": "Active"},
                },
            )

    # registry
    def register(self, res: Resource) -> None:
        self.resources[(res.group, res.version, res.plural)] = res

    def unregister(self, group: str, plural: str) -> None:
        for key in [k for k in self.resources if (k[0], k[2]) == (group, plural)]:
            del self.resources[key]
        self.objects.pop((group, plural), None)

    def resource(self, group: str, version: str, plural: str) -> Resource | None:
        return self.resources.get((group, version, plural))

    def group_versions(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for g, v, _ in self.resources:
            if v not in out.setdefault(g, []):
                out[g].append(v)
        return out

    # reads
    def get(self, res: Resource, namespace: str | None, name: str) -> dict | None:
        return self.objects[(res.group, res.plural)].get((namespace or "", name))

    def list(
        self,
        res: Resource,
        namespace: str | None = None,
        labels: str | None = None,
        fields: str | None = None,
    ) -> list[dict]:
        lm, fm = label_matcher(labels), field_matcher(fields)
        out = []
        for (ns, _), obj in sorted(self.objects[(res.group, res.plural)].items()):
            if namespace is not None and ns != namespace:
                continue
            if lm(obj["metadata"].get("labels") or {}) and fm(obj):
                out.append(obj)
        return out

    # writes
    def new_meta(self, obj: dict, namespace: str | None) -> None:
        md = obj.setdefault("metadata", {})
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + uuid.uuid4().hex[:5]
        if namespace:
            md["namespace"] = namespace
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = ts()
        md["generation"] = 1

    def put(self, res: Resource, obj: dict, event: str | None = None) -> dict:
        """Create or replace ``obj``; returns the stored object."""
        md = obj["metadata"]
        key = (md.get("namespace", "") if res.namespaced else "", md["name"])
        bucket = self.objects[(res.group, res.plural)]
        if event is None:
            event = "MODIFIED" if key in bucket else "ADDED"
        if event == "ADDED" and "uid" not in md:
            self.new_meta(obj, md.get("namespace") if res.namespaced else None)
        obj.setdefault("apiVersion", res.api_version)
        obj.setdefault("kind", res.kind)
        self.rv += 1
        md["resourceVersion"] = str(self.rv)
        bucket[key] = obj
        self._emit(event, res, obj)
        return obj

    def remove(self, res: Resource, namespace: str | None, name: str) -> dict | None:
        obj = self.objects[(res.group, res.plural)].pop((namespace or "", name), None)
        if obj is not None:
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self._emit("DELETED", res, obj)
        return obj

    def _emit(self, event: str, res: Resource, obj: dict) -> None:
        snap = copy.deepcopy(obj)
        self.history.append((self.rv, event, res, snap))
        for w in list(self.watchers):
            if w.wants(res, snap):
                w.queue.put_nowait((event, snap))
        for listener in list(self.listeners):
            listener(event, res, snap)

    def events_since(self, rv: int) -> list | None:
        """History after ``rv``, or None when it is older than what is kept (410 Gone)."""
        if self.history and rv < self.history[0][0] - 1:
            return None
        return [h for h in self.history if h[0] > rv]
