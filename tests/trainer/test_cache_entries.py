"""Entries of the shared compilation cache that must not hang, hold up or slow a start (issue
59, items 6 and 12; ``elastix_trainer.state.cachefile``).

Each run is a real process that switches the local backend's shared cache on as a head does
(``compilecache.enable`` of ``$ELASTIX_LOCAL_COMPILATION_CACHE``, with JAX's size bound and so
its file lock) and compiles one program. The entries are then made a FIFO (a read of one blocked
for ever, holding the lock: two runs at once, the second waiting on it) or cut short (it failed
to load, was compiled again and kept: every later run compiled from scratch).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest
from trainer_helpers import cli_env

from elastix.protocol import envvars

PROBE = """
import sys
import jax, jax.numpy as jnp
from elastix_trainer.state import compilecache
assert compilecache.enable(sys.argv[1])
f = jax.jit(lambda x: (x * 2.0 + 1.0).sum())
print("result", float(f(jnp.arange(8.0))), flush=True)
"""
MISSED = "Error reading persistent compilation cache entry"


def _start(cache) -> subprocess.Popen:
    env = cli_env(**{envvars.LOCAL_COMPILATION_CACHE: str(cache),
                     "ELASTIX_TEST_NO_SHARED_JAX_CACHE": "1"})
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env.pop("JAX_COMPILATION_CACHE_MAX_SIZE", None)
    return subprocess.Popen([sys.executable, "-c", PROBE, str(cache)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run(*caches) -> list[tuple[str, str]]:
    """Run one probe per cache at once; each one's (stdout, stderr). The bound is a JAX start's
    on a loaded machine, not the hang's: a probe blocked on an entry never ends."""
    procs = [_start(c) for c in caches]
    out = []
    try:
        for p in procs:
            so, se = p.communicate(timeout=120)
            assert p.returncode == 0, se
            assert "result 64.0" in so
            out.append((so, se))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


def _entries(cache) -> list:
    return sorted(p for p in cache.iterdir() if p.name.endswith("-cache"))


def test_entries_are_private_and_a_fifo_hangs_no_one(tmp_path):
    cache = tmp_path / ".cache" / "jax"
    (_, first), = _run(cache)
    entries = _entries(cache)
    assert entries and MISSED not in first
    for p in cache.iterdir():  # entries, access times and the lock: the user's alone
        if not p.name.startswith(".") or p.name == ".lockfile":
            assert stat.S_IMODE(p.stat().st_mode) == 0o600, p
    for p in entries:
        p.unlink()
        os.mkfifo(p)
    # two workloads start at once on the planted cache: neither blocks, neither waits on the
    # other's lock (JAX gave up on it with a Timeout after 10 s a program)
    runs = _run(cache, cache)
    said = "\n".join(se for _, se in runs)
    assert "is not a regular file (a FIFO): removed; the program is compiled again" in said
    assert "Timeout" not in said, said
    assert all(stat.S_ISREG(p.lstat().st_mode) for p in _entries(cache))


def test_a_damaged_entry_is_replaced_once(tmp_path):
    cache = tmp_path / ".cache" / "jax"
    _run(cache)
    for p in _entries(cache):
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 2])  # a write cut short
    (_, damaged), = _run(cache)
    assert "could not be loaded" in damaged and "removed; the program is compiled again and " \
        "its entry written anew" in damaged, damaged
    (_, after), = _run(cache)  # the entry written anew loads: no warning, no compile
    assert MISSED not in after and "elastix: compilation cache entry" not in after, after


@pytest.mark.parametrize("bad", ["link", "dir"])
def test_an_entry_that_is_no_file_is_removed(tmp_path, bad):
    cache = tmp_path / ".cache" / "jax"
    _run(cache)
    for p in _entries(cache):
        moved = p.with_name("." + p.name + ".elsewhere")
        p.rename(moved)
        if bad == "link":  # to the entry itself, moved: a link is refused whatever its target
            p.symlink_to(moved)
        else:
            p.mkdir()
    (_, said), = _run(cache)
    assert "elastix: compilation cache entry" in said and "removed" in said, said
    assert all(stat.S_ISREG(p.lstat().st_mode) for p in _entries(cache))
