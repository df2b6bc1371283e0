"""The backend interface every elastix backend implements (the torchx scheduler pattern).

A backend receives the *rendered, validated* JobSet manifest (a plain dict) and never the CLI's
flags. ``submit`` is dry-run + schedule. The GKE backend talks to the API server with the
official ``kubernetes`` client; the local backend runs the same manifest as local processes.
The result types are plain dataclasses so commands can print them as Rich tables or JSON.
"""

from __future__ import annotations

import abc
import dataclasses
import datetime as dt
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from elastix.backends import Target
from elastix.protocol import timefmt
from elastix.protocol.recovery import RecoveryPoint

if TYPE_CHECKING:
    from elastix.workload.selector import Selector


@dataclasses.dataclass
class PodInfo:
    """One pod (GKE) or process (local) of a workload."""

    name: str
    role: str  # "head" or "worker"
    phase: str  # Pending / Running / Succeeded / Failed / Unknown / Terminating / Stopped (local)
    slice: int | None = None  # worker: jobset job-index
    host: int | None = None  # worker: job-completion-index
    restarts: int = 0  # container restarts summed over the pod's containers
    node: str | None = None
    reason: str | None = None  # why it is not running (Unschedulable, ImagePullBackOff, ...)
    started: dt.datetime | None = None
    pid: int | None = None  # local backend only


@dataclasses.dataclass
class SliceStatus:
    """Per-slice state: the pods of one worker Job."""

    index: int
    hosts: int  # expected pods (hosts per slice)
    pods: list[PodInfo]
    job_failures: int = 0  # pod failures counted against the Job's backoffLimit
    backoff_limit: int | None = None
    lost: str | None = None
    """Why the controller counts this slice as lost though its pods may run (local: the
    trainer's ``elastic_detected`` not yet followed by ``elastic_slices_ready``)."""
    job_restarts: int | None = None
    """Times JobSet recreated this slice's Job (its ``jobRestarts[slice]``, ``--slice-restart
    job``); None when the JobSet restarts slices through ``backoffLimit``."""

    @property
    def slice_restarts(self) -> int:
        """Times the whole slice failed. On TPU one host's death fails every pod of its slice,
        so each costs ``hosts`` pod failures of the Job (hence ``backoffLimit = restarts x
        hosts``, as xpk and pathways-job render it); with ``--slice-restart job``, the times
        JobSet recreated the slice's Job."""
        if self.job_restarts is not None:
            return self.job_restarts
        return self.job_failures // max(1, self.hosts)

    @property
    def max_slice_restarts(self) -> int | None:
        """The slice restarts ``backoff_limit`` allows (``--max-slice-restarts`` when elastic);
        None with ``--slice-restart job``, whose budget is the JobSet's, shared."""
        if self.job_restarts is not None:
            return None
        return None if self.backoff_limit is None else self.backoff_limit // max(1, self.hosts)

    @property
    def ready(self) -> int:
        """Pods that are running."""
        return sum(1 for p in self.pods if p.phase == "Running")

    @property
    def state(self) -> str:
        """``Ready`` (every host runs), ``Degraded`` (some do), ``Completed`` (all succeeded),
        ``Failed`` (none runs and none is coming back) or ``Pending``; and, whatever the pods
        say, ``Lost`` while the controller counts it lost, ``Stopped`` while a host is stopped
        (its process exists but runs nothing, as a hung host)."""
        phases = [p.phase for p in self.pods]
        if phases and all(ph == "Succeeded" for ph in phases):
            return "Completed"
        if self.lost:
            return "Lost"
        if "Stopped" in phases:
            return "Stopped"
        if self.ready == self.hosts:
            return "Ready"
        if self.ready > 0:
            return "Degraded"
        if phases and not any(ph == "Pending" for ph in phases) and any(
                ph in ("Failed", "Unknown") for ph in phases):
            return "Failed"
        return "Pending"


