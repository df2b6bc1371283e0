"""The trainer's events as ml-goodput-measurement's records, one event at a time.

Google's ``ml-goodput-measurement`` (the library MaxText records goodput with,
``enable_goodput_recording``) reads log entries its recorders write: job start and end, each
step's start, init and prep spans, custom badput spans, elastic waits, re-initialisation and
slice counts (``GoodputRecorder`` / ``ElasticGoodputRecorder``, goodput.py L298-600 and
goodput_elastic.py L28-105 of 0.2.3), and the save and restore entries Orbax's checkpoint logger
writes (checkpoint_badput_calculator.py L14-28). :class:`Feed` turns elastix's events into those
entries as they happen, so that

- the trainer can write them live (``elastix_trainer.obs.mlgoodput``: Cloud Logging through the
  library's recorder on GKE, a JSONL file beside the events file locally), and
- ``elastix workload goodput --categories ml-goodput`` can rebuild them from a finished run's
  events (``elastix.measure.mlgoodput.entries``): one mapping for both.

Standard library only (this package's rule). The choices, event by event:

- ``run_start``: ``job_start_time``, and a training-prep span to the first step's start (the
  trainer's state, data and restore set-up; JAX is up by then);
- ``step`` N: ``step_count`` N - 1 started at its end less its ``seconds`` (the library records a
  step's start before it runs);
- ``snapshot_taken``: a custom badput span (:data:`SNAPSHOT`) of its ``seconds``;
- ``checkpoint_committed``: an Orbax ``save`` entry blocking for ``blocking_seconds``;
  ``restore``/``elastic_restored``: a ``restore`` entry of its ``seconds``, one per recovery
  (the last; a trainer may write both events for one restore, ``elastix.measure.events``);
- ``elastic_detected`` to ``elastic_slices_ready``: an ELASTIC_SLICE_DOWN wait; then to the next
  step's start the re-initialisation; a resize up outside a recovery: an ELASTIC_SCALE_UP wait to
  its restore (training stood still to take the slice back);
- slice counts: stepping slices as the steps say (0 from a detection to the next step), available
  ones as the recovery says (at a detection the full mesh less the lost slices), of the full
  mesh (``run_start``'s ``num_slices``, or the most live slices seen);
- ``run_end`` completed: ``job_end_time`` (any other end is a job still "running", as the
  library reads a job that died).
"""

from __future__ import annotations

from typing import Any

ENTRIES_SUFFIX = ".ml-goodput.jsonl"
"""The trainer writes ml-goodput-measurement's records beside a local events file: its name with
this suffix for the extension (``run/events.jsonl`` -> ``run/events.ml-goodput.jsonl``)."""
SNAPSHOT = "HOST_SNAPSHOT"
"""The custom badput type a host snapshot is recorded as (the library would count it
productive otherwise)."""

# Entry keys, as the library's recorders write them (goodput.py L41-57, goodput_elastic.py
# L10-19, checkpoint_badput_calculator.py L14-28).
JOB_START, JOB_END = "job_start_time", "job_end_time"
STEP_COUNT, STEP_START = "step_count", "step_start_time"
PREP_START, PREP_END = "training_prep_start_time", "training_prep_end_time"
TPU_START, TPU_END = "tpu_init_start_time", "tpu_init_end_time"
CUSTOM_TYPE = "custom_badput_event_type"
CUSTOM_START, CUSTOM_END = "custom_badput_event_start_time", "custom_badput_event_end_time"
WAIT_TYPE, WAIT_START, WAIT_END = ("elastic_wait_event_type", "elastic_wait_start_time",
                                   "elastic_wait_end_time")
REINIT_START, REINIT_END = "elastic_reinit_start_time", "elastic_reinit_end_time"
SLICES_AT = "elastic_slice_counts_timestamp"
SLICE_DOWN, SCALE_UP = "slice_down", "elastic_scale_up"


