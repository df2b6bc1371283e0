"""The trainer's goodput records in Google's vocabulary, written as training goes.

MaxText records goodput through ``ml-goodput-measurement`` (``enable_goodput_recording``): its
recorders write log entries (job start and end, step starts, prep spans, elastic waits,
re-initialisation, slice counts) and Orbax's checkpoint logger writes save and restore entries,
all into one Cloud Logging log that the library's calculator and monitor read. This listener
writes the same entries for elastix's trainer, each event mapped by
:class:`elastix.protocol.mlgoodput.Feed` (the mapping ``elastix workload goodput --categories
ml-goodput`` uses too), to

- a JSONL file beside a local events file (``<events>.ml-goodput.jsonl``, one entry per line,
  exactly the dicts the recorders would log), always; and
- Cloud Logging through the library's own ``ElasticGoodputRecorder`` with
  ``--ml-goodput-logger NAME``, so a MaxText-style goodput dashboard (or the library's
  ``GoodputCalculator(job_name, NAME)``) reads an elastix run unchanged. The library is an
  optional dependency (``pip install elastix[goodput]``): without it, one warning line, and
  training goes on.

Like every sink here, nothing it does may cost a step or a run: failures are reported once and
swallowed.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from elastix.protocol import mlgoodput as rec
from elastix.protocol import timefmt

log = logging.getLogger("elastix_trainer")

_NOT_DATA = ("ts", "event", "pid")


def entries_path(events_file: str) -> str:
    """Where the records of a local events file go: ``run/events.jsonl`` ->
    ``run/events.ml-goodput.jsonl``."""
    stem, _ = os.path.splitext(events_file)
    return stem + rec.ENTRIES_SUFFIX


class FileWriter:
    """Appends each entry as one JSON line (flushed: a killed head keeps what it wrote)."""

    def __init__(self, path: str) -> None:
        self.path = path
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._file = os.fdopen(fd, "a", encoding="utf-8")

    def __call__(self, entry: dict[str, Any]) -> None:
        self._file.write(json.dumps(entry) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _utc(seconds: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(seconds, dt.timezone.utc)


class RecorderWriter:
    """Hands each entry to the library's ``ElasticGoodputRecorder``, through the public
    ``record_*`` call that writes exactly that entry (goodput.py L362-600, goodput_elastic.py
    L31-105 of ml-goodput-measurement 0.2.3).

    Save and restore entries have no recorder call: in MaxText Orbax's ``CloudLogger`` writes
    them to the same log. elastix's checkpoints do not go through an Orbax logger, so they are
    written through the recorder's own logger (``_cloud_logger``, private: the one reach into
    the library, hence the exact pin of the ``goodput`` extra).
    """

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder

    def __call__(self, e: dict[str, Any]) -> None:
        r = self.recorder
        if "event_type" in e:
            logger = getattr(r, "_cloud_logger", None)
            if logger is not None:
                logger.write_cloud_logging_entry(e)
        elif rec.JOB_START in e:
            r.record_job_start_time(_utc(e[rec.JOB_START]))
        elif rec.JOB_END in e:
            r.record_job_end_time(_utc(e[rec.JOB_END]))
        elif rec.STEP_START in e:
            r.record_step_start_time(e[rec.STEP_COUNT], _utc(e[rec.STEP_START]))
        elif rec.PREP_START in e:
            r.record_training_preparation_start_time(_utc(e[rec.PREP_START]))
        elif rec.PREP_END in e:
            r.record_training_preparation_end_time(_utc(e[rec.PREP_END]))
        elif rec.CUSTOM_START in e:
            r.record_custom_badput_event_start_time(_utc(e[rec.CUSTOM_START]),
                                                    e[rec.CUSTOM_TYPE])
        elif rec.CUSTOM_END in e:
            r.record_custom_badput_event_end_time(_utc(e[rec.CUSTOM_END]), e[rec.CUSTOM_TYPE])
        elif rec.WAIT_START in e:
            r.record_elastic_wait_start_time(e[rec.WAIT_TYPE], _utc(e[rec.WAIT_START]))
        elif rec.WAIT_END in e:
            r.record_elastic_wait_end_time(e[rec.WAIT_TYPE], _utc(e[rec.WAIT_END]))
        elif rec.REINIT_START in e:
            r.record_elastic_reinit_start_time(_utc(e[rec.REINIT_START]))
        elif rec.REINIT_END in e:
            r.record_elastic_reinit_end_time(_utc(e[rec.REINIT_END]))
        elif rec.SLICES_AT in e:
            r.record_elastic_slice_counts(e["active_slices"], e["total_slices"],
                                          e["available_slices"], _utc(e[rec.SLICES_AT]))

    def close(self) -> None:
        self.recorder.flush()


def cloud_recorder(job: str, logger_name: str, cloud_logger: Any = None) -> Any | None:
    """The library's ``ElasticGoodputRecorder`` writing to Cloud Logging log ``logger_name``,
    or None (said once) when the library is not installed or Cloud Logging is not reachable.
    ``cloud_logger`` is the library's own test seam (its recorder's constructor argument)."""
    try:
        from ml_goodput_measurement.src.goodput_elastic import ElasticGoodputRecorder
    except ImportError as e:
        log.warning("elastix: --ml-goodput-logger %s: ml-goodput-measurement is not installed "
                    "(%s); install elastix[goodput] in the trainer image. Training goes on; "
                    "the records still go to the local file when the events file is local",
                    logger_name, e)
        return None
    try:
        return ElasticGoodputRecorder(job, logger_name, logging_enabled=True,
                                      cloud_logger=cloud_logger)
    except Exception as e:  # noqa: BLE001 - no credentials, no project: reported, not fatal
        log.warning("elastix: --ml-goodput-logger %s: cannot reach Cloud Logging (%s); "
                    "training goes on without goodput records there", logger_name,
                    (str(e).strip().splitlines() or [type(e).__name__])[0][:200])
        return None


class MlGoodputSink:
    """An ``EventLog`` listener: each event's records, to every writer."""

    def __init__(self, job: str, writers: list[Callable[[dict[str, Any]], None]],
                 full: int | None = None) -> None:
        self.feed = rec.Feed(job, full)
        self.writers = list(writers)
        self.entries = 0
        self._failed: set[int] = set()
        self._lock = threading.Lock()  # checkpoint commits are emitted from a watcher thread

    def attach(self, events) -> MlGoodputSink:
        events.listeners.append(self.on_event)
        return self

    def on_event(self, record: dict[str, Any]) -> None:
        with self._lock:
            self._on_event(record)

    def _on_event(self, record: dict[str, Any]) -> None:
        try:
            when = timefmt.parse(record["ts"]).timestamp() * 1000
            data = {k: v for k, v in record.items() if k not in _NOT_DATA}
            out = self.feed.add(record["event"], when, data)
        except Exception as e:  # noqa: BLE001 - records never cost a step
            self._report(-1, e)
            return
        self.entries += len(out)
        for i, write in enumerate(self.writers):
            for entry in out:
                try:
                    write(entry)
                except Exception as e:  # noqa: BLE001 - records never cost a step
                    self._report(i, e)
                    break

    def _report(self, i: int, e: Exception) -> None:
        if i not in self._failed:
            self._failed.add(i)
            log.warning("elastix: writing ml-goodput records failed (%s); training goes on",
                        (str(e).strip().splitlines() or [type(e).__name__])[0][:200])

    def close(self) -> None:
        for w in self.writers:
            close = getattr(w, "close", None)
            if close is not None:
                try:
                    close()
                except Exception:  # noqa: BLE001, S110 - closing never fails a run
                    pass


def attach(events, cfg, job: str) -> MlGoodputSink | None:
    """The sink ``cfg`` asks for on ``events``, or None: the file beside a local events file,
    and Cloud Logging with ``--ml-goodput-logger``."""
    writers: list[Any] = []
    path = events.path
    if path and not path.startswith("gs://"):
        try:
            writers.append(FileWriter(entries_path(path)))
        except OSError as e:
            log.warning("elastix: cannot write ml-goodput records beside %s (%s); training "
                        "goes on", path, e.strerror or e)
    if cfg.ml_goodput_logger:
        recorder = cloud_recorder(job, cfg.ml_goodput_logger)
        if recorder is not None:
            writers.append(RecorderWriter(recorder))
    if not writers:
        return None
    return MlGoodputSink(job, writers).attach(events)  # the full mesh: run_start's