@dataclasses.dataclass
class QueueStatus:
    """Where a workload stands in Kueue (GKE, when its JobSet names a LocalQueue)."""

    queue: str  # the LocalQueue (label kueue.x-k8s.io/queue-name)
    workload: str | None = None  # Kueue's Workload for the JobSet; None: not (yet) created
    quota_reserved: bool | None = None  # condition QuotaReserved; None: not reported
    admitted: bool | None = None  # condition Admitted
    message: str | None = None  # the newest of those conditions' messages
    pending_checks: list[dict[str, str]] = dataclasses.field(default_factory=list)
    """Admission checks holding it: ``{"name", "state", "message"}`` (state Pending/Retry)."""
    position: int | None = None  # in the LocalQueue, from 0 (Kueue's visibility API)
    cluster_position: int | None = None  # in the ClusterQueue, from 0
    visibility: str | None = None  # why the position is not shown (API not served, ...)


@dataclasses.dataclass
class WorkloadStatus:
    """What ``elastix workload list/status`` prints for one workload."""

    name: str
    namespace: str
    backend: str
    state: str  # Running / Pending / Restarting / Completed / Failed / Suspended / Terminating
    created: dt.datetime | None
    num_slices: int
    jobset_restarts: int = 0
    max_restarts: int | None = None
    head: PodInfo | None = None
    slices: list[SliceStatus] = dataclasses.field(default_factory=list)
    reasons: list[str] = dataclasses.field(default_factory=list)  # why it is stuck, if it is
    message: str | None = None
    labels: dict[str, str] = dataclasses.field(default_factory=dict)
    """The workload's labels (GKE: the JobSet's; local: kept in its plan), ``-l`` selects on."""
    recovery_point: RecoveryPoint | None = None
    """The newest committed checkpoint and the steps since (GKE: the head's annotations on the
    JobSet; local: folded from the events file); None before any commit."""
    queue: QueueStatus | None = None
    """Kueue's view while the JobSet is suspended and names a queue (GKE ``status``)."""

    def age_seconds(self, now: dt.datetime | None = None) -> float | None:
        if self.created is None:
            return None
        return ((now or timefmt.utc_now()) - self.created).total_seconds()

    def to_json(self) -> dict[str, Any]:
        """A JSON-safe dict (datetimes as ISO strings)."""

        def conv(v: Any) -> Any:
            if isinstance(v, dt.datetime):
                return timefmt.iso_ms(v)
            if isinstance(v, dict):
                return {k: conv(x) for k, x in v.items()}
            if isinstance(v, list):
                return [conv(x) for x in v]
            return v

        d = conv(dataclasses.asdict(self))
        d["age_seconds"] = self.age_seconds()
        for sd, s in zip(d["slices"], self.slices, strict=True):  # properties: not fields
            sd["state"], sd["ready"] = s.state, s.ready
            sd["slice_restarts"], sd["max_slice_restarts"] = s.slice_restarts, s.max_slice_restarts
        return d


FAULTS = ("kill", "term", "hang", "slice", "head")
"""The faults ``elastix chaos`` delivers (``--fault``), each as the platform delivers it:

- ``kill``: one slice host crashes (SIGKILL; GKE: its pod deleted with grace 0);
- ``term``: planned maintenance of one host (SIGTERM, then SIGKILL once the grace is over;
  GKE: its pod deleted with that grace, as node maintenance does);
- ``hang``: one host stops answering (SIGSTOP) until the platform replaces it, or until
  ``Fault.hang_for`` seconds have passed (then SIGCONT);
- ``slice``: every host of one slice at once (SIGKILL);
- ``head``: the controller itself dies (SIGKILL of the head): the whole workload restarts.
"""


@dataclasses.dataclass(frozen=True)
class Fault:
    """One fault to deliver: its kind (:data:`FAULTS`) and how."""

    kind: str = "kill"
    grace: float | None = None
    """``term``: seconds from SIGTERM to SIGKILL; None: the platform's (the pod's
    ``terminationGracePeriodSeconds``, Kubernetes' default 30 s when it sets none)."""
    hang_for: float | None = None
    """``hang``: SIGCONT after this many seconds; None: stopped until the platform replaces
    the host (locally the hung-host probe, ``ELASTIX_LOCAL_HUNG_HOST_TIMEOUT``)."""

    def describe(self) -> str:
        """``kill``, ``term (grace 30 s)``, ``hang (10 s)``... as reports name it."""
        if self.kind == "term" and self.grace is not None:
            return f"term (grace {self.grace:g} s)"
        if self.kind == "hang":
            return f"hang ({self.hang_for:g} s)" if self.hang_for is not None \
                else "hang (until replaced)"
        return self.kind

    def check_target(self, slice: int | None, host: int | None, where: str | None = None
                     ) -> None:
        """The one place a fault's target is checked against its kind: ``head`` is one pod
        (no slice, no host), ``slice`` takes every host of its slice (no host). ``where``
        names a file's entry (``plan 'p.yaml', round 2``): its keys are named, not flags.

        Raises:
            UsageError: the target does not fit the fault (exit 2, nothing killed).
        """
        from elastix.errors import UsageError

        s, h = ("slice", "host") if where else ("--slice", "--host")
        at = f"{where}: fault" if where else "--fault"
        if self.kind == "head" and (slice is not None or host is not None):
            raise UsageError(f"{at} head takes no {s} or {h}",
                             hint=f"the head is one pod: drop {s}/{h}")
        if self.kind == "slice" and host is not None:
            raise UsageError(f"{at} slice takes every host of a slice: not {h}",
                             hint=f"drop {h} (or fault kill with {s} and {h})")


