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


class SpecError(UsageError):
    """A WorkloadSpec failed validation. Holds every problem found, not just the first."""

    def __init__(self, problems: list[tuple[str, str, str | None]]) -> None:
        """Args:
        problems: (field, message, hint) triples, in the order the fields were checked.
        """
        self.problems = problems
        first_field, first_msg, first_hint = problems[0]
        if len(problems) == 1:
            message = f"{first_field}: {first_msg}"
            hint = first_hint
        else:
            message = f"{len(problems)} problems in the workload spec"
            hint = None
        super().__init__(message, hint)

    def lines(self) -> list[str]:
        """One line per problem: ``field: message (hint)``."""
        out = []
        for field, msg, hint in self.problems:
            out.append(f"{field}: {msg}" + (f" ({hint})" if hint else ""))
        return out


class ManifestError(UsageError):
    """A rendered manifest (ours or a user template's) is not a valid JobSet."""


class BackendError(ElastixError):
    """A backend (cluster or local processes) failed to do what was asked."""


class NotFoundError(BackendError):
    """The named workload (or pod, or resource type) does not exist."""


class ConflictError(BackendError):
    """The workload already exists (HTTP 409 or a local state directory in use)."""
