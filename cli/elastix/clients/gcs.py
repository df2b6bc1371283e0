"""Read the trainer's JSONL events from ``gs://`` with google-cloud-storage (imported lazily).

Credentials are application-default; with ``STORAGE_EMULATOR_HOST`` set (fake-gcs-server in
tests) the client is anonymous.
"""

from __future__ import annotations

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


def _client():
    from google.cloud import storage

    if os.environ.get("STORAGE_EMULATOR_HOST"):
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project="elastix-emulator", credentials=AnonymousCredentials())
    try:
        return storage.Client()
    except Exception as e:  # google.auth.exceptions.DefaultCredentialsError and friends
        raise BackendError(f"no Google credentials to read events from GCS: {e}",
                           hint="set up application-default credentials, or measure from the "
                                "head's log (unset --events-path)") from None


def read_jsonl(uri: str) -> list[dict[str, Any]] | None:
    """The JSON objects of a JSONL object on GCS; None when it does not exist (yet).

    A torn last line (the trainer uploads the whole file while it is written) is skipped; any
    other line that is not an event is an error (``EventsUnreadable``), as for a local file.
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
    records, bad, total = eventspec.split_jsonl(data.decode("utf-8", errors="replace"))
    if bad:  # the rule of a local events file and of --events FILE
        raise EventsUnreadable(f"events file {uri}", bad, total)
    return records
