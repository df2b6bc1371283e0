"""A stand-in for Pathways' slice probe over the fake API server, for the pod-watch tests and
bench (there is no Pathways here to run pathwaysutils' probe against).

``StandinProbe`` answers as Pathways would once its workers are back: a slice is up when every
worker pod of its Job is Ready. It reads the fake API server over HTTP each time it is called
(as the real probe does work each time), counts its calls, and can be told to answer "up"
regardless (``pathways_says_up``), to check that a pod event alone decides nothing.
"""

from __future__ import annotations

import json
import threading
import urllib.parse
import urllib.request

JS = "jobset.sigs.k8s.io/"


def ready(pod: dict) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


class StandinProbe:
    """``probe(slice_to_devices) -> live slice indices``, the signature PathwaysHealth takes."""

    def __init__(self, url: str, workload: str, hosts: int, namespace: str = "default") -> None:
        sel = f"{JS}jobset-name={workload},{JS}replicatedjob-name=worker"
        self.url = (f"{url}/api/v1/namespaces/{namespace}/pods?"
                    f"labelSelector={urllib.parse.quote(sel)}")
        self.hosts = hosts
        self.calls: list[frozenset[int]] = []  # the slices asked about, call by call
        self.pathways_says_up: set[int] = set()
        self._lock = threading.Lock()

    def pods(self) -> list[dict]:
        with urllib.request.urlopen(self.url, timeout=10) as r:
            return json.loads(r.read())["items"]

    def up(self) -> set[int]:
        """Slices whose worker pods are all Ready (and not being deleted)."""
        count: dict[int, int] = {}
        for p in self.pods():
            if ready(p) and not p["metadata"].get("deletionTimestamp"):
                s = int(p["metadata"]["labels"][f"{JS}job-index"])
                count[s] = count.get(s, 0) + 1
        return {s for s, n in count.items() if n >= self.hosts}

    def __call__(self, slice_to_devices: dict) -> set[int]:
        with self._lock:
            self.calls.append(frozenset(slice_to_devices))
        return (self.up() | self.pathways_says_up) & set(slice_to_devices)
