"""The trainer's JSONL event log and its UTC-timestamped log lines (contract: docs/events.md).

Recovery measurement and goodput read these, and the local backend tails them, so every event
and every log line is flushed as soon as it is written.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import logging
import os
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from elastix.protocol import eventspec, timefmt

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


def quiet_libraries(debug: bool = False) -> None:
    """Keep the log to elastix's own lines: one per event, one ``error:`` per failure.

    Orbax logs every failed background write with a traceback through absl (and asyncio its
    "Task exception was never retrieved"), and once a write failed, TensorStore's callbacks into
    Orbax's closed event loops print "Event loop is closed" tracebacks as unraisable errors: a
    full disk wrote over a thousand of them in 40 steps. elastix already reports each failed
    save in one line (``checkpoint save failed``), so these are dropped; ``ELASTIX_DEBUG=1``
    keeps them.
    """
    if debug:
        return
    for name in ("absl", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    default = sys.unraisablehook

    def hook(unraisable) -> None:
        exc = unraisable.exc_value
        if isinstance(exc, RuntimeError) and str(exc) == "Event loop is closed":
            return
        default(unraisable)

    sys.unraisablehook = hook


class Uploader:
    """Uploads the local mirror of a ``gs://`` events file from its own thread.

    Events must never cost a step or a run: the training thread only appends a line locally
    and wakes this thread, which uploads at most every ``every`` seconds, retries a failure
    with a growing pause (1 s, 2 s, ... 60 s), reports failures in the log (the first of each
    streak, then every tenth) and never raises. Objects cannot be appended to, so each upload
    writes the whole file; its cost grows with the file but lands on this thread only.
    """

    MAX_BACKOFF = 60.0

    def __init__(self, read, remote: str, every: float) -> None:
        self._read, self.remote, self._every = read, remote, every
        self._cond = threading.Condition()
        self._dirty = self._stopping = False
        self.failures = 0
        self.uploads = 0
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name="elastix-events-upload")
        self._thread.start()

    def kick(self) -> None:
        with self._cond:
            self._dirty = True
            self._cond.notify()

    def _attempt(self) -> bool:
        from elastix_trainer.storage import upload_file_bytes

        try:
            upload_file_bytes(self._read(), self.remote)
        except Exception as e:  # noqa: BLE001 - reported; events never end a run
            self.failures += 1
            if self.failures == 1 or self.failures % 10 == 0:
                log.warning("elastix: events upload to %s failed (%d in a row): %s; training "
                            "goes on and the upload is retried", self.remote, self.failures,
                            (str(e).strip().splitlines() or [type(e).__name__])[0][:200])
            return False
        if self.failures:
            log.info("elastix: events upload to %s works again after %d failures", self.remote,
                     self.failures)
        self.failures, self.uploads = 0, self.uploads + 1
        return True

    def _run(self) -> None:
        last, pause = 0.0, 0.0
        while True:
            with self._cond:
                while not self._dirty and not self._stopping:
                    self._cond.wait()
                if self._stopping:
                    return
                # Sleep out the pause; new events (kick) do not shorten it, a stop request does.
                deadline = time.monotonic() + max(self._every - (time.monotonic() - last), pause)
                while not self._stopping and (left := deadline - time.monotonic()) > 0:
                    self._cond.wait(left)
                if self._stopping:
                    return
                self._dirty = False
            last = time.monotonic()
            if self._attempt():
                pause = 0.0
            else:
                pause = min(self.MAX_BACKOFF, max(1.0, pause * 2))
                self.kick()

    IN_FLIGHT_WAIT = 60.0
    """How long ``close`` waits for an upload in flight before it writes the final file."""

    def close(self, attempts: int = 3) -> bool:
        """Stop the thread, then upload the final file (a few tries). True if it is up.

        The upload in flight is waited for first: each upload writes the whole object, so one
        that landed after the final upload would replace the full file with an older, shorter
        one (seen with a 6 s stall under load, when this waited 5 s)."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join(timeout=self.IN_FLIGHT_WAIT)
        if self._thread.is_alive():
            log.warning("elastix: an events upload to %s is still in flight after %.0f s; the "
                        "final upload may be replaced by it", self.remote, self.IN_FLIGHT_WAIT)
        for i in range(attempts):
            if i:
                time.sleep(min(2.0 ** (i - 1), 4.0))
            if self._attempt():
                return True
        return False


