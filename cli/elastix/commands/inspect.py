"""``elastix workload inspect``: one workload's diagnostics bundle, in one file
(:mod:`elastix.measure.inspect`)."""

from __future__ import annotations

import json
import os
import re
import stat
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
                "instead of standard output. An earlier bundle there is replaced; any other "
                "file only with --force; never a directory, a FIFO or a device.")] = None,
            output: Annotated[str, output_option(INSPECT_OUTPUTS, "json or yaml.")] = "json",
            force: Annotated[bool, typer.Option(
                "--force", help="Replace an --output-file that is a regular file but not an "
                                "earlier bundle.")] = False,
            ) -> None:
    """Everything needed to say why a workload is stuck or failed, in one file: status, the
    JobSet and its Jobs, pods per slice with their last events, nodes per TPU pool, Kueue's
    admission, the head's last lines and elastix's measurement so far. Environment values
    never appear in it. Works on JobSets elastix did not create, too."""
    from elastix.measure.inspect import bundle

    check_output(output, INSPECT_OUTPUTS)
    dest = None if output_file is None else writable_target(output_file, force)
    data = bundle(get_backend(target), name)
    if output == "yaml":
        import yaml

        text = yaml.safe_dump(data, sort_keys=False)
    else:
        text = json.dumps(data, indent=2) + "\n"
    if output_file is None or dest is None:
        typer.echo(text, nl=False)
        return
    dest = writable_target(output_file, force)  # again: reading the bundle took a while
    replaced = None if not dest.exists() else (
        "replaced the earlier bundle there" if _is_bundle(dest) else
        "replaced the file there: --force")
    _write_private(dest, text)
    parts = ([replaced] if replaced else []) + (
        [f"{len(data['unreadable'])} part(s) unreadable"] if data["unreadable"] else [])
    typer.echo(f"wrote {output_file}" + (f" ({'; '.join(parts)})" if parts else ""), err=True)


_BUNDLE_HEAD = re.compile(r'\A(?:\{\s*"elastix":\s*\{|elastix:\n)')
_HEAD_BYTES = 4096


def writable_target(path: Path, force: bool) -> Path:
    """Where ``--output-file PATH`` is written: the path itself, or the file a link there
    points to. Checked before anything is read (and again before the file is replaced).

    Raises:
        UsageError: not a regular file (a directory, a FIFO, a device: never replaced, with
            ``--force`` neither); or a regular file that is not an earlier bundle, without
            ``force``.
    """
    dest = Path(os.path.realpath(path))
    try:
        st = os.stat(dest)
    except FileNotFoundError:
        return dest
    except OSError as e:
        raise UsageError(f"--output-file {path}: {e.strerror or e}",
                         hint="give a file name, e.g. --output-file inspect.json") from None
    if stat.S_ISDIR(st.st_mode):
        raise UsageError(f"--output-file {path} is a directory",
                         hint="give a file name, e.g. --output-file inspect.json")
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"--output-file {path} is not a regular file ({_kind(st.st_mode)}): "
                         "nothing was written there", hint="give a file name, e.g. "
                         "--output-file inspect.json")
    if not force and not _is_bundle(dest):
        raise UsageError(f"--output-file {path} exists and is not an elastix workload inspect "
                         "bundle: it was left as it is",
                         hint="give another file name, or pass --force to replace it")
    return dest


def _is_bundle(path: Path) -> bool:
    """Whether the regular file ``path`` begins as a bundle of this command does (JSON or
    YAML, its ``elastix`` part first, naming the command); read without blocking, its first
    4 KiB only."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        head = f.read(_HEAD_BYTES).decode("utf-8", "replace")
    return bool(_BUNDLE_HEAD.match(head)) and "elastix workload inspect" in head


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return what
    return "not a file"


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as its user's alone (0600), whole or not at all: a bundle
    holds pod names, nodes and log lines. A rename replaces what is at ``path``, so what is
    there is checked once more just before (:func:`writable_target` ran before the bundle
    was read)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise UsageError(f"--output-file {path} is not a regular file "
                             f"({_kind(st.st_mode)}) any more: nothing was written there",
                             hint="give a file name, e.g. --output-file inspect.json")
        os.replace(tmp, path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise UsageError(f"cannot write {str(path)!r}: {e.strerror or e}",
                         hint="check the path given to --output-file") from None
    except UsageError:
        tmp.unlink(missing_ok=True)
        raise
