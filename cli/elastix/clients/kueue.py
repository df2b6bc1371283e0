"""An installed Kueue as the API shows it: the API versions it serves, its controller's version
and what its configuration does to a workload whose pods are not all ready (WaitForPodsReady).

``cluster create`` (which objects to send, which settings to install), ``cluster describe`` and
``workload create``'s preflight read the same facts through this module. Sources are
kubernetes-sigs/kueue at the tag named in each comment.

WaitForPodsReady (``apis/config/v1beta2/configuration_types.go`` L304-329 @ v0.19.2): an admitted
Workload whose pods are not all ready ``timeout`` after admission is evicted and requeued; one
that was ready and stops being so (a pod failed, its replacement is not scheduled) is evicted
``recoveryTimeout`` after that (``pkg/controller/core/workload_controller.go`` L1657-1682). A
JobSet is ready only when every Job of every replicated job is (``pkg/controller/jobs/jobset/
jobset_controller.go`` L185-195), so one missing slice makes the whole JobSet not ready, and the
eviction suspends all of it.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from elastix.clients.kube import Forbidden, Http, Translator, api_path
from elastix.errors import NotFoundError

GROUP = "kueue.x-k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # newest first: v1beta2 is served from v0.15.0 on
NAMESPACE = "kueue-system"
DEPLOYMENT = "kueue-controller-manager"
# The release manifest's ConfigMap (``config/components/manager/kustomization.yaml``
# ``manager-config`` with ``config/default/kustomization.yaml``'s ``kueue-`` prefix), mounted as
# the manager's ``--config`` file by ``config/default/manager_config_patch.yaml`` L11-21 @ v0.19.2.
CONFIG_MAP = "kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"
CONFIG_PATH = api_path("v1", "configmaps", CONFIG_MAP, NAMESPACE)
# xpk's LocalQueue (src/xpk/core/kueue_manager.py L48-49 @ 367c838), which ``cluster create
# --kueue`` makes and xpk labels every Pathways JobSet with (its JobSet template L6).
DEFAULT_LOCAL_QUEUE = "multislice-queue"
GATE = "DisableWaitForPodsReady"  # alpha in 0.19, to be removed in 0.21 (kube_features.go L49-52)

ELASTIX_TIMEOUT = "8760h"
"""The ``waitForPodsReady.timeout`` elastix installs: a year. Kueue 0.19 cannot turn the check
off except by the alpha gate above, and an unset or zero timeout becomes 30 minutes
(``apis/config/v1beta2/defaults.go`` L48, L104-108). The timeout runs from admission until every
pod is ready, so it also bounds an elastic run that starts on fewer slices (its JobSet is never
all ready) and a ``--flex`` admission waiting for capacity: longer than any run."""
ELASTIX_RECOVERY = "0s"
"""The ``waitForPodsReady.recoveryTimeout`` elastix installs in Kueue v0.16.0 and later: "0s"
disables the recovery check there (``configuration_types.go`` L320-328; ``pkg/controller/core/
core.go`` L151-153 @ v0.19.2 keeps only a positive one, since v0.16.0's L113). Unset, it would
default to the timeout (``defaults.go`` L112). Before v0.16 a zero one evicts at once, and
elastix leaves it unset there (:func:`zero_recovery_disables`)."""
_RELEASE_TIMEOUT = 30 * 60  # defaults.go L48
_V1BETA1_TIMEOUT = 5 * 60  # apis/config/v1beta1/defaults.go L46 @ v0.14.3 … v0.19.2

_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: Any) -> float | None:
    """Seconds of a Go duration string (``metav1.Duration``: "30m", "1h30m", "0s"); None if it
    is not one."""
    s = str(text).strip()
    if s in ("0", "-0"):
        return 0.0
    if not s or not re.fullmatch(rf"(?:{_PART.pattern})+", s):
        return None
    return sum(float(n) * _UNITS[u] for n, u in _PART.findall(s))


def format_duration(seconds: float) -> str:
    """"30m", "8760h", "1h30m", "45s": whole units as Go prints them, without zero parts."""
    s = int(round(seconds))
    if s == 0:
        return "0s"
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return "".join(f"{v}{u}" for v, u in ((h, "h"), (m, "m"), (sec, "s")) if v)


def zero_recovery_disables(tag: str | None) -> bool:
    """Whether Kueue ``tag`` reads ``recoveryTimeout: 0s`` as "off": from v0.16.0
    (``pkg/controller/core/core.go`` L113 @ v0.16.0); before, it evicts at once (L110-112 @
    v0.15.8). False for an unknown tag."""
    ver = _version(tag)
    return ver is not None and ver >= (0, 16)


def _version(tag: str | None) -> tuple[int, int] | None:
    m = re.match(r"^v?(\d+)\.(\d+)", tag or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclasses.dataclass(frozen=True)
class PodsReady:
    """What WaitForPodsReady does on a cluster: off, or its two timeouts in seconds."""

    enabled: bool
    timeout: float | None = None  # admission -> every pod ready; evicted past it
    recovery: float | None = None  # ready -> not ready again; None: never evicted for it
    source: str = ""  # "set in ConfigMap …" or the defaults that apply
    block_admission: bool = False  # no admission while an admitted workload is not all ready

    def describe(self) -> str:
        """One phrase: ``WaitForPodsReady on: timeout 30m, recoveryTimeout 30m (…)``."""
        if not self.enabled:
            return f"WaitForPodsReady off ({self.source})"
        rec = "off" if self.recovery is None else format_duration(self.recovery)
        block = ", blockAdmission on" if self.block_admission else ""
        return (f"WaitForPodsReady on: timeout {format_duration(self.timeout or 0)}, "
                f"recoveryTimeout {rec}{block} ({self.source})")

    @property
    def keeps_elastic_runs(self) -> bool:
        """No recovery timeout and a timeout at least elastix's: a run that loses a slice, or
        starts without one, stays admitted."""
        return not self.enabled or (self.recovery is None and (self.timeout or 0)
                                    >= (parse_duration(ELASTIX_TIMEOUT) or 0))

    def effect(self) -> str | None:
        """The one line preflight prints for a queued elastic workload; None when Kueue keeps
        it admitted through a missing slice and admits others meanwhile."""
        blocks = ("; while this workload misses a slice Kueue admits no other workload "
                  "(blockAdmission)" if self.enabled and self.block_admission else "")
        if self.keeps_elastic_runs:
            return (f"Kueue's {self.describe()}{blocks}; elastix cluster create --kueue installs "
                    "blockAdmission false (docs/gke.md, Queues: Kueue)") if blocks else None
        parts = []
        if self.recovery is not None:
            parts.append(f"once running, a slice missing for {format_duration(self.recovery)}")
        parts.append(f"a slice not ready {format_duration(self.timeout or 0)} after admission "
                     "(a --flex wait, a run started on fewer slices)")
        return (f"Kueue's {self.describe()} evicts and requeues this workload whole, every "
                f"slice, on {' or on '.join(parts)}{blocks}; elastix cluster create --kueue "
                f"installs timeout {ELASTIX_TIMEOUT} and no recoveryTimeout "
                "(docs/gke.md, Queues: Kueue)")


def pods_ready(config: dict | None, version: str | None,
               flag_gates: dict[str, bool] | None = None) -> PodsReady:
    """WaitForPodsReady as Kueue ``version`` (image tag; None: taken as the newest) runs it with
    ``config`` (its parsed ``controller_manager_config.yaml``; {} when it sets nothing).

    The rules, by config API version: ``config.kueue.x-k8s.io/v1beta2`` (Kueue >= 0.15) is on
    when the block is present, and from v0.19.0 also when it is absent (``CHANGELOG/
    CHANGELOG-0.19.md`` L215; ``apis/config/v1beta2/defaults.go`` L99-117 @ v0.19.2), with a
    30-minute timeout; ``v1beta1`` is on only with ``enable: true`` and a 5-minute default
    (``apis/config/v1beta1/defaults.go`` L95-102 @ v0.14.3; converted to no block when off,
    ``configuration_conversion.go`` L47-48 @ v0.19.2). ``recoveryTimeout`` defaults to the
    timeout from v0.16.0 and "0s" turns it off there (``core.go`` L113 @ v0.16.0); before, an
    unset one is off.
    """
    cfg = config or {}
    ver = _version(version) or (99, 0)
    gates = {**(cfg.get("featureGates") or {}), **(flag_gates or {})}
    where = f"ConfigMap {NAMESPACE}/{CONFIG_MAP}"
    if ver >= (0, 19) and gates.get(GATE) is True:
        return PodsReady(False, source=f"feature gate {GATE}")
    block = cfg.get("waitForPodsReady")
    if not isinstance(block, dict):
        block = None
    v1beta1 = str(cfg.get("apiVersion", "")).endswith("/v1beta1")
    if v1beta1 and not (block or {}).get("enable"):
        return PodsReady(False, source=f"not enabled in {where}")
    if block is None and ver < (0, 19):
        return PodsReady(False, source=f"not set in {where}; Kueue {version} defaults")
    block = block or {}
    timeout = parse_duration(block.get("timeout", "0s")) or (
        _V1BETA1_TIMEOUT if v1beta1 else _RELEASE_TIMEOUT)
    rec = block.get("recoveryTimeout")
    recovery = parse_duration(rec) if rec is not None else (timeout if ver >= (0, 16) else None)
    if recovery == 0 and ver >= (0, 16):
        recovery = None
    said = [k for k in ("timeout", "recoveryTimeout") if k in block]
    source = (f"{' and '.join(said)} set in {where}" if said else
              f"Kueue {version or 'v0.19+'} defaults")
    # v1beta1 defaults it to true (apis/config/v1beta1/defaults.go L98 @ v0.15.8), v1beta2 to
    # false (apis/config/v1beta2/defaults.go L95 @ v0.15.8)
    blocks = block.get("blockAdmission", v1beta1) is True
    return PodsReady(True, timeout, recovery, source, blocks)


@dataclasses.dataclass(frozen=True)
class Installed:
    """An installed Kueue, read over the API (:func:`read`)."""

    served: tuple[str, ...]  # of :data:`VERSIONS`, newest first; () when Kueue is not served
    version: str | None = None  # the controller's image tag
    config: dict | None = None  # the parsed config file; None when it could not be read
    config_problem: str | None = None  # why not
    flag_gates: dict[str, bool] = dataclasses.field(default_factory=dict)

    @property
    def api_version(self) -> str | None:
        """The newest ``kueue.x-k8s.io/…`` it serves of those elastix can write."""
        return f"{GROUP}/{self.served[0]}" if self.served else None

    def pods_ready(self) -> PodsReady | None:
        return None if self.config is None else pods_ready(self.config, self.version,
                                                           self.flag_gates)


def served_versions(http: Http, tr: Translator) -> tuple[str, ...]:
    """The Kueue API versions the cluster serves (its ``APIGroup``), of :data:`VERSIONS`."""
    try:
        with tr("looking for Kueue"):
            group = http.request("GET", f"/apis/{GROUP}")
    except NotFoundError:
        return ()
    have = {v.get("version") for v in (group or {}).get("versions") or []}
    return tuple(v for v in VERSIONS if v in have)


def _gates(dep: dict | None) -> dict[str, bool]:
    """``--feature-gates=A=true,B=false`` of the manager container (``cmd/kueue/main.go``
    L135-138 @ v0.19.2)."""
    out: dict[str, bool] = {}
    for c in ((dep or {}).get("spec", {}).get("template", {}).get("spec", {})
              .get("containers") or []):
        for arg in c.get("args") or []:
            if str(arg).startswith("--feature-gates="):
                for pair in str(arg).split("=", 1)[1].split(","):
                    k, _, v = pair.partition("=")
                    out[k.strip()] = v.strip().lower() == "true"
    return out


def read(http: Http, tr: Translator) -> Installed:
    """Served versions; when served, the controller's version and its configuration."""
    import yaml

    served = served_versions(http, tr)
    if not served:
        return Installed(())

    def get(path: str, what: str) -> tuple[dict | None, str | None]:
        try:
            with tr(what):
                return http.request("GET", path), None
        except NotFoundError:
            return None, "not found"
        except Forbidden:
            return None, "not readable with these credentials"

    dep, _ = get(api_path("apps/v1", "deployments", DEPLOYMENT, NAMESPACE),
                 "reading the Kueue controller")
    version = None
    for c in ((dep or {}).get("spec", {}).get("template", {}).get("spec", {})
              .get("containers") or [])[:1]:
        ref = str(c.get("image", "")).split("@", 1)[0]
        version = ref.rsplit(":", 1)[1] if ":" in ref.rsplit("/", 1)[-1] else None
    cm, why = get(CONFIG_PATH, "reading Kueue's configuration")
    config = None
    if cm is not None:
        try:
            config = yaml.safe_load((cm.get("data") or {}).get(CONFIG_KEY) or "") or {}
            if not isinstance(config, dict):
                config, why = None, f"its {CONFIG_KEY} is not a mapping"
        except yaml.YAMLError:
            config, why = None, f"its {CONFIG_KEY} is not YAML"
    return Installed(served, version, config, None if config is not None else why,
                     _gates(dep))
