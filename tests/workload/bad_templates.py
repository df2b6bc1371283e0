"""What the render and sandbox tests share: a user template that must fail to render."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from elastix.errors import ManifestError


def template_error(render_fn: Callable, spec, path: Path, body: str) -> ManifestError:
    """Write ``body`` to ``path`` and render ``spec`` through it with ``render_fn``
    (``render.render`` or ``render.render_text``): the ManifestError it must raise."""
    path.write_text(body)
    with pytest.raises(ManifestError) as e:
        render_fn(spec, path)
    return e.value
