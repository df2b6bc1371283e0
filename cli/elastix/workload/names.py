"""Every name Kubernetes and JobSet derive from a workload's name, and the longest name that fits.

A JobSet's name does not stay where it was written. JobSet v0.12.0 builds Job names, pod names,
hostnames, a headless Service and the coordinator label from it, and Kubernetes holds each of
those to a DNS or label rule. :func:`derived` lists them for a rendered manifest (ours or a
user's ``--template``); :func:`check` refuses a manifest whose name makes any of them too long,
with the longest name that would fit, computed from the manifest itself, not a constant.

Sources (read, not copied; the rules are re-stated here):
- kubernetes-sigs/jobset v0.12.0 (f22e565): ``pkg/webhooks/jobset_webhook.go`` ``ValidateCreate``
  (job names and pod names with a 5-character suffix must be DNS-1035 labels, L234-256; the
  subdomain a DNS-1123 subdomain and a DNS-1035 label, L182-198; group names DNS-1035, L227-233;
  the coordinator label value a label value, ``validateCoordinatorLabelValue`` L526-533;
  a volume claim's PVC ``<claim>-<jobset>`` at most 63 characters, L560-567, named by
  ``pkg/controllers/volume_claim_policy.go`` ``GeneratePVCName``);
  ``pkg/util/placement/placement.go`` ``GenJobName`` / ``GenPodName``;
  ``pkg/controllers/jobset_controller.go`` ``CoordinatorEndpoint`` (L1373,
  ``<jobset>-<rjob>-<jobIndex>-<podIndex>.<subdomain>``), ``GetSubdomain`` (L1090, the JobSet
  name unless ``network.subdomain``), ``createHeadlessSvcIfNecessary`` (a Service named after the
  subdomain), ``labelAndAnnotateObject`` (the JobSet and replicated job names as label values on
  every Job and pod).
- kubernetes/apimachinery v0.36.0 (the version JobSet v0.12.0 builds with):
  ``pkg/util/validation/validation.go`` (``IsDNS1123Label``, ``IsDNS1123Subdomain``,
  ``IsDNS1035Label``: 63, 253 and 63 characters), ``pkg/api/validate/content/kube.go``
  (``IsLabelValue``: 63 characters), ``pkg/api/validation/objectmeta.go`` (annotations: 256 KiB
  in total).
- kubernetes/apiextensions-apiserver v0.36.0 ``pkg/registry/customresource/validator.go``: a
  custom resource's name is a DNS-1123 subdomain.
- kubernetes/kubernetes ``pkg/controller/job/job_controller.go`` (an Indexed Job's pod hostname
  is ``<job>-<index>``, its generateName ``<job>-<index>-``) and
  ``pkg/apis/batch/validation/validation.go`` ``ValidateJob`` (``<job>-<completions-1>`` must be
  a DNS-1123 label); ``pkg/apis/core/validation`` (Service names are DNS-1035 labels, a pod's
  hostname and subdomain DNS-1123 labels, ServiceAccount names DNS-1123 subdomains). Read through
  the code search, not pinned to a tag.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from elastix.errors import ManifestError, SpecError
from elastix.workload import rbac

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")
ANNOTATIONS_LIMIT = 256 * 1024

# rule -> (maximum length, pattern, what it is called in Kubernetes' messages)
RULES: dict[str, tuple[int, re.Pattern[str], str]] = {
    "dns1123-label": (63, _DNS1123_LABEL, "a DNS-1123 label"),
    "dns1123-subdomain": (253, _DNS1123_SUBDOMAIN, "a DNS-1123 subdomain"),
    "dns1035-label": (63, _DNS1035_LABEL, "a DNS-1035 label"),
    "label-value": (63, _LABEL_VALUE, "a label value"),
    "path-segment": (10**9, re.compile(r"^(?!\.\.?\Z)[^/%]+\Z"), "a path segment name"),
    "annotations": (ANNOTATIONS_LIMIT, re.compile(r"(?s).*"), "at most 256 KiB of annotations"),
    "pvc-name": (63, _DNS1123_SUBDOMAIN, "a DNS-1123 subdomain of at most 63 characters"),
}
POD_SUFFIX = "-abcde"
"""The 5 random characters the Job controller adds to a pod's name, as JobSet's webhook counts
them (``GenPodName(...) + "-abcde"``)."""


@dataclasses.dataclass(frozen=True)
class Derived:
    """One name (or value) built from the workload's name, and the rule it must satisfy."""

    what: str
    """What it is, e.g. ``pod name of worker``: the same across renders of other names."""
    value: str
    rule: str
    """A key of :data:`RULES`."""
    authority: str
    """Who refuses it: ``JobSet`` (the webhook) or ``Kubernetes`` (the API server)."""

    def problem(self) -> str | None:
        """Why the value breaks its rule (None when it fits)."""
        limit, pattern, called = RULES[self.rule]
        if len(self.value) > limit:
            return f"must be no more than {limit} characters"
        if not pattern.match(self.value):
            return f"is not {called}"
        return None


