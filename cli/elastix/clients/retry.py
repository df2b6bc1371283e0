"""When a Kubernetes API request answered 429 or 503 is sent again, and how long to wait first.

The API server answers 429 Too Many Requests when API Priority and Fairness (or the max-in-flight
limit) turns a request away, and 503 Service Unavailable when it cannot serve it at all (starting,
shutting down, storage not ready); both before handling the request, with a ``Status`` body and,
usually, a ``Retry-After`` header in seconds (also in the body's ``details.retryAfterSeconds``).
client-go (so kubectl) sends a request answered with ``Retry-After`` again, up to 10 times; a
command line should not wait that long for a control plane that is down, so elastix's bound is
smaller (:class:`RetryPolicy`).

What may be sent again:

- reads (GET, including the start of a watch or a log stream) and idempotent patches
  (server-side apply, merge patch): on any 429 or 503, whoever sent it.
- creates (POST) and deletes: only when the 429/503 is the API server's own (a ``Status``
  body): it did not process the request, so sending it again cannot make a second object, nor
  turn a done delete into "not found". A 429/503 without one came from something in front of
  the API server (a proxy, a load balancer), possibly after the API server acted: not sent
  again. Nor is a request that timed out or whose connection dropped (the answer is unknown):
  the caller decides (a failed submit checks what exists before cleaning up).

Pure: no HTTP here; :class:`elastix.clients.kube.Http` asks :meth:`RetryPolicy.wait`.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from typing import Any

RETRIED_STATUSES = (429, 503)
_IDEMPOTENT_PATCHES = ("application/apply-patch+yaml", "application/merge-patch+json")


@dataclasses.dataclass
class Retried:
    """What the retries of one request did, kept on its final error for the message."""

    attempts: int = 1
    waited: float = 0.0  # seconds slept between attempts
    retry_after: float | None = None  # the last answer's Retry-After, if any
    over_budget: bool = False  # stopped because the next wait would pass the time budget
    sendable: bool = True  # False: a create or delete whose answer was not the API server's


@dataclasses.dataclass
class RetryPolicy:
    """The bound on sending one request again.

    The defaults: at most 5 attempts, and no wait that would end more than 30 s after the first
    attempt started. The API server's own Retry-After is 1 s under Priority and Fairness, so a
    burst of throttling is ridden out in a few seconds; a control plane that stays unavailable
    for longer (a GKE control-plane upgrade takes minutes) is reported rather than waited on,
    so a command fails within about half a minute and says why. Without a Retry-After the
    waits are 1, 2, 4 and 8 s.
    """

    attempts: int = 5
    budget: float = 30.0
    backoff: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0)
    max_wait: float = 30.0  # a Retry-After above this is not waited for
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic

    def wait(self, method: str, content_type: str, err: Any, attempt: int, started: float,
             record: Retried) -> float | None:
        """Seconds to wait before sending the request again, or None to raise ``err``.

        Args:
            method: the request's HTTP method.
            content_type: its body's content type (which patches are idempotent).
            err: the ``ApiException`` of the answer.
            attempt: how many attempts were made (1 after the first).
            started: ``clock()`` when the first attempt started.
            record: updated with what was decided, for the error message.
        """
        status = getattr(err, "status", None)
        if status not in RETRIED_STATUSES:
            return None
        after = retry_after(err)
        record.retry_after = after
        if not may_resend(method, content_type, err):
            record.sendable = False
            return None
        if attempt >= self.attempts:
            return None
        delay = after if after is not None else self.backoff[min(attempt, len(self.backoff)) - 1]
        if delay > self.max_wait or self.clock() - started + delay > self.budget:
            record.over_budget = True
            return None
        return delay


def may_resend(method: str, content_type: str, err: Any) -> bool:
    """Whether a request answered 429/503 may be sent again (see the module's docstring)."""
    method = method.upper()
    if method in ("GET", "HEAD"):
        return True
    if method == "PATCH" and content_type in _IDEMPOTENT_PATCHES:
        return True
    return is_api_server_status(err)


def is_api_server_status(err: Any) -> bool:
    """Whether the answer's body is a Kubernetes ``Status`` (the API server's own refusal)."""
    body = _json(getattr(err, "body", None))
    return body.get("kind") == "Status" and body.get("code") == getattr(err, "status", None)


def retry_after(err: Any) -> float | None:
    """Seconds the answer asks to wait: its ``Retry-After`` header (delta-seconds), else the
    Status body's ``details.retryAfterSeconds``; None when it names none (or an HTTP date)."""
    headers = getattr(err, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    if value is not None:
        try:
            seconds = float(str(value).strip())
        except ValueError:
            seconds = None
        if seconds is not None and seconds >= 0:
            return seconds
    details = _json(getattr(err, "body", None)).get("details") or {}
    seconds = details.get("retryAfterSeconds") if isinstance(details, dict) else None
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and seconds >= 0:
        return float(seconds)
    return None


def _json(body: Any) -> dict:
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str):
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}
