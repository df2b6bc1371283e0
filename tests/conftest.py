"""Suite-wide: keep tools' caches out of the user's home (tests leave nothing outside temp dirs).

Set at import, before any test module imports matplotlib, and inherited by every subprocess the
tests start (the CLI, the trainer, the local backend's processes).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

_CACHES = tempfile.mkdtemp(prefix="elastix-test-caches-")
atexit.register(shutil.rmtree, _CACHES, ignore_errors=True)
os.environ["MPLCONFIGDIR"] = os.path.join(_CACHES, "matplotlib")
os.environ["XDG_CACHE_HOME"] = os.path.join(_CACHES, "xdg-cache")
os.environ["KUBECACHEDIR"] = os.path.join(_CACHES, "kube")
# The user's gcloud configuration (project, zone) must not leak into the tests' defaults.
os.environ["CLOUDSDK_CONFIG"] = os.path.join(_CACHES, "gcloud")
for _var in ("CLOUDSDK_CORE_PROJECT", "CLOUDSDK_COMPUTE_ZONE", "CLOUDSDK_COMPUTE_REGION",
             "CLOUDSDK_ACTIVE_CONFIG_NAME"):
    os.environ.pop(_var, None)


# -- Ctrl-C reaches the processes the tests interrupt ---------------------------------------------

def pytest_configure(config) -> None:
    """Tests Ctrl-C the CLI (``logs -f``, ``status --watch``) and expect it to stop. A shell
    starts a background job (``bash .ci/run &`` in a script, ``nohup``) with SIGINT ignored,
    and an ignored signal stays ignored across fork and exec: every CLI the suite started then
    ignored its Ctrl-C, and those tests failed on a hang that no user at a terminal has (seen
    in busy-machine runs started from a script). A handler, unlike SIG_IGN, is reset at exec,
    so each child gets SIGINT's default and Python its KeyboardInterrupt."""
    import signal

    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


# -- parallel workers (pytest-xdist; pyproject's addopts asks for ``-n auto``) -------------------

def pytest_xdist_auto_num_workers(config) -> int:
    """Two workers a core: most tests spend their time waiting on processes they started (a
    trainer's JAX start-up, slice hosts, a fake API server), not on the CPU. ELASTIX_TEST_WORKERS
    sets the count (0 runs everything in this process, as ``-n 0`` does)."""
    wanted = os.environ.get("ELASTIX_TEST_WORKERS")
    if wanted is not None:
        return int(wanted)
    return 2 * (os.cpu_count() or 1)


# Modules that take minutes (measured with --durations): started first, so the suite does not
# end on one long module while the other workers sit idle. Order only; a module missing here
# runs after them in collection order.
SLOW_FIRST = (
    "tests/provision/test_image_requirements.py",  # a fresh venv installs the image's set
    "tests/maxtext/test_real_maxtext.py",  # two real MaxText starts
    "tests/backends/local/test_local_maxtext.py",
    "tests/trainer/test_precompile.py",
    "tests/test_packaging.py",  # builds the wheel
    "tests/ci/test_ci_workflow.py",
    "tests/trainer/test_restore_exact.py",
    "tests/trainer/test_sigterm.py",
    "tests/trainer/test_watchdog.py",
    "tests/trainer/test_tensorboard.py",
    "tests/trainer/test_compilecache.py",
    "tests/backends/local/test_local_resize_back.py",
    "tests/backends/local/test_local_e2e.py",
    "tests/backends/local/test_local_kept_data.py",
)


def pytest_collection_modifyitems(session, config, items) -> None:
    rank = {path: i for i, path in enumerate(SLOW_FIRST)}
    root = str(config.rootpath)

    def key(item):
        path = os.path.relpath(str(item.path), root).replace(os.sep, "/")
        return rank.get(path, len(SLOW_FIRST))

    items.sort(key=key)  # stable: each module's own order is kept