class EventLog:
    """Append-only JSONL events. Thread-safe (checkpoint commits are seen from a watcher thread).

    A ``gs://`` path is written to a local mirror and uploaded whole (objects cannot be
    appended to) by a background thread, at most every ``upload_every`` seconds and on
    ``close()``: see ``Uploader``. A local write that fails (a full disk) is reported once and
    training goes on; the in-process ``records`` keep every event.
    """

    def __init__(self, path: str | None, upload_every: float = 2.0) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._gcs_path = path if path and path.startswith("gs://") else None
        self.records: list[dict] = []  # in-process copy, for tests and benchmarks
        self.listeners: list[Callable[[dict], None]] = []  # called with each record, after it
        self._file = None
        self._uploader: Uploader | None = None
        self._write_failed = False
        self.last_emit = time.monotonic()
        """``time.monotonic()`` of the newest event (the watchdog's measure of progress)."""
        if path is None:
            return
        local = path
        if self._gcs_path:
            fd, local = tempfile.mkstemp(prefix="elastix-events-", suffix=".jsonl")
            os.close(fd)
        else:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._local = local
        torn = _ends_torn(local)
        self._file = _open_append(local)
        if torn:
            # A head killed mid-line (a full disk, then SIGKILL) left half a record: end it,
            # so this process's first record is a line of its own, not the torn one's tail
            # (readers skip the torn line and say so; glued to it, this one would be lost).
            try:
                self._file.write("\n")
                self._file.flush()
            except OSError:
                pass  # the disk is still full: the newline goes out with the first event
        if self._gcs_path:
            self._uploader = Uploader(self._snapshot, self._gcs_path, upload_every)

    def progress(self) -> None:
        """Count as progress for the watchdog without writing an event: a session's compile and
        restore ended (``Trainer.start``), which write none of their own on a fresh start. The
        run has started from then on (``started``)."""
        self.last_emit = time.monotonic()
        self.started = True

    started = False
    """A session was built (see ``progress``): the run is past its start-up."""

    def _snapshot(self) -> bytes:
        with self._lock:  # whole lines only: emit writes and flushes a line under this lock
            with open(self._local, "rb") as f:
                return f.read()

    def emit(self, event: str, *, at: str | None = None, logged: bool = True,
             **values: Any) -> dict:
        """Write one event now, and its log line (docs/events.md) with the same timestamp.

        Args:
            event: the event's name (``eventspec``): its table gives the record's keys and the
                line's template, so each value is given once.
            at: the ``ts`` to record instead of now (an event that dates from another one).
            logged: False for a record whose line another event already logged.
            **values: the event's values.

        Returns:
            The record written.
        """
        fields, text_line = eventspec.build(event, pid=os.getpid(), **values)
        self.last_emit = time.monotonic()
        when = timefmt.utc_now() if at is None else timefmt.parse(at)
        line = text_line if logged else None
        record = {"ts": timefmt.iso_us(when), "event": event, "pid": os.getpid(), **fields}
        if line is not None:
            log.info("%s", line, extra={"elastix_when": when})
        text = json.dumps(record, default=_jsonable)
        with self._lock:
            self.records.append(record)
            if self._file is not None:
                try:
                    self._file.write(text + "\n")
                    self._file.flush()
                    self._write_failed = False
                except OSError as e:  # the events file must never cost a step or a run
                    if not self._write_failed:
                        log.warning("elastix: cannot write the events file %s (%s); training "
                                    "goes on, the head's log lines carry the same events",
                                    self._local, e.strerror or e)
                    self._write_failed = True
        if self._uploader is not None:
            self._uploader.kick()
        for listener in self.listeners:  # e.g. TensorBoard; each guards itself
            listener(record)
        return record

    def of(self, event: str) -> list[dict]:
        """Records of one event type written by this process."""
        with self._lock:
            return [r for r in self.records if r["event"] == event]

    def close(self) -> None:
        """Flush, upload (gs://) and close. Never raises for the events' sake."""
        with self._lock:
            if self._file is None:
                return
            try:
                self._file.close()
            except OSError:
                pass
            self._file = None
        if self._uploader is not None:
            if self._uploader.close():
                os.unlink(self._local)
            else:
                log.warning("elastix: the events were not uploaded to %s; the local copy is "
                            "kept at %s", self._gcs_path, self._local)


def _open_append(path: str):
    """``path`` opened to append text, created if missing: a regular file only. Opened without
    blocking, so a FIFO there (which an ordinary open would wait on for a reader, for ever)
    is refused at once, as is a device or a socket.

    Raises:
        UsageError: it is not a regular file (one line; the trainer exits 2).
        OSError: it cannot be opened (no permission, a directory).
    """
    from elastix.errors import UsageError

    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o666)
    except OSError as e:
        if e.errno != errno.ENXIO:  # ENXIO: a FIFO with no reader (open(2))
            raise
        mode = os.stat(path).st_mode
    else:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode):
            os.set_blocking(fd, True)
            return os.fdopen(fd, "a", encoding="utf-8")
        os.close(fd)
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a character device" if stat.S_ISCHR(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "not a file")
    raise UsageError(f"the events file {path} is not a regular file ({kind}): the trainer "
                     "appends its events to a file of its own",
                     hint="give --events-file (or ELASTIX_EVENTS_FILE) the path of a regular "
                          "file, created if missing")


def _ends_torn(path: str) -> bool:
    """The file at ``path`` is a regular file whose last line has no newline."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False  # never opened to read: a FIFO would block
        with open(path, "rb") as f:
            if f.seek(0, os.SEEK_END) == 0:
                return False
            f.seek(-1, os.SEEK_END)
            return f.read(1) != b"\n"
    except OSError:
        return False  # none yet (or unreadable: appending says so)


def _jsonable(x: Any) -> Any:
    if hasattr(x, "item"):
        return x.item()
    if isinstance(x, (set, frozenset)):
        return sorted(x)
    return str(x)
