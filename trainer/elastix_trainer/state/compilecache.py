"""JAX's persistent compilation cache: where it lives and switching it on before any compile.

A restarted trainer (a JobSet restart, a re-run, a new head pod) otherwise recompiles its step,
which is most of its start-up. The cache has to live somewhere the workload keeps: the local
backend's state directory, or beside the checkpoints on GCS (MaxText's ``jax_cache_dir``
plays the same part; JAX reads and writes ``gs://`` caches through etils.epath). It sits beside
the step directories, never inside one, so Orbax never lists it as a step.

On the local backend the cache is one for the whole state directory
(``$ELASTIX_LOCAL_COMPILATION_CACHE``, ``<state-dir>/.cache/jax``), not one per workload: a new
workload of a model compiled before then starts warm. Sharing it is safe because JAX keys each
entry by a hash of the program (its StableHLO), the compile options, the device assignment, the
backend and the jax/jaxlib versions (``jax/_src/cache_key.py``): another model, another layout or
another JAX writes other entries and never reads these. JAX writes an entry in place, unlocked,
unless the cache has a size bound (``jax/_src/lru_cache.py``): then every read and write holds a
file lock (``filelock``, a trainer dependency) in the directory. So the shared cache gets a bound
(:data:`SHARED_MAX_BYTES`, least recently used entries evicted) and two workloads compiling the
same program at once never see each other's half-written entry.

A user's own ``JAX_COMPILATION_CACHE_DIR`` wins over every default, as does the flag.

The cache is an optimisation: a directory that cannot be written is reported once and the run
goes on without it. On a local disk JAX reads and writes it through
:mod:`elastix_trainer.state.cachefile`: an entry that is not a regular file never blocks a read,
entries are written 0600 and whole, and an entry that fails to load is removed and written anew
by the compile that follows, with one line in the head's log.
"""

from __future__ import annotations

import importlib.util
import os
import uuid

from elastix.protocol import envvars
from elastix_trainer import storage
from elastix_trainer.obs.events import log
from elastix_trainer.state import cachefile

CACHE_NAME = "jax-cache"
OFF = ("off", "none", "")


JAX_ENV = "JAX_COMPILATION_CACHE_DIR"
"""JAX's own variable: JAX reads it when it is imported, and a user who set it chose the cache."""
SHARED_MAX_BYTES = 4 * 1024**3
"""The local backend's shared cache's bound (JAX's ``jax_compilation_cache_max_size``; a user's
``JAX_COMPILATION_CACHE_MAX_SIZE`` wins). The tiny preset's programs take about a megabyte."""


def resolve(flag: str | None, checkpoint_dir: str | None) -> str | None:
    """The cache directory: the flag (``off``: none), else the user's own
    ``JAX_COMPILATION_CACHE_DIR``, else the local backend's shared cache
    (``$ELASTIX_LOCAL_COMPILATION_CACHE``; ``off``: none), else the local backend's kept data
    dir (a head whose supervisor predates the shared cache), else beside a gs:// checkpoint
    dir, else None. A local checkpoint dir gets no default: the next run on the same machine
    mostly has the local backend's directory, and tools that list a checkpoint dir should not
    meet a stranger there."""
    if flag is not None:
        return None if flag.strip().lower() in OFF else flag
    own = os.environ.get(JAX_ENV)
    if own:
        return own
    shared = os.environ.get(envvars.LOCAL_COMPILATION_CACHE)
    if shared is not None:
        return None if shared.strip().lower() in OFF else shared
    data = os.environ.get(envvars.LOCAL_DATA_DIR)
    if data:
        return os.path.join(data, CACHE_NAME)
    if checkpoint_dir and storage.is_gcs(checkpoint_dir):
        return checkpoint_dir.rstrip("/") + "/" + CACHE_NAME
    return None


def _writable(path: str) -> str | None:
    """None when a file can be created (and removed) in ``path``, else why not."""
    probe = f".probe-{uuid.uuid4().hex}"
    try:
        root = storage.epath(path)
        root.mkdir(parents=True, exist_ok=True)
        (root / probe).write_bytes(b"")
        (root / probe).unlink()
    except Exception as e:  # noqa: BLE001 - any reason means "go on without the cache"
        return f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0][:200]}"
    return None


def enable(path: str | None) -> bool:
    """Point JAX's persistent cache at ``path`` (call before the first compile).

    On a local filesystem every program is cached, however small or quick to compile (JAX's
    defaults skip programs that compile in under a second, which on CPU is most of a small
    model's start-up). On GCS JAX's thresholds stay: each entry is an object round trip.

    Returns:
        True when the cache is on; False (after one warning) when ``path`` is unusable.
    """
    if path is None:
        return False
    why = _writable(path)
    if why is not None:
        log.warning("elastix: compilation cache %s is not writable (%s): going on without it; "
                    "every start compiles from scratch", path, why)
        return False
    import jax

    if not storage.is_gcs(path):
        cachefile.install()  # reads that never block, private writes, damage replaced
    if path == os.environ.get(JAX_ENV):  # the user's: JAX has it, with their thresholds
        log.info("elastix: compilation cache %s (%s)", path, JAX_ENV)
        return True
    jax.config.update("jax_compilation_cache_dir", path)
    if not storage.is_gcs(path):
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    shared = path == os.environ.get(envvars.LOCAL_COMPILATION_CACHE)
    if shared and not os.environ.get("JAX_COMPILATION_CACHE_MAX_SIZE"):
        # a bound turns on JAX's file lock around each read and write (module docstring);
        # without filelock JAX would refuse the cache at the first compile
        if importlib.util.find_spec("filelock") is None:
            log.warning("elastix: the shared compilation cache %s is written without a lock "
                        "(the filelock package is missing): install elastix[trainer]", path)
        else:
            jax.config.update("jax_compilation_cache_max_size", SHARED_MAX_BYTES)
    log.info("elastix: compilation cache %s%s", path,
             " (shared by this state directory's workloads)" if shared else "")
    return True
