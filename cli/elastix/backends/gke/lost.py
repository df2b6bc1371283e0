"""The slices the trainer has declared lost, as GKE ``status`` shows them.

The Kubernetes API cannot say it: a slice the trainer gave up on may still have every pod
Running. The trainer says it in its events (``elastic_detected`` ... ``elastic_slices_ready``,
``eventspec.next_lost``), which on GKE it uploads to the ``gs://`` object named by the JobSet's
events-path annotation. The local backend reads the same events from its file.
"""

from __future__ import annotations

from typing import Any

from elastix.errors import BackendError
from elastix.workload import labels


class LostSlices:
    """Per workload: a :class:`~elastix.clients.gcs.JsonlTail` on its events and what they
    say so far. Each :meth:`of` reads only the bytes appended since the last, so ``status
    --watch`` costs one ranged read a refresh whatever the file's size, and only the lines
    that can change the answer are parsed."""

    def __init__(self) -> None:
        self._state: dict[str, tuple[Any, dict[int, str]]] = {}  # name -> (tail, lost)

    def of(self, jobset: dict) -> tuple[dict[int, str], str | None]:
        """``({slice: why}, note)``: the note says why they could not be read (else None).
        A JobSet without the events-path annotation has nothing to read: ``({}, None)``."""
        from elastix.clients.gcs import JsonlTail
        from elastix.protocol import eventspec

        md = jobset.get("metadata") or {}
        uri = (md.get("annotations") or {}).get(labels.EVENTS_PATH)
        if not uri:
            return {}, None
        name = md.get("name", "")
        tail, lost = self._state.get(name, (None, {}))
        if tail is None or tail.uri != uri:  # a new workload of the same name
            tail, lost = JsonlTail(uri, keep=eventspec.relevant_to_lost), {}
        try:
            got = tail.read()
        except BackendError as e:
            return lost, f"slices the trainer lost are not shown: {e}"
        if got is not None:
            new, reset = got
            if reset:  # another file (a restarted head): what the old one said is void
                lost = {}
            for ev in new:
                lost = eventspec.next_lost(lost, ev)
        self._state[name] = (tail, lost)
        return lost, None
