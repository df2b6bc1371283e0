"""Typed errors. Library code raises these; only the entry point prints them and picks the exit code.

Each error carries a one-line message and an optional hint. Every exit code elastix uses is
listed once, in :class:`ExitCode` (README.md, "Exit codes", shows the same table).
"""

from __future__ import annotations

import enum
import errno
import os
import stat
from pathlib import Path
from typing import Any


class ExitCode(enum.IntEnum):
    """Every exit code of every elastix command, so a CI job can tell the outcomes apart.

    3-6 are results, not errors of elastix: the command ran and found the workload short of
    what was asked (kubectl's habit: ``kubectl wait`` too fails only once its condition cannot
    be met in time).
    """

    OK = 0  # done; every kill measured within the bounds; the awaited condition met
    ERROR = 1  # a runtime failure (cluster, processes, files), the workload not found
    USAGE = 2  # bad input: flags, spec file, template; nothing was created or killed
    BOUND_MISSED = 3  # a recovery missed --max-downtime/--max-steps-lost or its --timeout, or
    # chaos run --verify found the losses differ from the reference's
    DIED = 4  # the workload failed, was deleted or was replaced (during a chaos run or a wait)
    COMPLETED = 5  # the workload completed first: before the last kill, or it can never be
    # what `workload wait --for` asked (running, stepping) any more
    TIMED_OUT = 6  # `workload wait`: the condition was not met within --timeout
    INTERRUPTED = 130  # Ctrl-C


EXIT_CODES_HELP = (
    "Exit codes (every elastix command): 0 done (bounds met, condition met); 1 a runtime "
    "error; 2 bad input, nothing created or killed; 3 a bound missed (--max-downtime, "
    "--max-steps-lost, no recovery within --timeout, or --verify's losses differ); 4 the "
    "workload failed, was deleted or was replaced; 5 the workload completed first (before the last kill, "
    "or before the awaited condition); 6 wait timed out; 130 Ctrl-C."
)


class ElastixError(Exception):
    """Base class of every error elastix reports to the user."""

    exit_code = int(ExitCode.ERROR)

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(ElastixError):
    """Bad flags, a bad spec file or a bad template: the user's input is wrong."""

    exit_code = int(ExitCode.USAGE)


