"""The local backend's on-disk contract: where a workload lives and what the supervisor runs.

One directory per workload (``<root>/<name>/``) holds everything: ``plan.json`` (what to run,
derived once from the rendered JobSet), ``manifest.json``, ``state.json`` (written atomically by
the supervisor), ``procs.jsonl`` (every process ever started, with its start time, so ``delete``
can sweep them even after the supervisor was SIGKILLed), ``logs/`` and the trainer's
``events.jsonl``. Every process also carries ``ELASTIX_LOCAL_MARKER=<uuid>`` in its environment,
which finds grandchildren that escaped their process group.

Imported by the launcher and by the supervisor; stdlib only at import time (psutil lazily).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import sys
import time
from pathlib import Path
from typing import Any

from elastix.errors import UsageError
from elastix.protocol import env as E
from elastix.protocol import timefmt
from elastix.workload import labels

FINAL_STATES = ("Completed", "Failed")

DEFAULT_SCHEDULING_DELAY = 1.0
"""Seconds before a replacement worker starts, unless ``ELASTIX_LOCAL_SCHEDULING_DELAY`` says."""


def default_root() -> Path:
    """``<user data dir>/elastix/workloads``."""
    import platformdirs

    return Path(platformdirs.user_data_dir("elastix")) / "workloads"


def read_json(path: Path) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_json_atomic(path: Path, data: Any) -> None:
    """Write-then-rename, so readers never see half a file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def health_address(workload_dir: Path) -> str:
    """A UNIX datagram socket in the workload dir, or a short stand-in when the path is too long.

    ``sun_path`` holds about 104 bytes; pytest's tmp dirs easily exceed that.
    """
    path = str(workload_dir / "health.sock")
    if len(path.encode()) < 100:
        return f"unix:{path}"
    digest = hashlib.sha1(path.encode()).hexdigest()[:16]
    if sys.platform.startswith("linux"):
        return f"unix:@elastix-{digest}"
    return f"unix:/tmp/elastix-{digest}.sock"


# ----------------------------------------------------------------------------- manifest -> plan

_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes ``$(VAR)`` expansion: defined names are replaced, ``$$`` escapes, others stay."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR.sub(sub, text)


def _field_value(path: str, fields: dict[str, str]) -> str:
    """Local value of a downward-API ``fieldPath``."""
    m = re.fullmatch(r"metadata\.(?:labels|annotations)\['([^']+)'\]", path)
    if m:
        return fields.get(m.group(1), "")
    return {"metadata.name": fields.get("pod", ""), "metadata.namespace": "local",
            "status.podIP": "127.0.0.1", "status.hostIP": "127.0.0.1",
            "spec.nodeName": "localhost"}.get(path, "")


def resolve_env(env_list: list[dict[str, Any]], fields: dict[str, str]) -> dict[str, str]:
    """A container's ``env`` as a dict: literal values, fieldRefs resolved to local values.

    ``$(VAR)`` inside values refers to earlier entries, as in Kubernetes. Secret and ConfigMap
    references cannot be resolved locally and are left out.
    """
    out: dict[str, str] = {}
    for item in env_list or []:
        name = item["name"]
        if "value" in item:
            out[name] = expand(str(item["value"]), out)
        elif "fieldRef" in (item.get("valueFrom") or {}):
            out[name] = _field_value(item["valueFrom"]["fieldRef"].get("fieldPath", ""), fields)
    return out


def _rjob(manifest: dict[str, Any], name: str) -> dict[str, Any] | None:
    for rj in manifest.get("spec", {}).get("replicatedJobs", []):
        if rj.get("name") == name:
            return rj
    return None


def _main_container(pod_spec: dict[str, Any], name: str) -> dict[str, Any] | None:
    containers = pod_spec.get("containers", [])
    for c in containers:
        if c.get("name") == name:
            return c
    return containers[0] if len(containers) == 1 else None


def pod_fields(name: str, rjob: str, replicas: int, slice_id: int, host: int,
               attempt: int) -> dict[str, str]:
    """The JobSet labels/annotations a pod would carry, for downward-API env resolution."""
    return {labels.JOBSET_NAME: name, labels.REPLICATED_JOB_NAME: rjob,
            labels.REPLICATED_JOB_REPLICAS: str(replicas), labels.JOB_INDEX: str(slice_id),
            labels.JOB_COMPLETION_INDEX: str(host), labels.RESTART_ATTEMPT: str(attempt),
            labels.COORDINATOR: "127.0.0.1", labels.WORKLOAD: name,
            "pod": f"{name}-{rjob}-{slice_id}-{host}"}


