"""`elastix logs`."""

from __future__ import annotations

import typer


def logs_command(name: str = typer.Argument(..., help="Workload name.")) -> None:
    from elastix.errors import UsageError

    raise UsageError("elastix logs is not implemented yet")