def derived(manifest: dict[str, Any]) -> list[Derived]:
    """Every name Kubernetes and JobSet derive from the manifest's JobSet name."""
    md = manifest.get("metadata") or {}
    js = str(md.get("name") or "")
    spec = manifest.get("spec") or {}
    network = spec.get("network") or {}
    subdomain = network.get("subdomain") or js
    hostnames = network.get("enableDNSHostnames", True) is not False  # the webhook's default
    out = [Derived("JobSet name", js, "dns1123-subdomain", "Kubernetes"),
           Derived("label jobset.sigs.k8s.io/jobset-name on every Job and pod", js,
                   "label-value", "JobSet")]
    out += _meta("JobSet", md)
    if network.get("subdomain"):
        out += [Derived("network.subdomain", subdomain, "dns1123-subdomain", "JobSet"),
                Derived("network.subdomain", subdomain, "dns1035-label", "JobSet")]
    if hostnames:
        out += [Derived("headless Service name", subdomain, "dns1035-label", "Kubernetes"),
                Derived("pod subdomain", subdomain, "dns1123-label", "Kubernetes")]
    for rj in spec.get("replicatedJobs") or []:
        out += _replicated_job(js, rj)
    coord = spec.get("coordinator")
    if coord:
        endpoint = (f"{js}-{coord.get('replicatedJob', '')}-{coord.get('jobIndex', 0)}-"
                    f"{coord.get('podIndex', 0)}.{subdomain}")
        out.append(Derived("the coordinator label (jobset.sigs.k8s.io/coordinator)", endpoint,
                           "label-value", "JobSet"))
    for policy in spec.get("volumeClaimPolicies") or []:  # controllers GeneratePVCName
        for tmpl in policy.get("templates") or []:
            claim = (tmpl.get("metadata") or {}).get("name") or ""
            out.append(Derived(f"PVC name of volume claim {claim}", f"{claim}-{js}", "pvc-name",
                               "JobSet"))
    head = rbac.wanted(manifest)
    if head is not None:
        for _, _, obj in rbac.objects(head, md.get("namespace") or "default"):
            kind = obj["kind"]
            out.append(Derived(f"{kind} name", obj["metadata"]["name"],
                               "dns1123-subdomain" if kind == "ServiceAccount" else "path-segment",
                               "Kubernetes"))
            out += _meta(kind, obj["metadata"])
    return out


def _replicated_job(js: str, rj: dict[str, Any]) -> list[Derived]:
    """The longest Job name, pod name and hostname of one replicated job, and its labels."""
    name = str(rj.get("name") or "")
    job_spec = (rj.get("template") or {}).get("spec") or {}
    last_job = f"{js}-{name}-{max(int(rj.get('replicas', 1)), 1) - 1}"
    out = [Derived(f"Job name of {name}", last_job, "dns1035-label", "JobSet"),
           Derived(f"label jobset.sigs.k8s.io/replicatedjob-name of {name}", name,
                   "label-value", "JobSet"),
           Derived(f"label batch.kubernetes.io/job-name of {name}", last_job, "label-value",
                   "Kubernetes"),
           Derived(f"groupName of {name}", str(rj.get("groupName", "default")),
                   "dns1035-label", "JobSet")]
    completions = job_spec.get("completions")
    if job_spec.get("completionMode", "Indexed") == "Indexed" and completions:
        last_pod = f"{last_job}-{int(completions) - 1}"
        out += [Derived(f"pod name of {name}", last_pod + POD_SUFFIX, "dns1035-label", "JobSet"),
                Derived(f"pod hostname of {name}", last_pod, "dns1123-label", "Kubernetes")]
    out += _meta(f"pod template of {name}", (job_spec.get("template") or {}).get("metadata"))
    return out


def _meta(where: str, md: dict[str, Any] | None) -> list[Derived]:
    """Label values and the annotations' total size of one object's metadata."""
    md = md or {}
    out = [Derived(f"label {k} of the {where}", str(v), "label-value", "Kubernetes")
           for k, v in (md.get("labels") or {}).items()]
    annotations = md.get("annotations") or {}
    if annotations:  # the rule counts every key's and value's characters together
        out.append(Derived(f"annotations of the {where}",
                           "".join(f"{k}{v}" for k, v in annotations.items()), "annotations",
                           "Kubernetes"))
    return out


