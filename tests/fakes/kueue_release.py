"""A Kueue-release-shaped manifest for the tests (elastix ships no copy of the release, nor do
its tests): the kinds and names of Kueue's ``manifests.yaml``, minimal bodies."""

from __future__ import annotations

from elastix.provision import kueue_install

KINDS = (("resourceflavors", "ResourceFlavor", "Cluster"), ("clusterqueues", "ClusterQueue",
         "Cluster"), ("localqueues", "LocalQueue", "Namespaced"),
         ("workloads", "Workload", "Namespaced"))

# The release's controller_manager_config.yaml, trimmed: no waitForPodsReady block (kueue
# config/components/manager/controller_manager_config.yaml L1-34 @ v0.19.2, the block commented).
RELEASE_CONFIG = """apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
health:
  healthProbeBindAddress: :8081
#waitForPodsReady:
#  timeout: 5m
integrations:
  frameworks:
  - "jobset.x-k8s.io/jobset"
"""


def kueue_manifest(version: str = kueue_install.KUEUE_VERSION,
                   served: tuple[str, ...] = ("v1beta1", "v1beta2"),
                   config_version: str = "v1beta2") -> list[dict]:
    """A Kueue-release-shaped manifest: the kinds and names of ``manifests.yaml``, minimal
    bodies (elastix ships no copy, nor do its tests); ``served``: the CRDs' versions (v0.14.x
    serves v1beta1 only); ``config_version``: its Configuration's (``v1beta1`` up to
    v0.14.x, ``config/components/manager/controller_manager_config.yaml`` @ v0.14.3)."""
    ns = kueue_install.NAMESPACE
    crds = [{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": f"{plural}.kueue.x-k8s.io"},
             "spec": {"group": "kueue.x-k8s.io", "scope": scope,
                      "names": {"plural": plural, "kind": kind},
                      "versions": [{"name": v, "served": True, "storage": v == served[-1],
                                    "schema": {"openAPIV3Schema": {
                                        "type": "object",
                                        "x-kubernetes-preserve-unknown-fields": True}}}
                                   for v in served]}}
            for plural, kind, scope in KINDS]
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": "kueue-mutating-webhook-configuration"}, "webhooks": []},
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": kueue_install.DEPLOYMENT, "namespace": ns},
         "spec": {"replicas": 1, "template": {"spec": {"containers": [
             {"name": "manager", "image": f"registry.k8s.io/kueue/kueue:{version}"}]}}}},
        {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
         "metadata": {"name": "v1beta1.visibility.kueue.x-k8s.io"},
         "spec": {"group": "visibility.kueue.x-k8s.io", "version": "v1beta1"}},
        *crds,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}},
        {"apiVersion": "v1", "kind": "ConfigMap",
         "metadata": {"name": "kueue-manager-config", "namespace": ns},
         "data": {"controller_manager_config.yaml": RELEASE_CONFIG.replace(
             "config.kueue.x-k8s.io/v1beta2", f"config.kueue.x-k8s.io/{config_version}")}},
    ]


