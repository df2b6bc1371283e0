"""TensorBoard scalars from the trainer's events (``elastix-train --tensorboard-dir DIR``).

Users read loss curves in TensorBoard, and MaxText writes its scalars there with tensorboardX's
``SummaryWriter`` (MaxText ``max_utils.initialize_summary_writer``): so does this, from the same
events the launcher measures (docs/events.md). Tags are MaxText's where MaxText has the quantity
(maxtext 0.2.5 ``src/maxtext/common/metric_logger.py``, its scalar-name table), so a MaxText
user's dashboards and habits carry over. Every scalar is written at the training step it belongs to:

- at each completed step: ``learning/loss``, ``learning/grad_norm`` (before clipping),
  ``learning/current_learning_rate``, ``perf/step_time_seconds``,
  ``perf/per_device_tflops_per_sec``, ``perf/per_device_tokens_per_sec`` (MaxText's names) and
  ``elastic/live_slices`` (MaxText logs a live slice count but writes no scalar for it);
- ``checkpoint/blocking_seconds`` and ``checkpoint/write_seconds`` at each committed step;
- one ``recovery/*`` scalar per phase of an in-process recovery (``detection_seconds`` when the
  trainer dated the loss, ``cleanup_seconds``, ``waiting_for_slices_seconds``,
  ``restore_seconds``, ``first_step_seconds``), ``steps_lost``, ``downtime_seconds`` (from the
  loss, or its detection when the loss is not dated, to the first step after it) and
  ``total_downtime_seconds`` (the run's so far), all at the last step completed before the loss;
  and ``recovery/restore_load_seconds``, the checkpoint's own read inside the restore phase.
  The phases are :mod:`elastix.protocol.phases`'s, the definition ``chaos kill-worker
  --measure`` and ``workload goodput`` read: the same names are the same numbers there (each
  phase runs from one event's time to the next's, not the event's own ``seconds``).

A restore rolls training back to step S: the steps after S are trained again and their first
values are no longer the run's. TensorBoard's own rule for a restarted job is a ``SessionLog
START`` event at step S + 1, on which its readers drop every point at or past that step
(tensorboard ``backend/event_processing/event_accumulator.py``, ``_CheckForRestartAndMaybePurge``;
what tensorboardX writes for ``SummaryWriter(purge_step=...)``). So every restore, at start-up
after a restart or in a recovery, writes one, and each step shows once, with its final value.

A ``gs://`` directory is written locally and uploaded from a background thread (the events
file's uploader: retries, never costs a step). A writer that fails is reported once and
training goes on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from elastix.protocol import eventspec, phases
from elastix_trainer.obs.events import EventLog, Uploader, log


class TensorBoardSink:
    """Writes scalars for the events an ``EventLog`` emits (attach with :meth:`attach`)."""

    def __init__(self, directory: str, upload_every: float = 10.0) -> None:
        from tensorboardX import SummaryWriter

        self.directory = directory.rstrip("/")
        self._gcs = self.directory.startswith("gs://")
        local = tempfile.mkdtemp(prefix="elastix-tb-") if self._gcs else self.directory
        if not self._gcs:
            os.makedirs(local, exist_ok=True)
        # flush_secs: how stale TensorBoard may be; the writer thread flushes, never the loop.
        self._writer = SummaryWriter(logdir=local, flush_secs=5)
        self._uploader = None
        if self._gcs:
            self._writer.flush()  # creates the events file: its name is the upload's
            (name,) = [n for n in os.listdir(local) if n.startswith("events.out.tfevents")]
            self._local_file = os.path.join(local, name)
            self._uploader = Uploader(self._read, f"{self.directory}/{name}", upload_every)
        self._step = 0
        self._recovery = phases.InProcess()
        self._at = 0  # the step a recovery's scalars go at: the last before its loss
        self._load: float | None = None  # the recovery's restore_load_seconds
        self._total_downtime = 0.0
        self._failed = False

    def _read(self) -> bytes:
        # What the writer thread has flushed (every flush_secs); a torn last record is read
        # by TensorBoard as not yet written. close() uploads the complete file.
        with open(self._local_file, "rb") as f:
            return f.read()

    def attach(self, events: EventLog) -> TensorBoardSink:
        events.listeners.append(self.on_event)
        return self

    def _scalar(self, tag: str, value: Any, step: int) -> None:
        if value is None:
            return
        self._writer.add_scalar(tag, float(value), global_step=int(step))

    def on_event(self, record: dict) -> None:
        """Turn one event into scalars. Never raises: TensorBoard must not cost the run."""
        try:
            self._on_event(record)
        except Exception as e:  # noqa: BLE001 - reported once
            if not self._failed:
                log.warning("elastix: TensorBoard writing failed (%s); training goes on", e)
            self._failed = True
        if self._uploader is not None:
            self._uploader.kick()

    def _purge_from(self, step: int) -> None:
        """Drop every point at or past ``step`` in TensorBoard's readers (see the module doc)."""
        from tensorboardX.proto.event_pb2 import Event, SessionLog

        self._writer._get_file_writer().add_event(
            Event(step=int(step), session_log=SessionLog(status=SessionLog.START)))

    def _on_event(self, r: dict) -> None:
        name = r["event"]
        before = self._recovery.current
        done = self._recovery.add(r)
        if name == eventspec.STEP:
            self._step_scalars(r)
        elif name == eventspec.RESTORE and r.get("step") is not None and before is None:
            self._purge_from(r["step"] + 1)
        elif name == eventspec.CHECKPOINT_COMMITTED:
            self._scalar("checkpoint/blocking_seconds", r.get("blocking_seconds"), r["step"])
            self._scalar("checkpoint/write_seconds", r.get("seconds"), r["step"])
        elif name == eventspec.ELASTIC_DETECTED:
            at = r.get("last_step")
            self._at, self._load = self._step if at is None else at, None
        elif name in (eventspec.ELASTIC_RESTORED, eventspec.RESTORE) and before is not None:
            self._load = r.get("seconds")
            if r.get("step") is not None:
                self._purge_from(r["step"] + 1)
        elif done is not None:
            self._recovery_scalars(done)

    def _step_scalars(self, r: dict) -> None:
        self._step = s = r["step"]
        self._scalar("learning/loss", r.get("loss"), s)
        self._scalar("learning/grad_norm", r.get("grad_norm"), s)
        self._scalar("learning/current_learning_rate", r.get("learning_rate"), s)
        seconds = r.get("seconds")
        self._scalar("perf/step_time_seconds", seconds, s)
        self._scalar("perf/per_device_tflops_per_sec", r.get("tflops_per_device"), s)
        self._scalar("perf/per_device_tokens_per_sec", r.get("tokens_per_second_per_device"), s)
        self._scalar("elastic/live_slices", r.get("live_slices"), s)

    def _recovery_scalars(self, done: phases.Measured) -> None:
        """Write a recovery's scalars once it steps again. They go at the last step before the
        loss, written after the restore's purge: before it they would be dropped with the
        re-done steps."""
        got = done.scalars()
        if got["downtime_seconds"] is not None:
            self._total_downtime += got["downtime_seconds"]
            got["total_downtime_seconds"] = self._total_downtime
        got["restore_load_seconds"] = self._load
        for tag, value in got.items():
            self._scalar(f"recovery/{tag}", value, self._at)

    def close(self) -> None:
        """Flush and close (and upload, for ``gs://``). Never raises."""
        try:
            self._writer.close()
        except Exception as e:  # noqa: BLE001
            log.warning("elastix: closing the TensorBoard writer failed: %s", e)
        if self._uploader is not None:
            if self._uploader.close():
                shutil.rmtree(os.path.dirname(self._local_file), ignore_errors=True)
            else:
                log.warning("elastix: TensorBoard scalars were not uploaded to %s; the local "
                            "copy is kept at %s", self.directory, self._local_file)
