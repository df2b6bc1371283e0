"""A JobSet-release-shaped manifest for tests, written here (elastix ships no copy).

Same kinds, names and order of application concerns as JobSet's ``manifests.yaml``: a namespace,
the real v0.12.0 CRD (the vendored package-data copy), RBAC, the webhook Service and Secret, the
controller Deployment (its image tag is the version) and the webhook configurations. Object
bodies are minimal.
"""

from __future__ import annotations

import functools
from pathlib import Path

import yaml

import elastix.templates

NS = "jobset-system"


@functools.lru_cache(maxsize=1)
def _crd_text() -> str:
    path = Path(elastix.templates.__file__).parent / "jobset-crd-v0.12.0.yaml"
    return path.read_text()


def crd() -> dict:
    return yaml.load(_crd_text(), Loader=yaml.CSafeLoader)


def manifest(version: str = "v0.12.0") -> list[dict]:
    meta = {"namespace": NS, "labels": {"app.kubernetes.io/name": "jobset"}}
    webhook = {"name": "vjobset.kb.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
               "clientConfig": {"service": {"name": "jobset-webhook-service", "namespace": NS,
                                            "path": "/validate-jobset-x-k8s-io-v1alpha2-jobset"}}}
    return [
        # Deliberately out of order: the installer must order objects itself.
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": "jobset-validating-webhook-configuration"}, "webhooks": [webhook]},
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
        crd(),
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": "jobset-controller-manager", **meta}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
         "metadata": {"name": "jobset-manager-role"},
         "rules": [{"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": ["*"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": "jobset-manager-rolebinding"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                     "name": "jobset-manager-role"},
         "subjects": [{"kind": "ServiceAccount", "name": "jobset-controller-manager",
                       "namespace": NS}]},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "jobset-webhook-server-cert",
                                                            **meta}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "jobset-webhook-service",
                                                             **meta},
         "spec": {"ports": [{"port": 443, "targetPort": 9443}],
                  "selector": {"control-plane": "controller-manager"}}},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "jobset-controller-manager", **meta},
         "spec": {"replicas": 1, "selector": {"matchLabels": {"control-plane":
                                                              "controller-manager"}},
                  "template": {"metadata": {"labels": {"control-plane": "controller-manager"}},
                               "spec": {"serviceAccountName": "jobset-controller-manager",
                                        "containers": [{
                                            "name": "manager", "command": ["/manager"],
                                            "image": f"registry.k8s.io/jobset/jobset:{version}"}]}}}},
    ]


def write(path: Path, docs: list[dict]) -> Path:
    path.write_text(yaml.dump_all(docs, Dumper=yaml.CSafeDumper, sort_keys=False))
    return path
