"""The contract's import rules, read from the source (no imports are executed)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return out


def test_protocol_is_stdlib_only():
    for f in (ROOT / "cli" / "elastix" / "protocol").glob("*.py"):
        for name in _imports(f):
            top = name.split(".")[0]
            assert top in sys.stdlib_module_names or name.startswith("elastix.protocol"), \
                f"{f.name} imports {name}"


def test_launcher_never_imports_the_trainer():
    for f in (ROOT / "cli" / "elastix").rglob("*.py"):
        assert not any(n.split(".")[0] == "elastix_trainer" for n in _imports(f)), f


def test_trainer_imports_only_protocol_and_errors_from_the_launcher():
    for f in (ROOT / "trainer" / "elastix_trainer").rglob("*.py"):
        for name in _imports(f):
            if name.split(".")[0] == "elastix":
                assert name.startswith(("elastix.protocol", "elastix.errors")), \
                    f"{f.name} imports {name}"
