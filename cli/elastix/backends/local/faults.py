"""The local backend's faults: real signals to the real processes of a workload's pods, as the
GKE backend's are pod deletions and node actions (:mod:`elastix.backends.gke.faults`).

Every fault takes the workload's plan and its last state (what ``LocalBackend`` read) and
returns one :class:`~elastix.backends.base.KillRecord` per process signalled. Two times bound
each fault: ``time`` just before the signal (nothing the fault caused can predate it:
``kill_to_loss`` runs from it) and ``sent`` once it was sent (a SIGKILLed or SIGSTOPped process
runs nothing after it: the aim places the fault there). A CLI preempted between the two
separates them; neither is right for both.
"""

from __future__ import annotations

import os
import random
import signal
from pathlib import Path

from elastix.backends.base import Fault, KillRecord
from elastix.backends.local.delete import sigkill_after
from elastix.backends.local.plan import Plan, check_pod_index
from elastix.backends.local.state import PodRecord, WorkloadState, proc_matches, read_procs
from elastix.backends.local.supervisor import killpg
from elastix.errors import BackendError
from elastix.protocol.timefmt import utc_now

_SIGNAL = {"kill": signal.SIGKILL, "slice": signal.SIGKILL, "term": signal.SIGTERM,
           "hang": signal.SIGSTOP}
"""What each fault on a worker sends (``head`` SIGKILLs the head's process group)."""


def kill_worker(name: str, plan: Plan, st: WorkloadState, *, slice: int | None = None,
                host: int | None = None, seed: int | None = None,
                dry_run: bool = False) -> KillRecord:
    """SIGKILL one running worker pod's process, chosen by ``seed`` among those ``slice`` and
    ``host`` allow."""
    check_pod_index(name, plan, slice, host)
    victim = random.Random(seed).choice(_running_workers(name, st, slice, host, "kill"))
    rec = KillRecord(workload=name, pod=victim.name, slice=victim.slice, host=victim.host,
                     node="localhost", time=utc_now(), dry_run=dry_run, pid=victim.pid)
    if not dry_run:
        try:
            os.kill(victim.pid, signal.SIGKILL)
        except ProcessLookupError as err:
            raise BackendError(f"worker {victim.name} exited before the kill") from err
        rec.sent = utc_now()
    return rec


def inject(name: str, fault: Fault, plan: Plan, st: WorkloadState, *, slice: int | None = None,
           host: int | None = None, seed: int | None = None,
           dry_run: bool = False) -> list[KillRecord]:
    """Signal the victim's process: SIGKILL (``kill``, ``slice``: every host of the slice,
    ``head``: the head's process group, as a pod's containers die together), SIGTERM then
    SIGKILL after the grace (``term``: ``--grace``, else the worker pods' rendered
    ``terminationGracePeriodSeconds``), SIGSTOP (``hang``)."""
    fault.check_target(slice, host)
    if fault.kind == "kill":
        return [kill_worker(name, plan, st, slice=slice, host=host, seed=seed,
                            dry_run=dry_run)]
    if fault.kind == "head":
        return [_kill_head(name, st, dry_run)]
    check_pod_index(name, plan, slice, host)
    running = _running_workers(name, st, slice, None if fault.kind == "slice" else host,
                               "fault")
    rng = random.Random(seed)
    if fault.kind == "slice":
        chosen = slice if slice is not None else rng.choice(sorted({p.slice for p in running}))
        victims = [p for p in running if p.slice == chosen]
    else:
        victims = [rng.choice(running)]
    out: list[KillRecord] = []
    for i, v in enumerate(victims):
        rec = KillRecord(workload=name, pod=v.name, slice=v.slice, host=v.host,
                         node="localhost", time=utc_now(), dry_run=dry_run, pid=v.pid,
                         fault=fault.kind)
        if dry_run:
            out.append(rec)
            continue
        try:
            os.kill(v.pid, _SIGNAL[fault.kind])
        except ProcessLookupError:
            if fault.kind == "slice" and i > 0:
                continue  # its slice went down with the first host: that is the fault
            raise BackendError(f"worker {v.name} exited before the fault") from None
        rec.sent = utc_now()
        if fault.kind == "term":
            rec.grace = fault.grace if fault.grace is not None else plan.worker_grace
            sigkill_after(v.pid, v.create_time, rec.grace)
        out.append(rec)
    return out


def resume(d: Path, rec: KillRecord) -> bool:
    """SIGCONT the hung host ``rec`` stopped, if that same process (of the workload in ``d``)
    still exists."""
    ours = next((r for r in read_procs(d) if r.get("pid") == rec.pid), None)
    if rec.pid is None or ours is None or not proc_matches(rec.pid, ours.get("create_time")):
        return False
    try:
        os.kill(rec.pid, signal.SIGCONT)
    except ProcessLookupError:
        return False
    rec.resumed = utc_now()
    return True


def _kill_head(name: str, st: WorkloadState, dry_run: bool) -> KillRecord:
    head = st.head
    if head is None or head.phase != "Running" or not proc_matches(head.pid, head.create_time):
        raise BackendError(f"the head of {name} is not running: nothing to kill",
                           hint=f"see elastix workload status {name}")
    rec = KillRecord(workload=name, pod=head.name, slice=None, host=None, node="localhost",
                     time=utc_now(), dry_run=dry_run, pid=head.pid, fault="head")
    if not dry_run:
        killpg(head.pid, signal.SIGKILL)
        rec.sent = utc_now()
    return rec


def _running_workers(name: str, st: WorkloadState, slice: int | None, host: int | None,
                     verb: str) -> list[PodRecord]:
    """The running worker pods ``slice`` and ``host`` allow, in order; none is bad news."""
    pods = [p for s in st.slices for p in s.pods
            if (slice is None or p.slice == slice) and (host is None or p.host == host)
            and p.phase == "Running" and proc_matches(p.pid, p.create_time)]
    if not pods:
        where = "".join(f" {k} {v}" for k, v in (("slice", slice), ("host", host))
                        if v is not None)
        raise BackendError(f"no running worker pod of {name}{where} to {verb}",
                           hint=f"see the pods with: elastix workload status {name}")
    return sorted(pods, key=lambda p: (p.slice, p.host))
