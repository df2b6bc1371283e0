"""Suite-wide: keep tools' caches out of the user's home (tests leave nothing outside temp dirs).

Set at import, before any test module imports matplotlib, and inherited by every subprocess the
tests start (the CLI, the trainer, the local backend's processes).
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest
import tiers

if "ELASTIX_TEST_CACHES" in os.environ:  # an xdist worker: the controller's caches
    _CACHES = os.environ["ELASTIX_TEST_CACHES"]
else:
    _CACHES = os.environ["ELASTIX_TEST_CACHES"] = tempfile.mkdtemp(prefix="elastix-test-caches-")
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
    _declare_tier_markers(config)
    if not hasattr(config, "workerinput"):
        _font_cache()


def _font_cache() -> None:
    """Build matplotlib's font cache once, in the controller, before any test: building it runs
    ``fc-list``, a process, inside whichever plotting test came first in a worker (a fast-tier
    test then failed its guard, or not, by the order tests ran in). The workers share the
    controller's cache directory and find it built."""
    try:
        import matplotlib.font_manager  # noqa: F401 (building the cache is its import)
    except ImportError:
        pass


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
    "tests/commands/test_fit_check.py",  # the seed's run compiled for 48 and 32 chips
    "tests/maxtext/test_maxtext_fit_check.py",  # MaxText's train_compile.py, three compiles
    "tests/provision/test_image_requirements.py",  # a fresh venv installs the image's set
    "tests/bench/test_bench_smoke.py",  # every benchmark's smallest case, one after another
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

    wanted = config.getoption("--tier")
    kept, dropped = [], []
    for item in items:
        tier = _tier(item, root)
        item.add_marker(tier)
        item.stash[_TIER] = tier
        (kept if wanted in ("all", tier) else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


# -- tiers (tests/fakes/tiers.py says what each one holds) -----------------------------------------

@pytest.fixture
@tiers.slow
def slow_run() -> None:
    """Used by a test that takes minutes whatever it tests (a fresh virtualenv's install, the
    CI workflow's smoke runs): it lands in the slow tier. Such tests also skip unless
    ``ELASTIX_SLOW_TESTS=1`` (``.ci/run`` sets it), each saying why."""


TIERS = ("fast", "process", "slow")
_TIER = pytest.StashKey[str]()


def pytest_addoption(parser) -> None:
    parser.addoption("--tier", choices=(*TIERS, "all"), default="all",
                     help="run one tier of the suite: fast (no process, server or JAX; collects "
                          "without importing JAX), process, slow; all (the default) runs every "
                          "test")


def _declare_tier_markers(config) -> None:  # called from pytest_configure below
    for tier in TIERS:
        config.addinivalue_line("markers", f"{tier}: the {tier} tier (set by tests/conftest.py)")


def _tier(item, root: str) -> str:
    names = set(getattr(item, "fixturenames", ()))
    if item.get_closest_marker("maxtext") or names & tiers.SLOW_FIXTURES:
        return "slow"
    path = str(item.path)
    if (names & tiers.PROCESS_FIXTURES
            or tiers.imports_jax(path, tiers.test_dirs(path, root))
            or _conftest_imports_jax(os.path.dirname(path), root)
            or _code_starts(item, root)):
        return "process"
    return "fast"


def _code_starts(item, root: str) -> bool:
    """The test's own code, or a fixture's it uses (defined in the suite), names something
    that starts a process or a server (:func:`tiers.code_starts`)."""
    tests = os.path.join(root, "tests") + os.sep
    funcs = [(str(item.path), getattr(item, "originalname", item.name))]
    info = getattr(item, "_fixtureinfo", None)
    for defs in (info.name2fixturedefs.values() if info else ()):
        for fd in defs:
            code = getattr(getattr(fd, "func", None), "__code__", None)
            if code is not None and code.co_filename.startswith(tests):
                funcs.append((code.co_filename, code.co_name))
    return any(tiers.code_starts(p, n, tiers.test_dirs(p, root)) for p, n in funcs)


def _conftest_imports_jax(folder: str, root: str) -> bool:
    tests = os.path.join(root, "tests")
    while folder.startswith(tests):
        conftest = os.path.join(folder, "conftest.py")
        if os.path.isfile(conftest) and tiers.imports_jax(conftest,
                                                            tiers.test_dirs(conftest, root)):
            return True
        folder = os.path.dirname(folder)
    return False


def pytest_ignore_collect(collection_path, config):
    """The fast tier does not even collect a module (or a folder whose conftest) that imports
    JAX: its collection stays free of it."""
    if config.getoption("--tier") != "fast":
        return None
    root = str(config.rootpath)
    path = str(collection_path)
    if collection_path.is_dir():
        conftest = os.path.join(path, "conftest.py")
        if os.path.isfile(conftest) and tiers.imports_jax(conftest,
                                                            tiers.test_dirs(conftest, root)):
            return True
    elif collection_path.name.startswith("test_") and path.endswith(".py"):
        if tiers.imports_jax(path, tiers.test_dirs(path, root)):
            return True
    return None


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_setup(item):
    if item.stash.get(_TIER, None) == "fast":
        guard = tiers.Guard().__enter__()
        item.stash[_GUARD] = guard
    yield


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    guard = item.stash.get(_GUARD, None)
    if guard is not None:
        guard.__exit__(None, None, None)
        del item.stash[_GUARD]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    yield
    guard = item.stash.get(_GUARD, None)
    if guard is not None and guard.imported_jax():
        raise tiers.TierError("a fast-tier test imported JAX: it belongs in the process tier "
                              "(tests/fakes/tiers.py)")


_GUARD = pytest.StashKey[tiers.Guard]()