def problems(manifest: dict[str, Any]) -> list[tuple[Derived, str]]:
    """The derived names that break their rule, each with why."""
    return [(d, p) for d in derived(manifest) if (p := d.problem()) is not None]


@dataclasses.dataclass(frozen=True)
class Limit:
    """The longest workload name a manifest allows, and the derived name that sets it."""

    length: int
    binding: Derived
    slope: int
    """How many characters the binding name grows per character of the workload name."""
    offset: int
    """Its length with an empty workload name: ``slope * n + offset`` characters."""

    def formula(self) -> str:
        a = "n" if self.slope == 1 else f"{self.slope}n"
        return f"{a}+{self.offset}" if self.offset >= 0 else f"{a}{self.offset}"


def name_limit(render_named: Callable[[str], dict[str, Any]]) -> Limit | None:
    """The longest name for which :func:`problems` is empty, from two renders of probe names.

    Every derived name is the workload name written ``slope`` times with fixed text around it,
    so its length is ``slope * n + offset``: two probe names give both. A third render checks
    the answer. None when even a one-character name breaks a rule (the name is not the cause).
    """
    one, two = (_lengths(render_named(_probe(n))) for n in (1, 2))
    best: Limit | None = None
    for key, (d, length1) in one.items():
        slope = two[key][1] - length1 if key in two else 0
        if slope <= 0:
            continue
        offset = length1 - slope
        fits = (RULES[d.rule][0] - offset) // slope
        if best is None or fits < best.length:
            best = Limit(fits, d, slope, offset)
    if best is None or best.length < 1 or problems(render_named(_probe(best.length))):
        return None
    return best


def _probe(n: int) -> str:
    return "a" * n


def _lengths(manifest: dict[str, Any]) -> dict[tuple[str, str], tuple[Derived, int]]:
    return {(d.what, d.rule): (d, len(d.value)) for d in derived(manifest)}


def check(manifest: dict[str, Any], render_named: Callable[[str], dict[str, Any]]) -> None:
    """Refuse a manifest whose workload name makes a derived name break Kubernetes' or JobSet's
    rules, before anything is sent.

    Args:
        manifest: the rendered JobSet.
        render_named: renders the same spec and template with another workload name (to find
            the longest name that fits; called only when this one does not).

    Raises:
        SpecError: the name is too long (field ``name``): says which derived name, its length
            as a formula of n, the rule, and the longest name that fits.
        ManifestError: a derived name breaks a rule whatever the name's length.
    """
    found = problems(manifest)
    if not found:
        return
    name = str((manifest.get("metadata") or {}).get("name") or "")
    limit = name_limit(render_named)
    if limit is None or len(name) <= limit.length:
        d, why = found[0]
        shown = d.value if len(d.value) <= 80 else d.value[:77] + "..."
        raise ManifestError(f"the manifest would be refused: {d.what} {shown!r} {why} "
                            f"({d.authority} requires {RULES[d.rule][2]})",
                            hint="fix the template or the value that makes it")
    d = next((x for x in derived(manifest) if (x.what, x.rule) == (limit.binding.what,
                                                                    limit.binding.rule)),
             limit.binding)
    pattern = d.value if len(name) < 3 else d.value.replace(name, "<name>")
    raise SpecError([("name", f"{name!r} is {len(name)} characters: {d.what} {pattern!r} is "
                              f"{limit.formula()} characters; {d.authority} requires <= "
                              f"{RULES[d.rule][0]}: use at most {limit.length} characters",
                      f"e.g. {name[:limit.length].rstrip('-')!r}")])


def companion_name(name: str, suffix: str, fits: Callable[[str], bool]) -> str | None:
    """A name for a workload made beside ``name`` (``chaos run --verify``'s reference):
    ``<name>-<suffix>``, else ``<name>-<suffix[:3]>``, else ``name`` cut short with 4 hex
    digits of its hash (two long names that share a prefix still get two names), the first
    that is a DNS label and ``fits`` (the copied manifest's derived names all keep their
    rules). None when none does."""
    import hashlib

    short = suffix[:3]
    tag = hashlib.sha1(name.encode()).hexdigest()[:4]
    candidates = [f"{name}-{suffix}", f"{name}-{short}"]
    candidates += [f"{name[:k].rstrip('-')}-{tag}-{short}" for k in range(len(name) - 1, 0, -1)]
    return next((c for c in candidates if _DNS1123_LABEL.match(c) and fits(c)), None)
