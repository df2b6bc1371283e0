"""The line every wait shows on stderr: what it waits for, the phase it is in, and since when.

On a terminal, one live line (transient: gone when the wait ends) whose elapsed time ticks by
itself. Elsewhere (a CI log), a plain line each time the phase changes and a ``still ...`` line
every :data:`STILL_EVERY` seconds of one phase: a log shows the wait's course, not a line per
poll. stdout is left alone (it may be a JSON report).
"""

from __future__ import annotations

import datetime as dt
import threading
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
        self._lock = threading.Lock()  # the plain lines: update's and the still timer's
        self._closed = threading.Event()
        self._timer: threading.Thread | None = None

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
        with self._lock:
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
                    self._print(self.line())
                    self._start_timer()
            else:
                self._still(now)

    def _still(self, now: float) -> None:
        """A ``still ...`` line, off a terminal, once the phase has gone unsaid that long."""
        if not self.err.is_terminal and self.phase is not None \
                and now - self.said >= STILL_EVERY:
            self.said = now
            self._print(self.line(still=True))

    def _print(self, text: str) -> None:
        self.err.print(text, markup=False, highlight=False, soft_wrap=True)

    def _start_timer(self) -> None:
        """Off a terminal: say ``still ...`` every STILL_EVERY seconds even when the waiter
        does not call again (a delete waits in one call, a soak sleeps out its interval)."""
        if self._timer is not None:
            return

        def tick() -> None:
            while not self._closed.wait(1.0):
                with self._lock:
                    if not self._closed.is_set():
                        self._still(self.clock())

        self._timer = threading.Thread(target=tick, name="elastix-wait-line", daemon=True)
        self._timer.start()

    def __call__(self, phase: Phase) -> None:
        self.update(phase)

    def close(self) -> None:
        """End the live line (it leaves nothing behind) and the still timer; idempotent."""
        with self._lock:
            self._closed.set()
        if self._status is not None:
            self._status.stop()
            self._status = None
