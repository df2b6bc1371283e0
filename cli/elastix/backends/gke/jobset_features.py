"""What the cluster's JobSet controller can do, read before a workload is submitted.

Two things the rendered manifest depends on:

- **DependsOn.** elastix renders the workers as depending on the head being Ready
  (``replicatedJobs[].dependsOn``): JobSet deprecated ``startupPolicy`` for it ("Deprecated:
  StartupPolicy is deprecated, please use the DependsOn API", ``api/jobset/v1alpha2/
  jobset_types.go`` of v0.12.0), and both wait on the same condition (a ReplicatedJob is
  started when ``failed + ready + succeeded`` Jobs of the previous one equal its replicas:
  ``pkg/controllers/depends_on.go`` and ``startup_policy.go`` ``allReplicasStarted``).
  DependsOn arrived in JobSet v0.8.0 (KEP-672, jobset#740); an older controller's CRD has no
  such field (a strict create is refused, a lax one drops it: jobset#893), so for a controller
  older than v0.8.0 the manifest gets ``startupPolicy: InOrder`` back instead.
- **The RestartJob gate.** ``--slice-restart job`` renders ``RestartJob`` failure-policy rules,
  which JobSet's webhook refuses unless its alpha feature gate ``RestartJob`` is on
  (``pkg/webhooks/jobset_webhook.go`` L440-444; ``pkg/features/features.go`` L73, default
  off). JobSet reads its feature gates from its configuration file, not from a flag
  (``main.go`` L117: ``SetFromMap(cfg.FeatureGates)``; the file is ``--config=
  /controller_manager_config.yaml``, mounted from the ConfigMap the Deployment's
  ``manager-config`` volume names: ``charts/jobset/templates/controller/deployment.yaml``,
  ``config/default/manager_config_patch.yaml``), so the gates are read from that ConfigMap.

The controller's version is its image tag (:func:`elastix.provision.jobset_install.status` reads
it the same way); when the Deployment cannot be read (another namespace's objects are often not
the user's to read), the CRD's schema says whether ``dependsOn`` is served.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

from elastix.clients.kube import api_path
from elastix.workload import labels

DEPENDS_ON_SINCE = (0, 8, 0)
"""The first JobSet release with ``replicatedJobs[].dependsOn`` (KEP-672, jobset#740)."""
RESTART_JOB_SINCE = (0, 12, 0)
"""The first JobSet release with the ``RestartJob`` action (``pkg/features/features.go``: absent
in v0.11.1, alpha in v0.12.0)."""
NAMESPACE = "jobset-system"
DEPLOYMENT = "jobset-controller-manager"
CRD = "jobsets.jobset.x-k8s.io"
CONFIG_KEY = "controller_manager_config.yaml"
CONFIG_VOLUME = "manager-config"
RESTART_JOB = "RestartJob"
GATE_HINT = ("turn it on in the JobSet controller's configuration: featureGates: {RestartJob: "
             f"true}} in ConfigMap jobset-manager-config ({CONFIG_KEY}), namespace {NAMESPACE}, "
             "then restart the controller; or pass --slice-restart backoff")


@dataclasses.dataclass(frozen=True)
class Controller:
    """What was read about the installed JobSet controller (None: could not be read)."""

    version: str | None = None  # its image tag, e.g. "v0.12.0"
    gates: dict[str, bool] | None = None  # its configuration's featureGates
    crd_depends_on: bool | None = None  # whether the served CRD schema has dependsOn

    @property
    def depends_on(self) -> bool:
        """Whether it honours ``dependsOn`` (unknown: assume the JobSet elastix installs)."""
        v = parse_version(self.version)
        if v is not None:
            return v >= DEPENDS_ON_SINCE
        return self.crd_depends_on is not False

    def gate(self, name: str) -> bool | None:
        """A feature gate's state: None when the configuration could not be read."""
        if self.gates is None:
            return None
        return bool(self.gates.get(name, False))  # every JobSet alpha gate defaults to off


def parse_version(tag: str | None) -> tuple[int, int, int] | None:
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?", tag or "")
    return (int(m[1]), int(m[2]), int(m[3] or 0)) if m else None


def gates_of(config_text: str) -> dict[str, bool]:
    """``featureGates`` of a controller configuration (YAML); {} when it has none."""
    import yaml

    try:
        doc = yaml.safe_load(config_text) or {}
    except yaml.YAMLError:
        return {}
    gates = doc.get("featureGates") if isinstance(doc, dict) else None
    return {str(k): v is True for k, v in gates.items()} if isinstance(gates, dict) else {}


def read(get: Callable[[str], dict | None]) -> Controller:
    """Read the controller; ``get(path)`` answers an object or None (absent or forbidden)."""
    dep = get(api_path("apps/v1", "deployments", DEPLOYMENT, NAMESPACE))
    version = gates = None
    if dep is not None:
        pod = ((dep.get("spec") or {}).get("template") or {}).get("spec") or {}
        for c in pod.get("containers") or []:
            ref = str(c.get("image", "")).split("@", 1)[0]
            if ":" in ref.rsplit("/", 1)[-1]:
                version = ref.rsplit(":", 1)[1]
            break
        cm_name = next((v["configMap"].get("name") for v in pod.get("volumes") or []
                        if v.get("name") == CONFIG_VOLUME and v.get("configMap")), None)
        if cm_name:
            cm = get(api_path("v1", "configmaps", cm_name, NAMESPACE))
            if cm is not None:
                gates = gates_of(str((cm.get("data") or {}).get(CONFIG_KEY, "")))
        else:  # no configuration file: every gate at its default
            gates = {}
    crd_depends_on = None
    if parse_version(version) is None:
        crd = get(api_path("apiextensions.k8s.io/v1", "customresourcedefinitions", CRD))
        if crd is not None:
            crd_depends_on = "dependsOn" in _replicated_job_schema(crd)
    return Controller(version, gates, crd_depends_on)


def _replicated_job_schema(crd: dict) -> dict:
    for v in (crd.get("spec") or {}).get("versions") or []:
        if v.get("name") == "v1alpha2":
            props = (((v.get("schema") or {}).get("openAPIV3Schema") or {})
                     .get("properties") or {})
            spec = (props.get("spec") or {}).get("properties") or {}
            return ((spec.get("replicatedJobs") or {}).get("items") or {}).get("properties") or {}
    return {}


def uses_restart_job(manifest: dict[str, Any]) -> bool:
    rules = ((manifest.get("spec") or {}).get("failurePolicy") or {}).get("rules") or []
    return any(r.get("action") in ("RestartJob", "RestartJobAndIgnoreMaxRestarts")
               for r in rules)


def adapt(manifest: dict[str, Any], ctl: Controller) -> list[str]:
    """Fit ``manifest`` to the controller in place; the notices that say what changed.

    A controller without DependsOn gets ``startupPolicy: InOrder`` (the same order) instead.
    """
    spec = manifest.get("spec") or {}
    rjobs = spec.get("replicatedJobs") or []
    if ctl.depends_on or not any("dependsOn" in rj for rj in rjobs):
        return []
    for rj in rjobs:
        rj.pop("dependsOn", None)
    spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    return [f"the JobSet controller is {ctl.version or 'older than v0.8.0'}, without DependsOn: "
            "the workers wait for the head with startupPolicy InOrder instead (JobSet "
            "v0.8.0 and newer have DependsOn)"]


def problems(manifest: dict[str, Any], ctl: Controller) -> list[tuple[str, str, str | None]]:
    """What the controller cannot run, as (field, message, hint): RestartJob on a controller
    older than v0.12.0, or with its gate off. A gate that could not be read is left to the
    JobSet webhook, which answers for it."""
    if not uses_restart_job(manifest):
        return []
    v = parse_version(ctl.version)
    if v is not None and v < RESTART_JOB_SINCE:
        return [("slice_restart", f"--slice-restart job needs JobSet v0.12.0 or newer, the "
                 f"controller is {ctl.version}", "upgrade JobSet (its release manifest, "
                 "templates/JOBSET.md), or pass --slice-restart backoff")]
    if ctl.gate(RESTART_JOB) is False:
        return [("slice_restart", "--slice-restart job needs the JobSet controller's RestartJob "
                 f"feature gate, which is off (controller {ctl.version or 'version unknown'})",
                 GATE_HINT)]
    return []


def slice_restarts(js: dict[str, Any]) -> list[int] | None:
    """Per-slice ``jobRestarts`` of a JobSet's workers (index = slice); None when JobSet
    reports none (no RestartJob has happened, or the gate is off)."""
    for st in (js.get("status") or {}).get("replicatedJobsStatus") or []:
        if st.get("name") == labels.WORKER_JOB and st.get("jobRestarts") is not None:
            return [int(n) for n in st["jobRestarts"]]
    return None
