"""The local backend's delete: stop a workload's processes, the head first with its grace (its
final save), and remove its state directory; its kept data (checkpoints) stays unless
``--delete-data``. Nothing is orphaned even when the supervisor itself was SIGKILLed or stopped:
every recorded process and every process carrying the workload's marker is swept.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from elastix.backends.local import channel
from elastix.backends.local.plan import compilation_cache_dir, data_dir, read_workload, workload_dir
from elastix.backends.local.state import (
    marked_pids,
    proc_matches,
    read_procs,
    supervisor_record,
    sweep,
)
from elastix.backends.local.supervisor import HEAD_TERM_GRACE, TERM_GRACE
from elastix.backends.local.workdir import command_files, move_command_files
from elastix.errors import BackendError


def delete(root: Path, name: str, *, timeout: float = 300.0,
           delete_data: bool = False) -> str | None:
    """Stop workload ``name``'s processes and remove its state directory under ``root``; what
    was done with its kept data (and by whom, when the supervisor could not stop them), for
    the user."""
    d = workload_dir(root, name, must_exist=False)
    if not (d / "plan.json").exists() and delete_data and data_dir(d).is_dir():
        # deleted before, its data kept: what --delete-data then said it would remove
        shutil.rmtree(data_dir(d), ignore_errors=True)
        return (f"only its data was left: removed its data (checkpoints) in {data_dir(d)}"
                + _cache_kept(d))
    d = workload_dir(root, name)
    with _held(d) as still_ours:
        if not still_ours:
            # Another delete ran while this one waited: what is left (its data, or
            # nothing) is judged afresh, so each delete says only what it did itself.
            return delete(root, name, timeout=timeout, delete_data=delete_data)
        return _delete_held(name, d, timeout, delete_data)


def _delete_held(name: str, d: Path, timeout: float, delete_data: bool) -> str | None:
    """:func:`delete` of ``d``, its lock held (:func:`_held`)."""
    try:
        plan, st = read_workload(d)
    except (OSError, ValueError, KeyError, TypeError):
        plan, st = None, None  # half-written or damaged: sweep what procs.jsonl recorded
    sup = supervisor_record(d, st)
    unanswered = said = None
    if sup and proc_matches(sup["pid"], sup.get("create_time")):
        unanswered = _stop_supervisor(sup, timeout)
    if unanswered:
        # Before the supervisor goes: its guard SIGKILLs every pod when it dies.
        said = _stop_head_itself(d, unanswered, timeout)
        with contextlib.suppress(ProcessLookupError):
            os.kill(sup["pid"], signal.SIGKILL)  # it restarts nothing from here on
    sweep_all(d, plan.marker if plan else None, plan.health_address if plan else None,
               d, timeout=min(timeout, 10.0))
    survivors = [r["pid"] for r in read_procs(d)
                 if proc_matches(r["pid"], r.get("create_time"))]
    if survivors:
        raise BackendError(f"processes of {name!r} survived SIGKILL: {survivors}",
                           hint="they may be stuck in the kernel; try again")
    kept = data_dir(d)
    theirs = command_files(d)
    moved = None
    if not delete_data:
        try:
            moved = move_command_files(d, kept)
        except OSError as e:  # never delete what could not be moved: the directory stays
            raise BackendError(f"could not move what {name!r}'s command wrote in {d} into "
                               f"its kept data {kept}: {e.strerror or e}",
                               hint="make the state dir writable, then delete again (its "
                                    "processes are stopped; nothing was removed)") from None
    shutil.rmtree(d, ignore_errors=True)
    first = f"{said}; " if said else ""  # what was done in the supervisor's place
    if delete_data and (kept.exists() or theirs):
        shutil.rmtree(kept, ignore_errors=True)
        also = f" and what its command wrote in $ELASTIX_WORKLOAD_DIR ({', '.join(theirs)})"
        return (first + f"removed its data (checkpoints) in {kept}" + (also if theirs else "")
                + _cache_kept(d))
    if not kept.exists():
        return said
    return (first + f"kept its data (checkpoints) in {kept}"
            + (f", and {moved}" if moved else "") + "; --delete-data removes it")


def _cache_kept(d: Path) -> str:
    """What ``--delete-data`` leaves on purpose: the compilation cache every workload of the
    state directory shares (another workload's entries are in it; JAX keys them apart)."""
    cache = compilation_cache_dir(d)
    return (f"; kept the compilation cache all workloads here share, {cache}"
            if cache.is_dir() else "")


def sweep_all(procs_of: Path | None, marker: str | None, health_address: str | None,
               d: Path, timeout: float = 10.0) -> None:
    """SIGKILL every process of a workload whose supervisor is stopped or killed: those
    ``procs_of``'s ``procs.jsonl`` records (None: the directory is someone else's now) and
    those carrying ``marker``; then remove the supervisor's short socket directory outside
    ``d``, which a SIGKILLed supervisor leaves. ``delete`` and a create undone both end so."""
    sweep(procs_of, marker, timeout=timeout)
    if health_address is not None:
        channel.remove(health_address, d)


def outlived(marker: str) -> list[str]:
    """``pid N (command)`` of each live process carrying the workload's marker.

    Looked for only when the supervisor died without finishing: its guard kills these, so any
    left means the guard was killed too (``delete`` still sweeps them by the marker).
    """
    import psutil

    out = []
    for pid in marked_pids(marker):
        try:
            cmd = " ".join(psutil.Process(pid).cmdline()) or "?"
        except psutil.Error:
            continue
        out.append(f"pid {pid} ({cmd if len(cmd) <= 60 else cmd[:57] + '...'})")
    return out


@contextlib.contextmanager
def _held(d: Path) -> Iterator[bool]:
    """An exclusive lock on the workload directory ``d`` (flock on the directory itself: no
    file left behind), for one ``delete`` at a time. Yields whether ``d`` is still the
    directory that was locked (False: it was removed, or replaced, while this waited)."""
    import fcntl

    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        yield False
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            now = os.stat(d)
        except FileNotFoundError:
            yield False
            return
        locked = os.fstat(fd)
        yield (now.st_dev, now.st_ino) == (locked.st_dev, locked.st_ino)
    finally:
        os.close(fd)


def being_deleted(d: Path) -> bool:
    """Whether a ``delete`` (or a ``create --replace``'s) holds ``d``'s lock now: between its
    supervisor's exit and the directory's removal the run is stopping, not failed. A shared
    lock tried without waiting, released at once: readers never hold up each other, and a
    delete waits for one at most a few microseconds."""
    import fcntl

    try:
        fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops a lock it got
    return False


def _stop_supervisor(sup: dict[str, Any], timeout: float) -> str | None:
    """SIGTERM the supervisor (it stops its pods, the head first with its grace, then exits)
    and wait for it; None when it did. For a supervisor that is stopped (SIGSTOP) or does not
    exit in time, why: its pods' processes still need their SIGTERM."""
    import psutil

    pid, made = sup["pid"], sup.get("create_time")
    try:
        stopped = psutil.Process(pid).status() == psutil.STATUS_STOPPED
    except psutil.Error:
        return None
    if not stopped:
        os.kill(pid, signal.SIGTERM)
        # The head's grace (its final save), then the hosts': what the supervisor allows.
        deadline = time.monotonic() + min(timeout, HEAD_TERM_GRACE + TERM_GRACE + 5.0)
        while proc_matches(pid, made):
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        else:
            return None
    return "was stopped (SIGSTOP)" if stopped else "did not exit in time"


def _stop_head_itself(d: Path, why: str, timeout: float) -> str:
    """What a kubelet does whatever the JobSet controller does: SIGTERM the head pod's process
    group, wait its grace (its final save), SIGKILL what is left. The slice hosts are still up
    (the sweep ends them after), so the head commits its step rather than seeing a slice go."""
    heads = [r for r in read_procs(d) if r.get("role") == "head"
             and proc_matches(r["pid"], r.get("create_time"))]
    what = f"the supervisor (the local JobSet controller) {why}"
    if not heads:
        return f"{what}: elastix stopped its processes itself; no head was running"
    head = heads[-1]
    for sig in (signal.SIGTERM, signal.SIGCONT):  # a stopped head acts on SIGTERM once resumed
        try:
            os.killpg(head["pid"], sig)
        except (ProcessLookupError, PermissionError):
            pass
    started = time.monotonic()
    grace = min(timeout, HEAD_TERM_GRACE)
    sigkill_after(head["pid"], head.get("create_time"), grace)
    took = time.monotonic() - started
    if took >= grace:
        return (f"{what}: elastix sent the head SIGTERM itself, as a kubelet does; it did not "
                f"exit in its {grace:g} s grace and was killed (steps since its last "
                "checkpoint are lost)")
    return (f"{what}: elastix sent the head SIGTERM itself, as a kubelet does, and it exited "
            f"after {took:.1f} s (its final save)")


def sigkill_after(pid: int, create_time: float | None, grace: float) -> None:
    """Wait until ``pid`` has exited, at most ``grace`` seconds, then SIGKILL it if it is still
    the same process: the kubelet's end of a pod's grace period."""
    deadline = time.monotonic() + grace
    while proc_matches(pid, create_time):
        if time.monotonic() >= deadline:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            return
        time.sleep(0.01)
