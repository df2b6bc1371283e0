"""Typed errors. Library code raises these; only the entry point prints them and picks the exit code.

Each error carries a one-line message and an optional hint. Every exit code elastix uses is
listed once, in :class:`ExitCode` (README.md, "Exit codes", shows the same table).
"""

from __future__ import annotations

import enum
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


def load_user_yaml(text: str, subject: str, hint: str, *, too_deep: str = "",
                   load: Any = None, error: type[ElastixError] = UsageError) -> Any:
    """Parse YAML a user gave (``load``, ``yaml.safe_load`` unless given), where every way it
    can fail is one line naming ``subject``, the line and the parser's problem, with ``hint``:
    a syntax error, or nesting deeper than the parser recurses (``too_deep`` ends that
    message, e.g. " to be a manifest")."""
    import yaml  # here, not at the top: errors is on every command's import path

    try:
        return (load or yaml.safe_load)(text)
    except yaml.YAMLError as err:
        raise error(f"{subject} is not valid YAML{yaml_where(err)}: "
                    f"{getattr(err, 'problem', None) or 'parse error'}", hint=hint) from None
    except RecursionError:  # the parser and constructor recurse once per nesting level
        raise error(f"{subject} is nested too deeply{too_deep}", hint=hint) from None
