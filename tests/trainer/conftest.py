"""Trainer tests run on 8 fake CPU devices (4 slices x 2), set before JAX starts its backend."""

from __future__ import annotations

import os

os.environ["JAX_PLATFORMS"] = "cpu"
_flags = os.environ.get("XLA_FLAGS", "")
if "xla_force_host_platform_device_count" not in _flags:
    os.environ["XLA_FLAGS"] = (_flags + " --xla_force_host_platform_device_count=8").strip()
for _var in ("ELASTIX_NUM_SLICES", "ELASTIX_DEVICES_PER_SLICE", "ELASTIX_EVENTS_FILE",
             "ELASTIX_MAX_SLICE_LOSSES",
             "ELASTIX_LOCAL_HEALTH", "ELASTIX_HEARTBEAT_KEY"):
    os.environ.pop(_var, None)

import jax  # noqa: E402

try:  # if another test module already imported jax, the backend may not have started yet
    jax.config.update("jax_num_cpu_devices", 8)
except RuntimeError:
    pass

import pytest  # noqa: E402

# One persistent compilation cache for the whole pytest process, in a temp dir: each test builds
# a new Trainer, whose jitted functions JAX's in-memory cache never finds again, so without it
# every test compiled the same tiny step (seconds on a loaded machine) from scratch. A hit still
# traces and lowers the step (the cache key), and reads the executable XLA compiled the first
# time: what a restarted trainer does with the local backend's cache. Tests that count compiles
# give their runs a config of their own (see test_precompile, test_fresh_start), so no other
# test's entry can serve them. Subprocesses do not use this directory (JAX's file cache is not
# safe for two writers of one entry): they share one of their own (trainer_helpers.cli_env).
# ELASTIX_TEST_NO_SHARED_JAX_CACHE=1 turns both off, to compare.
if os.environ.get("ELASTIX_TEST_NO_SHARED_JAX_CACHE") != "1":
    import atexit  # noqa: E402
    import shutil  # noqa: E402
    import tempfile  # noqa: E402

    _JAX_CACHE = tempfile.mkdtemp(prefix="elastix-test-jax-cache-")
    atexit.register(shutil.rmtree, _JAX_CACHE, ignore_errors=True)
    jax.config.update("jax_compilation_cache_dir", _JAX_CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)


@pytest.fixture(scope="session", autouse=True)
def _eight_devices():
    if len(jax.devices()) < 8:
        pytest.fail("the trainer tests need 8 CPU devices: run them in their own pytest process "
                    "or set XLA_FLAGS=--xla_force_host_platform_device_count=8")


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """The uninterrupted tiny run every recovery test compares with (8 steps, 4 slices,
    checkpoints at 4 and 8)."""
    from trainer_helpers import losses, make_cfg, run_elastic

    ckpt = tmp_path_factory.mktemp("reference") / "ckpt"
    cfg = make_cfg(checkpoint_dir=str(ckpt))
    outcome, trainer, _ = run_elastic(cfg)
    assert outcome.status == "completed", outcome
    return {"losses": losses(trainer.events), "ckpt": str(ckpt), "cfg": cfg,
            "events": trainer.events}


# The trainer's CLI keeps Orbax's and asyncio's logs out of its output (see quiet_libraries);
# so do the in-process tests, whose failed-write cases would otherwise print their tracebacks.
from elastix_trainer.obs.events import quiet_libraries  # noqa: E402

quiet_libraries()


@pytest.fixture(scope="module")
def gcs(tmp_path_factory):
    """fake-gcs-server with a ``ckpts`` bucket, one per test module; yields its URL."""
    from fake_gcs import fake_gcs

    with fake_gcs(tmp_path_factory.mktemp("gcs"), buckets=("ckpts",)) as url:
        yield url
