"""A full disk under the state directory (issue 34: the supervisor crashed with ENOSPC, and
``status`` said "killed?" and "no head log"). The state directory is a real 1 MiB tmpfs, filled
for real; the workload's processes are real and are killed with real signals."""

from __future__ import annotations

import errno
import json
import os
import signal
import sys

import psutil
import pytest
from local_helpers import wait_until
from process_tags import tagged_pids
from tmpfs import small_tmpfs

from elastix.backends.local.backend import LocalBackend

HEAD = f"{sys.executable} -c \"import time; time.sleep(600)\""  # writes nothing of its own


@pytest.fixture
def small_state(tmp_path):
    with small_tmpfs(tmp_path / "small", "size=1m,mode=0700", "a 1 MiB tmpfs") as d:
        yield d / "state"


def _fill(path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as e:
        assert e.errno == errno.ENOSPC
    try:  # the last few blocks too
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)


def _fill_with_no_write_in_flight(wdir, filler) -> None:
    """Fill the disk while the supervisor is stopped between two state writes: a write in
    flight (its new file already has its page) would free the old file's page when it lands,
    and one more write would then fit."""
    pid = json.loads((wdir / "state.json").read_text())["supervisor"]["pid"]
    sup = psutil.Process(pid)
    while True:
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: sup.status() == psutil.STATUS_STOPPED, 10, "the supervisor stopped")
        if not list(wdir.glob(".state.json.*.tmp")):
            break
        os.kill(pid, signal.SIGCONT)  # let the write in flight land, then try again
        wait_until(lambda: not list(wdir.glob(".state.json.*.tmp")), 10, "the write landed")
    try:
        _fill(filler)
    finally:
        os.kill(pid, signal.SIGCONT)


def _restarts(backend, name: str) -> int:
    return sum(s.slice_restarts for s in backend.status(name).slices)


def test_a_full_state_disk_is_said_and_the_workload_goes_on(cli, small_state, tag):
    env = {"ELASTIX_STATE_DIR": str(small_state)}
    backend = LocalBackend(small_state)
    cli("workload", "create", "full", "--tpu-type", "v5litepod-8", "--num-slices", "2",
        "--elastic-slices", "2", "--max-slice-restarts", "5", "--command", HEAD, env=env)
    wait_until(lambda: backend.status("full").state == "Running", 60, "Running")
    filler = small_state.parent / "filler"
    _fill_with_no_write_in_flight(small_state / "full", filler)
    assert os.statvfs(filler).f_bavail == 0
    sup = backend.status("full")
    before = set(tagged_pids(tag))
    # A slice host dies while nothing can be written: the supervisor must replace it anyway.
    backend.kill_worker("full", slice=0, host=0)
    wait_until(lambda: len(set(tagged_pids(tag)) - before) >= 2, 60,
               "slice 0's two hosts replaced, with the disk still full")
    st = backend.status("full")
    assert st.state == "Running", st.reasons
    assert any("the state directory's disk is full" in r for r in st.reasons), st.reasons
    assert not any("killed?" in r for r in st.reasons), st.reasons
    os.unlink(filler)  # room again: the next state write lands, and says what happened
    state_json = small_state / "full" / "state.json"
    wait_until(lambda: "cannot write state.json" in state_json.read_text(), 60,
               "the state written again, with what happened meanwhile")
    st = backend.status("full")
    assert st.state == "Running" and not any("disk is full" in r for r in st.reasons)
    assert _restarts(backend, "full") == 1  # the slice was replaced while nothing could be written
    # Said once, in one line, in the state (its events) and the supervisor's log.
    said = state_json.read_text()
    assert said.count("cannot write state.json") == 1 and "(is its disk full?)" in said
    wait_until(lambda: "state.json written again"
               in (small_state / "full" / "supervisor.log").read_text(), 30, "said again")
    assert backend.status("full").head.pid == sup.head.pid  # the same controller throughout
    cli("workload", "delete", "full", "--wait", env=env)