def check_pod_index(name: str, num_slices: int, hosts: int, slice: int | None,
                    host: int | None, where: str | None = None) -> None:
    """``slice``/``host`` within workload ``name``'s shape (``hosts`` per slice; 0: unknown,
    not checked), or bad input naming the range: the same check and words on every backend,
    so a typo is never taken for a workload between pods. ``where`` names a plan's round
    (its keys are named, not flags).

    Raises:
        UsageError: out of range (exit 2, nothing killed).
    """
    from elastix.errors import UsageError

    s, h = (f"{where}: slice", f"{where}: host") if where else ("--slice", "--host")
    hint = f"see them with: elastix workload status {name}"
    if slice is not None and not 0 <= slice < num_slices:
        raise UsageError(f"{s} {slice} is out of range: {name} has {num_slices} slices "
                         f"(0-{num_slices - 1})", hint=hint)
    if host is not None and hosts and not 0 <= host < hosts:
        raise UsageError(f"{h} {host} is out of range: {name} has {hosts} hosts per slice "
                         f"(0-{hosts - 1})", hint=hint)


@dataclasses.dataclass
class KillRecord:
    """What ``elastix chaos kill-worker`` did (or would do, with ``dry_run``): one process or
    pod a fault was delivered to."""

    workload: str
    pod: str
    slice: int | None  # None for the head
    host: int | None
    node: str | None
    time: dt.datetime  # when the fault was delivered (term: its SIGTERM), taken just before
    sent: dt.datetime | None = None  # local: taken once the signal was sent; the fault landed
    # between the two (a SIGKILLed or SIGSTOPped process runs nothing after ``sent``)
    dry_run: bool = False
    pid: int | None = None  # local backend: the process that got the signal
    fault: str = "kill"  # the kind delivered (:data:`FAULTS`)
    grace: float | None = None  # term: the grace given, in seconds
    resumed: dt.datetime | None = None  # hang --for: when it was sent SIGCONT


@dataclasses.dataclass
class LogOptions:
    """Which container's log to stream, and how."""

    container: str | None = None  # default: the head's main container
    slice: int | None = None  # a worker instead of the head
    host: int | None = None
    follow: bool = False
    since_seconds: int | None = None
    tail_lines: int | None = None
    previous: bool = False  # the container's previous instance (locally: the previous head attempt)
    timestamps: bool = False  # each line led by the time the log API recorded (GKE), as kubectl


EVENTS_FILE = "events file"
"""A :class:`TrainerEvents` source: the trainer's JSONL events (docs/events.md)."""
HEAD_LOG = "head log"
"""A :class:`TrainerEvents` source: the head's log lines (docs/events.md, "Log lines")."""
MAXTEXT_LOG = "MaxText log"
"""A :class:`TrainerEvents` source: a MaxText head's log, which has no events file."""


@dataclasses.dataclass
class TrainerEvents:
    """A workload's trainer events as its backend reached them (:meth:`Backend.trainer_events`).

    Exactly one of ``records`` and ``lines`` is set. Measurement normalises either into one
    stream (``elastix.measure.events.events_of``): this layer only knows where they are.
    """

    source: str
    """Where they came from: :data:`EVENTS_FILE`, :data:`HEAD_LOG` or :data:`MAXTEXT_LOG`."""
    from_start: bool
    """They reach back to the run's first event: a goodput over them is the run's so far.
    False for a log's tail, or a log the kubelet rotated (GKE: the current head's run; a
    replaced head pod's log is gone with it)."""
    records: list[dict[str, Any]] | None = None
    """The events file's records, in the order written (an events file)."""
    lines: list[str] | None = None
    """The head's log lines, oldest first, each led by a time (a log): the log API's (GKE,
    ``timestamps``) or the line's own; notices are not lines."""
    skipped: int = 0
    """Torn lines of the events file skipped (``eventspec.split_jsonl``): half a record left
    by a head killed mid-write, a run of NUL bytes."""
    first_skipped: str | None = None
    """The first of them: ``line N, not JSON``."""


