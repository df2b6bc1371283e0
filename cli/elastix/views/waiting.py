"""The line every wait shows on stderr: what it waits for, the phase it is in, and since when.

On a terminal, one live line (transient: gone when the wait ends) whose elapsed time ticks by
itself. Elsewhere (a CI log), a plain line each time the phase changes and a ``still ...`` line
every :data:`STILL_EVERY` seconds of one phase: a log shows the wait's course, not a line per
poll. stdout is left alone (it may be a JSON report).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

from elastix.measure.progress import Phase
from elastix.views.console import duration_words

STILL_EVERY = 30.0
"""Seconds between ``still ...`` lines of one phase when stderr is not a terminal."""


class WaitLine:
    """Says what a wait waits for: ``update(phase)`` at each poll, ``close()`` (or leave the
    ``with`` block) when it ends.

    Args:
        err: the stderr console (:func:`elastix.views.console.console`); other lines printed
            through it while the live line shows go above it.
        what: the wait's prefix, ``waiting for NAME to be stepping``.
        clock: wall seconds (tests inject one).
    """

    def __init__(self, err: Any, what: str, *, clock: Callable[[], float] = time.time) -> None:
        self.err, self.what, self.clock = err, what, clock
        self.phase: Phase | None = None
        self.since = 0.0  # wall seconds the phase began
        self.said = 0.0  # wall seconds its last plain line was printed
        self._status: Any = None

    def __enter__(self) -> WaitLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def line(self, still: bool = False) -> str:
        """``waiting for NAME to be stepping: compiling (since 12:01:03, 41 s)``."""
        if self.phase is None:
            return self.what
        at = dt.datetime.fromtimestamp(self.since).strftime("%H:%M:%S")
        return (f"{self.what}: {'still ' if still else ''}{self.phase.what} "
                f"(since {at}, {duration_words(self.clock() - self.since, 0)})")

    def __rich__(self) -> str:  # the live line: rendered at each refresh, so its time ticks
        return self.line()

    def update(self, phase: Phase) -> None:
        """The phase now (the same one again is no news: no plain line, same ``since``)."""
        now = self.clock()
        if self.phase is None or phase.what != self.phase.what:
            self.phase = phase
            self.since = phase.since / 1000 if phase.since is not None else now
            self.said = now
            if self.err.is_terminal:
                if self._status is None:
                    self._status = self.err.status(self, spinner="dots")
                    self._status.start()
            else:
                self.err.print(self.line(), markup=False, highlight=False, soft_wrap=True)
        elif not self.err.is_terminal and now - self.said >= STILL_EVERY:
            self.said = now
            self.err.print(self.line(still=True), markup=False, highlight=False, soft_wrap=True)

    def __call__(self, phase: Phase) -> None:
        self.update(phase)

    def close(self) -> None:
        """End the live line (it leaves nothing behind); idempotent."""
        if self._status is not None:
            self._status.stop()
            self._status = None
