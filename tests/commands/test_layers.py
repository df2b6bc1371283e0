"""Views only draw: they import no command, no backend factory and no Typer."""

from __future__ import annotations

import ast
from pathlib import Path

import elastix.views

FORBIDDEN = ("elastix.commands", "elastix.main", "typer")


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            if node.module == "elastix.backends":  # the package itself is the backend factory
                out.update(f"elastix.backends:{a.name}" for a in node.names)
    return out


def test_views_import_no_commands_and_no_backend_factory():
    bad = {}
    for path in Path(elastix.views.__file__).parent.glob("*.py"):
        names = _imports(path)
        hits = sorted(n for n in names if n.startswith(FORBIDDEN)
                      or n.startswith("elastix.backends:"))
        if hits:
            bad[path.name] = hits
    assert bad == {}
