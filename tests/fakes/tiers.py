"""The suite's tiers, decided by what a test uses (``tests/conftest.py`` applies them).

- ``fast``: starts no process, no server and no JAX trainer; its modules import no JAX.
- ``process``: starts processes (the CLI as a subprocess, trainers, slice hosts) or servers (the
  fake Kubernetes API, fake GCS), or builds a JAX trainer in the pytest process.
- ``slow``: minutes each: real MaxText, a fresh virtualenv's install, the CI workflow's runs,
  the benchmarks' smallest cases.

A fixture says what it starts where it is defined, so every test that uses it (directly or
through another fixture) lands in that tier::

    @pytest.fixture
    @tiers.process
    def fake_k8s(): ...

A test that starts something itself, with no fixture, is caught by the conftest's rules (the
modules it imports, the calls in its body) and, in the fast tier, by a guard that fails it the
moment it starts a process or listens on a socket: a test cannot be fast by mistake.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

PROCESS_FIXTURES: set[str] = {"httpserver", "httpserver_ipv4", "make_httpserver"}
"""Fixtures that start a process or a server: pytest-httpserver's, and each suite fixture
decorated with :func:`process` (most need not be: a fixture whose code names a starter is found
by :func:`code_starts`)."""
SLOW_FIXTURES: set[str] = set()


def process(fn: F) -> F:
    """Mark a fixture function as one that starts a process or a server (or a JAX trainer)."""
    PROCESS_FIXTURES.add(fn.__name__)
    return fn


def slow(fn: F) -> F:
    """Mark a fixture function as one whose users belong in the slow tier."""
    SLOW_FIXTURES.add(fn.__name__)
    return fn


# -- the rules ----------------------------------------------------------------------------------

import ast  # noqa: E402
import functools  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402

JAX_MODULES = ("jax", "jaxlib", "orbax", "optax", "flax", "grain", "elastix_trainer",
               "pathwaysutils", "tensorboard")
"""A test module that imports one of these (itself or through a test-support module) builds or
reads what JAX builds: the process tier, and never collected by the fast one, so that its
collection imports no JAX."""


@functools.cache
def _imports(path: str, top_only: bool = False) -> frozenset[str]:
    """Dotted names of the modules ``path`` imports (``from a.b import c`` gives ``a.b`` and
    ``a.b.c``; a relative import is resolved against the module's package): at any depth of
    its code, or with ``top_only`` only what importing it runs (not inside a function)."""
    try:
        tree = ast.parse(open(path, encoding="utf-8").read(), path)
    except (OSError, SyntaxError):
        return frozenset()
    pkg = _package_of(path)
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        if top_only and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level and pkg is not None:
                parts = pkg.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            if base:
                out.add(base)
                out.update(f"{base}.{a.name}" for a in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return frozenset(out)


_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_PACKAGES = {"elastix": os.path.join(_REPO, "cli"), "elastix_trainer": os.path.join(_REPO, "trainer")}


def _package_of(path: str) -> str | None:
    """The dotted package of a module file of the repo's own packages (None elsewhere)."""
    path = os.path.abspath(path)
    for base in _PACKAGES.values():
        if path.startswith(base + os.sep):
            rel = os.path.relpath(path, base)[:-len(".py")].split(os.sep)
            return ".".join(rel[:-1])
    return None


def _repo_module(name: str) -> list[str]:
    """The files importing ``name`` of the repo's own packages runs: each package's
    ``__init__`` on the way, then the module (empty for any other name)."""
    parts = name.split(".")
    base = _PACKAGES.get(parts[0])
    if base is None:
        return []
    out = []
    for i in range(1, len(parts) + 1):
        stem = os.path.join(base, *parts[:i])
        if os.path.isfile(os.path.join(stem, "__init__.py")):
            out.append(os.path.join(stem, "__init__.py"))
        elif os.path.isfile(stem + ".py"):
            out.append(stem + ".py")
            break
        else:
            break
    return out


def _support(name: str, dirs: tuple[str, ...]) -> str | None:
    for d in dirs:
        p = os.path.join(d, name + ".py")
        if os.path.isfile(p):
            return p
    return None


def _is_jax(name: str) -> bool:
    return name.split(".")[0] in JAX_MODULES and name.split(".")[0] != "elastix_trainer"


@functools.cache
def _repo_imports_jax(path: str) -> bool:
    """Whether importing a module of the repo's packages imports JAX (what it runs at import,
    transitively)."""
    return _reaches(path, lambda p: _imports(p, top_only=True), _is_jax, _repo_module)


@functools.cache
def imports_jax(path: str, dirs: tuple[str, ...]) -> bool:
    """Whether the test module at ``path`` (any import in it, a test's own included), or a
    test-support module it imports from ``dirs`` (transitively), imports one of
    :data:`JAX_MODULES`, itself or through a module of elastix's packages."""
    def support(name: str) -> list[str]:
        sup = _support(name.split(".")[0], dirs)
        return [] if sup is None else [sup]

    return _reaches(path, _imports,
                    lambda name: _is_jax(name) or any(map(_repo_imports_jax, _repo_module(name))),
                    support)


def _reaches(path: str, names: Callable[[str], Iterable[str]], found: Callable[[str], bool],
             then: Callable[[str], Iterable[str]]) -> bool:
    """Whether the module at ``path``, or one reached from it, names a module that is
    ``found``: ``names`` gives what a module names, ``then`` the module files a name leads to."""
    seen: set[str] = set()
    todo = [path]
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        for name in names(p):
            if found(name):
                return True
            todo += then(name)
    return False


def test_dirs(path: str, rootdir: str) -> tuple[str, ...]:
    """Where a test module's bare imports resolve: its own folder and ``tests/fakes``."""
    return (os.path.dirname(path), os.path.join(rootdir, "tests", "fakes"))


# -- the fast tier's guard ----------------------------------------------------------------------

class TierError(AssertionError):
    pass


def _refuse(what: str) -> None:
    raise TierError(f"a fast-tier test {what}: give the fixture that does it @tiers.process "
                    "(tests/fakes/tiers.py), or use one that already is")


class Guard:
    """While a fast-tier test runs (its fixtures' set-up included): starting a process or
    listening on a socket raises :class:`TierError`; importing JAX fails the test after it."""

    def __init__(self) -> None:
        self._saved: list[tuple[object, str, object]] = []
        self._jax_before = False

    def _patch(self, owner: object, attr: str, what: str) -> None:
        orig = getattr(owner, attr, None)
        if orig is None:
            return
        self._saved.append((owner, attr, orig))

        def refused(*_a, **_k):
            _refuse(what)

        setattr(owner, attr, refused)

    def __enter__(self) -> Guard:
        import socket
        import subprocess

        self._jax_before = "jax" in sys.modules
        self._patch(subprocess.Popen, "__init__", "starts a process (subprocess.Popen)")
        for fn in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "execv", "execve"):
            self._patch(os, fn, f"starts a process (os.{fn})")
        self._patch(socket.socket, "listen", "listens on a socket (a server)")
        return self

    def __exit__(self, *exc: object) -> None:
        while self._saved:
            owner, attr, orig = self._saved.pop()
            setattr(owner, attr, orig)

    def imported_jax(self) -> bool:
        return not self._jax_before and "jax" in sys.modules


