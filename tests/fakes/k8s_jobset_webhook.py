"""The JobSet v0.12.0 webhook and CRD rules, for the fake API server (see ``k8s_admission``).

Source: kubernetes-sigs/jobset v0.12.0 (f22e565a) ``pkg/webhooks/jobset_webhook.go`` (cited by
line below), ``pkg/controllers/jobset_controller.go``, ``pkg/util/placement/placement.go``,
``pkg/features/features.go`` and ``api/jobset/v1alpha2/jobset_types.go``. Rule ids are those of
``tests/fixtures/jobset_webhook_rules.json``. Re-stated from the Go, not generated from it.
"""

from __future__ import annotations

import copy
import re

from k8s_admission import Cause, dns1035_label, dns1123_subdomain, label_value

WEBHOOK = "vjobset.kb.io"  # jobset_webhook.go L163 (the validating webhook's name)
INT32_MAX = 2**31 - 1
FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes",
                   "MaxFailedIndexesExceeded", "PodFailurePolicy")  # jobset_webhook.go L85-91
_RULE_NAME = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"  # jobset_webhook.go L418


def defaulted(js: dict) -> dict:
    """A copy with the CRD's structural defaults (jobset_types.go L326 groupName, L334 replicas,
    L487 restartStrategy) and the mutating webhook's (jobset_webhook.go ``Default`` L111-161).
    The real server stores these; the fake validates the copy and stores what it was sent."""
    js = copy.deepcopy(js)
    spec = js.setdefault("spec", {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    for rj in spec.get("replicatedJobs") or []:
        rj.setdefault("groupName", "default")
        rj.setdefault("replicas", 1)
        job = rj.setdefault("template", {}).setdefault("spec", {})
        job.setdefault("completionMode", "Indexed")
        job.setdefault("template", {}).setdefault("spec", {}).setdefault("restartPolicy",
                                                                         "OnFailure")
    net = spec.setdefault("network", {})
    net.setdefault("enableDNSHostnames", True)
    net.setdefault("publishNotReadyAddresses", True)
    fp = spec.get("failurePolicy")
    if fp is not None:
        fp.setdefault("restartStrategy", "Recreate")
        for i, rule in enumerate(fp.get("rules") or []):
            if not rule.get("name"):
                rule["name"] = f"failurePolicyRule{i}"
    return js


def _internal(rule: str, msg: str) -> Cause:
    """A plain Go error, wrapped by ``toFieldErrorList`` (jobset_webhook.go L681-695)."""
    return Cause(rule, "internal", None, msg)


def crd_rules(js: dict, old: dict | None) -> list[Cause]:
    """The CRD's CEL rules (jobset_types.go L120; L572; L130, L138, L145, L150, L193, L346),
    which the API server evaluates before any webhook: rules crd-startup-depends-on,
    crd-volume-claim-namespace, crd-immutable."""
    spec = js.get("spec") or {}
    out = []
    rjobs = spec.get("replicatedJobs") or []
    if (spec.get("startupPolicy") or {}).get("startupPolicyOrder") == "InOrder" and any(
            "dependsOn" in rj for rj in rjobs):
        out.append(Cause("crd-startup-depends-on", "invalid", "spec",
                         "StartupPolicy and DependsOn APIs are mutually exclusive", "object"))
    for i, policy in enumerate(spec.get("volumeClaimPolicies") or []):  # jobset_types.go L572
        if any(((t.get("metadata") or {}).get("namespace") or "")
               for t in policy.get("templates") or []):
            out.append(Cause("crd-volume-claim-namespace", "invalid",
                             f"spec.volumeClaimPolicies[{i}]",
                             "namespace cannot be set for VolumeClaimPolicies templates", "object"))
    if old is not None:
        ospec = old.get("spec") or {}
        for f in ("network", "successPolicy", "failurePolicy", "startupPolicy",
                  "volumeClaimPolicies"):
            # a transition rule runs only when the field has an old and a new value
            if f in ospec and f in spec and spec[f] != ospec[f]:
                out.append(Cause("crd-immutable", "invalid", f"spec.{f}", "Value is immutable",
                                 "object" if isinstance(ospec[f], dict) else "array"))
        olds = {rj.get("name"): rj for rj in ospec.get("replicatedJobs") or []}
        for i, rj in enumerate(rjobs):
            before = olds.get(rj.get("name"))
            if (before is not None and "dependsOn" in before and "dependsOn" in rj
                    and rj["dependsOn"] != before["dependsOn"]):
                out.append(Cause("crd-immutable", "invalid",
                                 f"spec.replicatedJobs[{i}].dependsOn", "Value is immutable",
                                 "array"))
    return out


def validate_create(js: dict, gates: frozenset[str] = frozenset()) -> list[Cause]:
    """``ValidateCreate`` (jobset_webhook.go L166-310) on the defaulted JobSet; ``gates``: the
    feature gates the controller's configuration turns on (:func:`gates_on`)."""
    spec, name = js.get("spec") or {}, (js.get("metadata") or {}).get("name") or ""
    out: list[Cause] = []
    fp = spec.get("failurePolicy")
    if fp and fp.get("restartStrategy") == "InPlaceRestart":  # L169-175, gate off (features L69)
        out.append(_internal("js-in-place-restart-gate", "InPlaceRestart restart strategy cannot "
                             "be set when InPlaceRestart feature gate is disabled"))
    rjobs = spec.get("replicatedJobs") or []
    if rjobs and rjobs[0].get("dependsOn") is not None:  # L177-180
        out.append(_internal("js-depends-on-first",
                             "DependsOn can't be set for the first ReplicatedJob"))
    sub = (spec.get("network") or {}).get("subdomain")
    if sub:  # L182-198: a subdomain, and a DNS-1035 label because it names the Service
        out += [Cause("js-subdomain", "invalid", "spec.network.subdomain", m, sub)
                for m in dns1123_subdomain(sub)]
        out += [Cause("js-subdomain", "invalid", "spec.network.subdomain",
                      ".spec.network.subdomain is too long, must be less than 63 characters"
                      if "must be no more than 63" in m else m, sub) for m in dns1035_label(sub)]
    if spec.get("managedBy") is not None:  # L200-210
        out += _managed_by(spec["managedBy"])
    seen: set[str] = set()
    for i, rj in enumerate(rjobs):  # L212-282
        out += _replicated_job(name, i, rj, seen)
    for target in (spec.get("successPolicy") or {}).get("targetReplicatedJobs") or []:
        if target not in seen:  # L284-289
            out.append(_internal("js-success-policy-targets", f"invalid replicatedJob name "
                                 f"'{target}' does not appear in .spec.ReplicatedJobs"))
    if fp:
        out += _failure_policy(fp, rjobs, seen, gates)
    if spec.get("coordinator") is not None:  # L292-296
        out += _coordinator(js)
    if spec.get("volumeClaimPolicies"):  # L298-301
        out += _volume_claim_policies(name, spec["volumeClaimPolicies"], rjobs)
    return out


def _volume_claim_policies(js_name: str, policies: list[dict], rjobs: list[dict]) -> list[Cause]:
    """``validateVolumeClaimPolicies`` (L536-609) without its look-up of an existing PVC of the
    same name (the fake answers as if there were none), and ``validateReplicatedJobsVolumeClaims``
    (L611-655). The PVC is named ``<template>-<jobset>`` (controllers/volume_claim_policy.go
    ``GeneratePVCName`` L74-77) and may have at most 63 characters (L50, L560-567)."""
    out: list[Cause] = []
    seen: set[str] = set()
    for i, policy in enumerate(policies):
        for j, tmpl in enumerate(policy.get("templates") or []):
            path = f"spec.volumeClaimPolicies[{i}].template[{j}].name"
            claim = (tmpl.get("metadata") or {}).get("name") or ""
            if claim in seen:
                out.append(Cause("js-volume-claim-policies", "invalid", path,
                                 "names must be unique for VolumeClaimPolicies template", claim))
            out += [Cause("js-volume-claim-policies", "invalid", path, m, claim)
                    for m in dns1123_subdomain(claim)]
            if len(f"{claim}-{js_name}") > 63:
                out.append(Cause("js-volume-claim-policies", "invalid", path,
                                 "VolumeClaimPolicies template name is too long", claim))
            out += _claim_mounts(claim, rjobs)
            seen.add(claim)
    return out


def _claim_mounts(claim: str, rjobs: list[dict]) -> list[Cause]:
    """No pod volume may take the claim's name, and some container must mount it (L611-655)."""
    out, mounted = [], False
    for i, rj in enumerate(rjobs):
        pod = (((rj.get("template") or {}).get("spec") or {}).get("template") or {}).get(
            "spec") or {}
        for k, vol in enumerate(pod.get("volumes") or []):
            if vol.get("name") == claim:
                out.append(Cause("js-volume-claim-policies", "invalid",
                                 f"spec.replicatedJobs[{i}].template.spec.template.spec."
                                 f"volumes[{k}].name", "volume name conflicts with "
                                 f"VolumeClaimPolicy template name: {claim}", claim))
        mounted = mounted or any(m.get("name") == claim
                                 for c in (pod.get("initContainers") or [])
                                 + (pod.get("containers") or [])
                                 for m in c.get("volumeMounts") or [])
    if not mounted:
        out.append(Cause("js-volume-claim-policies", "invalid", "spec.replicatedJobs",
                         "replicatedJob containers don't have a matching volumeMount: "
                         f"{claim} from VolumeClaimPolicies", rjobs))
    return out


def _managed_by(value: str) -> list[Cause]:
    """IsDomainPrefixedPath (apimachinery validation.go) and at most 63 characters (L207-209)."""
    out = []
    host, slash, path = value.partition("/")
    if not (slash and host and path):
        out.append(Cause("js-managed-by", "invalid", "spec.managedBy",
                         'must be a domain-prefixed path (such as "acme.io/foo")', value))
    else:
        out += [Cause("js-managed-by", "invalid", "spec.managedBy", m, host)
                for m in dns1123_subdomain(host)]
    if len(value) > 63:
        out.append(Cause("js-managed-by", "too-long", "spec.managedBy",
                         "may not be more than 63 bytes"))
    return out


def _replicated_job(js_name: str, i: int, rj: dict, seen: set[str]) -> list[Cause]:
    """The per-replicated-job checks of ``ValidateCreate`` (L215-263)."""
    out = []
    path = f"spec.replicatedJobs[{i}]"
    rname, replicas = rj.get("name") or "", int(rj.get("replicas", 1))
    seen.add(rname)
    job = (rj.get("template") or {}).get("spec") or {}
    if int(job.get("parallelism", 1)) * replicas > INT32_MAX:  # L219-225
        out.append(_internal("js-replicas-parallelism", "the product of replicas and parallelism "
                             f"must not exceed {INT32_MAX} for replicatedJob '{rname}'"))
    group = rj.get("groupName", "default")
    out += [Cause("js-group-name", "invalid", f"{path}.groupName",  # L227-233
                  ".spec.replicatedJob[].groupName is too long, must be less than 63 characters"
                  if "must be no more than 63" in m else m, group) for m in dns1035_label(group)]
    longest_job = f"{js_name}-{rname}-{replicas - 1}"  # placement.GenJobName, L234-242
    out += [Cause("js-job-name", "invalid", f"{path}.name", "JobSet name is too long, job names "
                  "generated for this JobSet will exceed 63 characters"
                  if "must be no more than 63" in m else m, longest_job)
            for m in dns1035_label(longest_job)]
    if job.get("completionMode") == "Indexed" and job.get("completions") is not None:
        # L243-256: placement.GenPodName plus the Job controller's 5 random characters; the
        # webhook reports the longest Job name as the bad value.
        longest_pod = f"{longest_job}-{int(job['completions']) - 1}-abcde"
        out += [Cause("js-pod-name", "invalid", f"{path}.name", "JobSet name is too long, pod "
                      "names generated for this JobSet will exceed 63 characters"
                      if "must be no more than 63" in m else m, longest_job)
                for m in dns1035_label(longest_pod)]
    for dep in rj.get("dependsOn") or []:  # L258-263 (seen holds this job and the earlier ones)
        if dep.get("name") not in seen:
            out.append(_internal("js-depends-on-previous", f"replicatedJob: {rname} cannot "
                                 f"depend on replicatedJob: {dep.get('name')}"))
    return out


def _failure_policy(fp: dict, rjobs: list[dict], names: set[str],
                    gates: frozenset[str] = frozenset()) -> list[Cause]:
    """``validateFailurePolicy`` (L425-494)."""
    rules = fp.get("rules") or []
    out = []
    if any(r.get("action") in ("RestartJob", "RestartJobAndIgnoreMaxRestarts") for r in rules):
        if "RestartJob" not in gates:
            # L440-444: the RestartJob gate, off by default (features.go L73): an early return
            return [_internal("js-restart-job-gate", "RestartJob and "
                              "RestartJobAndIgnoreMaxRestarts failure policy actions are not "
                              "allowed when RestartJob feature gate is disabled")]
        # With the gate on, L445-450's limit of 1024 replicas is not checked (not_enforced).
    by_name: dict[str, list[int]] = {}
    for i, r in enumerate(rules):
        rn = r.get("name") or ""
        if not 1 <= len(rn) <= 128:  # L457-461
            out.append(_internal("js-failure-rule-name", f"invalid failure policy rule name of "
                                 f"length {len(rn)}, the rule name must be at least 1 characters "
                                 "long and at most 128 characters long"))
        by_name.setdefault(rn, []).append(i)
        if not re.match(_RULE_NAME, rn):  # L465-468
            out.append(_internal("js-failure-rule-name", f"invalid failure policy rule name "
                                 f"'{rn}', a failure policy rule name must start with an "
                                 "alphabetic character, optionally followed by a string of "
                                 "alphanumeric characters or '_,:', and must end with an "
                                 "alphanumeric character or '_'"))
        for t in r.get("targetReplicatedJobs") or []:  # L470-475
            if t not in names:
                out.append(_internal("js-failure-rule-targets", f"invalid replicatedJob name "
                                     f"'{t}' in failure policy does not appear in "
                                     ".spec.ReplicatedJobs"))
        for reason in r.get("onJobFailureReasons") or []:  # L477-482
            if reason not in FAILURE_REASONS:
                out.append(_internal("js-failure-rule-reasons", f"invalid job failure reason "
                                     f"'{reason}' in failure policy is not a recognized job "
                                     "failure reason"))
    for rn, idx in by_name.items():  # L485-491
        if len(idx) > 1:
            out.append(_internal("js-failure-rule-unique", f"rule names are not unique, rules "
                                 f"with indices {idx} all have the same name '{rn}'"))
    return out


def coordinator_endpoint(js: dict) -> str:
    """jobset_controller.go ``CoordinatorEndpoint`` L1373 with ``GetSubdomain`` L1090-1098."""
    spec = js.get("spec") or {}
    c = spec.get("coordinator") or {}
    sub = (spec.get("network") or {}).get("subdomain") or js["metadata"].get("name", "")
    return (f"{js['metadata'].get('name', '')}-{c.get('replicatedJob', '')}-"
            f"{c.get('jobIndex', 0)}-{c.get('podIndex', 0)}.{sub}")


def _coordinator(js: dict) -> list[Cause]:
    """``validateCoordinator`` (L500-522, first failure only) and
    ``validateCoordinatorLabelValue`` (L526-533)."""
    spec = js["spec"]
    c = spec["coordinator"]
    rname = c.get("replicatedJob", "")
    rj = next((r for r in spec.get("replicatedJobs") or [] if r.get("name") == rname), None)
    out = []
    job = ((rj or {}).get("template") or {}).get("spec") or {}
    if rj is None:
        out.append(_internal("js-coordinator", f"coordinator replicatedJob {rname} does not exist"))
    elif not 0 <= int(c.get("jobIndex", 0)) < int(rj.get("replicas", 1)):
        out.append(_internal("js-coordinator", f"coordinator job index {c.get('jobIndex', 0)} is "
                             f"invalid for replicatedJob {rname}"))
    elif job.get("completionMode") != "Indexed" or job.get("completions") is None:
        out.append(_internal("js-coordinator", "job for coordinator pod must be indexed "
                             "completion mode, and completions number must be set"))
    elif not 0 <= int(c.get("podIndex", 0)) < int(job["completions"]):
        out.append(_internal("js-coordinator", f"coordinator pod index {c.get('podIndex', 0)} is "
                             f"invalid for replicatedJob {rname} job index "
                             f"{c.get('jobIndex', 0)}"))
    value = coordinator_endpoint(js)
    errs = label_value(value)
    if errs:
        out.append(_internal("js-coordinator-label", f"spec will lead to invalid label value "
                             f"\"{value}\" for coordinator label \"jobset.sigs.k8s.io/coordinator\" "
                             "(long JobSet / ReplicatedJob / SubDomain name?): " + ", ".join(errs)))
    return out


_SUSPEND_MUTABLE = ("nodeSelector", "tolerations", "schedulingGates")


def validate_update(old: dict, new: dict) -> list[Cause]:
    """``ValidateUpdate`` (L312-407; the ElasticJobSet gate is off by default, features.go L75):
    replicatedJobs and managedBy are immutable, but a suspended (or suspending) JobSet's pod
    templates may change labels, annotations, nodeSelector, tolerations and schedulingGates.

    Compared as sent: the real webhook compares typed, defaulted objects, so an update that
    only spells out a default (``groupName: default``) passes there and is refused here."""
    ospec, nspec = old.get("spec") or {}, new.get("spec") or {}
    munged = copy.deepcopy(nspec.get("replicatedJobs") or [])
    olds = {rj.get("name"): rj for rj in ospec.get("replicatedJobs") or []}
    if ospec.get("suspend") or nspec.get("suspend"):
        for rj in munged:
            before = olds.get(rj.get("name"))
            if before is None:
                continue
            tmpl = rj.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {})
            otmpl = ((before.get("template") or {}).get("spec") or {}).get("template") or {}
            md, omd = tmpl.setdefault("metadata", {}), otmpl.get("metadata") or {}
            for f in ("labels", "annotations"):
                _copy_field(md, omd, f)
            pspec, opspec = tmpl.setdefault("spec", {}), otmpl.get("spec") or {}
            for f in _SUSPEND_MUTABLE:
                _copy_field(pspec, opspec, f)
    out = []
    if munged != (ospec.get("replicatedJobs") or []):
        out.append(Cause("js-update-replicated-jobs", "invalid", "spec.replicatedJobs",
                         "field is immutable", munged))
    if nspec.get("managedBy") != ospec.get("managedBy"):
        out.append(Cause("js-update-managed-by", "invalid", "spec.managedBy",
                         "field is immutable", nspec.get("managedBy")))
    return out


def _copy_field(dst: dict, src: dict, key: str) -> None:
    if key in src:
        dst[key] = copy.deepcopy(src[key])
    else:
        dst.pop(key, None)


def gates_on(config_text: str) -> frozenset[str]:
    """The feature gates a JobSet controller configuration (its ConfigMap's
    ``controller_manager_config.yaml``) turns on: ``featureGates`` of
    ``api/config/v1alpha1/configuration_types.go`` L39-41, applied by ``main.go`` L117."""
    import yaml

    try:
        doc = yaml.safe_load(config_text) or {}
    except yaml.YAMLError:
        return frozenset()
    gates = doc.get("featureGates") if isinstance(doc, dict) else None
    return frozenset(k for k, v in (gates or {}).items() if v is True)


def admit(js: dict, old: dict | None,
          gates: frozenset[str] = frozenset()) -> tuple[list[Cause], list[Cause]]:
    """(the API server's CRD rule errors, the webhook's errors) for a create (``old`` None) or
    an update of a JobSet; ``gates``: the controller's feature gates that are on."""
    crd = crd_rules(js, old)
    if old is None:
        return crd, validate_create(defaulted(js), gates)
    return crd, validate_update(old, js)
