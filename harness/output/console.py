"""Consoles for people and for logs: tables that never break an id, whether stdout is a terminal or a pipe.

- In a terminal, rich measures the terminal as usual.
- Anywhere else (a CI log, `| tee`, `| grep`), the width comes from $COLUMNS when it is set, else it is wide enough
  that every table row stays on one line: a log can be read and grepped for a case id.
- Colour follows rich's rules: none in a pipe, `NO_COLOR` turns it off, `FORCE_COLOR` turns it on.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

LOG_WIDTH = 1000  # characters: more than any row bugmatrix prints, so a row is never folded in a log


def make_console(stderr: bool = False) -> Console:
    """A console for stdout (or stderr) that keeps table rows whole when it is not a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    width = None
    if not stream.isatty() and not os.environ.get("COLUMNS"):
        width = LOG_WIDTH
    return Console(stderr=stderr, width=width)


def is_terminal(stream: object = None) -> bool:
    """Whether `stream` (default: stdout) is a terminal; FORCE_COLOR does not make a pipe one."""
    stream = stream or sys.stdout
    return bool(getattr(stream, "isatty", lambda: False)())
