"""The one way out of a command: a `Printer`, made once per command from its parsed arguments, through which it writes
what it answers (tables, JSON, text: stdout) and what it says on the way (progress, notes, warnings, errors: stderr).
Commands never `print` nor write to `sys.stdout`/`sys.stderr` themselves (tests/test_layout.py checks it), so that a
format, a quiet mode or a width is decided here once. The consoles are those of harness/output/console.py: rows kept
whole in a log, colour only on a terminal; each is made on first use, so a command that answers in JSON loads no rich
console for stdout."""

from __future__ import annotations

import argparse
import sys
from functools import cached_property
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from rich.console import Console


class Printer:
    """Where a command's output goes: `answer`/`show` to stdout, `say`/`note`/`warn`/`error` to stderr."""

    def __init__(self, format: str = "text") -> None:
        self.format = format

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Printer:
        """The printer of a command given `args` (its `--format`, where it has one)."""
        return cls(getattr(args, "format", None) or "text")

    @cached_property
    def out(self) -> Console:
        """The rich console on stdout (what the command answers)."""
        from harness.output.console import make_console

        return make_console()

    @cached_property
    def err(self) -> Console:
        """The rich console on stderr (progress, notes, errors); a progress bar draws on it."""
        from harness.output.console import make_console

        return make_console(stderr=True)

    def answer(self, text: str, end: str = "\n") -> None:
        """Write `text` (JSON, a report, a line of an answer) to stdout as it is, then `end`."""
        sys.stdout.write(text + end)

    def show(self, *renderables: Any, **options: Any) -> None:
        """Print rich renderables (a table, marked-up text) to stdout; `options` are rich's `Console.print`'s."""
        self.out.print(*renderables, **options)

    def say(self, *renderables: Any, **options: Any) -> None:
        """Print rich renderables (progress lines, notes, marked-up warnings) to stderr."""
        self.err.print(*renderables, **options)

    def note(self, text: str) -> None:
        """Write one plain line to stderr as it is (no markup, no wrapping), flushed at once."""
        sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def wrote(self, path: Path | str) -> None:
        """Say that a file was written (`wrote PATH`)."""
        self.say(f"wrote {path}", soft_wrap=True, highlight=False)

    def error(self, command: str, message: str) -> None:
        """The one line a command's error ends with: `bugmatrix COMMAND: message` in red, on stderr."""
        from rich.markup import escape

        self.say(f"[red]{command}:[/] {escape(message)}", soft_wrap=True, highlight=False)

    def interrupted(self) -> None:
        """The line Ctrl-C, SIGTERM or SIGHUP end a command with."""
        self.say("[yellow]interrupted: launches in flight were killed[/]")

    def to_file(self, file: IO[str]) -> Console:
        """A console writing into `file` (an `--output`), as wide as a log: no row folded."""
        from rich.console import Console

        from harness.output.console import LOG_WIDTH

        return Console(file=file, width=LOG_WIDTH)
