"""Reading a local workload's logs: the head attempts' files (``logs/head-N.log``) and the slice
hosts' (``logs/worker-S-H.log``), followed as they grow, onto the next head when one restarts,
until the workload will write no more: :func:`logs` chooses the files, the rest reads them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import time
from collections.abc import Iterator
from pathlib import Path

from elastix.backends.base import LogEvent, LogOptions
from elastix.backends.local.plan import Plan, check_pod_index
from elastix.backends.local.state import (
    FINAL_STATES,
    WorkloadState,
    proc_matches,
    read_json,
    read_record,
)
from elastix.errors import NotFoundError
from elastix.protocol import timefmt
from elastix.protocol.timefmt import utc_now
from elastix.workload import labels

_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)Z?\s")
"""The time the supervisor writes before each line of a stamped head's log."""


def finished(d: Path) -> bool:
    """The workload will write no more logs: final state, supervisor gone, or deleted."""
    try:
        st = WorkloadState.from_json(read_json(d / "state.json"))
    except (OSError, ValueError, KeyError, TypeError):
        return not d.exists()
    if st.state in FINAL_STATES or st.state == "Terminating":
        return True
    sup = st.supervisor or {}
    return not proc_matches(sup.get("pid", -1), sup.get("create_time"))


def _keep(line: str, since: dt.datetime | None) -> bool:
    if since is None:
        return True
    m = _TS.match(line)
    return m is None or timefmt.parse(m.group(1)) >= since


def unstamped(lines: Iterator[LogEvent]) -> Iterator[LogEvent]:
    """A stamped head's lines without the time the supervisor put before each."""
    for ev in lines:
        m = None if ev.notice else _TS.match(ev.text)
        yield dataclasses.replace(ev, text=ev.text[m.end():]) if m else ev


def every_attempt(d: Path, files, opts: LogOptions) -> Iterator[LogEvent]:
    """Every head attempt's lines in order, each attempt announced (on stderr): with the
    supervisor's time on every line, the lines of a restarted MaxText show its restart."""
    paths = files()
    for i, path in enumerate(paths):
        yield LogEvent(f"head attempt {path.stem.split('-')[1]}", notice=True)
        if i == len(paths) - 1:
            yield from follow_files(d, lambda p=path: [p], opts)
            return
        with open(path, encoding="utf-8", errors="replace") as f:
            yield from (LogEvent(line.rstrip("\n")) for line in f)


def previous(d: Path, prev: Path, cur: Path, opts: LogOptions) -> Iterator[LogEvent]:
    """The head attempt before the current one, said so first (on stderr)."""
    yield LogEvent(f"head attempt {prev.stem.split('-')[1]} (the current attempt is "
                   f"{cur.stem.split('-')[1]})", notice=True)
    yield from follow_files(d, lambda: [prev], opts)