def default_devices_per_slice(num_slices: int, hosts_per_slice: int) -> int:
    """Scale a slice down to 1-2 CPU devices so a multislice workload fits a laptop."""
    del hosts_per_slice  # a CPU "slice" is the unit; its hosts are the heartbeat processes
    return max(1, min(2, 8 // max(1, num_slices)))


def make_plan(manifest: dict[str, Any], workload_dir: Path, env: dict[str, str],
              cwd: str) -> dict[str, Any]:
    """What the supervisor runs, derived from the rendered JobSet.

    Raises:
        UsageError: the manifest lacks something the local backend needs.
    """
    name = manifest.get("metadata", {}).get("name")
    head = _rjob(manifest, labels.HEAD_JOB)
    worker = _rjob(manifest, labels.WORKER_JOB)
    if not name or head is None or worker is None:
        raise UsageError("the local backend needs a JobSet with replicated jobs "
                         f"{labels.HEAD_JOB!r} and {labels.WORKER_JOB!r}",
                         hint="render it with elastix workload create (a Pathways workload)")
    head_pod = head["template"]["spec"]["template"]["spec"]
    main = _main_container(head_pod, labels.MAIN_CONTAINER)
    if main is None or not (main.get("command") or main.get("args")):
        raise UsageError(f"the head's {labels.MAIN_CONTAINER!r} container has no command",
                         hint="the local backend cannot run an image's entrypoint: give a command")
    wjob = worker["template"]["spec"]
    num_slices = int(worker.get("replicas", 1))
    hosts = int(wjob.get("parallelism", 1))
    failure_policy = manifest.get("spec", {}).get("failurePolicy") or {}
    if env.get(E.LOCAL_DEVICES_PER_SLICE):
        dps = int(env[E.LOCAL_DEVICES_PER_SLICE])
    else:
        dps = default_devices_per_slice(num_slices, hosts)
    wcont = _main_container(wjob["template"]["spec"], labels.WORKER_CONTAINER) or {}
    return {
        "name": name,
        "created": timefmt.iso_us(),
        "dir": str(workload_dir),
        "cwd": cwd,
        "num_slices": num_slices,
        "hosts_per_slice": hosts,
        "backoff_limit": int(wjob.get("backoffLimit", 6)),
        "max_restarts": int(failure_policy.get("maxRestarts", 0)),
        "devices_per_slice": dps,
        "scheduling_delay": float(env.get(E.LOCAL_SCHEDULING_DELAY, DEFAULT_SCHEDULING_DELAY)),
        "health_timeout": float(env.get(E.HEALTH_TIMEOUT, 2.0)),
        "heartbeat_interval": float(env.get(E.HEARTBEAT_INTERVAL, 0.2)),
        "health_address": health_address(workload_dir),
        "events_file": str(workload_dir / "events.jsonl"),
        "head_command": list(main.get("command") or []) + list(main.get("args") or []),
        "head_env": main.get("env") or [],
        "worker_env": wcont.get("env") or [],
        "marker": hashlib.sha1(f"{workload_dir}{time.time()}{os.getpid()}".encode()).hexdigest(),
    }


# ----------------------------------------------------------------------------- processes


def proc_matches(pid: int, create_time: float | None) -> bool:
    """True if ``pid`` is alive (not a zombie) and is the process recorded (same start time)."""
    import psutil

    try:
        p = psutil.Process(pid)
        if p.status() == psutil.STATUS_ZOMBIE:
            return False
        return create_time is None or abs(p.create_time() - create_time) < 0.05
    except psutil.Error:
        return False


def create_time_of(pid: int) -> float | None:
    import psutil

    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


def read_procs(workload_dir: Path) -> list[dict[str, Any]]:
    """Every process record the supervisor appended to ``procs.jsonl``."""
    out = []
    try:
        with open(workload_dir / "procs.jsonl", encoding="utf-8") as f:
            for line in f:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass  # a line cut by a SIGKILL mid-write
    except FileNotFoundError:
        pass
    return out


def marked_pids(marker: str, exclude: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Live processes whose environment carries this workload's marker."""
    import psutil

    found = []
    for p in psutil.process_iter(["pid"]):
        if p.info["pid"] in exclude:
            continue
        try:
            if p.status() != psutil.STATUS_ZOMBIE and p.environ().get(E.LOCAL_MARKER) == marker:
                found.append(p.info["pid"])
        except psutil.Error:
            continue
    return found


def sweep(workload_dir: Path, marker: str | None, exclude: set[int] | None = None,
          timeout: float = 5.0) -> list[int]:
    """SIGKILL every process this workload started (and their groups); wait until gone.

    Returns the pids that were killed. Raises nothing: what survives ``timeout`` is returned too,
    and the caller decides.
    """
    exclude = set(exclude or ()) | {os.getpid()}
    victims: set[int] = set()
    for rec in read_procs(workload_dir):
        pid = rec["pid"]
        if pid in exclude or not proc_matches(pid, rec.get("create_time")):
            continue
        victims.add(pid)
        try:
            if os.getpgid(pid) == pid:  # its own group: take grandchildren along
                os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    if marker:
        victims.update(marked_pids(marker, exclude))
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not any(proc_matches(pid, None) for pid in victims):
            break
        time.sleep(0.02)
    return sorted(victims)
