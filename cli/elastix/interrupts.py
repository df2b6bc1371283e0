"""Ctrl-C where a command must not be cut in two: held, then acted on.

``workload create`` has a commit point: the local supervisor has written its first state, or
the API server has answered the JobSet's POST. Before it, Ctrl-C undoes whatever the create
made (the backend's ``except BaseException``), so nothing is left; after it, the workload runs,
and Ctrl-C must not make the command say "interrupted" (exit 130) over a workload it left
running. So the command opens :func:`until_reported` around the submit and its report, the
backend calls :func:`commit` at its commit point, and from there to the exit a Ctrl-C only
sets ``pending`` (the command says the workload is left running). :func:`deferred` holds Ctrl-C over
a few steps that must happen together (a process started *and* recorded), then raises it.

Holding swaps Python's SIGINT handler (in the main thread only; elsewhere, and when SIGINT is
ignored or not Python's, nothing is held): masking the signal would not do, a thread that does
not mask it would take it and Python would still raise in the main thread.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Held:
    """One hold of Ctrl-C: whether one came while it was on."""

    def __init__(self) -> None:
        self.pending = False
        self._old: Any = None
        self._on = False

    def start(self) -> None:
        if self._on or threading.current_thread() is not threading.main_thread():
            return
        old = signal.getsignal(signal.SIGINT)
        if not callable(old):  # ignored, or the default (which kills): nothing to hold
            return
        self._old, self._on = old, True
        signal.signal(signal.SIGINT, self._note)

    def stop(self, ignore: bool = False) -> None:
        """End the hold: Python's handler back, or with ``ignore`` SIGINT ignored."""
        if self._on:
            signal.signal(signal.SIGINT, signal.SIG_IGN if ignore else self._old)
            self._on = False

    def hand_to(self, other: Held) -> None:
        """Let ``other`` hold from here, with any Ctrl-C that came already."""
        if self._on:
            signal.signal(signal.SIGINT, other._note)
            other._old, other._on, self._on = self._old, True, False
            other.pending = other.pending or self.pending
            self.pending = False

    def act(self) -> None:
        """What the Ctrl-C would have done (KeyboardInterrupt, or an outer hold noting it)."""
        if self.pending and callable(self._old):
            self.pending = False
            self._old(signal.SIGINT, None)

    def _note(self, *_: object) -> None:
        self.pending = True


@contextlib.contextmanager
def deferred() -> Iterator[Held]:
    """Hold Ctrl-C inside the block; one that came acts when the block ends (unless the block
    raised: its exception goes on)."""
    held = Held()
    held.start()
    try:
        yield held
    finally:
        held.stop()
    held.act()


_scopes: list[Held] = []
_reported: list[Held] = []


@contextlib.contextmanager
def until_reported() -> Iterator[Held]:
    """The command's side: from the backend's :func:`commit`, Ctrl-C is held; ``pending`` says
    one came. A block that ends well keeps the hold until :func:`release` (the program then
    ignores SIGINT and exits: nothing is left to cut), so no Ctrl-C between the report and the
    exit turns it into "interrupted". One that raises ends it."""
    held = Held()
    _scopes.append(held)
    try:
        yield held
    except BaseException:
        held.stop()
        raise
    finally:
        _scopes.remove(held)
    _reported.append(held)


def commit(held: Held | None = None) -> None:
    """The backend's side, at its commit point: from here Ctrl-C waits for the command to
    report. ``held``: the :func:`deferred` hold over the step that committed (a request whose
    answer decides), handed on with a Ctrl-C that came during it. Nothing is held outside
    :func:`until_reported` (a backend used by other code): ``held`` then acts as it ends."""
    if not _scopes:
        return
    if held is not None:
        held.hand_to(_scopes[-1])
    _scopes[-1].start()


def release(exiting: bool = False) -> None:
    """End the holds of commands that reported: ``main`` called in-process gives its caller
    its Ctrl-C back; the program, ``exiting``, ignores SIGINT from here (Python's finalization
    puts back the default action, which kills, for a signal it handles; not for one ignored)."""
    while _reported:
        _reported.pop().stop(ignore=exiting)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised as an interrupt where elastix has something to undo before it exits
    (:func:`sigterm_interrupts`): every ``except KeyboardInterrupt`` that cleans up runs."""


_terminated: list[bool] = []


def terminated() -> bool:
    """Whether a SIGTERM came inside :func:`sigterm_interrupts` (the entry point then exits as
    a process SIGTERM ended, once the undoing is done)."""
    return bool(_terminated)


@contextlib.contextmanager
def sigterm_interrupts() -> Iterator[None]:
    """Inside the block SIGTERM raises :class:`Terminated` instead of ending the process at
    once, so what elastix did and must undo (a host it stopped) is undone on that way out too.
    Only in the main thread and only over SIGTERM's default action (a handler someone else set,
    or an ignored SIGTERM, is theirs)."""
    if threading.current_thread() is not threading.main_thread() \
            or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return

    def _raise(*_: object) -> None:
        _terminated.append(True)
        raise Terminated

    signal.signal(signal.SIGTERM, _raise)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
