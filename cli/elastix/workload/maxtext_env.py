"""Where the MaxText environment is: the Python that runs MaxText beside the launcher.

maxtext 0.2.5 needs Python >= 3.12 and a stack of its own, so it lives in a second environment:
``ELASTIX_MAXTEXT_PYTHON`` when set, else ``<elastix tree>/.venv-maxtext/bin/python``
(``bash .ci/setup-maxtext`` makes it). The local backend runs a MaxText head with it; the fit
check compiles MaxText's step with it (``backends.gke.maxtext_fit``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from elastix.protocol import envvars

SETUP_HINT = "create it with: bash .ci/setup-maxtext (in the elastix tree), or set " \
             f"{envvars.MAXTEXT_PYTHON} to a Python that has maxtext"


def elastix_tree() -> Path:
    """The elastix source tree the launcher runs from, else the working directory."""
    here = Path(__file__).resolve().parents[3]
    return here if (here / "pyproject.toml").exists() else Path.cwd()


def default_python() -> Path:
    return elastix_tree() / ".venv-maxtext" / "bin" / "python"


def python(env: Mapping[str, str]) -> str:
    """The MaxText Python ``env`` names (``ELASTIX_MAXTEXT_PYTHON``), else the default."""
    return env.get(envvars.MAXTEXT_PYTHON) or str(default_python())
