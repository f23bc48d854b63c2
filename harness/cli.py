"""The `bugmatrix` entry point: parse the command line with the parser of the command it names (built by
`build_parser`, harness/commands/context.py) and run that command (harness/commands/<name>.py), turning one-line errors
(a `BugmatrixError`, harness/model/errors.py) into the exit code each carries (2; 3 for a full disk under the
results store) and Ctrl-C, SIGTERM and SIGHUP into exit 130."""

from __future__ import annotations

# isort: off
# First of all: for a command that launches, where only nvidia-smi can count the GPUs, it starts now and runs while
# the rest imports (harness/launch/early_smi.py).
from harness.launch import early_smi  # noqa: F401

# isort: on
import signal
import sys

from harness.commands import COMMANDS
from harness.commands.context import build_parser, command
from harness.model.errors import BugmatrixError
from harness.model.exitcode import ExitCode

# What only launching needs (pyproject.toml's `run` extra), by import name: an audit install goes without them.
LAUNCH_ONLY = {"psutil", "pytest", "xdist", "uv", "ruamel"}
RUN_EXTRA = "pip install 'bugmatrix[run]'"


def chosen(argv: list[str]) -> str | None:
    """The command word of `argv` when it names a command (skipping --cases-dir and its value), else None."""
    words = iter(argv)
    for word in words:
        if word in ("-h", "--help") or word == "--":
            return None
        if word.startswith("-"):
            if "=" not in word and len(word) > 2 and "--cases-dir".startswith(word):
                next(words, None)  # --cases-dir, or an abbreviation of it, takes the next word
            continue
        return word if word in COMMANDS else None
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of `bugmatrix` and `python -m harness`; returns the process exit code (an `ExitCode`). A command
    that needs a launch-only dependency this install lacks says which extra brings it, in one line (exit 2)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return _main(argv)
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in LAUNCH_ONLY:
            raise
        from harness.output.printer import Printer

        name = " ".join(["bugmatrix", *filter(None, [chosen(argv)])])
        Printer().error(name, f"{exc.name} is not installed; launching needs it: {RUN_EXTRA}")
        return ExitCode.USAGE_ERROR


def _main(argv: list[str]) -> int:
    from harness.output.printer import Printer

    args = build_parser(chosen(argv)).parse_args(argv)
    printer = Printer.from_args(args)  # the error handler's way out; each command's Context makes its own alike
    if "db" in vars(args):  # an explicit --db must exist for a reading command; the default may be absent
        from harness.session.basics import default_db

        args.db_given = args.db is not None
        args.db = args.db if args.db is not None else default_db()
    # Ctrl-C, SIGTERM and SIGHUP all end in the same cleanup. SIGINT is installed explicitly: a parent that ignores it
    # (pytest-xdist workers, some CI runners) would otherwise pass the ignore on and Ctrl-C would do nothing.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    signal.signal(signal.SIGHUP, _sigterm_as_interrupt)  # a closed terminal or a killed job shell: same cleanup
    try:
        return int(command(args.command).run(args))
    except BugmatrixError as exc:  # a bad store, matrix, index answer or argument: one line, never a traceback
        printer.error(f"bugmatrix {args.command}", str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        printer.interrupted()
        return ExitCode.INTERRUPTED


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
