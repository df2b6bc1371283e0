"""JAX's persistent compilation cache on a local disk, read and written so that no entry can
hang a run, hold up another, or stay broken.

JAX's own file cache (``jax/_src/lru_cache.py``) reads an entry with ``Path.read_bytes`` and
writes it in place with the process's umask. So an entry that is a FIFO blocks its reader for
ever, and with a size bound (the local backend's shared cache: :mod:`.compilecache`) it blocks
while holding the directory's file lock, which every other workload then waits on for 10 s per
program before it gives up on the cache. A damaged entry (a write cut short, bytes changed) fails
to load with a Python warning, the program is compiled again, and the entry is kept as it is
(``put`` writes a key only once): every later start compiles from scratch.

:class:`PrivateFileCache` is that cache with three changes, installed by :func:`install` in place
of JAX's for every local cache directory:

- **a read never blocks**: an entry is opened ``O_NONBLOCK | O_NOFOLLOW`` and must be a regular
  file of at most :data:`MAX_ENTRY_BYTES`; anything else (a FIFO, a device, a link, a giant) is
  removed and the program compiled, with one line of elastix's saying so;
- **a write is private and whole**: an entry (and its access time) is written to a new file
  ``0600`` and renamed into place, so no reader ever sees half of one and no other user can
  read it;
- **a damaged entry is replaced**: when an entry that was read fails to load (JAX's
  ``get_executable_and_time`` raised), it is removed at once and the head's log says so in
  elastix's words; JAX then compiles the program and writes the entry anew, once.

It reaches into JAX's private modules (``jax._src.compilation_cache``, ``jax._src.lru_cache``,
pinned ``jax>=0.10,<0.11``): when they are not as expected, :func:`install` logs one line and
JAX's own cache is used.
"""

from __future__ import annotations

import os
import stat
import time
import uuid
from pathlib import Path
from typing import Any

from elastix_trainer.obs.events import log

MAX_ENTRY_BYTES = 2 * 1024**3
"""The largest entry read: a compiled program of a model elastix trains is megabytes; a file
larger than this is not one (a link to /dev/zero, a planted giant)."""
_CACHE, _ATIME = "-cache", "-atime"
_installed = False


class BadEntry(Exception):
    """An entry that is not a regular file of a sane size."""


