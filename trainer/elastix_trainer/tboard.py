"""TensorBoard scalars from the trainer's events (``elastix-train --tensorboard-dir DIR``).

Users read loss curves in TensorBoard, and MaxText writes its scalars there with tensorboardX's
``SummaryWriter`` (MaxText ``max_utils.initialize_summary_writer``): so does this, from the same
events the launcher measures (docs/events.md), so the curves and ``elastix workload goodput``
never disagree. Every scalar is written at the training step it belongs to:

- ``learning/loss``, ``perf/step_seconds``, ``perf/tflops_per_device``, ``elastic/live_slices``
  at each completed step (the names of MaxText's ``learning/loss`` and ``perf/step_time_seconds``
  family where one exists);
- ``checkpoint/blocking_seconds`` and ``checkpoint/write_seconds`` at each committed step;
- one ``recovery/*`` scalar per phase of an in-process recovery (``detection_seconds`` when the
  trainer dated the loss, ``cleanup_seconds``, ``waiting_for_slices_seconds``,
  ``restore_seconds``, ``first_step_seconds``, ``steps_lost``), at the last step completed
  before the loss.

A ``gs://`` directory is written locally and uploaded from a background thread (the events
file's uploader: retries, never costs a step). A writer that fails is reported once and
training goes on.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

from elastix.protocol import eventspec
from elastix_trainer.events import EventLog, _Uploader, log


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
            self._uploader = _Uploader(self._read, f"{self.directory}/{name}", upload_every)
        self._step = 0
        self._recovery: dict[str, Any] = {}
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

    def _on_event(self, r: dict) -> None:
        name = r["event"]
        if name == eventspec.STEP:
            self._step = s = r["step"]
            self._scalar("learning/loss", r.get("loss"), s)
            self._scalar("perf/step_seconds", r.get("seconds"), s)
            self._scalar("perf/tflops_per_device", r.get("tflops_per_device"), s)
            self._scalar("elastic/live_slices", r.get("live_slices"), s)
        elif name == eventspec.CHECKPOINT_COMMITTED:
            self._scalar("checkpoint/blocking_seconds", r.get("blocking_seconds"), r["step"])
            self._scalar("checkpoint/write_seconds", r.get("seconds"), r["step"])
        elif name == eventspec.ELASTIC_DETECTED:
            at = r.get("last_step")
            self._recovery = {"at": self._step if at is None else at, "last": at}
            self._scalar("recovery/detection_seconds", r.get("since_loss"), self._recovery["at"])
        elif self._recovery:
            at = self._recovery["at"]
            if name == eventspec.ELASTIC_CLEANUP_DONE:
                self._scalar("recovery/cleanup_seconds", r.get("seconds"), at)
            elif name == eventspec.ELASTIC_SLICES_READY:
                self._scalar("recovery/waiting_for_slices_seconds", r.get("seconds"), at)
            elif name == eventspec.ELASTIC_RESTORED:
                self._scalar("recovery/restore_seconds", r.get("seconds"), at)
                last = self._recovery.get("last")
                if last is not None and r.get("step") is not None:
                    self._scalar("recovery/steps_lost", last - r["step"], at)
            elif name == eventspec.ELASTIC_FIRST_STEP:
                self._scalar("recovery/first_step_seconds", r.get("seconds"), at)
                self._recovery = {}

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
