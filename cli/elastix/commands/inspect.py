"""``elastix workload inspect``: one workload's diagnostics bundle, in one file
(:mod:`elastix.measure.inspect`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from elastix.backends import Target, get_backend
from elastix.commands.options import (
    WorkloadName,
    check_output,
    output_option,
    with_target,
    with_workload_option,
)
from elastix.errors import UsageError

INSPECT_OUTPUTS = ("json", "yaml")


@with_target
@with_workload_option
def inspect(target: Target, name: WorkloadName,
            output_file: Annotated[Path | None, typer.Option(
                "--output-file", help="Write the bundle to FILE (readable by you alone) "
                "instead of standard output.")] = None,
            output: Annotated[str, output_option(INSPECT_OUTPUTS, "json or yaml.")] = "json",
            ) -> None:
    """Everything needed to say why a workload is stuck or failed, in one file: status, the
    JobSet and its Jobs, pods per slice with their last events, nodes per TPU pool, Kueue's
    admission, the head's last lines and elastix's measurement so far. Environment values
    never appear in it. Works on JobSets elastix did not create, too."""
    from elastix.measure.inspect import bundle

    check_output(output, INSPECT_OUTPUTS)
    if output_file is not None and output_file.is_dir():
        raise UsageError(f"--output-file {output_file} is a directory",
                         hint="give a file name, e.g. --output-file inspect.json")
    data = bundle(get_backend(target), name)
    if output == "yaml":
        import yaml

        text = yaml.safe_dump(data, sort_keys=False)
    else:
        text = json.dumps(data, indent=2) + "\n"
    if output_file is None:
        typer.echo(text, nl=False)
        return
    _write_private(output_file, text)
    typer.echo(f"wrote {output_file} ({len(data['unreadable'])} part(s) unreadable)"
               if data["unreadable"] else f"wrote {output_file}", err=True)


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as its user's alone (0600), whole or not at all: a bundle
    holds pod names, nodes and log lines."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {str(path)!r}: {e.strerror or e}",
                         hint="check the path given to --output-file") from None
