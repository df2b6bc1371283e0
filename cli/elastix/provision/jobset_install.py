"""Install the JobSet controller on a cluster, and report whether (and which version) is there.

The manifest is JobSet's pinned release manifest (``manifests.yaml`` of release
:data:`JOBSET_VERSION`), read from a file or downloaded from the release. elastix does not ship a
copy: see ``templates/JOBSET.md`` for why and for air-gapped use. Objects are applied with
server-side apply through the official ``kubernetes`` client (the JobSet CRD is larger than the
``last-applied-configuration`` annotation client-side apply would need), so a second install is
an idempotent upgrade.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any, TypeVar

from elastix.clients.kube import Http, Translator, api_path
from elastix.errors import BackendError, NotFoundError, UsageError, load_user_yaml

JOBSET_VERSION = "v0.12.0"
RELEASE_URL = (f"https://github.com/kubernetes-sigs/jobset/releases/download/{JOBSET_VERSION}/"
               "manifests.yaml")
CRD_NAME = "jobsets.jobset.x-k8s.io"
NAMESPACE = "jobset-system"
DEPLOYMENT = "jobset-controller-manager"
FIELD_MANAGER = "elastix"
# Server-side apply: the request every object of the manifest gets (create, and --dry-run, say so).
APPLY_METHOD = "PATCH"
APPLY_QUERY = {"fieldManager": FIELD_MANAGER, "force": "true"}
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
CRD_PATH = api_path("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD_NAME)

# Each kind of the release manifest: (plural, namespaced), keyed by (apiVersion, kind); the path
# comes from elastix.clients.kube.api_path. Applying in this order means namespaces and the CRD
# exist before what refers to them, and the webhooks come last, once the Service behind them exists.
_KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("apiextensions.k8s.io/v1", "CustomResourceDefinition"): ("customresourcedefinitions", False),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "Service"): ("services", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration"):
        ("mutatingwebhookconfigurations", False),
    ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration"):
        ("validatingwebhookconfigurations", False),
}


@dataclasses.dataclass(frozen=True)
class ApplyStep:
    """One server-side apply request."""

    kind: str
    name: str
    namespace: str | None
    path: str  # the object's URL path; the request is APPLY_METHOD path?APPLY_QUERY
    body: dict

    def describe(self) -> str:
        """``PATCH <path>?…  (server-side apply of Kind name)``."""
        query = "&".join(f"{k}={v}" for k, v in APPLY_QUERY.items())
        return (f"{APPLY_METHOD} {self.path}?{query}  "
                f"(server-side apply, {self.kind} {self.name})")


@dataclasses.dataclass(frozen=True)
class JobSetStatus:
    """What ``elastix cluster describe`` reports about JobSet."""

    crd_installed: bool
    version: str | None  # from the controller image tag, e.g. "v0.12.0"
    ready_replicas: int  # controller replicas available

    @property
    def installed(self) -> bool:
        """CRD and controller both present."""
        return self.crd_installed and self.version is not None


def read_manifest(source: str | None = None, timeout: float = 60.0) -> list[dict]:
    """Load the release manifest from a file path or an https URL (default: the pinned release).

    Raises:
        UsageError: unreadable, not YAML, or not a JobSet release manifest.
        BackendError: the download failed.
    """
    source = source or RELEASE_URL
    return check_manifest(load_documents(source, "--jobset-manifest", "JobSet", RELEASE_URL,
                                         timeout), source)


def load_documents(source: str, flag: str, what: str, release_url: str,
                   timeout: float = 60.0) -> list:
    """The YAML documents of a release manifest (a file path or an https URL), unchecked.

    Raises:
        UsageError: unreadable or not YAML (the message names ``flag``).
        BackendError: the download failed.
    """
    import yaml

    hint = f"pass {what}'s release manifest, e.g. {release_url}, or a copy of it"
    if source.startswith("https://"):
        import urllib.request

        try:
            with urllib.request.urlopen(source, timeout=timeout) as resp:  # noqa: S310 (https)
                text = _utf8(resp.read(), source, flag, hint)
        except OSError as err:
            raise BackendError(f"cannot download the {what} manifest {source}: {err}",
                               hint=f"download it elsewhere and pass {flag} FILE") from err
    elif "://" in source:
        raise UsageError(f"{flag} {source}: only https:// URLs or file paths",
                         hint=f"e.g. {release_url}")
    else:
        try:
            with open(source, "rb") as f:
                text = _utf8(f.read(), source, flag, hint)
        except OSError as err:
            raise UsageError(f"cannot read {flag} {source}: {err.strerror}",
                             hint=hint) from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml: the CRD alone is 800 kB
    docs = load_user_yaml(text, f"{flag} {source}", hint, too_deep=" to be a manifest",
                          loader=loader, documents=True)
    return [d for d in docs if d]


_MANIFEST_HINT = f"pass JobSet's release manifest, e.g. {RELEASE_URL}, or a copy of it"


def _utf8(data: bytes, source: str, flag: str, hint: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UsageError(f"{flag} {source} is not UTF-8 text (byte {err.start})",
                         hint=hint) from None


def object_words(key: tuple[Any, Any], what: str) -> str:
    """Why a document of (apiVersion, kind) ``key`` is refused from ``what``'s release
    manifest, in words: a YAML mapping with neither is no Kubernetes object."""
    api, kind = key
    if api is None and kind is None:
        return (f"a document without apiVersion and kind (no Kubernetes object) is not part of "
                f"a {what} release manifest")
    return f"unexpected object {str(kind)[:60]} {str(api)[:60]} in a {what} manifest"


def check_manifest(docs: list[dict], source: str) -> list[dict]:
    """Check the documents form a JobSet release manifest of kinds elastix knows how to apply."""
    kinds = set()
    for d in docs:
        if not isinstance(d, dict):
            raise UsageError(f"{source}: a document is a {type(d).__name__}, not a Kubernetes "
                             "object: not a JobSet release manifest", hint=_MANIFEST_HINT)
        key = (d.get("apiVersion"), d.get("kind"))
        meta = d.get("metadata")
        if key not in _KINDS or not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise UsageError(f"{source}: {object_words(key, 'JobSet')}",
                             hint=f"use the release manifest of JobSet, e.g. {RELEASE_URL}")
        kinds.add((d["kind"], d["metadata"]["name"]))
    for need in (("CustomResourceDefinition", CRD_NAME), ("Deployment", DEPLOYMENT)):
        if need not in kinds:
            raise UsageError(f"{source} has no {need[0]} {need[1]}: not a JobSet release manifest",
                             hint=f"use {RELEASE_URL}")
    return docs


def plan(docs: list[dict],
         kinds: dict[tuple[str, str], tuple[str, bool]] | None = None) -> list[ApplyStep]:
    """The apply requests for a manifest, in dependency order (``kinds``: the kinds a manifest
    may hold, in the order to apply them; default: JobSet's)."""
    kinds = kinds or _KINDS
    order = {key: i for i, key in enumerate(kinds)}
    steps = []
    for d in sorted(docs, key=lambda d: order[(d["apiVersion"], d["kind"])]):
        plural, namespaced = kinds[(d["apiVersion"], d["kind"])]
        meta = d["metadata"]
        ns = meta.get("namespace") or ("default" if namespaced else None)
        path = api_path(d["apiVersion"], plural, meta["name"], ns)
        steps.append(ApplyStep(d["kind"], meta["name"], ns, path, d))
    return steps


def dry_run_lines(source: str | None = None) -> list[str]:
    """The requests ``cluster create`` makes to install JobSet, one line each, for ``--dry-run``
    (a file manifest is read and planned; a URL summed up: :func:`release_lines`)."""
    return [f"GET {CRD_PATH} (on the new cluster; install JobSet only if missing)",
            *release_lines(source or RELEASE_URL, lambda src: plan(read_manifest(src)))]


def release_lines(source: str, plan_file: Callable[[str], list[ApplyStep]]) -> list[str]:
    """A release manifest's apply requests, one line each, for ``--dry-run`` (JobSet's, and
    Kueue's with its own ``plan_file``): a URL is not downloaded in a dry run, so its objects
    are summed up in one line."""
    if source.startswith("https://"):
        return [f"GET {source}", f"{APPLY_METHOD} each object of it (server-side apply, "
                                 f"fieldManager={FIELD_MANAGER})"]
    return [step.describe() for step in plan_file(source)]


def apply(api: Any, where: str, steps: list[ApplyStep],
          on_step: Callable[[ApplyStep], None] = lambda s: None) -> None:
    """Server-side apply every step (creates what is missing, updates what differs).

    Raises:
        BackendError: the API server refused an object (translated, with a hint).
    """
    http, tr = Http(api), Translator(where)
    for step in steps:
        on_step(step)
        with tr(f"applying {step.kind} {step.name}", name=step.name, kind=step.kind,
                namespace=step.namespace):
            http.request(APPLY_METHOD, step.path, APPLY_QUERY, body=step.body,
                         content_type=APPLY_CONTENT_TYPE)


def status(api: Any, where: str) -> JobSetStatus:
    """Whether the JobSet CRD and controller are installed, and the controller's version."""
    http, tr = Http(api), Translator(where)

    def get(path: str) -> dict | None:
        try:
            with tr("reading JobSet installation"):
                return http.request("GET", path)
        except NotFoundError:  # "not installed"
            return None

    crd = get(CRD_PATH)
    dep = get(api_path("apps/v1", "deployments", DEPLOYMENT, NAMESPACE))
    ready = int((dep or {}).get("status", {}).get("availableReplicas") or 0)
    return JobSetStatus(crd is not None, _image_version(dep) if dep else None, ready)


S = TypeVar("S")
"""A controller's status, as :func:`wait_available` reads it."""


def wait_ready(api: Any, where: str, timeout: float = 300.0, interval: float = 2.0,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> JobSetStatus:
    """Wait until the controller Deployment has an available replica.

    Raises:
        BackendError: not ready within ``timeout`` seconds.
    """
    return wait_available(lambda: status(api, where), "the JobSet controller", where,
                          f"look at its pods: kubectl -n {NAMESPACE} get pods; "
                          f"kubectl -n {NAMESPACE} describe deployment {DEPLOYMENT}",
                          timeout, interval, clock, sleep)


def wait_available(read: Callable[[], S], what: str, where: str, hint: str, timeout: float,
                   interval: float, clock: Callable[[], float],
                   sleep: Callable[[float], None]) -> S:
    """Poll ``read`` (a controller's status) until it is installed with an available replica;
    JobSet's and Kueue's installs both wait so.

    Raises:
        BackendError: not ready within ``timeout`` seconds ("``what`` is not ready", ``hint``).
    """
    deadline = clock() + timeout
    while True:
        st = read()
        if st.installed and st.ready_replicas > 0:
            return st
        if clock() >= deadline:
            raise BackendError(f"{what} is not ready after {timeout:.0f} s ({where})", hint=hint)
        sleep(interval)


def _image_version(dep: dict) -> str | None:
    for c in dep.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        image = c.get("image", "")
        ref = image.split("@", 1)[0]
        if ":" in ref.rsplit("/", 1)[-1]:
            return ref.rsplit(":", 1)[1]
        return "unknown"
    return None

