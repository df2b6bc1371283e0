"""What the fake API server refuses at admission: Kubernetes' name and label rules, the JobSet
CRD's CEL rules and the JobSet v0.12.0 validating webhook.

Written from the sources, independently of elastix's own checks (``elastix.workload.names``), so
that a test comparing the two can fail. Each rule carries the id it has in
``tests/fixtures/jobset_webhook_rules.json``, where its source (repo, path, version, lines) is
recorded; the rule functions below cite it too.

How the real server answers, and so this fake (kubernetes/apiserver v0.36.0
``pkg/registry/generic/registry/store.go`` ``Create``: strategy validation at L509, validating
admission at L515, storage after):
- a field error of the API server itself: 422, reason ``Invalid``, message
  ``KIND "NAME" is invalid: CAUSES`` (apimachinery v0.36.0 ``pkg/api/errors/errors.go``
  ``NewInvalid``; ``KIND`` is ``Kind.group`` for a custom resource);
- a JobSet the webhook refuses: the webhook returns ``apierrors.NewInvalid`` (jobset_webhook.go
  ``invalidError``), controller-runtime v0.24.0 answers with that status
  (``validator_custom.go`` L145-149), and the API server keeps its code and reason and prefixes
  the message with ``admission webhook "vjobset.kb.io" denied the request: `` (apiserver
  v0.36.0 ``pkg/admission/plugin/webhook/errors/statuserror.go`` ``ToStatusErr``). So 422, not
  the 400 a webhook denial without a code gets.

Where this fake and a real server can differ (also in docs/gke.md):
- the mutating webhook's defaults are applied to a copy for validation and not stored;
- only the metadata, the JobSet rules and a few pod/Job name rules are checked: the rest of a
  Pod's or Job's validation is not (containers, resources, volumes...);
- a volume claim template is not compared with an existing PVC of its name, and the rules
  behind feature gates that are off by default are not checked (``not_enforced`` in the rules
  file);
- the fake's JobSet controller checks the Jobs it makes with these rules (an invalid one is a
  ``JobCreationFailed`` event, as for real), not the Pods: the webhook's name rules keep the
  pods' names valid;
- messages follow the sources' wording, causes in the order the sources check them; a map's keys
  (labels) are visited in insertion order here, in random order by Go.
"""

from __future__ import annotations

import json
import re
from typing import Any

# --- Kubernetes' name rules: kubernetes/apimachinery v0.36.0 pkg/util/validation/validation.go
# and pkg/api/validate/content/{dns,kube}.go (IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label,
# IsLabelKey, IsLabelValue), with their messages.
_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_FMT = _LABEL_FMT + "(\\." + _LABEL_FMT + ")*"
_DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_VALUE_FMT = "(" + _KEY_FMT + ")?"


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    ex = " or ".join(f"'{e}'" for e in examples)
    return f"{msg} (e.g. {ex}, regex used for validation is '{fmt}')"


def _full(fmt: str, value: str) -> bool:
    return re.fullmatch(fmt, value) is not None


def dns1123_label(v: str) -> list[str]:
    errs = ["must be no more than 63 characters"] if len(v) > 63 else []
    if not _full(_LABEL_FMT, v):
        errs.append("must not contain dots" if _full(_SUBDOMAIN_FMT, v) else _regex_error(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character", _LABEL_FMT,
            "my-name", "123-abc"))
    return errs


def _limited(v: str, limit: int, fmt: str, msg: str, *examples: str) -> list[str]:
    """A value of at most ``limit`` characters matching ``fmt``: Kubernetes' MaxLenError, then
    its RegexError with ``msg`` and the examples, the way each IsXxx function reports them."""
    errs = [f"must be no more than {limit} characters"] if len(v) > limit else []
    if not _full(fmt, v):
        errs.append(_regex_error(msg, fmt, *examples))
    return errs


def dns1123_subdomain(v: str) -> list[str]:
    return _limited(
        v, 253, _SUBDOMAIN_FMT,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
        "'-' or '.', and must start and end with an alphanumeric character", "example.com")


def dns1035_label(v: str) -> list[str]:
    return _limited(
        v, 63, _DNS1035_FMT,
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
        "with an alphabetic character, and end with an alphanumeric character",
        "my-name", "abc-123")


def label_value(v: str) -> list[str]:
    return _limited(
        v, 63, _VALUE_FMT,
        "a valid label must be an empty string or consist of alphanumeric characters, '-', "
        "'_' or '.', and must start and end with an alphanumeric character",
        "MyValue", "my_value", "12345")


