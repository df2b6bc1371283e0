"""The one Rich console every command prints through."""

from __future__ import annotations

from typing import Any

# Piped output (a file, less, grep) is at least this wide, so tables do not wrap at Rich's
# default of 80 columns when no terminal says how wide it is.
PIPED_WIDTH = 160


def console(stderr: bool = False, **options: Any) -> Any:
    """A Rich console on stdout (or stderr) without auto-highlighting.

    The width rule, the same for every command: a terminal's own width; piped, ``COLUMNS``
    when it is set (a user who pipes with ``COLUMNS=80`` asks for 80), else ``PIPED_WIDTH``;
    a ``width`` option given here wins over both. Piped, a line of text is never wrapped (a
    CI log or a file shows a note whole, not cut mid-phrase at the width): only tables use it.
    """
    import os

    from rich.console import Console

    c = Console(stderr=stderr, highlight=False, **options)
    if not c.is_terminal:
        options.setdefault("soft_wrap", True)
        if "width" not in options:
            columns = os.environ.get("COLUMNS", "")
            options["width"] = int(columns) if columns.isdigit() and int(columns) > 0 \
                else PIPED_WIDTH
        c = Console(stderr=stderr, highlight=False, **options)
    return c


def duration_words(seconds: float, tenths_below: float = 10.0) -> str:
    """``4.2 s``, ``42 s``, ``1 min 41 s``, ``2 h 5 min``: a length read at a glance (tenths
    below ``tenths_below`` seconds; 0: whole seconds, for a line that ticks)."""
    seconds = max(0.0, seconds)
    if seconds < tenths_below:
        return f"{seconds:.1f} s"
    s = int(seconds) if tenths_below <= 0 else round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"


SHORT_SPAN_SECONDS = 60.0
"""Below this a goodput share is shown as seconds first: one recovery of a second in a window
of two is "50 %", which alarms and says little (docs/recovery.md, "Goodput over a short run")."""
STARTUP_DOMINATES = 0.5
"""From this share of start-up on, a run's goodput is mostly its start-up: said so."""


def goodput_phrase(goodput: float | None, span_seconds: float,
                   startup_seconds: float | None = None) -> str:
    """``96.1% over 8 min``; over a span under :data:`SHORT_SPAN_SECONDS`, or one mostly
    start-up, the seconds first and the share after, named: ``0.6 s of 1.9 s productive
    (31.6%, under a minute)``, ``13.9 s of 1 min 40 s productive (13.9%, mostly start-up)``."""
    if goodput is None:
        return "-"
    pct = f"{goodput:.1%}"
    startup = startup_seconds if startup_seconds is not None else 0.0
    short = span_seconds < SHORT_SPAN_SECONDS
    mostly_startup = span_seconds > 0 and startup / span_seconds >= STARTUP_DOMINATES
    if not short and not mostly_startup:
        return f"{pct} over {duration_words(span_seconds, 0)}"
    span = f"{span_seconds:.1f} s" if short else duration_words(span_seconds, 0)
    return (f"{goodput * span_seconds:.1f} s of {span} productive ({pct}, "
            f"{'under a minute' if short else 'mostly start-up'})")
