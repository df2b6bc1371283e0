"""The house plan, checked from the code: folders match imports, imports only go down a layer.

docs/architecture.md draws the layers. Every import in the launcher and the trainer (module
level, inside functions, and under TYPE_CHECKING alike) is read with ``ast`` and resolved to a
file of the tree, so the plan cannot drift without this test naming the import that broke it.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCE_ROOTS = {"elastix": ROOT / "cli", "elastix_trainer": ROOT / "trainer"}

# The launcher's floors, top to bottom: a module may import its own package and any floor below
# its own (a later entry here), never one above nor a neighbour on the same floor.
FLOORS = [
    ("elastix.__main__",),
    ("elastix.main",),
    ("elastix.commands",),
    ("elastix.views",),
    ("elastix.measure",),
    ("elastix.backends", "elastix.provision"),
    ("elastix.workload", "elastix.clients"),
    ("elastix.protocol", "elastix.errors", "elastix.interrupts"),
]
# The trainer's floors, top to bottom, read the same way: the process (``program``) assembles a
# run from the elastic runtime, which drives the loop (``train``), which uses state, the step and
# the data; below them the mesh, config and the memory fit, the model and tokenizer, the model's
# kernels (each beside its plain reference), observability (events,
# TensorBoard, the watchdog) and, lowest, storage (local paths and gs:// URLs), which events
# upload through.
TRAINER_FLOORS = [
    ("elastix_trainer.warm",),
    ("elastix_trainer.__main__",),
    ("elastix_trainer.program", "elastix_trainer.fitcheck"),
    ("elastix_trainer.elastic",),
    ("elastix_trainer.train",),
    ("elastix_trainer.seams",),
    ("elastix_trainer.state", "elastix_trainer.step", "elastix_trainer.data"),
    ("elastix_trainer.config", "elastix_trainer.mesh", "elastix_trainer.fit",
     "elastix_trainer.predict"),
    ("elastix_trainer.model", "elastix_trainer.tokenizer"),
    ("elastix_trainer.kernels",),
    ("elastix_trainer.obs",),
    ("elastix_trainer.storage",),
]
# What the trainer may take from the launcher's package: the contract and the error types.
TRAINER_MAY_IMPORT = ("elastix.protocol", "elastix.errors")


def _modules() -> dict[str, Path]:
    out = {}
    for top, root in SOURCE_ROOTS.items():
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The module of the tree an imported name lives in (None: not ours)."""
    while name:
        if name in MODULES:
            return name
        name = name.rpartition(".")[0]
    return None


def _type_only_lines(tree: ast.Module) -> set[int]:
    """Lines of the imports under ``if TYPE_CHECKING:`` (for annotations; never executed)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {n.lineno for stmt in node.body for n in ast.walk(stmt)
                      if isinstance(n, (ast.Import, ast.ImportFrom))}
    return lines


def _imports(module: str, runtime_only: bool = False) -> list[tuple[str, int]]:
    """(imported module of the tree, line) for every import statement of ``module``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    skip = _type_only_lines(tree) if runtime_only else set()
    out = []
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert node.level == 0, f"{module}:{node.lineno}: relative import"
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        for name in names:
            target = _resolve(name)
            if target and target != module and (target, node.lineno) not in out:
                out.append((target, node.lineno))
    return out


GRAPH = {m: _imports(m) for m in MODULES}
# What runs: a cycle through a TYPE_CHECKING import costs nothing at run time.
RUNTIME_GRAPH = {m: _imports(m, runtime_only=True) for m in MODULES}


def _package(module: str) -> str:
    """The concept folder a module belongs to (``elastix.backends.gke.logs`` -> ``elastix.backends``)."""
    for floor in FLOORS + TRAINER_FLOORS:
        for pkg in floor:
            if module == pkg or module.startswith(pkg + "."):
                return pkg
    return module


def _floor(module: str) -> int | None:
    floors = TRAINER_FLOORS if module.startswith("elastix_trainer") else FLOORS
    for i, floor in enumerate(floors):
        if _package(module) in floor:
            return i
    return None