def _read(path: Path, limit: int) -> bytes | None:
    """The bytes of the regular file ``path`` (None if there is none), never blocking.

    Raises:
        BadEntry: it is a FIFO, a device, a socket, a link or a directory, or larger than
            ``limit``.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as e:
        if os.path.islink(path):
            raise BadEntry("is a symbolic link") from None
        raise BadEntry(f"cannot be opened ({e.strerror or e})") from None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise BadEntry(f"is not a regular file ({_kind(st.st_mode)})")
        if st.st_size > limit:
            raise BadEntry(f"is larger than an entry can be ({st.st_size} bytes)")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise BadEntry("grew larger than an entry can be")
    return data


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return what
    return "not a file"


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` as ``path``, 0600, whole: a new file renamed into place."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _remove(path: Path) -> None:
    try:
        if path.is_dir() and not path.is_symlink():
            path.rmdir()
        else:
            path.unlink()
    except FileNotFoundError:
        pass


def make_class(lru: Any) -> type:
    """:class:`PrivateFileCache` on JAX's ``LRUCache`` class ``lru`` (imported late: JAX is
    imported only once a cache is switched on)."""

    class PrivateFileCache(lru):  # type: ignore[misc, valid-type]
        """JAX's ``LRUCache`` whose reads never block and whose writes are private and whole
        (the module's docstring)."""

        def __init__(self, path: str, *, max_size: int,
                     lock_timeout_secs: float | None = 10) -> None:
            super().__init__(path, max_size=max_size, lock_timeout_secs=lock_timeout_secs)
            self.dir = Path(str(self.path))  # JAX's path may be etils' (no is_symlink, lstat)
            self.limit = min(MAX_ENTRY_BYTES, max_size) if max_size > 0 else MAX_ENTRY_BYTES
            if self.eviction_enabled:
                import filelock

                self.lock = filelock.FileLock(self.lock_path, mode=0o600)

        def _locked(self) -> Any:
            import contextlib

            if not self.eviction_enabled:
                return contextlib.nullcontext()
            self.lock.acquire(timeout=self.lock_timeout_secs)
            return _Release(self.lock)

        def get(self, key: str) -> bytes | None:
            if not key:
                raise ValueError("key cannot be empty")
            entry = self.dir / f"{key}{_CACHE}"
            with self._locked():
                try:
                    data = _read(entry, self.limit)
                except BadEntry as e:
                    self._discard_locked(key, str(e))
                    return None
                if data is not None and self.eviction_enabled:
                    _write(self.dir / f"{key}{_ATIME}", time.time_ns().to_bytes(8, "little"))
                return data

        def put(self, key: str, value: bytes) -> None:
            if not key:
                raise ValueError("key cannot be empty")
            if self.eviction_enabled and len(value) > self.max_size:
                return super().put(key, value)  # JAX's warning, nothing written
            entry = self.dir / f"{key}{_CACHE}"
            with self._locked():
                if os.path.lexists(entry):
                    return  # written once (a damaged one was removed when it failed to load)
                self._evict_if_needed(additional_size=len(value))
                _write(entry, value)
                if self.eviction_enabled:
                    _write(self.dir / f"{key}{_ATIME}", time.time_ns().to_bytes(8, "little"))

        def discard(self, key: str, why: str) -> None:
            """Remove entry ``key`` (it could not be used) and say so in the head's log."""
            with self._locked():
                self._discard_locked(key, why)

        def _discard_locked(self, key: str, why: str) -> None:
            entry = self.dir / f"{key}{_CACHE}"
            _remove(entry)
            _remove(self.dir / f"{key}{_ATIME}")
            log.warning("elastix: compilation cache entry %s %s: removed; the program is "
                        "compiled again and its entry written anew", entry, why)

        def _evict_if_needed(self, *, additional_size: int = 0) -> None:
            if not self.eviction_enabled:
                return
            import heapq

            found: list[tuple[int, str, int]] = []
            total = 0
            for entry in self.dir.glob(f"*{_CACHE}"):
                key = entry.name.removesuffix(_CACHE)
                try:
                    st = os.lstat(entry)
                    stamp = _read(self.dir / f"{key}{_ATIME}", 8) or b""
                except (OSError, BadEntry):
                    stamp, st = b"", None
                if st is None or not stat.S_ISREG(st.st_mode):
                    self._discard_locked(key, "is not a regular file")
                    continue
                total += st.st_size
                heapq.heappush(found, (int.from_bytes(stamp, "little"), key, st.st_size))
            target = self.max_size - additional_size
            while total > target and found:
                _, key, size = heapq.heappop(found)
                _remove(self.dir / f"{key}{_CACHE}")
                _remove(self.dir / f"{key}{_ATIME}")
                total -= size

    return PrivateFileCache


class _Release:
    def __init__(self, lock: Any) -> None:
        self.lock = lock

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        self.lock.release()


def install() -> bool:
    """Make JAX use :class:`PrivateFileCache` for every local cache directory, and remove an
    entry that fails to load (idempotent). False, after one line in the log, when JAX's
    internals are not those this was written against."""
    global _installed
    if _installed:
        return True
    try:
        from jax._src import compilation_cache as cc
        from jax._src import lru_cache

        original_cache, original_get = cc.get_file_cache, cc.get_executable_and_time
        cls = make_class(lru_cache.LRUCache)
        local = lru_cache._is_local_filesystem
    except (ImportError, AttributeError) as e:
        log.warning("elastix: the compilation cache is JAX's own, unguarded (its internals "
                    "changed: %s): an entry that is not a regular file can block a start", e)
        return False

    def get_file_cache(path: str) -> Any:
        if not local(path):
            return original_cache(path)
        cache = cls(path.removeprefix("file://"),
                    max_size=cc.config.compilation_cache_max_size.value)
        if cc.config.compilation_cache_check_contents.value:
            return cc.VerificationCache(cache), path
        return cache, path

    def get_executable_and_time(cache_key: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return original_get(cache_key, *args, **kwargs)
        except Exception as e:
            cache = cc._cache
            if isinstance(cache, cls):
                first = (str(e).strip().splitlines() or [""])[0][:200]
                cache.discard(cache_key, f"could not be loaded ({type(e).__name__}: {first})")
            raise

    cc.get_file_cache = get_file_cache
    cc.get_executable_and_time = get_executable_and_time
    _installed = True
    return True
