"""An events file that is no file (issue 48): a run's command may write in its workload
directory, where its events file is. A FIFO there hung ``workload list`` (for every workload),
``status`` and ``goodput``, and ``wait --timeout`` ignored its timeout; a link to /dev/zero was
read until the memory ran out. Now each is one clear line, and the pods' view still shows.

A real local workload whose head command puts a FIFO in its events file's place; the CLI as
real subprocesses, each under a timeout (a hang fails the test instead of hanging it).
"""

from __future__ import annotations

import os
import resource
import stat
import subprocess
import sys
from pathlib import Path

from local_helpers import wait_until

FIFO_HEAD = ('rm -f "$ELASTIX_EVENTS_FILE" && mkfifo "$ELASTIX_EVENTS_FILE" && exec sleep 600')


def _is_fifo(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except FileNotFoundError:
        return False


def _small_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # /dev/zero read whole: fails


def test_an_events_file_that_is_a_fifo_or_dev_zero_is_said_not_waited_on(cli, backend):
    name = "fifo"
    cli("workload", "create", name, "--tpu-type", "v5litepod-8", "--num-slices", "2",
        "--command", FIFO_HEAD)
    try:
        events = Path(backend.events_path(name))
        wait_until(lambda: _is_fifo(events), 60, "the head's FIFO")
        listed = cli("workload", "list", timeout=60)
        assert name in listed.stdout
        st = cli("workload", "status", name, timeout=60)
        assert (f"training: the trainer's events cannot be read: events file {events} is not "
                "a regular file (a FIFO)") in st.stdout, st.stdout
        for args in (["workload", "goodput", name],
                     ["workload", "wait", name, "--for", "stepping", "--timeout", "20s"]):
            p = cli(*args, check=False, timeout=60)
            assert p.returncode == 2, p.stdout + p.stderr
            err = p.stderr.splitlines()
            assert err[0] == f"error: events file {events} is not a regular file (a FIFO)"
            assert err[1].startswith("hint: ") and len(err) == 2, p.stderr
        os.unlink(events)
        os.symlink("/dev/zero", events)
        for args in (["workload", "status", name], ["workload", "goodput", name]):
            p = subprocess.run([sys.executable, "-m", "elastix", *args], capture_output=True,
                               text=True, env=cli.env, timeout=60, preexec_fn=_small_memory)
            assert "is not a regular file (a character device)" in p.stdout + p.stderr, \
                p.stdout + p.stderr
            assert "MemoryError" not in p.stderr and "Traceback" not in p.stderr
    finally:
        cli("workload", "delete", name, "--wait", check=False, timeout=120)