def test_every_launcher_module_has_a_floor():
    # The package itself (``elastix``: its version) and the data package sit below every floor.
    homeless = [m for m in MODULES if m.startswith("elastix.") and m != "elastix.templates"
                and _floor(m) is None]
    assert homeless == [], "add these to FLOORS here and to docs/architecture.md"


def test_launcher_imports_only_go_down():
    bad = []
    for src, targets in GRAPH.items():
        if not src.startswith("elastix.") or _floor(src) is None:
            continue
        for dst, line in targets:
            if dst in ("elastix", "elastix.templates"):
                continue
            if dst.startswith("elastix_trainer"):
                bad.append(f"{src}:{line} imports the trainer ({dst})")
                continue
            bad += _upward(src, dst, line)
    assert bad == []


def _upward(src: str, dst: str, line: int) -> list[str]:
    """The import ``src`` -> ``dst`` as a violation, if it goes up or sideways a floor."""
    if _package(src) != _package(dst) and _floor(dst) <= _floor(src):
        return [f"{src}:{line} -> {dst} (floor {_floor(src)} -> {_floor(dst)})"]
    return []


def test_every_trainer_module_has_a_floor():
    homeless = [m for m in MODULES if m.startswith("elastix_trainer.") and _floor(m) is None]
    assert homeless == [], "add these to TRAINER_FLOORS here and to docs/architecture.md"


def test_trainer_imports_only_go_down():
    bad = []
    for src, targets in GRAPH.items():
        if not src.startswith("elastix_trainer."):
            continue
        for dst, line in targets:
            if dst != "elastix_trainer" and dst.startswith("elastix_trainer"):
                bad += _upward(src, dst, line)
    assert bad == []


def test_no_private_names_cross_modules():
    # A leading underscore means "this module's own": another module importing it couples to
    # what its owner is free to change.
    bad = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and _resolve(node.module):
                bad += [f"{module}:{node.lineno} imports {node.module}.{a.name}"
                        for a in node.names if a.name.startswith("_") and a.name != "__version__"]
    assert bad == []


def test_backends_do_not_import_each_other():
    bad = [f"{src}:{line} -> {dst}" for src, targets in GRAPH.items() for dst, line in targets
           for a, b in (("gke", "local"), ("local", "gke"))
           if src.startswith(f"elastix.backends.{a}") and dst.startswith(f"elastix.backends.{b}")]
    assert bad == []


def test_trainer_takes_only_the_contract_from_the_launcher():
    bad = [f"{src}:{line} -> {dst}" for src, targets in GRAPH.items()
           if src.startswith("elastix_trainer") for dst, line in targets
           if not dst.startswith("elastix_trainer")
           and not any(dst == ok or dst.startswith(ok + ".") for ok in TRAINER_MAY_IMPORT)]
    assert bad == []


