"""Manifest -> plan: what the local supervisor runs for a rendered JobSet.

``make_plan`` reads the JobSet once, at submit, into a :class:`Plan` that is stored as
``plan.json`` in the workload's directory; the supervisor runs from that file alone. Pod
environments are resolved the way Kubernetes would (``$(VAR)`` expansion, downward-API
``fieldRef``s), with local values.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import time
from pathlib import Path
from typing import Any

from elastix.backends.local import channel, trainerhead
from elastix.backends.local import maxtext as maxtext_head
from elastix.backends.local.state import WorkloadState, read_record
from elastix.backends.local.typed import typed
from elastix.errors import NotFoundError, UsageError, shown
from elastix.protocol import envvars, heartbeat, timefmt
from elastix.workload import labels
from elastix.workload.manifest import replicated_job

DEFAULT_SCHEDULING_DELAY = 1.0
"""Seconds before a replacement worker starts, unless ``ELASTIX_LOCAL_SCHEDULING_DELAY`` says."""
DEFAULT_HUNG_HOST_TIMEOUT = 30.0
"""Seconds without progress before a hung slice host is replaced (``elastix.backends.local.
liveness``), unless ``ELASTIX_LOCAL_HUNG_HOST_TIMEOUT`` says."""


@dataclasses.dataclass
class Plan:
    """``plan.json``: one workload, as the supervisor runs it (written once, at submit)."""

    name: str
    created: str
    """Submit time, ``timefmt.iso_us``."""
    dir: str
    """The workload's state directory."""
    cwd: str
    """The submitter's working directory: the head runs there."""
    num_slices: int
    hosts_per_slice: int
    backoff_limit: int
    """Failures of one slice's Job before the Job (and so the attempt) fails."""
    max_restarts: int
    """Whole-workload restarts allowed (JobSet ``failurePolicy.maxRestarts``)."""
    devices_per_slice: int
    """CPU devices per slice; on an accelerator its chips per slice, 0 for all of them divided
    evenly among the slices."""
    scheduling_delay: float
    health_timeout: float
    heartbeat_interval: float
    health_address: str
    events_file: str
    head_command: list[str]
    head_env: list[dict[str, Any]]
    """The head container's ``env``, unresolved (resolved per attempt)."""
    worker_env: list[dict[str, Any]]
    marker: str
    """``ELASTIX_LOCAL_MARKER`` of every process of this workload."""
    hung_host_timeout: float = DEFAULT_HUNG_HOST_TIMEOUT
    """Seconds a slice host may make no progress before it is killed and replaced (0: never)."""
    maxtext: str = ""
    """A MaxText head (``elastix.backends.local.maxtext``): its Pathways stand-in, ``elastic``
    or ``fault``, ``none`` without one; empty for any other head."""
    head_note: str = ""
    """Said in the supervisor's log when the head starts."""
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    """The JobSet's labels (``workload create --label``), for ``-l`` selectors."""
    platform: str = "cpu"
    """The JAX platform the head trains on (``ELASTIX_LOCAL_PLATFORM``)."""
    worker_grace: float = 30.0
    """The worker pods' ``terminationGracePeriodSeconds`` (``--termination-grace-period``):
    a ``term`` fault's SIGTERM-to-SIGKILL, as the kubelet gives it."""

    @property
    def stamped(self) -> bool:
        """The head's log lines carry the time the supervisor read them (a MaxText head: its
        own lines have no date), as the Kubernetes log API's ``timestamps=true`` gives them."""
        return bool(self.maxtext)

    def to_json(self) -> dict[str, Any]:
        """The ``plan.json`` object."""
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Plan:
        """From a ``plan.json`` object (keys this version does not know are ignored), each
        value of its field's type.

        Raises:
            KeyError, TypeError or ValueError: not a plan this version can run.
        """
        plan = cls(**typed(cls, {f.name: data[f.name] for f in dataclasses.fields(cls)
                                 if f.name in data or (f.default is dataclasses.MISSING
                                                       and f.default_factory
                                                       is dataclasses.MISSING)}))
        timefmt.parse(plan.created)  # ValueError: not a time
        return plan


def data_dir(workload_dir: Path) -> Path:
    """The workload's kept data (``ELASTIX_LOCAL_DATA_DIR``): beside the workload directories,
    under a name no workload can have, so replacing or deleting the workload leaves it."""
    return workload_dir.parent / ".data" / workload_dir.name


