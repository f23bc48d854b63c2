"""The one error a command ends with, as pytest's `UsageError`: `BugmatrixError` carries its exit code, each
layer's own error is a subclass, and harness/cli.py catches the base once."""

from __future__ import annotations

from harness.model.exitcode import ExitCode


class BugmatrixError(Exception):
    """An input or a state a command cannot carry out as asked: one line, exit `exit_code` (2 unless a subclass
    says otherwise)."""

    exit_code: ExitCode = ExitCode.USAGE_ERROR


class UsageError(BugmatrixError):
    """A command line that cannot be carried out as asked; one line, exit 2."""


class StepError(UsageError):
    """A nightly step refused for bad input; `title` heads the GitHub annotation the step writes for it."""

    def __init__(self, title: str, message: str) -> None:
        super().__init__(message)
        self.title = title
