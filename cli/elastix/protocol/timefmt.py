"""The timestamp formats of the contract, and their one parser.

Events carry ``ts`` to the microsecond (``2026-11-29T09:50:01.123456Z``); log lines start with
the time to the millisecond (``2026-11-29T09:50:01.123Z``), the event's ``ts`` truncated, so
measurement gets the same instant from either source. Always UTC with a ``Z``.
"""

from __future__ import annotations

import datetime as dt

_US = "%Y-%m-%dT%H:%M:%S.%fZ"


def utc_now() -> dt.datetime:
    """The current time, timezone-aware UTC."""
    return dt.datetime.now(dt.timezone.utc)


def iso_us(t: dt.datetime | None = None) -> str:
    """``2026-11-29T09:50:01.123456Z``: an event's ``ts`` (now when ``t`` is None)."""
    return (t or utc_now()).astimezone(dt.timezone.utc).strftime(_US)


def iso_ms(t: dt.datetime | None = None) -> str:
    """``2026-11-29T09:50:01.123Z``: a log line's prefix, truncated (never rounded)."""
    return iso_us(t)[:23] + "Z"


def parse(text: str) -> dt.datetime:
    """An ISO 8601 time (``Z``, an offset, or none: UTC) as an aware UTC datetime.

    Raises:
        ValueError: not an ISO 8601 time.
    """
    t = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return t.astimezone(dt.timezone.utc)


def to_ms(t: dt.datetime) -> int:
    """Milliseconds since the Unix epoch, truncated like the log lines' times."""
    t = t.astimezone(dt.timezone.utc)
    return int(t.replace(microsecond=0).timestamp()) * 1000 + t.microsecond // 1000


def parse_ms(text: str) -> int:
    """An ISO 8601 time to milliseconds since the epoch, truncated.

    Raises:
        ValueError: not an ISO 8601 time.
    """
    return to_ms(parse(text))


def from_ms(ms: int) -> str:
    """Milliseconds since the epoch to ``2026-11-29T09:50:01.123Z``."""
    t = dt.datetime.fromtimestamp(ms // 1000, dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"
