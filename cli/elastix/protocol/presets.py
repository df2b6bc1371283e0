"""A preset's training-state size, read from the trainer's source without importing it.

The launcher sizes a first run's restore before it submits (``elastix.backends.gke.statesize``)
and must not import the trainer (no JAX in a launcher-only install, and the house plan:
``tests/test_layers.py``). So the preset's shape is read from ``elastix_trainer/model.py``'s
``PRESETS`` with ``ast`` (the file, found next to the installed package; nothing of it is run),
and the size is the arithmetic of ``model.init_params``. Standard library only (this package's
rule). ``tests/trainer/test_state_bytes.py`` checks it against the real state's bytes.
"""

from __future__ import annotations

import ast
import importlib.util
import os
from typing import Any

from elastix.protocol import entrypoints
from elastix.protocol.modelconfig import param_count


def _model_source() -> str | None:
    """``elastix_trainer/model.py``'s text, or None when the trainer is not installed."""
    # A top-level package: found, not imported.
    spec = importlib.util.find_spec(entrypoints.TRAINER_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        path = os.path.join(folder, "model.py")
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                return f.read()
    return None


def state_bytes(preset: str) -> int | None:
    """Bytes of a preset's training state: its float32 parameters (``model.init_params``) and
    AdamW's two float32 moments; None for an unknown preset, or without the trainer."""
    text = _model_source()
    if text is None:
        return None
    shape: dict[str, Any] | None = None
    for node in ast.parse(text).body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) else None)
        if isinstance(target, ast.Name) and target.id == "PRESETS" and \
                isinstance(node.value, ast.Dict):
            for k, v in zip(node.value.keys, node.value.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == preset and isinstance(v, ast.Call):
                    shape = {kw.arg: ast.literal_eval(kw.value) for kw in v.keywords}
    if shape is None:
        return None
    return param_count(shape) * 4 * 3
