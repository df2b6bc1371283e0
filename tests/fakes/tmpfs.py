"""A small tmpfs, for the tests that need a disk to fill up for real (ENOSPC from the kernel, not
a mock). Mounting needs root, as CI has; elsewhere those tests skip and say why."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_tmpfs(d: Path, options: str, what: str = "a tmpfs") -> Iterator[Path]:
    """Make the folder ``d`` and mount a tmpfs there (``options``: ``size=2m``, ...) for the
    block, unmounted after it; skip the test, naming ``what``, where mounting is refused."""
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(d)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"mounting {what} needs root (CI runs as root): {r.stderr.strip()}")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], check=False)