def compilation_cache_dir(workload_dir: Path) -> Path:
    """JAX's compilation cache shared by the state directory's workloads
    (``ELASTIX_LOCAL_COMPILATION_CACHE``): beside the workload directories under a name no
    workload can have, and outside every workload's kept data, so no delete removes it.
    JAX keys each entry by the program, its compile options, the devices and the jax/jaxlib
    versions, so workloads of different models share it safely."""
    return workload_dir.parent / ".cache" / "jax"


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


_PLATFORM = re.compile(r"[a-z][a-z0-9_]{0,15}")


def local_platform(env: dict[str, str]) -> str:
    """``ELASTIX_LOCAL_PLATFORM``: ``cpu`` unless it names another JAX platform (``tpu``).

    Raises:
        UsageError: not a platform's name.
    """
    raw = env.get(envvars.LOCAL_PLATFORM, "").strip()
    if not raw:
        return "cpu"
    if not _PLATFORM.fullmatch(raw.lower()) or raw.lower() == "proxy":
        raise UsageError(f"{envvars.LOCAL_PLATFORM}={raw[:40]!r} is not a JAX platform the "
                         "local head can train on",
                         hint="give cpu (the default), or this machine's accelerator: tpu")
    return raw.lower()


def make_plan(manifest: dict[str, Any], workload_dir: Path, env: dict[str, str],
              cwd: str) -> Plan:
    """What the supervisor runs, derived from the rendered JobSet.

    Raises:
        UsageError: the manifest lacks something the local backend needs, or its head runs
            ``elastix-train`` and this install has no trainer.
    """
    name = manifest.get("metadata", {}).get("name")
    head = replicated_job(manifest, labels.HEAD_JOB)
    worker = replicated_job(manifest, labels.WORKER_JOB)
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
    platform = local_platform(env)
    if env.get(envvars.LOCAL_DEVICES_PER_SLICE):
        dps = int(env[envvars.LOCAL_DEVICES_PER_SLICE])
    else:
        dps = default_devices_per_slice(num_slices, hosts) if platform == "cpu" else 0
    wcont = _main_container(wjob["template"]["spec"], labels.WORKER_CONTAINER) or {}
    check_process_room(num_slices, hosts)
    command = list(main.get("command") or []) + list(main.get("args") or [])
    mt = maxtext_head.resolve(command, env, num_slices)
    if mt is None:
        trainerhead.check_installed(command, env)  # elastix-train heads only
    return Plan(
        name=name,
        created=timefmt.iso_us(),
        dir=str(workload_dir),
        cwd=cwd,
        num_slices=num_slices,
        hosts_per_slice=hosts,
        backoff_limit=int(wjob.get("backoffLimit", 6)),
        max_restarts=int(failure_policy.get("maxRestarts", 0)),
        devices_per_slice=dps,
        scheduling_delay=float(env.get(envvars.LOCAL_SCHEDULING_DELAY, DEFAULT_SCHEDULING_DELAY)),
        health_timeout=float(env.get(envvars.HEALTH_TIMEOUT, heartbeat.DEFAULT_TIMEOUT)),
        heartbeat_interval=float(env.get(envvars.HEARTBEAT_INTERVAL, heartbeat.DEFAULT_INTERVAL)),
        health_address=channel.address(workload_dir),
        events_file=str(workload_dir / "events.jsonl"),
        head_command=mt.command if mt else command,
        head_env=main.get("env") or [],
        worker_env=wcont.get("env") or [],
        hung_host_timeout=float(env.get(envvars.LOCAL_HUNG_HOST_TIMEOUT,
                                        DEFAULT_HUNG_HOST_TIMEOUT)),
        marker=hashlib.sha1(f"{workload_dir}{time.time()}{os.getpid()}".encode()).hexdigest(),
        maxtext=(mt.standin or "none") if mt else "",
        head_note=(mt.note or "") if mt else "",
        labels=dict((manifest.get("metadata") or {}).get("labels") or {}),
        worker_grace=float(wjob["template"]["spec"].get("terminationGracePeriodSeconds", 30)),
        platform=platform,
    )


def tasks_needed(num_slices: int, hosts_per_slice: int, cpus: int) -> int:
    """Processes and threads a local workload starts, estimated on the generous side.

    ``RLIMIT_NPROC`` counts threads too: the supervisor and each slice host run a few; the
    head's trainer runs JAX, whose thread pools grow with the CPU count.
    """
    return 4 * (1 + num_slices * hosts_per_slice) + 2 * cpus + 32