class Feed:
    """Maps elastix events to the library's entries, in order, keeping what a span needs.

    Args:
        job: the ``job_name`` every entry carries (the library reads one job's entries).
        full: slices of the full mesh; None learns it from ``run_start`` (``num_slices``) and
            the steps' live slices. Without it no slice-count entry is written.
    """

    def __init__(self, job: str, full: int | None = None) -> None:
        self.job, self.full = job, full
        self._fixed = full is not None
        self._prep_open = self._scale_up_open = self._reinit_open = False
        self._active: int | None = None
        self._in_recovery = False  # from a detection to the next step
        self._pending_restore: dict[str, Any] | None = None

    def _end_recovery(self, out: list[dict[str, Any]]) -> None:
        if self._pending_restore is not None:
            out.append(self._pending_restore)
        self._in_recovery, self._pending_restore = False, None

    def _learn(self, n: Any) -> None:
        if not self._fixed and isinstance(n, int) and n > 0 and (self.full or 0) < n:
            self.full = n

    def _e(self, **kv: Any) -> dict[str, Any]:
        return {"job_name": self.job, **kv}

    def _slices(self, out: list, t: float, stepping: int, available: int) -> None:
        self._active = stepping
        if self.full:
            out.append(self._e(active_slices=stepping, total_slices=self.full,
                               available_slices=available, **{SLICES_AT: t}))

    def add(self, name: str, t_ms: float, d: dict[str, Any]) -> list[dict[str, Any]]:
        """The entries event ``name`` at ``t_ms`` (ms since the epoch) with values ``d`` adds."""
        out: list[dict[str, Any]] = []
        t = t_ms / 1000
        if name in ("step", "elastic_first_step", "run_start", "run_end", "elastic_detected"):
            self._end_recovery(out)
        if name == "run_start":
            self._learn(d.get("num_slices"))
            out += [self._e(**{JOB_START: t}), self._e(**{PREP_START: t})]
            self._prep_open = True
            self._slices(out, t, 0, d.get("num_slices") or self.full or 0)
        elif name == "step":
            self._learn(d.get("live_slices"))
            start = (t_ms - round((d.get("seconds") or 0.0) * 1000)) / 1000
            if self._prep_open:
                out.append(self._e(**{PREP_END: start}))
                self._prep_open = False
            if self._reinit_open:  # the new mesh's compile and warm-up end where its step starts
                out.append(self._e(**{REINIT_END: start}))
                self._reinit_open = False
            live = d.get("live_slices") or self.full or 0
            if self._active != live:
                self._slices(out, start, live, live)
            out.append(self._e(**{STEP_COUNT: d["step"] - 1, STEP_START: start}))
        elif name == "snapshot_taken" and d.get("seconds"):
            a = t - d["seconds"]
            out += [self._e(**{CUSTOM_TYPE: SNAPSHOT, CUSTOM_START: a}),
                    self._e(**{CUSTOM_TYPE: SNAPSHOT, CUSTOM_END: t})]
        elif name == "checkpoint_committed" and d.get("blocking_seconds") is not None:
            b = d["blocking_seconds"]
            out.append(self._e(event_type="save", step=d["step"],
                               directory="elastix/checkpoint",
                               checkpoint_manager_blocking_duration_secs=b,
                               checkpointer_blocking_duration_secs=b,
                               wait_for_prev_duration_secs=0.0, get_old_steps_duration_secs=0.0))
        elif name in ("restore", "elastic_restored"):
            entry = None
            if d.get("seconds") is not None:
                entry = self._e(event_type="restore", step=d.get("step"),
                                directory=f"elastix/{d.get('source')}",
                                checkpoint_manager_duration_secs=d["seconds"],
                                checkpointer_duration_secs=d["seconds"])
            if self._in_recovery:  # one restore per recovery, the last (as measurement reads it)
                self._pending_restore = entry
            elif entry is not None:
                out.append(entry)
            if self._scale_up_open and name == "restore":
                out.append(self._e(**{WAIT_TYPE: SCALE_UP, WAIT_END: t}))
                self._scale_up_open = False
        elif name == "elastic_detected":
            self._in_recovery = True
            out.append(self._e(**{WAIT_TYPE: SLICE_DOWN, WAIT_START: t}))
            lost = d.get("lost_slices")
            # The full mesh less the lost slices: what a head log says too (its line has no
            # live count), so a live record and one rebuilt from the log agree.
            up = (self.full - len(lost) if self.full and isinstance(lost, list)
                  else d.get("live_slices") or 0)
            self._slices(out, t, 0, max(0, up))
        elif name == "elastic_slices_ready":
            out += [self._e(**{WAIT_TYPE: SLICE_DOWN, WAIT_END: t}),
                    self._e(**{REINIT_START: t})]
            self._reinit_open = True
            self._slices(out, t, 0, d.get("live_slices") or 0)
        elif name == "elastic_resize" and self._active and (d.get("to_slices") or 0) > (
                d.get("from_slices") or 0):
            out.append(self._e(**{WAIT_TYPE: SCALE_UP, WAIT_START: t}))
            self._scale_up_open = True
        elif name == "run_end" and d.get("status") == "completed":
            out.append(self._e(**{JOB_END: t}))
        return out