def follow_files(d: Path, files, opts: LogOptions) -> Iterator[LogEvent]:
    """Lines of the newest file; with ``follow``, keep reading it and move on to newer ones."""
    since = utc_now() - dt.timedelta(seconds=opts.since_seconds) if opts.since_seconds else None
    paths = files()
    if not paths:
        if not opts.follow:
            return
        while not paths and not finished(d):
            time.sleep(0.1)
            paths = files()
        if not paths:
            return
    current = paths[-1]
    with open(current, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines(keepends=True)
        pos = f.tell()
    if lines and not lines[-1].endswith("\n") and opts.follow:
        pos -= len(lines.pop().encode())  # half a line: read it whole later
    if opts.tail_lines is not None:
        lines = lines[-opts.tail_lines:] if opts.tail_lines > 0 else []
    for line in lines:
        if _keep(line, since):
            yield LogEvent(line.rstrip("\n"))
    if not opts.follow:
        return
    yield from _tail(d, files, current, pos)


def _tail(d: Path, files, current: Path, pos: int) -> Iterator[LogEvent]:
    buf = b""
    while True:
        try:
            with open(current, "rb") as f:
                f.seek(pos)
                chunk = f.read()
        except FileNotFoundError:
            return  # deleted
        pos += len(chunk)
        buf += chunk
        *whole, buf = buf.split(b"\n")
        for line in whole:
            yield LogEvent(line.decode("utf-8", "replace"))
        if chunk:
            continue
        paths = files()
        later = paths[paths.index(current) + 1] if current in paths[:-1] else None
        if later is not None:
            if buf:
                yield LogEvent(buf.decode("utf-8", "replace"))
            yield LogEvent(f"head restarted (workload restart {later.stem.split('-')[1]}): "
                           "following the new head", notice=True)
            current, pos, buf = later, 0, b""
            continue
        if finished(d):
            # One last read: the process may have written between our read and its exit.
            try:
                with open(current, "rb") as f:
                    f.seek(pos)
                    buf += f.read()
            except FileNotFoundError:
                pass
            for line in buf.decode("utf-8", "replace").splitlines():
                yield LogEvent(line)
            return
        time.sleep(0.1)


def logs(d: Path, name: str, opts: LogOptions) -> Iterator[LogEvent]:
    """The lines ``elastix logs`` shows of the local workload in ``d``: the head's (every
    attempt's, or the previous one's) or one slice host's, followed as they grow."""
    stamped = read_record(d / "plan.json", Plan.from_json).stamped
    if opts.timestamps and not stamped:
        return _stamped(d, name, opts)
    container = opts.container
    if opts.slice is not None or opts.host is not None:
        check_pod_index(name, read_record(d / "plan.json", Plan.from_json), opts.slice,
                         opts.host)
        if container not in (None, labels.WORKER_CONTAINER):
            raise NotFoundError(f"worker pods have no container {container!r}",
                                hint=f"the worker container is {labels.WORKER_CONTAINER}")
        if opts.previous:
            raise NotFoundError("the local backend keeps no previous worker log",
                                hint="a replaced host appends to its one log: drop --previous")
        path = d / "logs" / f"worker-{opts.slice or 0}-{opts.host or 0}.log"
        if not path.exists():
            raise NotFoundError(f"no worker slice {opts.slice or 0} host {opts.host or 0} "
                                f"in {name!r}")
        return follow_files(d, lambda: [path], opts)
    if container not in (None, labels.MAIN_CONTAINER):
        raise NotFoundError(f"container {container!r} does not run on the local backend",
                            hint=f"local workloads run the head's {labels.MAIN_CONTAINER} "
                                 "container and the slice hosts (--slice/--host)")

    def heads() -> list[Path]:
        files = list((d / "logs").glob("head-*.log"))
        return sorted(files, key=lambda p: int(p.stem.split("-")[1]))

    if opts.previous:  # every attempt's head writes its own head-N.log
        attempts = heads()
        if len(attempts) < 2:
            raise NotFoundError(f"workload {name} has no previous head attempt: it has not "
                                "restarted", hint=f"elastix logs {name} shows the current one")
        prev, cur = attempts[-2:]
        lines = previous(d, prev, cur, opts)
    elif stamped and opts.timestamps and not opts.follow:
        lines = every_attempt(d, heads, opts)  # a restart is measured across attempts
    else:
        lines = follow_files(d, heads, opts)
    return lines if opts.timestamps or not stamped else unstamped(lines)

def _stamped(d: Path, name: str, opts: LogOptions) -> Iterator[LogEvent]:
    """``--timestamps`` locally: a process writes straight to its log file, so no time per
    line is recorded to add; say so once, then the lines as written (elastix's own lines
    start with their time; measurement reads the events file here, not the log)."""
    lines = logs(d, name, dataclasses.replace(opts, timestamps=False))
    # Worded for what the reader sees (issue 39): elastix-train's lines do start with a time.
    yield LogEvent("--timestamps: the local backend adds no time of its own (each process "
                   "writes its log file directly); lines are shown as written, "
                   "elastix-train's with the time it wrote them", notice=True)
    yield from lines
