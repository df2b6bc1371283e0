"""Will host memory hold the state's host copies? Said in one line before the first step.

A run with host snapshots holds two copies of its training state in host memory at once: the
newest snapshot, kept until the next one is whole, and that next one while it is copied
(``SnapshotStore``: a snapshot is kept only once its copy completed, so the old one cannot be
dropped first). A checkpoint makes a copy of its own, held while the writer writes it, unless
a snapshot of the same step was just taken (its copy is written as it is): when every
checkpoint step is a snapshot step that costs nothing more. On CPU the devices' own state is
host memory too, a replica for each slice. With qwen3-0.6b's 7.15 GB state that is 14.3 GB
before the checkpoint's: a head with less would find out at the first snapshot, steps in,
from the kernel's OOM killer.

The count is the steady state. A write that outlasts a whole snapshot period holds a third
copy (an older snapshot's) for its remainder; that is not refused here, since it depends on the
storage's pace, not on the flags. Nor is the write's own transient: Orbax used to deep-copy
every host array it wrote (a whole copy more, uncounted: ``manager.HostCopyRegistry`` now
writes a host copy as it is), and tensorstore still copies the chunks it cannot take from an
array as they are, for the arrays being written at once: 0.12x of qwen3-0.6b's state at the
write's peak with ``manager.WRITE_WINDOW_BYTES`` (``bench/bench_save_memory.py``).

What is available: the kernel's ``MemAvailable`` (free memory plus what it can reclaim), and,
where the process's memory cgroup has a limit (a container: the head pod's), that limit less
the cgroup's use, page cache it can reclaim not counted (cgroup v2 ``memory.max`` and
``memory.current``, v1 ``memory.limit_in_bytes`` and ``memory.usage_in_bytes``, with
``inactive_file`` of ``memory.stat`` in both); the smaller wins. Where none can be read (not
Linux) nothing is checked.
"""

from __future__ import annotations

import dataclasses
import os

import jax

from elastix.errors import UsageError

UNLIMITED = 1 << 60
"""A cgroup limit at or above this is no limit (v1 writes 2**63 rounded down to a page)."""


@dataclasses.dataclass(frozen=True)
class Available:
    """Bytes of host memory the run may still take, and where the figure comes from."""

    bytes: int
    source: str


@dataclasses.dataclass(frozen=True)
class Copies:
    """The host copies of the state a run holds at once, each with why and its flag."""

    state_bytes: int
    reasons: tuple[tuple[str, int], ...]
    """(why, how many copies)"""

    @property
    def count(self) -> int:
        return sum(n for _, n in self.reasons)

    def said(self) -> str:
        return "; ".join(why if n == 1 else f"{n} x {why}" for why, n in self.reasons)

    @property
    def bytes(self) -> int:
        return self.state_bytes * self.count


def tree_bytes(shapes) -> int:
    """Bytes of a pytree of arrays or of their shapes (``jax.eval_shape``'s: nothing
    allocated)."""
    return int(sum(x.size * x.dtype.itemsize for x in jax.tree_util.tree_leaves(shapes)))


def copies(cfg, nbytes: int, *, cpu_replicas: int = 0, persistence: bool = False) -> Copies:
    """The host copies ``cfg``'s run holds at once (module docstring). ``cpu_replicas``: the
    replicas of the state on CPU devices (one a slice), which are host memory too."""
    why: list[tuple[str, int]] = []
    if cpu_replicas:
        why.append(("the devices' state, a replica a slice (CPU devices are host memory)",
                    cpu_replicas))
    snap = cfg.snapshot_period
    if snap:
        why += [(f"the newest snapshot (--snapshot-period {snap})", 1),
                ("the next snapshot while it is copied", 1)]
    continuous = cfg.continuous_checkpointing
    if cfg.checkpoint_dir and not persistence and (
            continuous or not (snap and cfg.checkpoint_period % snap == 0)):
        when = ""
        if snap:  # why its copy is not a snapshot's
            when = (" (--continuous-checkpointing saves between snapshots)" if continuous else
                    f" (--checkpoint-period {cfg.checkpoint_period} is no multiple of "
                    f"--snapshot-period {snap})")
        why.append(("a checkpoint's own copy while it is written" + when, 1))
    return Copies(nbytes, tuple(why))


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None  # "max" (cgroup v2: no limit), or unreadable


def _stat(text: str | None, key: str) -> int:
    for line in (text or "").splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return _int(value) or 0
    return 0


def _meminfo(root: str) -> Available | None:
    text = _read(os.path.join(root, "proc/meminfo"))
    for line in (text or "").splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                unit = 1024 if parts[2:3] == ["kB"] else 1
                return Available(int(parts[1]) * unit, "MemAvailable in /proc/meminfo")
    return None


def _cgroup(root: str) -> Available | None:
    """The memory cgroup's limit less its use (its reclaimable page cache not counted)."""
    base = os.path.join(root, "sys/fs/cgroup")
    for limit_file, usage_file, stat_dir in (
            ("memory.max", "memory.current", base),  # v2 (a namespaced container sees its own)
            ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes",
             os.path.join(base, "memory"))):  # v1
        limit = _int(_read(os.path.join(base, limit_file)))
        usage = _int(_read(os.path.join(base, usage_file)))
        if limit is None or usage is None or limit >= UNLIMITED:
            continue
        cache = _stat(_read(os.path.join(stat_dir, "memory.stat")), "inactive_file")
        used = max(0, usage - cache)
        return Available(max(0, limit - used),
                         f"the memory cgroup's limit of {size(limit)} less its use "
                         f"({os.path.basename(limit_file)})")
    return None


def available(root: str = "/") -> Available | None:
    """What host memory the run may still take (module docstring); None when unknown."""
    found = [a for a in (_meminfo(root), _cgroup(root)) if a is not None]
    return min(found, key=lambda a: a.bytes) if found else None


def size(n: int) -> str:
    """``7.15 GB``, ``1.30 MB``, ``12.0 kB``: decimal units, as ``bytes`` in the events."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n / 1e3:.1f} kB"


def check(cfg, need: Copies, have: Available | None) -> None:
    """Refuse a run whose host copies cannot fit, before anything is allocated.

    Raises:
        UsageError: ``need`` is more than ``have``, naming the bytes, each copy and the flags
            that change them.
    """
    if have is None or not need.count or need.bytes <= have.bytes:
        return
    hints = []
    if cfg.snapshot_period:
        hints.append("--snapshot-period 0 (no host snapshots: a recovery restores the newest "
                      "checkpoint)")
        if any(r.startswith("a checkpoint's") for r, _ in need.reasons):
            hints.append("a --checkpoint-period that is a multiple of --snapshot-period "
                         "(a checkpoint then writes the snapshot's copy)")
    hints.append("more memory for the head (--head-memory on GKE)")
    if not cfg.snapshot_period:
        hints.append(f"a smaller model than {cfg.model_name}")
    raise UsageError(
        f"host memory cannot hold the training state's host copies: {need.count} x the "
        f"{size(need.state_bytes)} state ({cfg.model_name}) = {size(need.bytes)} "
        f"({need.said()}), against {size(have.bytes)} available ({have.source})",
        hint="give " + ", or ".join(hints))
