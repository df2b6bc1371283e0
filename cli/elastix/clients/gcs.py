"""Read the trainer's JSONL events from ``gs://`` with google-cloud-storage (imported lazily).

Credentials are application-default; with ``STORAGE_EMULATOR_HOST`` set (fake-gcs-server in
tests) the client is anonymous.
"""

from __future__ import annotations

import json
import os
from typing import Any

from elastix.errors import BackendError, EventsUnreadable, UsageError
from elastix.protocol import eventspec


def split_uri(uri: str) -> tuple[str, str]:
    """``gs://bucket/a/b`` -> (``bucket``, ``a/b``)."""
    if not uri.startswith("gs://") or "/" not in uri[5:]:
        raise UsageError(f"{uri!r} is not a gs://bucket/object URI",
                         hint="e.g. gs://my-bucket/runs/demo/events.jsonl")
    bucket, _, name = uri[5:].partition("/")
    return bucket, name


def client():
    """A ``google.cloud.storage.Client``: anonymous against the emulator, else
    application-default credentials (a ``BackendError`` without them)."""
    return _client()


def _client():
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project="elastix-emulator", credentials=AnonymousCredentials())
    try:
        return storage.Client()
    except Exception as e:  # google.auth.exceptions.DefaultCredentialsError and friends
        raise BackendError(f"no Google credentials for Cloud Storage: {e}",
                           hint="set up application-default credentials, or measure from the "
                                "head's log (unset --events-path)") from None


def read_jsonl(uri: str) -> list[dict[str, Any]] | None:
    """The JSON objects of a JSONL object on GCS; None when it does not exist (yet).

    Torn lines (half a record; the trainer uploads the whole file while it is written) are
    skipped; a line that is JSON but not an event is an error (``EventsUnreadable``), as for a
    local file.
    """
    from google.api_core import exceptions as gexc

    bucket, name = split_uri(uri)
    try:
        data = _client().bucket(bucket).blob(name).download_as_bytes()
    except gexc.NotFound:
        return None
    except gexc.Forbidden as e:
        raise BackendError(f"no permission to read {uri}: {e.message}",
                           hint="grant the credential storage.objects.get on the bucket") from None
    except gexc.GoogleAPIError as e:
        raise BackendError(f"reading {uri} failed: {e}", hint="check the bucket and try again") \
            from None
    split = eventspec.split_jsonl(data.decode("utf-8", errors="replace"))
    if split.bad:  # the rule of a local events file and of --events FILE
        raise EventsUnreadable(f"events file {uri}", split.bad, split.total)
    return split.records


class JsonlTail:
    """A growing JSONL object on GCS read by its new bytes only: a ranged read from the offset
    already read on each :meth:`read`, so a status refresh costs what was appended, not the file.

    The trainer rewrites the object whole on each upload (objects cannot be appended to), so
    every read is of the newest generation. The last ``OVERLAP`` bytes already read are asked
    for again and compared: a different object (a restarted head's new file) or one shorter
    than what was read (HTTP 416) is read again from the start, and :meth:`read` says so.
    A partial last line is kept until its newline arrives.
    """

    OVERLAP = 64

    def __init__(self, uri: str, keep: Any = None) -> None:
        """``keep(line_text)``: whether to parse a line at all (default: every line)."""
        self.uri = uri
        self.bucket, self.name = split_uri(uri)
        self.keep = keep or (lambda text: True)
        self.offset = 0  # bytes of the object consumed: complete lines and the partial one
        self.partial = b""  # the bytes after the last newline read
        self.seen = b""  # the last OVERLAP bytes read, to tell the same object from another
        self._client: Any = None

    def read(self) -> tuple[list[dict[str, Any]], bool] | None:
        """(the events completed since the last read, whether the object was read again from
        its start); None while the object does not exist.

        Raises:
            BackendError: no permission, or the read failed.
        """
        start = self.offset - len(self.seen)
        data = self._download(start)
        if data is None:
            return None
        reset = False
        if data is _SHORTER or data[:len(self.seen)] != self.seen:
            self.offset, self.partial, self.seen, reset = 0, b"", b"", True
            data = self._download(0)
            if data is None or data is _SHORTER:
                return None if data is None else ([], True)
        else:
            data = data[len(self.seen):]
        return self._consume(data), reset

    def _consume(self, data: bytes) -> list[dict[str, Any]]:
        self.offset += len(data)
        self.seen = (self.seen + data)[-self.OVERLAP:]
        *lines, self.partial = (self.partial + data).split(b"\n")
        out = []
        for raw in lines:
            text = raw.decode("utf-8", errors="replace").strip()
            if not text or not self.keep(text):
                continue
            try:
                ev = json.loads(text)
            except json.JSONDecodeError:
                continue
            if isinstance(ev, dict):
                out.append(ev)
        return out

    def _download(self, start: int) -> Any:
        from google.api_core import exceptions as gexc

        if self._client is None:
            self._client = _client()
        # A new Blob each time: one that downloaded before pins its generation, which the
        # trainer's next upload replaces.
        blob = self._client.bucket(self.bucket).blob(self.name)
        try:
            return blob.download_as_bytes(start=start) if start else blob.download_as_bytes()
        except gexc.RequestRangeNotSatisfiable:
            return _SHORTER
        except gexc.NotFound:
            return None
        except gexc.Forbidden as e:
            raise BackendError(f"no permission to read {self.uri}: {e.message}",
                               hint="grant the credential storage.objects.get on the bucket") \
                from None
        except gexc.GoogleAPIError as e:
            raise BackendError(f"reading {self.uri} failed: {e}",
                               hint="check the bucket and try again") from None


_SHORTER = object()  # the object is shorter than the range asked for (HTTP 416)