def process_room_problem(needed: int, limit: int, in_use: int) -> str | None:
    """Why ``needed`` more tasks do not fit under ``limit`` with ``in_use`` running, or None."""
    if in_use + needed <= limit:
        return None
    return (f"the local workload needs about {needed} processes and threads, but the process "
            f"limit (ulimit -u) is {limit} and {in_use} are in use")


def check_process_room(num_slices: int, hosts_per_slice: int) -> None:
    """Refuse a workload the user's process limit cannot hold, before starting any of it.

    Otherwise a fork fails half-way through and the error is a traceback from the supervisor.

    Raises:
        UsageError: the limit leaves too little room.
    """
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
    if soft == resource.RLIM_INFINITY or os.geteuid() == 0:  # root is not held to it
        return
    needed = tasks_needed(num_slices, hosts_per_slice, os.cpu_count() or 1)
    problem = process_room_problem(needed, soft, _tasks_of_user())
    if problem:
        raise UsageError(problem, hint="raise it (e.g. ulimit -u 4096), or run fewer slices or "
                                       "hosts (--num-slices, a smaller --tpu-type)")


def _tasks_of_user() -> int:
    """Threads of every process of this real uid: what RLIMIT_NPROC counts."""
    import psutil

    uid, total = os.getuid(), 0
    for proc in psutil.process_iter(["uids", "num_threads"]):
        uids, threads = proc.info["uids"], proc.info["num_threads"]
        if uids is not None and uids.real == uid:
            total += threads or 1
    return total


def check_pod_index(name: str, plan: Plan, slice: int | None, host: int | None) -> None:
    """``--slice``/``--host`` within the workload's shape (:func:`elastix.backends.base.
    check_pod_index`, the same words as on GKE). Imported here, not above: the supervisor
    imports this module at its start and never checks an index."""
    from elastix.backends.base import check_pod_index as check

    check(name, plan.num_slices, plan.hosts_per_slice, slice, host)


_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
"""A workload's name: a Kubernetes name, as the JobSet it stands for."""


def is_workload_name(name: str) -> bool:
    """A name a workload can have: a DNS-1123 label's characters, at most 253 of them (a
    Kubernetes name's most; a directory name holds 255)."""
    return len(name or "") <= 253 and bool(_NAME.match(name or ""))


def check_root(root: Path) -> None:
    """A state dir that exists as something else (a file) is bad input, not "no workloads"."""
    if root.exists() and not root.is_dir():
        raise UsageError(f"--state-dir {root} is not a directory",
                         hint="give a directory (created if missing), or leave --state-dir "
                              "and ELASTIX_STATE_DIR unset for the default")


def workload_dir(root: Path, name: str, must_exist: bool = True) -> Path:
    """The state directory of workload ``name`` under ``root``; ``must_exist``: one with a
    plan, else not found. A name no workload can have is bad input."""
    check_root(root)
    if not is_workload_name(name):
        raise UsageError(f"{shown(name)} is not a valid workload name",
                         hint="lowercase letters, digits and '-', as in Kubernetes names")
    d = root / name
    if must_exist and not (d / "plan.json").exists() and not _replaced(root, name, d):
        raise NotFoundError(f"workload {name!r} not found in {root}",
                            hint="list workloads with: elastix workload list --backend local")
    return d


REPLACE_WAIT = 30.0
"""Seconds a reader waits for a ``create --replace`` that has removed the old run's directory
to rename the new one in (milliseconds, unless the machine is starved)."""


def replacing_marker(root: Path, name: str) -> Path:
    """Where ``create --replace`` says, for its whole length, that ``name`` is being replaced
    (the create's pid inside): between removing the old run's directory and renaming the new
    one in, a reader that finds no workload waits for it instead of calling it deleted."""
    return root / f".replacing-{name}"


def _replaced(root: Path, name: str, d: Path) -> bool:
    """Whether ``name``'s directory came back (a replace's new run) while a live replace's
    marker said it would; False at once when no replace is under way."""
    marker = replacing_marker(root, name)
    deadline = time.monotonic() + REPLACE_WAIT
    while time.monotonic() < deadline:
        if (d / "plan.json").exists():
            return True
        try:
            pid = int(marker.read_text() or "0")
        except (OSError, ValueError):
            return (d / "plan.json").exists()  # no marker (any more): the dir says
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False  # the replacing create died: its marker is stale
        except PermissionError:
            pass
        time.sleep(0.01)
    return (d / "plan.json").exists()


def read_workload(d: Path) -> tuple[Plan, WorkloadState]:
    """The plan and the last state the supervisor wrote of the workload in ``d``."""
    return read_record(d / "plan.json", Plan.from_json), WorkloadState.read(d)
