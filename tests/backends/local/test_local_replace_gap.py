"""``create --replace`` removes the old run's directory, then renames the new one in: a
reader in between (a chaos run's status read) must find the new run, not call it deleted
(issue 59: ``test_a_replaced_run_under_a_chaos_run`` failed so at load 6-8). The replace
says so in ``.replacing-NAME`` (its pid) for its whole length; a reader that finds no
workload while a live replace's marker is there waits for the new directory."""

from __future__ import annotations

import os
import threading

import pytest

from elastix.backends.local.plan import replacing_marker, workload_dir
from elastix.errors import NotFoundError


def _appear_later(d, event: threading.Event) -> threading.Thread:
    def make():
        event.wait(0.2)  # never set: the new directory comes a moment after the first look
        d.mkdir()
        (d / "plan.json").write_text("{}")

    t = threading.Thread(target=make)
    t.start()
    return t


def test_a_reader_in_a_replaces_gap_finds_the_new_run(tmp_path):
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    replacing_marker(root, "demo").write_text(str(os.getpid()))
    t = _appear_later(root / "demo", threading.Event())
    try:
        assert workload_dir(root, "demo") == root / "demo"
    finally:
        t.join()


def test_no_replace_or_a_dead_ones_marker_is_not_found_at_once(tmp_path):
    root = tmp_path / "state"
    root.mkdir(mode=0o700)
    with pytest.raises(NotFoundError):
        workload_dir(root, "demo")
    replacing_marker(root, "demo").write_text(str(2**22 + 4321))  # above any pid Linux gives
    with pytest.raises(NotFoundError):
        workload_dir(root, "demo")
