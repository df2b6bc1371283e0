"""The head pod's log as the trainer's events on GKE: ``list`` and ``status``'s training
columns, and measurement's fallback when the events file is out of reach (:func:`whole_log`).

The trainer's events file is in the user's bucket: a JobSet read and a download per workload
and refresh. The head's log is one request to the API server that already serves the pods,
and it carries the same events as lines (docs/events.md, "Log lines"), which measurement reads
with the parser ``workload goodput`` uses, so the two never disagree.

``list`` asks for the last :data:`LIST_TAIL` lines of each head (``tailLines``); ``status``
for all the log the kubelet keeps of the current container: only its latest log file, which
the kubelet rotates at ``containerLogMaxSize`` (default 10Mi; kubernetes/website
``content/en/docs/concepts/cluster-administration/logging.md``, "Log rotation", at commit
909cf8b), so one read is bounded. A head whose log was rotated no longer reaches its first
line: its goodput is then not shown (``HeadLog.from_start``). A refresh (``--watch``) asks only
for the lines since the last one it has (``sinceSeconds``, then lines at or before that time
dropped), as ``logs -f`` resumes after a cut stream.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math

from elastix.backends.base import LogOptions
from elastix.backends.gke.api import Namespace
from elastix.backends.gke.logs import (
    current_pod,
    log_container,
    log_request,
    pick_pod,
    read_lines,
    split_timestamp,
)
from elastix.backends.gke.status import object_labels, parse_time
from elastix.clients.kube import ContainerWaiting
from elastix.protocol.timefmt import utc_now
from elastix.workload import labels

LOG_START_SLACK = 300.0
"""Seconds between the container's start and the first line served within which the lines
count as reaching the container's first line (a trainer may be silent a while at start-up;
a rotation needs 10Mi of lines, which takes far longer)."""

LIST_TAIL = 400
"""Lines ``list`` reads per head: the trainer logs a line per step and a few per checkpoint or
recovery, so this holds the last 20 steps (the step time's median) many times over."""


@dataclasses.dataclass
class HeadLog:
    """Lines of the head's log, each led by the time the log API recorded (``timestamps``)."""

    lines: list[str]
    from_start: bool
    """The lines reach back to the head container's first line: a goodput over them is the
    goodput of the run so far (of the current head: a replaced pod's log is gone)."""


def whole_log(ns: Namespace, name: str) -> HeadLog:
    """The current head's whole log, read now, as ``elastix logs --timestamps`` reads it.

    Raises:
        NotFoundError: no such workload, or it has no head pod yet.
    """
    ns.jobset(name)  # a wrong name is said as such, before the pods are looked at
    pod, container = current_pod(ns, name, LogOptions(timestamps=True))
    resp = log_request(ns, pod, container, follow=False, since=None, tail=None,
                       timestamps=True)
    with ns.tr(f"reading the log of pod {pod['metadata']['name']}"):
        lines = list(read_lines(resp))  # as they came: a skipped line's number is the log's
    return HeadLog(lines=lines, from_start=_reaches_start(pod, container, lines))


@dataclasses.dataclass
class _Read:
    uid: str
    lines: list[str]
    last: dt.datetime | None
    from_start: bool


class HeadLogReader:
    """Reads and keeps each workload's head log between refreshes of one command."""

    def __init__(self, ns: Namespace) -> None:
        self.ns = ns
        self.heads: dict[str, dict | None] = {}
        self._reads: dict[str, _Read] = {}

    def note_pods(self, names: list[str], pods: list[dict]) -> None:
        """Remember the head pod (or that there is none) of each of ``names`` from a pods list
        the caller made anyway, so reading their logs costs no list of its own."""
        by_name: dict[str, list[dict]] = {n: [] for n in names}
        for p in pods:
            lab = object_labels(p)
            if lab.get(labels.REPLICATED_JOB_NAME) == labels.HEAD_JOB and \
                    lab.get(labels.JOBSET_NAME) in by_name:
                by_name[lab[labels.JOBSET_NAME]].append(p)
        for name, heads in by_name.items():
            self.heads[name] = pick_pod(heads)

    def read(self, name: str, *, whole: bool) -> HeadLog | None:
        """The head's lines (each led by the API's time), or None when no head has a log."""
        if name in self.heads:
            pod = self.heads[name]
        else:
            pods, _ = self.ns.pods(f"{labels.JOBSET_NAME}={name},"
                                   f"{labels.REPLICATED_JOB_NAME}={labels.HEAD_JOB}")
            pod = pick_pod(pods)
        if pod is None or (pod.get("status") or {}).get("phase") not in (
                "Running", "Succeeded", "Failed"):
            return None
        uid = pod["metadata"].get("uid", "")
        container = log_container(pod, LogOptions(), "head")
        seen = self._reads.get(name)
        try:
            if seen and seen.uid == uid and seen.last and (seen.from_start or not whole):
                since = max(1, math.ceil((utc_now() - seen.last).total_seconds()) + 1)
                new = [x for x in _lines(self.ns, pod, container, since=since, tail=None)
                       if (split_timestamp(x)[0] or seen.last) > seen.last]
                lines, from_start = seen.lines + new, seen.from_start
                if not whole and len(lines) > LIST_TAIL:
                    lines, from_start = lines[-LIST_TAIL:], False
            else:
                lines = _lines(self.ns, pod, container, since=None,
                               tail=None if whole else LIST_TAIL)
                from_start = (whole or len(lines) < LIST_TAIL) and _reaches_start(
                    pod, container, lines)
        except ContainerWaiting:  # started, restarting: no log to read this time
            return None
        last = next((t for t in (split_timestamp(x)[0] for x in reversed(lines)) if t), None)
        self._reads[name] = _Read(uid, lines, last, from_start)
        return HeadLog(lines=lines, from_start=from_start)


def _lines(ns: Namespace, pod: dict, container: str, *, since: int | None,
           tail: int | None) -> list[str]:
    """The container's log lines (without the empty ones), each led by the API's time."""
    resp = log_request(ns, pod, container, follow=False, since=since, tail=tail,
                       timestamps=True)
    with ns.tr(f"reading the log of pod {pod['metadata']['name']}"):
        return [x for x in read_lines(resp) if x]


def _reaches_start(pod: dict, container: str, lines: list[str]) -> bool:
    """Whether the first line served is the container's first (not the first of a rotated
    file): it came within :data:`LOG_START_SLACK` of the container's ``startedAt``."""
    first = next((t for t in (split_timestamp(x)[0] for x in lines) if t), None)
    st = pod.get("status") or {}
    cs = next((c for c in st.get("containerStatuses") or [] if c.get("name") == container), {})
    state = cs.get("state") or {}
    started = parse_time((state.get("running") or state.get("terminated") or {})
                          .get("startedAt"))
    if first is None or started is None:
        return first is None  # no line yet; or no start to compare with: not claimed
    return (first - started).total_seconds() <= LOG_START_SLACK