def label_key(v: str) -> list[str]:
    parts = v.split("/")
    if len(parts) > 2:
        return ["a valid label key " + _regex_error(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character", _KEY_FMT, "MyName", "my.name", "123-abc")]
    errs = []
    name = parts[-1]
    if len(parts) == 2:
        errs += ["prefix part " + m for m in dns1123_subdomain(parts[0])] if parts[0] else [
            "prefix part must be non-empty"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _full(_KEY_FMT, name):
        errs.append("name part " + _regex_error(
            "must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character", _KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def path_segment(v: str) -> list[str]:
    """apimachinery v0.36.0 pkg/api/validation/path/name.go IsValidPathSegmentName."""
    if v in (".", ".."):
        return [f"may not be '{v}'"]
    return [f"may not contain '{c}'" for c in "/%" if c in v]


# --- field errors and the Status the client receives -------------------------------------------


class Cause:
    """A field error as apimachinery v0.36.0 ``pkg/util/validation/field/errors.go`` prints it."""

    TYPES = {"invalid": ("FieldValueInvalid", "Invalid value"),
             "too-long": ("FieldValueTooLong", "Too long"),
             "forbidden": ("FieldValueForbidden", "Forbidden"),
             "internal": ("InternalError", "Internal error")}

    def __init__(self, rule: str, kind: str, field: str | None, detail: str,
                 value: Any = None) -> None:
        self.rule, self.kind, self.field, self.detail, self.value = rule, kind, field, detail, value

    def body(self) -> str:
        name = self.TYPES[self.kind][1]
        if self.kind == "invalid":
            v = self.value
            shown = f'"{v}"' if isinstance(v, str) else json.dumps(v, separators=(",", ":"))
            name = f"{name}: {shown}"
        return f"{name}: {self.detail}" if self.detail else name

    def __str__(self) -> str:
        return f"{self.field if self.field is not None else '<nil>'}: {self.body()}"


def invalid_status(kind: str, group: str, name: str, causes: list[Cause],
                   webhook: str | None = None) -> dict:
    """The 422 Status of ``NewInvalid``, as the API server sends it (prefixed for a webhook)."""
    seen: list[str] = []
    for c in causes:
        if str(c) not in seen:
            seen.append(str(c))
    agg = seen[0] if len(seen) == 1 else "[" + ", ".join(seen) + "]"
    qualified = f"{kind}.{group}" if group else kind
    message = f'{qualified} "{name}" is invalid: {agg}'
    if webhook:
        message = f'admission webhook "{webhook}" denied the request: {message}'
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "Invalid", "code": 422,
            "details": {"name": name, "group": group, "kind": kind,
                        "causes": [{"reason": Cause.TYPES[c.kind][0], "message": c.body(),
                                    "field": c.field or ""} for c in causes]}}


# --- ObjectMeta: apimachinery v0.36.0 pkg/api/validation/objectmeta.go -----------------------

# The name rule of each kind (rule k8s-name): Services are DNS-1035 labels and Namespaces DNS-1123
# labels (kubernetes pkg/apis/core/validation: ValidateServiceName, ValidateNamespaceName), RBAC
# objects path segments (pkg/apis/rbac/validation: ValidateRBACName); everything else here,
# custom resources included (apiextensions-apiserver v0.36.0 validator.go L53), a DNS-1123
# subdomain. Events are left out: the fake's controllers write them directly.
_NAME_RULES = {"services": dns1035_label, "namespaces": dns1123_label,
               "roles": path_segment, "rolebindings": path_segment,
               "clusterroles": path_segment, "clusterrolebindings": path_segment,
               "events": None, "customresourcedefinitions": None}


def object_meta(plural: str, md: dict, creating: bool, path: str = "metadata") -> list[Cause]:
    """Rules k8s-name, k8s-label-key, k8s-label-value, k8s-annotation-key, k8s-annotations-size
    (``path``: where the metadata is, e.g. a Job's ``spec.template.metadata``)."""
    out: list[Cause] = []
    rule = _NAME_RULES.get(plural, dns1123_subdomain)
    name = md.get("name") or ""
    if creating and rule is not None and name:
        out += [Cause("k8s-name", "invalid", f"{path}.name", m, name) for m in rule(name)]
    for k, v in (md.get("labels") or {}).items():
        out += [Cause("k8s-label-key", "invalid", f"{path}.labels", m, k) for m in label_key(k)]
        out += [Cause("k8s-label-value", "invalid", f"{path}.labels", m, str(v))
                for m in label_value(str(v))]
    annotations = md.get("annotations") or {}
    for k in annotations:
        out += [Cause("k8s-annotation-key", "invalid", f"{path}.annotations", m, k)
                for m in label_key(k.lower())]
    if sum(len(k) + len(str(v)) for k, v in annotations.items()) > 256 * 1024:
        out.append(Cause("k8s-annotations-size", "too-long", f"{path}.annotations",
                         "may not be more than 262144 bytes"))
    return out


def pod_and_job(plural: str, obj: dict) -> list[Cause]:
    """Rules k8s-pod-hostname (core ValidatePodSpec), k8s-job-pod-failure-policy and
    k8s-indexed-job-hostname (batch ValidateJob), for Pods and Jobs created through the API."""
    spec = obj.get("spec") or {}
    out: list[Cause] = []
    if plural == "pods":
        for f in ("hostname", "subdomain"):
            if spec.get(f):
                out += [Cause("k8s-pod-hostname", "invalid", f"spec.{f}", m, spec[f])
                        for m in dns1123_label(spec[f])]
    restart = ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy")
    if plural == "jobs" and spec.get("podFailurePolicy") is not None and restart != "Never":
        out.append(Cause("k8s-job-pod-failure-policy", "invalid",
                         "spec.template.spec.restartPolicy",
                         'only "Never" is supported when podFailurePolicy is specified', restart))
    if plural == "jobs" and spec.get("completionMode") == "Indexed" and spec.get("completions"):
        name = (obj.get("metadata") or {}).get("name") or ""
        host = f"{name}-{int(spec['completions']) - 1}"
        if dns1123_label(host):
            out.append(Cause("k8s-indexed-job-hostname", "invalid", "metadata.name",
                             f"will not able to create pod with invalid DNS label: {host}", name))
    return out
