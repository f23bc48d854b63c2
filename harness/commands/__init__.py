"""The commands of `bugmatrix`, one module each, above every other layer: each registers its options
(`add_parser(subparsers, parents)`) and carries them out (`run(args) -> ExitCode`), driving the layers below through
one `Context` (harness/commands/context.py); `harness/cli.py` imports only the module of the command it was given.
Each module's docstring lists its exit codes, the values of `ExitCode` (harness/model/exitcode.py)."""

from __future__ import annotations

# The commands in the order `bugmatrix --help` lists them; each is the module harness/commands/<name>.py (a `-` in
# the command's name is a `_` in its module's).
COMMANDS = (
    "list",
    "new",
    "run",
    "matrix",
    "env",
    "report",
    "compare",
    "bisect",
    "narrow",
    "expect",
    "compat",
    "record",
    "audit",
    "osv",
    "docs",
    "check-case",
    "merge",
    "nightly",
)
DESCRIPTION = "The `bugmatrix` command line: list cases, run them (here or across matrix cells), manage environments."
