"""The watchdog: a run that makes no progress for too long fails loudly instead of hanging.

Progress is any event (a step, a checkpoint event, a recovery phase), and the end of a
session's build (compile and restore: on a fresh start they write no event of their own); until
the first session is built the run is starting up, bounded by at least the default. When
none arrives for ``timeout`` seconds, the watchdog logs every thread's stack once (where it hangs
is the first thing anyone asks), writes ``run_end`` with the reason, and ends the process with exit code
``EXIT_CODE``, so the JobSet restarts the head (or gives up within its budget) instead of
leaving a live, silent workload that looks Running.

The default timeout must exceed every phase that may legitimately be silent: the first
compilation, a wait for slices (``--slice-wait-timeout``) and a checkpoint write
(``--checkpoint-timeout``); ``default_timeout`` derives it from those.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable

from elastix.protocol import eventspec
from elastix_trainer.obs.events import EventLog, log

EXIT_CODE = 3
"""The process's exit code after the watchdog fired (distinct from 1, a failed run)."""


def default_timeout(slice_wait_timeout: float, checkpoint_timeout: float) -> float:
    """Longer than the longest silent phase: a checkpoint wait, a slice wait, plus 10 minutes
    for a compilation (first steps of large models on TPU take minutes)."""
    return max(slice_wait_timeout, checkpoint_timeout) + 600.0


def thread_stacks() -> str:
    """Every thread's stack, innermost call last."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        out.append(f"--- thread {names.get(ident, ident)} ---")
        out.extend(ln.rstrip("\n") for ln in traceback.format_stack(frame))
    return "\n".join(out)


class Watchdog:
    """Watches ``events`` for progress from a daemon thread.

    Args:
        events: the run's event log (every emit counts as progress).
        timeout: seconds without an event before it fires.
        last_step: returns the last completed step (for ``run_end``).
        clock: monotonic clock; exit: what ends the process (both injected for tests).
    """

    def __init__(self, events: EventLog, timeout: float, last_step: Callable[[], int], *,
                 startup: float | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 exit: Callable[[int], None] = os._exit) -> None:
        self.events, self.timeout, self._last_step = events, timeout, last_step
        self.startup = startup
        self._clock, self._exit = clock, exit
        self._stop = threading.Event()
        self.fired = False
        self._thread = threading.Thread(target=self._run, daemon=True, name="elastix-watchdog")

    def start(self) -> Watchdog:
        self._thread.start()
        return self

    def _run(self) -> None:
        poll = min(5.0, max(0.05, self.timeout / 10))
        while not self._stop.wait(poll):
            idle = self._clock() - self.events.last_emit
            if idle >= self._limit():
                self._fire(idle)
                return

    def _limit(self) -> float:
        """``timeout``, or until the first session is built (``EventLog.started``) at least
        ``startup``: start-up waits for slices and compiles, silent phases the default bound
        (``default_timeout``) is made for, so a short ``--watchdog-timeout`` meant for a stuck
        step does not end a run whose first compile is slow on a loaded machine."""
        if self.startup is None or self.events.started:
            return self.timeout
        return max(self.timeout, self.startup)

    def _fire(self, idle: float) -> None:
        self.fired = True
        reason = (f"no progress for {idle:.0f} s (no step, checkpoint or recovery event; "
                  f"watchdog at {self._limit():g} s)")
        log.error("elastix: %s: every thread's stack follows, then the process exits %d",
                  reason, EXIT_CODE)
        log.error("%s", thread_stacks())
        end = {"status": "failed", "reason": reason, "step": self._last_step()}
        try:
            self.events.emit(eventspec.RUN_END, **end)
            self.events.close()
        finally:
            print(f"error: {reason}", file=sys.stderr, flush=True)
            print("hint: the stacks in the log show where it hung; the JobSet restarts the head "
                  "within --max-restarts", file=sys.stderr, flush=True)
            self._exit(EXIT_CODE)

    def stop(self) -> None:
        self._stop.set()
