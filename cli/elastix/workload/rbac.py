"""The head pod's Kubernetes identity: a ServiceAccount allowed to watch its namespace's pods
and to annotate its own JobSet.

The trainer in the head pod watches the workload's worker pods (``elastix_trainer.elastic.podwatch``),
so that Pathways re-probes a slice the moment its pods change. That needs ``get``, ``list`` and
``watch`` on ``pods`` (core API group) in the workload's namespace. It also writes its recovery
point (``elastix_trainer.obs.recoverypoint``) to its own JobSet's annotations with a JSON merge
patch: that needs ``patch`` on ``jobsets`` (group ``jobset.x-k8s.io``), and the rule names the
workload's JobSet in ``resourceNames``, so the head can annotate no other. No ``get``: a patch
is authorized as the ``patch`` verb alone, the API server reads the stored object itself. And
nothing else: a namespaced Role bound to a ServiceAccount of the workload's own, named in the
head pod's ``serviceAccountName`` (Kubernetes RBAC, its Role and RoleBinding examples,
https://kubernetes.io/docs/reference/access-authn-authz/rbac/; a name limit holds for ``patch``
because the name is in the request's URL: the same page's "Referring to resources" excepts only
``create`` and ``deletecollection``). Not the namespace's ``default`` account: the same page
warns that what is granted to ``default`` goes to every pod of the namespace that names no
account ("Service account permissions"). Only the head pod names it; the worker pods keep
``default``.

The GKE backend creates these objects before the JobSet (a pod naming a ServiceAccount that does
not exist yet is rejected: "Configure Service Accounts for Pods",
https://kubernetes.io/docs/tasks/configure-pod-container/configure-service-account/) and
deletes them with it. It creates them only for a manifest
whose head pod asks for :func:`service_account` of its name, so a user's ``--template`` that
does not is left as written (the watch then logs one line and the trainer polls; the recovery
point logs one line and is not published).

Pure: object bodies only, no API calls.
"""

from __future__ import annotations

from typing import Any

from elastix.protocol import jobset
from elastix.workload import labels
from elastix.workload.manifest import pod_spec, replicated_job

RBAC_VERSION = "rbac.authorization.k8s.io/v1"
POD_READER_RULES = [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
"""What the head's pod watch needs: get, list and watch on pods of its own namespace."""


def jobset_patch_rule(workload: str) -> dict[str, Any]:
    """What the head's recovery point needs: patch on its own JobSet, by name, nothing more."""
    return {"apiGroups": [jobset.API_GROUP], "resources": [jobset.PLURAL], "verbs": ["patch"],
            "resourceNames": [workload]}


def rules(workload: str) -> list[dict[str, Any]]:
    """The head's Role's rules: :data:`POD_READER_RULES` and :func:`jobset_patch_rule`."""
    return [*POD_READER_RULES, jobset_patch_rule(workload)]


def service_account(workload: str) -> str:
    """The head pod's ServiceAccount (also the Role's and the RoleBinding's name)."""
    return f"{workload}-head"


def objects(workload: str, namespace: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(apiVersion, plural, body) of the ServiceAccount, Role and RoleBinding, in creation
    order (delete in reverse)."""
    name = service_account(workload)
    md = {"name": name, "namespace": namespace,
          "labels": {labels.WORKLOAD: workload, labels.MANAGED_BY: labels.MANAGED_BY_VALUE}}
    return [
        ("v1", "serviceaccounts", {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": md}),
        (RBAC_VERSION, "roles", {"apiVersion": RBAC_VERSION, "kind": "Role", "metadata": md,
                                 "rules": rules(workload)}),
        (RBAC_VERSION, "rolebindings", {
            "apiVersion": RBAC_VERSION, "kind": "RoleBinding", "metadata": md,
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}}),
    ]


def drop_service_account(manifest: dict[str, Any]) -> None:
    """Let the head pod run as the namespace's ``default`` account again (no grant was made)."""
    if wanted(manifest) is not None:
        del pod_spec(replicated_job(manifest, labels.HEAD_JOB))["serviceAccountName"]


def wanted(manifest: dict[str, Any]) -> str | None:
    """The workload whose head pod asks for :func:`service_account`, or None."""
    name = (manifest.get("metadata") or {}).get("name")
    pod = pod_spec(replicated_job(manifest, labels.HEAD_JOB))
    return name if name and pod.get("serviceAccountName") == service_account(name) else None
