"""The contract's time formats: events to the microsecond, log lines truncated to the ms."""

from __future__ import annotations

import datetime as dt

from elastix.protocol import timefmt

T = dt.datetime(2026, 11, 29, 9, 50, 1, 123999, tzinfo=dt.timezone.utc)


def test_formats_truncate_and_parse_back():
    assert timefmt.iso_us(T) == "2026-11-29T09:50:01.123999Z"
    assert timefmt.iso_ms(T) == "2026-11-29T09:50:01.123Z"  # truncated, never rounded
    assert timefmt.parse(timefmt.iso_us(T)) == T
    assert timefmt.parse_ms(timefmt.iso_us(T)) == timefmt.parse_ms(timefmt.iso_ms(T))
    assert timefmt.from_ms(timefmt.to_ms(T)) == timefmt.iso_ms(T)


def test_parse_accepts_offsets_and_naive_as_utc():
    assert timefmt.parse("2026-11-29T10:50:01.123999+01:00") == T
    assert timefmt.parse("2026-11-29T09:50:01.123999") == T
