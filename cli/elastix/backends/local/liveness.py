"""Hung slice hosts: what the platform does with a host that stops heartbeating, done locally.

A slice host that exits is replaced at once (the supervisor's SIGCHLD). One that *hangs*
(SIGSTOP, a deadlock, a stuck syscall) still exists, so no exit says anything; the trainer sees
its heartbeats stop within ``ELASTIX_HEALTH_TIMEOUT`` and waits for the slice to come back.
Without more, nothing ever replaces it and the run gives up after ``--slice-wait-timeout``.

What GKE does. A hung TPU VM stops posting its node status: the node lifecycle controller marks
it NotReady/Unreachable after ``--node-monitor-grace-period`` and taints it ``NoExecute``; pods
without their own toleration for that taint get one of 300 s from the ``DefaultTolerationSeconds``
admission plugin (kube-apiserver reference, ``--default-not-ready-toleration-seconds`` and
``--default-unreachable-toleration-seconds``, default 300; kubernetes.io/docs/concepts/
scheduling-eviction/taint-and-toleration/#taint-based-evictions), after which the pod is
evicted and the worker Job creates its replacement (a failure of the Job, so JobSet's
``failurePolicy`` applies past ``backoffLimit``). xpk's Pathways worker pods (xpk 1.16.0,
``tests/fixtures/xpk-1.16.0-pathways-elastic.yaml``) tolerate only ``google.com/tpu`` and carry
no liveness probe, so a hung *process* on a healthy VM is replaced by nothing but a kubelet
liveness probe, had one been set (the kubelet kills a container whose probe fails
``failureThreshold`` times, default 3 x ``periodSeconds`` 10 = 30 s, and restarts it per
``restartPolicy: OnFailure``). No source says whether the Pathways server itself exits when its
resource manager stops hearing a worker.

What the local backend does. A host is one process, so it plays the liveness probe the kubelet
would run: the supervisor samples each running host's voluntary context switches (every
heartbeat is a ``sleep``, one switch each), and a host that made none for
``hung_host_timeout`` seconds (``ELASTIX_LOCAL_HUNG_HOST_TIMEOUT``, default 30, the probe
defaults above; 0 turns it off) is SIGKILLed and counted as a failed pod, so its slice is
recreated like any other lost slice. The GKE eviction path (about 340 s) is longer than the
default slice wait: elastix says so in the hint of a run that gives up waiting.
"""

from __future__ import annotations

import time


def progress(pid: int) -> int | None:
    """A counter that moves while ``pid`` runs its loop (voluntary context switches), or None
    when it cannot be read (gone, no ``/proc``, or a ``/proc`` without the counters: psutil
    raises NotImplementedError there, as on the TPU machine's sandboxed kernel): then no
    verdict is given."""
    import psutil

    try:
        return psutil.Process(pid).num_ctx_switches().voluntary
    except (psutil.Error, OSError, NotImplementedError):
        return None


class Liveness:
    """Tracks the last progress of each host; says which have hung for longer than ``timeout``."""

    def __init__(self, timeout: float, clock=time.monotonic) -> None:
        self.timeout = timeout
        self._clock = clock
        self._seen: dict[object, tuple[int, int, float]] = {}  # key -> (pid, counter, since)

    def hung(self, hosts: dict[object, int]) -> list[tuple[object, float]]:
        """``hosts`` maps a key to the pid running now; returns ``(key, seconds stuck)`` of the
        hosts whose counter has not moved for longer than the timeout."""
        if self.timeout <= 0:
            return []
        now = self._clock()
        out = []
        for key in list(self._seen):
            if key not in hosts:
                del self._seen[key]
        for key, pid in hosts.items():
            count = progress(pid)
            old = self._seen.get(key)
            if count is None:
                self._seen.pop(key, None)
            elif old is None or old[0] != pid or old[1] != count:
                self._seen[key] = (pid, count, now)
            elif now - old[2] > self.timeout:
                out.append((key, now - old[2]))
        return out

    def forget(self, key: object) -> None:
        self._seen.pop(key, None)