class OutcomeError(ElastixError):
    """The command ran, and the workload is short of what was asked: a missed bound, a dead or
    completed workload, a wait that timed out. Reported after the evidence was printed; its
    exit code (3-6) says which, so CI can tell them apart."""

    def __init__(self, code: ExitCode, message: str, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.exit_code = int(code)


class ProblemsError(UsageError):
    """Bad input reported as every problem at once, not just the first.

    One problem reads ``field: message`` with its hint; several read ``N problems {subject}``
    and the entry point lists them, one line each. Subclasses set ``subject``.
    """

    subject = "in the input"

    def __init__(self, problems: list[tuple[str, str, str | None]]) -> None:
        """Args:
        problems: (field, message, hint) triples, in the order the fields were checked.
        """
        self.problems = problems
        if len(problems) == 1:
            field, msg, hint = problems[0]
            super().__init__(f"{field}: {msg}", hint)
        else:
            super().__init__(f"{len(problems)} problems {self.subject}")

    def lines(self) -> list[str]:
        """One line per problem: ``field: message (hint)``."""
        return [f"{field}: {msg}" + (f" ({hint})" if hint else "")
                for field, msg, hint in self.problems]


class SpecError(ProblemsError):
    """A WorkloadSpec failed validation. Holds every problem found, not just the first."""

    subject = "in the workload spec"


class ManifestError(UsageError):
    """A rendered manifest (ours or a user template's) is not a valid JobSet."""


class EventsUnreadable(UsageError):
    """Lines of an events file that are not events (``eventspec.split_jsonl``), said once with
    the first of them; the same for a live file and ``--events FILE``. Also an events file
    that is no file (a FIFO, a device): ``bad`` is then empty and ``why`` says so."""

    def __init__(self, source: str, bad: list[tuple[int, str]], total: int,
                 why: str | None = None, hint: str | None = None) -> None:
        if why is not None:
            super().__init__(f"{source} {why}", hint=hint)
            return
        first, what = bad[0]
        super().__init__(f"{source}: {len(bad)} of {total} lines unreadable (first: line "
                         f"{first}, {what})",
                         hint=hint or "events must follow docs/events.md, one JSON object a "
                                      "line (a torn line, half a record, is skipped and "
                                      "counted)")


class BackendError(ElastixError):
    """A backend (cluster or local processes) failed to do what was asked."""


class NotFoundError(BackendError):
    """The named workload (or pod, or resource type) does not exist."""


class ConflictError(BackendError):
    """The workload already exists (HTTP 409 or a local state directory in use)."""


class AlreadyExists(ConflictError):
    """Creating a workload whose name is taken: bad input (exit 2) like any other usage error;
    the hint names ``--replace``."""

    exit_code = 2


def yaml_where(err: BaseException) -> str:
    """``" at line N"`` for a YAML parser error that knows where it is, else ``""``."""
    mark = getattr(err, "problem_mark", None)
    return f" at line {mark.line + 1}" if mark else ""


MAX_ALIAS_NODES = 10_000
"""How many nodes a user's YAML may gain by its aliases (``*name``): a few hundred repeat an
env block or a volume; an alias bomb (aliases of lists of aliases) gains billions in 1 KB."""


def shown(value: Any, limit: int = 60) -> str:
    """``value`` as a message quotes it: ``repr`` cut to about ``limit`` characters, in work
    bounded too (never a whole nested value, never a 10,000-digit integer spelled out): the one
    way an error message quotes a user's value."""
    import reprlib

    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of {int(value.bit_length() * 0.30103) + 1} digits"
    r = reprlib.Repr()
    r.maxlevel, r.maxdict, r.maxlist, r.maxtuple, r.maxset = 2, 4, 4, 4, 4
    r.maxstring = r.maxother = r.maxlong = limit
    text = r.repr(value)
    return text if len(text) <= limit + 3 else text[:limit] + "..."


def expanded_by_aliases(root: Any) -> int:
    """How many nodes the YAML node graph under ``root`` gains by its aliases: its size with
    every alias written out less its distinct nodes (-1: an alias within itself, endless).
    Memoised, so linear in the distinct nodes however much the aliases would expand."""
    import yaml

    size: dict[int, int] = {}
    distinct = 0
    stack: list[tuple[Any, bool]] = [(root, False)]
    open_: set[int] = set()
    while stack:
        node, done = stack.pop()
        key = id(node)
        kids = ([n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode)
                else node.value if isinstance(node, yaml.SequenceNode) else [])
        if done:
            open_.discard(key)
            size[key] = min(1 + sum(size[id(k)] for k in kids), 1 << 62)
            continue
        if key in size:
            continue
        if key in open_:
            return -1
        open_.add(key)
        distinct += 1
        stack.append((node, True))
        for k in kids:
            if id(k) in open_:
                return -1
            if id(k) not in size:
                stack.append((k, False))
    return size[id(root)] - distinct


def _guarded(loader: Any) -> Any:
    """``loader`` (a PyYAML Loader class) refusing a document that its aliases expand by more
    than :data:`MAX_ALIAS_NODES` nodes, checked on the composed node graph, before any value is
    built."""

    class Guarded(loader):  # type: ignore[misc,valid-type]
        def _checked(self, node: Any) -> Any:
            if node is not None:
                gained = expanded_by_aliases(node)
                if gained < 0 or gained > MAX_ALIAS_NODES:
                    raise _AliasBomb(gained)
            return node

        def get_single_node(self) -> Any:
            return self._checked(super().get_single_node())

        def get_node(self) -> Any:
            return self._checked(super().get_node())

    return Guarded


class _AliasBomb(Exception):
    def __init__(self, gained: int) -> None:
        super().__init__(gained)
        self.gained = gained


def load_user_yaml(text: str, subject: str, hint: str, *, too_deep: str = "",
                   loader: Any = None, documents: bool = False,
                   error: type[ElastixError] = UsageError) -> Any:
    """Parse YAML a user gave (with ``loader``, ``yaml.SafeLoader`` unless given; every
    document, a list, with ``documents``), where every way it can fail is one line naming
    ``subject``, the line and the parser's problem, with ``hint``: a syntax error, nesting
    deeper than the parser recurses (``too_deep`` ends that message, e.g. " to be a
    manifest"), or aliases that expand it beyond :data:`MAX_ALIAS_NODES` nodes (an alias
    bomb: refused before anything expands it)."""
    import yaml  # here, not at the top: errors is on every command's import path

    guarded = _guarded(loader or yaml.SafeLoader)
    try:
        if documents:
            return list(yaml.load_all(text, Loader=guarded))  # noqa: S506 (a safe loader)
        return yaml.load(text, Loader=guarded)  # noqa: S506 (a safe loader)
    except yaml.YAMLError as err:
        raise error(f"{subject} is not valid YAML{yaml_where(err)}: "
                    f"{getattr(err, 'problem', None) or 'parse error'}", hint=hint) from None
    except RecursionError:  # the parser and constructor recurse once per nesting level
        raise error(f"{subject} is nested too deeply{too_deep}", hint=hint) from None
    except (ValueError, OverflowError) as err:  # a value the constructor cannot build: an
        # integer over Python's 4,300 digits, a date 2026-13-45, !!float "x"
        what = "a number of over 4,300 digits" if "digits" in str(err) else \
            f"a value that cannot be read ({str(err)[:80]})"
        raise error(f"{subject} has {what}", hint=hint) from None
    except _AliasBomb as bomb:
        what = "an alias within itself" if bomb.gained < 0 else \
            f"aliases (*name) that expand it by more than {MAX_ALIAS_NODES:,} values"
        raise error(f"{subject} has {what}", hint="write the values out, or alias fewer "
                    "(an alias of lists of aliases grows exponentially)") from None


MAX_USER_FILE = 1 << 20
"""Bytes a spec, env file, template or requirements file may have (1 MiB: the largest spec of
the suite is under 2 KiB). Bigger is not such a file: refused before it is read whole."""


def read_user_bytes(path: Path, what: str, flag: str, limit: int = MAX_USER_FILE) -> bytes:
    """A file the user named, whole: a regular file of at most ``limit`` bytes, or one line
    saying why not (``--spec /dev/zero`` and ``--env-file /dev/urandom`` were read until the
    memory ran out). Nothing of its content is ever quoted. Opened without blocking and
    checked before it is read: ``--spec`` naming a FIFO waited for a writer forever."""
    not_a_file = UsageError(f"{what} {str(path)!r} is not a regular file",
                            hint=f"give {flag} a file (a device, a pipe or a directory is "
                                 "not one; write its content to a file first)")
    try:
        mode = os.stat(path).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
        if not stat.S_ISREG(mode):
            raise not_a_file
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):  # swapped since the stat
                raise not_a_file
            os.set_blocking(fd, True)
            data = f.read(limit + 1)
    except OSError as e:
        raise UsageError(f"cannot read {what} {str(path)!r}: {e.strerror}",
                         hint=f"check the path given to {flag}") from None
    if len(data) > limit:
        raise UsageError(f"{what} {str(path)!r} is larger than {limit >> 20} MiB: not a {what}",
                         hint=f"check the path given to {flag}")
    return data


def read_user_text(path: Path, what: str, flag: str, utf8_hint: str,
                   limit: int = MAX_USER_FILE) -> str:
    """A file the user named (spec, env file, template) as text; one-line errors otherwise."""
    data = read_user_bytes(path, what, flag, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{what} {str(path)!r} is not UTF-8 text (byte {e.start})",
                         hint=utf8_hint) from None