# -- what a test's code names ---------------------------------------------------------------------

STARTERS = ("subprocess", "multiprocessing", "aiohttp", "http.server", "socketserver",
            "concurrent.futures.process")
"""A test module that names one of these, or anything from a test-support module that imports
one (``fake_cluster``, ``local_helpers``, ...), in a test's code path starts a process or a
server there."""


@functools.cache
def _tree(path: str) -> ast.Module | None:
    try:
        return ast.parse(open(path, encoding="utf-8").read(), path)
    except (OSError, SyntaxError):
        return None


def _full_imports(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _is_starter_name(module: str) -> bool:
    return any(module == s or module.startswith(s + ".") for s in STARTERS)


@functools.cache
def starter_module(path: str, dirs: tuple[str, ...]) -> bool:
    """Whether a test-support module starts things: it imports a :data:`STARTERS` module,
    itself or through another support module."""
    tree = _tree(path)
    if tree is None:
        return False
    for mod in _full_imports(tree):
        if _is_starter_name(mod):
            return True
        sup = _support(mod.split(".")[0], dirs)
        if sup is not None and sup != path and starter_module(sup, dirs):
            return True
    return False




@functools.cache
def _module_facts(path: str, dirs: tuple[str, ...]) -> tuple[frozenset[str], dict]:
    """(names bound to something that starts, the module's top-level defs by name). A name
    imported from a test-support module starts when its definition there does (a helper that
    only polls, re-exported from a module that also starts hosts, does not)."""
    tree = _tree(path)
    starters: set[str] = set()
    defs: dict[str, ast.AST] = {}
    if tree is None:
        return frozenset(), defs
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defs[node.name] = node
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                sup = _support(a.name.split(".")[0], dirs)
                if _is_starter_name(a.name) or (sup and starter_module(sup, dirs)):
                    starters.add((a.asname or a.name).split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            sup = _support(node.module.split(".")[0], dirs)
            for a in node.names:
                if (_is_starter_name(node.module) or _is_starter_name(f"{node.module}.{a.name}")
                        or (sup and sup != path and _name_starts(sup, a.name, dirs))):
                    starters.add(a.asname or a.name)
    return frozenset(starters), defs


_busy: set[tuple[str, str]] = set()


def _name_starts(path: str, name: str, dirs: tuple[str, ...]) -> bool:
    """Whether ``name`` as a support module defines or re-exports it starts something."""
    key = (path, name)
    if key in _busy:  # a cycle between support modules: nothing found along it
        return False
    _busy.add(key)
    try:
        starters, defs = _module_facts(path, dirs)
        if name in starters:
            return True
        node = defs.get(name)
        return node is not None and _node_starts(node, starters, defs)
    finally:
        _busy.discard(key)


def _names(node: ast.AST) -> list[str]:
    """The names a function or class uses, annotations left out (naming a type is not a use)."""
    out: list[str] = []

    def visit(n: ast.AST) -> None:
        if isinstance(n, ast.arg):
            return
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for d in n.decorator_list:
                visit(d)
            for d in n.args.defaults + [x for x in n.args.kw_defaults if x is not None]:
                visit(d)
            for b in n.body:
                visit(b)
            return
        if isinstance(n, ast.AnnAssign):
            if n.value is not None:
                visit(n.value)
            return
        if isinstance(n, ast.Name):
            out.append(n.id)
        for child in ast.iter_child_nodes(n):
            visit(child)

    visit(node)
    return out


def _node_starts(node: ast.AST, starters: frozenset[str], defs: dict) -> bool:
    seen: set[str] = set()
    todo = [node]
    while todo:
        for name in _names(todo.pop()):
            if name in starters:
                return True
            if name in defs and name not in seen:
                seen.add(name)
                todo.append(defs[name])
    return False


def _find_def(tree: ast.AST, name: str) -> ast.AST | None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            return node
    return None


@functools.cache
def code_starts(path: str, name: str, dirs: tuple[str, ...]) -> bool:
    """Whether function ``name`` of the module at ``path`` names something that starts a
    process or a server, itself or through the module's own functions and classes it names."""
    tree = _tree(path)
    if tree is None:
        return False
    node = _find_def(tree, name)
    if node is None:
        return False
    starters, defs = _module_facts(path, dirs)
    return _node_starts(node, starters, defs)