@dataclasses.dataclass
class LogEvent:
    """One item of a log stream: a line, or a notice from elastix (e.g. the head pod restarted)."""

    text: str
    notice: bool = False


class Backend(abc.ABC):
    """Runs rendered JobSet manifests. Implementations: ``gke``, ``local``."""

    name: str = "abstract"

    namespace: str = "default"  # Kubernetes backends: the namespace their workloads live in

    notices: Sequence[str] = ()
    """Lines the last ``submit`` wants the user to read: something it went without, and why
    (``workload create`` prints them). A backend that has some sets a list of its own."""

    @classmethod
    def from_target(cls, target: Target) -> Backend:
        """Build the backend for the target the command's options describe."""
        raise NotImplementedError

    @classmethod
    def defaults(cls, smoke: bool = False) -> dict[str, Any]:
        """Spec fields this backend fills in when neither flags nor the spec file give them.

        Applied to workloads that are not headless. ``smoke``: the default job sized for a CI
        smoke run (``workload create --smoke``), for a backend that has a default job. A class
        method: ``workload create`` needs them before the spec (and so before the backend)
        exists.
        """
        return {}

    def where(self) -> str:
        """Where this backend's workloads live, as in ``no gke workloads in namespace x``."""
        return f"namespace {self.namespace}"

    @abc.abstractmethod
    def submit(self, manifest: dict[str, Any], *, replace: bool = False,
               dry_run: str | None = None, preflight: bool = True) -> str:
        """Create the workload from a validated manifest and return its name.

        Args:
            manifest: the rendered JobSet, already validated against the CRD.
            replace: delete an existing workload of the same name first.
            dry_run: ``None`` to submit; ``"server"`` to ask the backend to validate without
                persisting (``"client"`` dry runs never reach a backend).
            preflight: first check that the target can run it (GKE: pools, sizes, scopes,
                JobSet); backends without such checks ignore it.

        Raises:
            ConflictError: a workload of that name exists and ``replace`` is false.
        """

    @abc.abstractmethod
    def list(self, selector: Selector | None = None) -> list[WorkloadStatus]:
        """Every elastix workload this backend knows about, oldest first; with ``selector``
        (``-l``), only those whose labels it selects."""

    def exists(self, name: str) -> bool:
        """Whether the workload is there (``delete`` checks every name before deleting any)."""
        from elastix.errors import NotFoundError

        try:
            self.status(name)
        except NotFoundError:
            return False
        return True

    def diagnose(self, name: str) -> dict[str, Any]:
        """What this backend can say of workload ``name`` beyond its status, for ``elastix
        workload inspect``: ``manifest`` (the workload's JobSet, environment values and all:
        the caller hides them) and backend-specific sections (GKE: Jobs, pods with their
        events, nodes per pool, Kueue; local: the supervisor's state, log and processes), with
        ``unreadable``: a line per part it could not read."""
        raise NotImplementedError

    @abc.abstractmethod
    def status(self, name: str) -> WorkloadStatus:
        """One workload, with per-slice state. Raises NotFoundError."""

    @abc.abstractmethod
    def logs(self, name: str, opts: LogOptions) -> Iterator[LogEvent]:
        """Yield log lines; with ``opts.follow`` keep following across head restarts."""

    @abc.abstractmethod
    def kill_worker(self, name: str, *, slice: int | None = None, host: int | None = None,
                    seed: int | None = None, dry_run: bool = False) -> KillRecord:
        """Kill one worker with no grace (SIGKILL). Random among running workers unless pinned."""

    @classmethod
    def fault_support(cls, fault: Fault) -> str | None:
        """None when this backend can deliver ``fault``; else one line saying why not (said
        before anything is killed, before any connection: a class method)."""
        if fault.kind == "kill":
            return None
        return f"--fault {fault.kind} cannot be delivered on the {cls.name} backend"

    def inject(self, name: str, fault: Fault, *, slice: int | None = None,
               host: int | None = None, seed: int | None = None,
               dry_run: bool = False) -> list[KillRecord]:
        """Deliver ``fault`` to the workload and return what it hit, in the order hit.

        ``slice``/``host`` pin the victim (``slice`` alone: that slice's host chosen with
        ``seed``); ``head`` takes neither. ``term`` returns once the victim is gone (at most
        its grace, then SIGKILL); ``hang`` returns once it is stopped (:meth:`resume` ends it).

        Raises:
            UsageError: the fault cannot be delivered here (:meth:`fault_support`) or a
                pin is out of range; nothing was done.
            BackendError: no running victim.
        """
        from elastix.errors import UsageError

        why = self.fault_support(fault)
        if why is not None:
            raise UsageError(why, hint="see elastix chaos kill-worker --help for the faults")
        return [self.kill_worker(name, slice=slice, host=host, seed=seed, dry_run=dry_run)]

    def clone(self, name: str, *, suffix: str = "reference", dry_run: bool = False) -> str:
        """Start a copy of the workload from its own rendered manifest, under a name of its own
        (``<name>-<suffix>``, or a shorter one that fits the name rules) and with its own
        data (checkpoints): ``chaos run --verify``'s uninterrupted reference. Returns the
        copy's name; ``dry_run`` checks that it can be made and starts nothing.

        Raises:
            UsageError: this backend makes no copies, the copy's name is taken, or the copy
                would share the workload's checkpoints; nothing was started.
            NotFoundError: no such workload.
        """
        from elastix.errors import UsageError

        raise UsageError(f"the {self.name} backend does not copy workloads",
                         hint="create the copy yourself with elastix workload create")

    def events_path(self, name: str) -> str | None:
        """The trainer's events file, when this machine can read it as it grows (local):
        aiming a fault polls it every few ms. None: poll :meth:`trainer_events`."""
        return None

    def resume(self, name: str, rec: KillRecord) -> bool:
        """End a ``hang`` (SIGCONT): True if the stopped process was resumed, False if it is
        gone (replaced meanwhile)."""
        return False

    @abc.abstractmethod
    def trainer_events(self, name: str, *, tail: bool = False,
                       cheap: bool = False) -> TrainerEvents | None:
        """The workload's trainer events, read now, with their source and whether they reach
        the run's start: the one answer to "where do its events come from?".

        The events file when this backend can reach it, else the head's log (with the time of
        each line: MaxText's lines have none of their own). Guarantees:

        - One read of what exists now; it never follows or waits. Poll for more (as ``wait``
          and ``chaos`` do): a later full read of the same run returns at least the events of
          an earlier one, unless the head was replaced (GKE: a new pod's log begins anew).
        - ``from_start`` is true only when the events reach back to the run's first one;
          a log's tail or a rotated log says False, never a tail passed off as the run.
        - Notices (the head restarted, the stream was cut) are never events.

        Args:
            name: the workload.
            tail: the last steps are enough (``workload list``, one read per workload): a
                backend may read only the log's last lines (then ``from_start`` is false
                unless they are the whole log). Implies ``cheap``.
            cheap: the cheapest read that holds the same events, even where a fuller source
                exists (``workload status`` and its refreshes; GKE: the head's log, one request
                to the API server, not the events file in a bucket).

        Returns:
            The events; None when there is nothing to read yet: no events file and no head
            log (locally: no head has started; GKE, on a ``cheap`` read: no head pod runs).

        Raises:
            NotFoundError: no such workload (a ``cheap`` read may return None instead: its
                callers have just listed the workload); on GKE, a full read where the events
                file is out of reach and there is no head pod (as ``elastix logs`` says).
        """

    @abc.abstractmethod
    def delete(self, name: str, *, wait: bool = False, timeout: float = 300.0,
               delete_data: bool = False, foreign: bool = False) -> str | None:
        """Delete the workload; with ``wait``, return only once every pod/process is gone.

        Data the backend keeps apart from the workload (the local backend's checkpoints) stays
        unless ``delete_data``. Only what elastix made is deleted; ``foreign``: a workload
        another tool made too (GKE: a Pathways JobSet without elastix's labels). Returns a
        line saying what was kept or removed, or None.
        """
