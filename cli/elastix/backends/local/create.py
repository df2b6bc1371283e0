"""The local backend's create transaction: a rendered manifest becomes a running workload, or
nothing.

``submit`` turns the manifest into a plan (:func:`elastix.backends.local.plan.make_plan`),
builds the workload's state directory aside and renames it into place (two creates of one
name cannot both win), starts a detached supervisor (:mod:`elastix.backends.local.supervisor`)
and returns once it has written its first state: the commit point
(:func:`elastix.interrupts.commit`). Anything that fails before it, Ctrl-C included, is undone:
no directory, no process. ``create --replace`` starts the new run's supervisor and its head's
imports (``supervisor --prestart``) while the old run stops.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from elastix import interrupts
from elastix.backends.local import channel, private, trainerhead
from elastix.backends.local.delete import delete, sweep_all
from elastix.backends.local.plan import (
    Plan,
    data_dir,
    make_plan,
    replacing_marker,
    workload_dir,
)
from elastix.backends.local.state import private_append, read_record, record_proc, write_json_atomic
from elastix.errors import AlreadyExists, BackendError, UsageError
from elastix.protocol import envvars

_ASIDE = ".creating-"  # a state directory being built, before it is renamed into place
START_TIMEOUT = 30.0  # seconds for the supervisor to write its first state


def submit(root: Path, manifest: dict[str, Any], notices: list[str], *, replace: bool = False,
           dry_run: str | None = None, fresh: bool = False) -> str:
    """Run ``manifest`` as a workload under ``root`` (see :meth:`Backend.submit`); what the
    user should hear of it is added to ``notices``. ``fresh`` (``workload create --fresh``):
    start over: a workload of that name is replaced, and its kept data (checkpoints) removed
    first."""
    name = (manifest.get("metadata") or {}).get("name", "")
    d = workload_dir(root, name, must_exist=False)
    private.check(root)  # another user's state root: refused before anything starts
    plan = make_plan(manifest, d, dict(os.environ), os.getcwd())
    why = channel.problem(plan.health_address)
    if why:  # the supervisor would fail at start on it: said before anything is made
        raise UsageError(why, hint="remove it (as its owner or root), or pass a shorter "
                                   "--state-dir, whose socket then stays inside it")
    if dry_run:
        if not fresh:
            say_finished(name, d, plan, notices)
        return name
    if d.exists():
        if not (replace or fresh):
            raise AlreadyExists(f"workload {name!r} already exists (local, {d})",
                                hint="pass --replace, or delete it: "
                                     f"elastix workload delete {name} --backend local")
        # The new run's supervisor and its head's imports start now, in step with the
        # old run's stop (its final save): they touch nothing until the directory is theirs.
        pre = prestart(d, plan)
        marker = replacing_marker(root, name)
        marker.write_text(str(os.getpid()))
        try:
            kept = delete(root, name, delete_data=fresh)
            # The previous run's events, logs and measurements lived in its state directory.
            notices.append(f"replaced {name}: the previous run's events, logs and "
                           f"measurements are removed with it" + (f"; {kept}" if kept else ""))
            say_finished(name, d, plan, notices)
            launch(root, name, d, manifest, plan, pre)
        finally:
            marker.unlink(missing_ok=True)
            _release(pre)
        return name
    if fresh and data_dir(d).is_dir():
        said = delete(root, name, delete_data=True)
        notices.append(f"--fresh: {name} starts from step 0 ({said})")
    say_finished(name, d, plan, notices)
    launch(root, name, d, manifest, plan)
    return name

def say_finished(name: str, d: Path, plan: Plan, notices: list[str]) -> None:
    """A notice when the kept data already holds a checkpoint of the job's last step (the
    quickstart run again after it finished): the trainer would resume it and complete
    at once, which nothing else says until ``status``."""
    found = trainerhead.finished_checkpoint(plan.head_command, d, data_dir(d), plan.cwd)
    if found is None:
        return
    kept, steps = found
    notices.append(
        f"{name}'s kept data holds a checkpoint of step {kept}, and the job's last step is "
        f"{steps} (--steps): this run resumes it and completes without training a step; to "
        f"start over, create it again with --fresh (or first: elastix workload delete {name} "
        "--delete-data)")

def launch(root: Path, name: str, d: Path, manifest: dict[str, Any], plan: Plan,
           pre: subprocess.Popen | None = None) -> None:
    """Claim the state directory, start the supervisor (``pre``: the one
    :func:`prestart` started, told to go), return once it has written its first state:
    the commit point (:func:`elastix.interrupts.commit`). Anything before it that fails,
    Ctrl-C included, leaves nothing behind: no directory, no process."""
    ours: os.stat_result | None = None
    proc: subprocess.Popen | None = None
    try:
        # Held from Ctrl-C (milliseconds): what it makes is then known to the undo below,
        # a supervisor started but not yet recorded included.
        with interrupts.deferred():
            ours = claim(root, name, d, manifest, plan)
            proc = _go(d, pre) or start_supervisor(d, plan)
        await_first_state(name, d, ours, proc)
        interrupts.commit()
    except BaseException:
        if ours is not None:
            with interrupts.deferred():  # a second Ctrl-C must not cut the undo short
                discard(d, ours, proc, plan)
        raise

def prestart(d: Path, plan: Plan) -> subprocess.Popen | None:
    """A supervisor for the run that replaces the one in ``d``, started before that run
    has stopped (``supervisor --prestart``): it reads ``plan`` and starts its head's
    imports, then waits for :func:`_go`. None if it could not be started: the new run
    then starts as any does, after the stop."""
    env = _supervisor_env(plan)
    proc: subprocess.Popen | None = None
    # Held from Ctrl-C (milliseconds): a process started is one the caller knows of.
    with interrupts.deferred():
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "elastix.backends.local.supervisor", "--prestart",
                 str(d)], env=env, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, start_new_session=True)
            proc.stdin.write(json.dumps(plan.to_json()).encode() + b"\n")
            proc.stdin.flush()
        except OSError:
            if proc is not None:
                proc.kill()
                _release(proc)
            return None
    return proc

def start_supervisor(d: Path, plan: Plan) -> subprocess.Popen:
    env = _supervisor_env(plan)
    with open(private_append(d / "supervisor.log"), "ab") as out:
        # Its own session: the terminal's Ctrl-C reaches the create, not the workload.
        proc = subprocess.Popen([sys.executable, "-m", "elastix.backends.local.supervisor",
                                 str(d)], env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    record_proc(d, proc.pid, "supervisor")
    return proc

def await_first_state(name: str, d: Path, ours: os.stat_result,
                       proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not (d / "state.json").exists():
        if not _same_dir(d, ours):
            raise BackendError(f"workload {name!r} was deleted while it was being created",
                               hint=f"create it again: elastix workload create {name} "
                                    "--backend local")
        if proc.poll() is not None or time.monotonic() > deadline:
            try:
                tail = (d / "supervisor.log").read_text(errors="replace").strip().splitlines()
            except FileNotFoundError:
                tail = []
            last = tail[-1] if tail else "no output"
            raise BackendError(f"the local supervisor did not start: {last}",
                               hint="run again with --debug; the supervisor's log was: "
                                    + " | ".join(tail[-3:]))
        time.sleep(0.02)

def clone(root: Path, name: str, *, suffix: str = "reference", dry_run: bool = False) -> str:
    """The same manifest run again under its own name and data (see
    :mod:`elastix.backends.local.clone`)."""
    from elastix.backends.local.clone import copy_of

    d = workload_dir(root, name)
    new, manifest, plan = copy_of(
        name, d, read_record(d / "manifest.json", dict),
        read_record(d / "plan.json", Plan.from_json), dict(os.environ), suffix)
    if not dry_run:
        launch(root, new, workload_dir(root, new, must_exist=False), manifest, plan)
    return new

def claim(root: Path, name: str, d: Path, manifest: dict[str, Any],
          plan: Plan) -> os.stat_result:
    """Make the workload's state directory, atomically: it is built aside (a private
    directory beside it, 0700) and renamed into place, and a rename onto a directory that
    exists fails. So two creates of one name cannot both win, the loser removes only what
    it made, and no reader ever sees a directory without its plan. Returns the directory's
    identity (device and inode): what :func:`discard` checks before removing it."""
    try:
        private.prepare(root)
        _sweep_asides(root)
        aside = Path(tempfile.mkdtemp(prefix=f"{_ASIDE}{os.getpid()}-{name}-", dir=root))
    except OSError as e:
        raise BackendError(f"cannot create the workload's state directory {d}: "
                           f"{e.strerror or e}",
                           hint="pass --state-dir DIR (or ELASTIX_STATE_DIR) with a writable "
                                "directory") from None
    try:
        (aside / "logs").mkdir(mode=0o700)
        write_json_atomic(aside / "manifest.json", manifest)
        write_json_atomic(aside / "plan.json", plan.to_json())
        ours = os.stat(aside)
        rename_in(aside, d)
    except FileExistsError:
        shutil.rmtree(aside, ignore_errors=True)
        raise AlreadyExists(f"workload {name!r} already exists (local, {d}): another create "
                            "of that name won", hint=f"see it with: elastix workload status "
                            f"{name} --backend local") from None
    except OSError as e:
        shutil.rmtree(aside, ignore_errors=True)
        raise BackendError(f"cannot create the workload's state directory {d}: "
                           f"{e.strerror or e}",
                           hint="pass --state-dir DIR (or ELASTIX_STATE_DIR) with a writable "
                                "directory") from None
    return ours

def rename_in(aside: Path, d: Path) -> None:
    """Rename the built directory into place; FileExistsError when ``d`` exists. (A rename
    onto an *empty* directory would replace it: only a directory with a plan is a workload,
    and an empty one is no one's, so that is right.)"""
    try:
        os.rename(aside, d)
    except OSError as e:
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise FileExistsError(e.errno, e.strerror, str(d)) from None
        raise

def discard(d: Path, ours: os.stat_result, proc: subprocess.Popen | None,
             plan: Plan) -> None:
    """Undo a submit that failed or was interrupted half-way: stop the supervisor and every
    pod it started (as ``delete`` sweeps them), and remove the state dir only if it is
    still the one this submit made (a delete and another create may have come in between:
    theirs is never touched; the marker is this submit's own)."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()
    mine = _same_dir(d, ours)
    # Not theirs: a workload of the same name has the same socket address.
    sweep_all(d if mine else None, plan.marker, plan.health_address if mine else None, d)
    if mine:
        shutil.rmtree(d, ignore_errors=True)


def _same_dir(d: Path, ours: os.stat_result) -> bool:
    try:
        st = os.stat(d)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (ours.st_dev, ours.st_ino)


def _sweep_asides(root: Path) -> None:
    """Remove directories a create built aside and never renamed in because its launcher died
    (``.creating-<pid>-<name>-*`` whose pid no longer runs): nothing else ever will."""
    for p in root.glob(f"{_ASIDE}*"):
        pid = p.name[len(_ASIDE):].split("-", 1)[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(p, ignore_errors=True)
        except PermissionError:
            pass


def _supervisor_env(plan: Plan) -> dict[str, str]:
    """A supervisor's environment: the launcher's, and the workload's marker (its sweeps)."""
    return {**os.environ, envvars.LOCAL_MARKER: plan.marker}


def _go(d: Path, pre: subprocess.Popen | None) -> subprocess.Popen | None:
    """Tell a pre-started supervisor that ``d`` is its run's now; None if there is none, or it
    died (then one is started afresh)."""
    if pre is None or pre.poll() is not None:
        return None
    os.close(private_append(d / "supervisor.log"))  # there before it runs, as a spawned one's
    try:
        pre.stdin.write(b"go\n")
        pre.stdin.close()
    except OSError:
        return None
    record_proc(d, pre.pid, "supervisor")
    return pre


def _release(pre: subprocess.Popen | None) -> None:
    """A pre-started supervisor never told to go (the replace failed or was interrupted):
    end of file ends it and its head's imports, having touched nothing on disk."""
    if pre is None or pre.stdin.closed:
        return
    try:
        pre.stdin.close()
    except OSError:
        pass
    try:  # it ends its head and exits at once; killed, its head dies with it all the same
        pre.wait(2.0)
    except subprocess.TimeoutExpired:
        pre.kill()
        pre.wait()
