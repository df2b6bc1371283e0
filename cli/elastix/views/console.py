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
    a ``width`` option given here wins over both.
    """
    import os

    from rich.console import Console

    c = Console(stderr=stderr, highlight=False, **options)
    if not c.is_terminal and "width" not in options:
        columns = os.environ.get("COLUMNS", "")
        width = int(columns) if columns.isdigit() and int(columns) > 0 else PIPED_WIDTH
        c = Console(stderr=stderr, highlight=False, width=width, **options)
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
