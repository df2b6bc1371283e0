"""The trainer's JSONL event log and its UTC-timestamped log lines (contract: docs/events.md).

Recovery measurement and goodput read these, and the local backend tails them, so every event
and every log line is flushed as soon as it is written.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import sys
import tempfile
import threading
import time
from typing import Any

from elastix.protocol import timefmt

LOGGER_NAME = "elastix_trainer"
log = logging.getLogger(LOGGER_NAME)


class _UtcFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # An event's line carries the event's own instant, so events and log give one time.
        when = getattr(record, "elastix_when", None) or dt.datetime.fromtimestamp(
            record.created, dt.timezone.utc)
        return f"{timefmt.iso_ms(when)} {record.getMessage()}"


def setup_logging(stream=None, level: int = logging.INFO) -> None:
    """Send the trainer's log lines to ``stream`` (stdout), one flushed line each."""
    handler = logging.StreamHandler(stream or sys.stdout)
    handler.setFormatter(_UtcFormatter())
    log.handlers[:] = [handler]
    log.setLevel(level)
    log.propagate = False


class EventLog:
    """Append-only JSONL events. Thread-safe (checkpoint commits are seen from a watcher thread).

    A ``gs://`` path is written to a local mirror and uploaded whole (objects cannot be
    appended to): at most every ``upload_every`` seconds, and on ``close()``.
    """

    def __init__(self, path: str | None, upload_every: float = 2.0) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._gcs_path = path if path and path.startswith("gs://") else None
        self._upload_every, self._last_upload = upload_every, 0.0
        self.records: list[dict] = []  # in-process copy, for tests and benchmarks
        self._file = None
        if path is None:
            return
        local = path
        if self._gcs_path:
            fd, local = tempfile.mkstemp(prefix="elastix-events-", suffix=".jsonl")
            os.close(fd)
        else:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._local = local
        self._file = open(local, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())

    def emit(self, event: str, line: str | None = None, at: str | None = None,
             **fields: Any) -> dict:
        """Write one event now, and its log line (docs/events.md) with the same timestamp.

        Args:
            event: the event name.
            line: the log line's text (without the time prefix); ``None`` for no line.
            at: the ``ts`` to record instead of now (an event that dates from another one).
            **fields: the event's keys.

        Returns:
            The record written.
        """
        when = timefmt.utc_now() if at is None else timefmt.parse(at)
        record = {"ts": timefmt.iso_us(when), "event": event, "pid": os.getpid(), **fields}
        if line is not None:
            log.info("%s", line, extra={"elastix_when": when})
        text = json.dumps(record, default=_jsonable)
        with self._lock:
            self.records.append(record)
            if self._file is not None:
                self._file.write(text + "\n")
                self._file.flush()
                if self._gcs_path and time.monotonic() - self._last_upload >= self._upload_every:
                    self._upload()
        return record

    def of(self, event: str) -> list[dict]:
        """Records of one event type written by this process."""
        with self._lock:
            return [r for r in self.records if r["event"] == event]

    def _upload(self) -> None:
        from elastix_trainer.storage import upload_file

        upload_file(self._local, self._gcs_path)
        self._last_upload = time.monotonic()

    def close(self) -> None:
        """Flush, upload (gs://) and close."""
        with self._lock:
            if self._file is None:
                return
            self._file.close()
            self._file = None
            if self._gcs_path:
                self._upload()
                os.unlink(self._local)


def _jsonable(x: Any) -> Any:
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    return str(x)