def _imported_names(prefix: str):
    """(module, line, imported name) for every import in the modules under ``prefix``, any
    library's included (the graph above keeps only this tree's)."""
    for module, path in MODULES.items():
        if module != prefix and not module.startswith(prefix + "."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                yield from ((module, node.lineno, a.name) for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                yield module, node.lineno, node.module


def test_protocol_is_stdlib_only():
    bad = [f"{module}:{line} imports {name}"
           for module, line, name in _imported_names("elastix.protocol")
           if name.split(".")[0] not in sys.stdlib_module_names
           and not name.startswith("elastix.protocol")]
    assert bad == []


def test_no_import_cycles():
    # Tarjan's strongly connected components over every import that runs, lazy ones included
    # (an import inside a function still ties the two modules' load order together).
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w, _ in RUNTIME_GRAPH[v]:
            if w == "elastix":  # the package's own __init__ (version string): imports nothing
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            scc = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                scc.append(w)
                if w == v:
                    break
            if len(scc) > 1:
                cycles.append(sorted(scc))

    for v in GRAPH:
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_gke_backend_has_no_circle_even_for_the_type_checker():
    # Its readers (logs, training) take the namespace handle (gke.api), never the backend: a
    # module that reaches back into its caller, if only for an annotation, is one circle.
    gke = {m: [d for d, _ in GRAPH[m] if d.startswith("elastix.backends.gke.")]
           for m in GRAPH if m.startswith("elastix.backends.gke.")}

    def reaches(src: str, dst: str, seen: set[str]) -> bool:
        return any(n == dst or (n not in seen and not seen.add(n) and reaches(n, dst, seen))
                   for n in gke[src])

    assert [m for m in gke if reaches(m, m, set())] == []


def test_folders_are_import_paths():
    # pyproject's package-dir may only name source roots (folder == import path below them);
    # templates/ is the one documented data mapping. Every package folder is listed.
    try:
        import tomllib
    except ImportError:  # Python 3.10
        tomllib = pytest.importorskip("tomli")
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    not_identity = {pkg: d for pkg, d in conf["package-dir"].items()
                    if pkg != "elastix.templates" and not d.endswith(pkg.replace(".", "/"))}
    assert not_identity == {}
    folders = {".".join(p.parent.relative_to(root).parts)
               for root in SOURCE_ROOTS.values() for p in root.rglob("__init__.py")}
    assert folders | {"elastix.templates"} == set(conf["packages"])


def test_views_only_draw():
    # A view takes data and returns renderables: no Typer, and no backend factory (the
    # ``elastix.backends`` package itself); ``elastix.backends.base``'s data types are fine.
    bad = [f"{module}:{line} imports {name}"
           for module, line, name in _imported_names("elastix.views")
           if name.split(".")[0] in ("typer", "click") or name == "elastix.backends"]
    assert bad == []


# -- what the launcher starts of the trainer's: declared in one place --------------------------

def _docstring_nodes(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def test_the_launcher_names_the_trainer_only_where_it_declares_it():
    """``elastix.protocol.entrypoints`` is the one launcher module whose code spells a trainer
    module path: anywhere else such a string (not a docstring) is a tie that neither the import
    graph nor this test's floors can see. (The ``elastix-train`` script in help texts' examples
    is the user's to type, not a tie; the launcher's own use of it is declared there too.)"""
    from elastix.protocol import entrypoints

    spelled = re.compile(r"\belastix_trainer\b")
    found = []
    for module, path in MODULES.items():
        if not module.startswith("elastix.") or module == "elastix.protocol.entrypoints":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docs = _docstring_nodes(tree)
        # A string right after an assignment documents it (attribute docstrings).
        for node in ast.walk(tree):
            body = getattr(node, "body", None)
            for i, stmt in enumerate(body if isinstance(body, list) else []):
                if (i and isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                        and isinstance(body[i - 1], (ast.Assign, ast.AnnAssign))):
                    docs.add(id(stmt.value))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                    and id(node) not in docs and spelled.search(node.value)):
                found.append(f"{module}:{node.lineno}: {node.value[:60]!r}")
    assert found == [], "name it in elastix.protocol.entrypoints and use that"
    # Each declared tie resolves to the tree.
    assert _resolve(entrypoints.MAXTEXT_STANDIN) == entrypoints.MAXTEXT_STANDIN
    assert _resolve(entrypoints.TRAINER_WARM) == entrypoints.TRAINER_WARM
    pkg = SOURCE_ROOTS[entrypoints.TRAINER_PACKAGE] / entrypoints.TRAINER_PACKAGE
    assert pkg.joinpath(*entrypoints.MAXTEXT_SITECUSTOMIZE).is_file()
    scripts = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    target = re.search(rf'^{re.escape(entrypoints.TRAINER_SCRIPT)} = "([\w.]+):(\w+)"$',
                       scripts, re.M)
    assert target, f"{entrypoints.TRAINER_SCRIPT} is not a console script of pyproject.toml"
    module, func = target.groups()
    assert _resolve(module) == module
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    assert any(isinstance(n, ast.FunctionDef) and n.name == func for n in tree.body)
