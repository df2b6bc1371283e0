"""Typed errors. Library code raises these; only the entry point prints them and picks the exit code.

Each error carries a one-line message and an optional hint. Exit codes: 2 for bad input (usage,
spec, template), 1 for runtime failures (cluster, processes), 130 for interrupts.
"""

from __future__ import annotations


class ElastixError(Exception):
    """Base class of every error elastix reports to the user."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class UsageError(ElastixError):
    """Bad flags, a bad spec file or a bad template: the user's input is wrong."""

    exit_code = 2


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
    the first of them; the same for a live file and ``--events FILE``."""

    def __init__(self, source: str, bad: list[tuple[int, str]], total: int) -> None:
        first, why = bad[0]
        super().__init__(f"{source}: {len(bad)} of {total} lines unreadable (first: line "
                         f"{first}, {why})",
                         hint="events must follow docs/events.md, one JSON object a line (only "
                              "a torn last line, a file still being written, is skipped)")


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
