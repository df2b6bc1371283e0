"""Waiting in the benchmarks: for an event, with a bound that a loaded machine meets.

A bench waits for what a process will do (a trainer's first step, a checkpoint, a recovery).
How long that takes depends on the machine's load far more than on the code: a first step that
comes in 40 s on 2 quiet cores comes in minutes at load 15. So a wait here

- ends at once, saying why, when what it waits for can no longer come (``gone``: the process
  exited, the workload failed): that is how a broken run fails, never by running out of time;
- counts its bound in seconds of a quiet machine: a second waited while the load average is
  above the number of cores counts ``cores / load`` of a second, so the same bound holds on a
  busy machine. The bound is there to catch a hang, not to judge a speed;
- multiplies every bound by ``ELASTIX_BENCH_PATIENCE`` (default 1), for a machine slower still.

A bound handed to a library call (``measure_kill(timeout=...)``, a CLI's ``--timeout``) cannot
stretch as it runs: ``stretch`` scales it once, by the load when the call starts.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")
PATIENCE = "ELASTIX_BENCH_PATIENCE"


def patience() -> float:
    return float(os.environ.get(PATIENCE) or 1.0)


def _busy() -> float:
    """How many times busier than its cores the machine is now (1 when it is not)."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


def stretch(seconds: float) -> float:
    """``seconds`` of a quiet machine, as seconds of this one now (load and patience)."""
    return seconds * patience() * _busy()


def wait_for(cond: Callable[[], T], timeout: float, what: str, *,
             gone: Callable[[], str | None] | None = None,
             note: Callable[[], str] | None = None, poll: float = 0.2) -> T:
    """Poll ``cond`` until it returns something truthy, and return that.

    Args:
        cond: the event waited for.
        timeout: the bound, in seconds of a quiet machine (see the module's docstring).
        what: what is waited for, for the message.
        gone: returns why the event can no longer come (or None): the wait ends at once.
        note: what to add to a failure's message (the last lines of a log, say).
        poll: seconds between two looks at ``cond`` (``gone`` is asked every 0.5 s at most
            often: it may cost more than a look).

    Raises:
        SystemExit: with the reason, when ``gone`` says so or the bound is spent.
    """
    budget = timeout * patience()
    start = last = time.monotonic()
    spent, peak, asked = 0.0, 0.0, float("-inf")
    while True:
        value = cond()
        if value:
            return value
        why = None
        if gone is not None and time.monotonic() - asked >= 0.5:
            why, asked = gone(), time.monotonic()
        if why:
            raise SystemExit(f"gave up waiting for {what} after {time.monotonic() - start:.0f} s: "
                             f"{why}{_note(note)}")
        now = time.monotonic()
        load = os.getloadavg()[0]
        peak = max(peak, load)
        spent += (now - last) / _busy()
        last = now
        if spent > budget:
            raise SystemExit(
                f"timed out waiting for {what}: {now - start:.0f} s waited, {budget:.0f} s of a "
                f"quiet machine (load average up to {peak:.1f} on {os.cpu_count()} cores); "
                f"{PATIENCE}=2 (or more) waits longer{_note(note)}")
        time.sleep(poll)


def _note(note: Callable[[], str] | None) -> str:
    if note is None:
        return ""
    try:
        text = note()
    except Exception as e:  # noqa: BLE001 - the message matters more than its extra
        text = f"({type(e).__name__} while gathering more: {e})"
    return f"\n{text}" if text else ""


def exited(proc: Any) -> Callable[[], str | None]:
    """A ``gone`` for a ``subprocess.Popen``: why it can no longer do anything, once it exited."""
    return lambda: None if proc.poll() is None else f"the process exited {proc.returncode}"


def workload_ended(backend: Any, name: str) -> Callable[[], str | None]:
    """A ``gone`` for a local workload: its state, once it failed or completed."""
    def why() -> str | None:
        st = backend.status(name)
        if st.state in ("Failed", "Completed"):
            reasons = "; ".join([*st.reasons, *([st.message] if st.message else [])])
            return f"workload {name} is {st.state}" + (f" ({reasons})" if reasons else "")
        return None
    return why
