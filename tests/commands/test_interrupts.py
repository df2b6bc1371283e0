"""Ctrl-C held at a command's commit point (``elastix.interrupts``): a real SIGINT to this
process, in the main thread, where Python runs its handler."""

from __future__ import annotations

import os
import signal

import pytest

from elastix import interrupts


@pytest.fixture(autouse=True)
def python_sigint():
    """Python's own KeyboardInterrupt handler for the test, whatever pytest runs under."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    interrupts.release()
    signal.signal(signal.SIGINT, old)


def _ctrl_c() -> None:
    os.kill(os.getpid(), signal.SIGINT)  # the handler runs before kill returns to Python code


def test_before_the_commit_ctrl_c_interrupts_at_once():
    with pytest.raises(KeyboardInterrupt), interrupts.until_reported():
        _ctrl_c()
        pytest.fail("not interrupted")
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_after_the_commit_ctrl_c_waits_for_the_report_and_is_said():
    with interrupts.until_reported() as held:
        interrupts.commit()
        _ctrl_c()
        reached = True  # the report: not cut
        assert held.pending
    assert reached
    _ctrl_c()  # after the report, before the exit: still held
    interrupts.release()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_the_program_ignores_ctrl_c_once_reported():
    with interrupts.until_reported():
        interrupts.commit()
    interrupts.release(exiting=True)
    assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN


def test_a_create_that_fails_after_the_commit_gives_ctrl_c_back():
    with pytest.raises(RuntimeError), interrupts.until_reported():
        interrupts.commit()
        raise RuntimeError
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_deferred_raises_once_the_steps_are_done():
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts.deferred():
        _ctrl_c()
        done.append("started")
        done.append("recorded")
    assert done == ["started", "recorded"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_deferred_after_the_commit_passes_ctrl_c_to_the_hold():
    with interrupts.until_reported() as held:
        interrupts.commit()
        with interrupts.deferred():
            _ctrl_c()
        assert held.pending


def test_a_backend_used_outside_a_command_holds_nothing():
    interrupts.commit()  # e.g. chaos verify's reference clone
    with pytest.raises(KeyboardInterrupt):
        _ctrl_c()
