"""What every command shares: the parser (`build_parser`, each command registering its own), the options declared
once (`options`), their value types, and the `Context` a command builds once from its arguments: the matrix (or
none), the store (or the null store), the cells' environments, the cases and the consoles. Everything heavy is
imported on first use, so a command loads only what it reads."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from datetime import date
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from harness.commands import COMMANDS, DESCRIPTION
from harness.matrix.basics import DEFAULT_MATRIX, ENVS_FALLBACK, MatrixError, default_envs, default_matrix
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode
from harness.session.basics import DB_FALLBACK, RECORD_FALLBACK, default_record

if TYPE_CHECKING:
    from harness.analysis.flaky import Policy
    from harness.matrix.cellenvs import CellEnvironments
    from harness.matrix.chronology import Chronology
    from harness.matrix.expand import Matrix
    from harness.model.case import Case
    from harness.model.case_schema import CaseError
    from harness.output.printer import Printer
    from harness.session.contract import Store


def options() -> dict[str, argparse.ArgumentParser]:
    """The options several commands share, each a parent parser declared once, by flag."""
    found = {}
    for flag in ("--db", "--record", "--matrix", "--envs", "--jobs", "--launch"):
        parent = argparse.ArgumentParser(add_help=False)
        if flag == "--db":
            parent.add_argument(
                "--db",
                type=Path,
                default=None,
                help=f"results store (default $BUGMATRIX_DB, else "
                f"{DB_FALLBACK}); a reading command given one that does not exist stops (exit 2)",
            )
        elif flag == "--record":
            parent.add_argument(
                "--record",
                type=Path,
                default=default_record(),
                help=f"the committed record that reading commands layer the store over (default "
                f"$BUGMATRIX_RECORD, else {RECORD_FALLBACK})",
            )
        elif flag == "--matrix":
            parent.add_argument(
                "--matrix", type=Path, default=default_matrix(), help=f"matrix file (default {DEFAULT_MATRIX})"
            )
        elif flag == "--envs":
            parent.add_argument(
                "--envs",
                type=Path,
                default=default_envs(),
                help=f"environments folder (default $BUGMATRIX_ENVS, else {ENVS_FALLBACK})",
            )
        elif flag == "--jobs":
            parent.add_argument(
                "-j", "--jobs", type=int, default=os.cpu_count() or 1, help="cores to use (a 2-rank case takes 2)"
            )
        elif flag == "--launch":
            how = parent.add_mutually_exclusive_group()
            how.add_argument(
                "--cold",
                dest="launch_mode",
                action="store_const",
                const="cold",
                help="launch every job under torchrun, each rank a fresh interpreter (default: $BUGMATRIX_LAUNCH_MODE "
                "cold|warm, else warm)",
            )
            how.add_argument(
                "--warm",
                dest="launch_mode",
                action="store_const",
                const="warm",
                help="fork each job's ranks from a warm interpreter of its environment (a case that says `cold:` "
                "still launches cold)",
            )
        found[flag] = parent
    return found


def launch_mode(asked: str | None) -> str:
    """How jobs launch: `asked` (--cold, --warm), else $BUGMATRIX_LAUNCH_MODE, else the default
    (harness/launch/warm.py `DEFAULT_MODE`); a bad value of the variable is refused in one line (exit 2)."""
    from harness.launch.warm import default_mode

    try:
        return asked or default_mode()
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def add_format(parser: argparse.ArgumentParser, formats: tuple[str, ...], help: str | None = None) -> None:
    """`--format`, one choice per renderer the command has (the first, for a person, is the default), and `--json`,
    the same as `--format json` (what scripts and the docs have always passed): the command reads `args.format`."""
    said = f"how to answer (default {formats[0]}; json: machine-readable)" + (f"; {help}" if help else "")
    parser.add_argument("--format", choices=formats, default=formats[0], help=said)
    parser.add_argument(
        "--json",
        dest="format",
        action="store_const",
        const="json",
        default=argparse.SUPPRESS,
        help="the same as --format json",
    )


def command(name: str) -> ModuleType:
    """The module of command `name` (harness/commands/<name>.py), imported on first use."""
    return importlib.import_module(f"harness.commands.{name.replace('-', '_')}")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The full `bugmatrix` parser, every command and option registered (docs/reference/cli.md is generated from
    it); with `only`, that command's alone (what harness/cli.py parses a command line with, so that it imports only
    the command it was given)."""
    from harness.model.basics import default_cases_dir

    parser = argparse.ArgumentParser(prog="bugmatrix", description=DESCRIPTION)
    parser.add_argument(
        "--version", action=ShowVersion, help="the code's version and commit, and the record's newest result and commit"
    )
    parser.add_argument("--cases-dir", type=Path, default=default_cases_dir(), help="folder of case folders")
    sub = parser.add_subparsers(dest="command", required=True)
    parents = options()
    for name in COMMANDS:
        if only is None or name == only:
            command(name).add_parser(sub, parents)
        else:  # named only, so that a usage line or an error lists every command as the full parser does
            sub.add_parser(name)
    return parser


class ShowVersion(argparse.Action):
    """`--version`: print the code's and the record's version (harness/session/version.py, asked only when given)
    and exit."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        from harness.output.printer import Printer
        from harness.session.version import version_text

        Printer().answer(version_text())
        parser.exit()


def positive(text: str) -> int:
    """A whole number >= 1 (`--repeat`)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


AUTO = "auto"  # `--repeat auto`: adaptive repeats for a flaky case (docs/flaky.md)


def add_repeats(parser: argparse.ArgumentParser) -> None:
    """`--repeat K|auto` and `--max-launches N`, as `bisect` and `narrow` take them (read with `flaky_policy`)."""
    from harness.analysis.flaky import Policy

    parser.add_argument(
        "--repeat",
        type=repeats,
        default=1,
        metavar="K|auto",
        help="run each probe K times (disagreement is flaky); auto: a flaky case, launched in batches (10, doubling) "
        "until the boundary holds at confidence 0.95, repeats pooled with earlier runs' (docs/flaky.md)",
    )
    parser.add_argument(
        "--max-launches",
        type=positive,
        metavar="N",
        help=f"with --repeat auto: launches of one version at most (default {Policy().cap}); at the cap the answer "
        "is 'could not decide'",
    )


def repeats(text: str) -> int | str:
    """`--repeat` of a probing command: a whole number >= 1, or `auto` (a flaky case: repeats chosen adaptively
    until the boundary holds at a stated confidence, harness/analysis/flaky.py)."""
    return AUTO if text == AUTO else positive(text)


def flaky_policy(repeat: int | str, max_launches: int | None) -> tuple[int, Policy | None]:
    """The repeats and the flaky policy `--repeat` and `--max-launches` ask for: (K, None), or with `auto` (1, the
    policy capped at `max_launches` a version); --max-launches without `auto` is refused (exit 2)."""
    from harness.analysis.flaky import Policy

    if repeat != AUTO:
        if max_launches is not None:
            raise UsageError(f"--max-launches {max_launches}: only with --repeat auto (it caps adaptive repeats)")
        return int(repeat), None
    return 1, Policy(cap=max_launches) if max_launches is not None else Policy()


def dates(text: str) -> tuple[date, date]:
    """`START..END`, two ISO days, the first not after the second (`bisect --dates`)."""
    start, sep, end = text.partition("..")
    try:
        first, last = date.fromisoformat(start), date.fromisoformat(end)
    except ValueError:
        first = last = None  # type: ignore[assignment]
    if not sep or first is None or last is None or first > last:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range of days like 2025-08-01..2025-08-31")
    return first, last


def size(text: str) -> int:
    """A size in bytes from `30G`, `500M`, `1.5T` (`--disk-budget`)."""
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    number, unit = text.upper().rstrip("B")[:-1], text.upper().rstrip("B")[-1:]
    if unit not in units or not unit.isalpha():
        number, unit = text.upper().rstrip("B"), ""
    try:
        return int(float(number) * units[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 30G") from None


class Context:
    """What a command works with, built once from its arguments and each part on first use."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.chronology: Chronology | None = None  # the reader's, once `reader` opened one: what `matrix` dates with

    @cached_property
    def printer(self) -> Printer:
        """The command's one way out (tables, JSON, progress, notes, errors): harness/output/printer.py."""
        from harness.output.printer import Printer

        return Printer.from_args(self.args)

    @cached_property
    def matrix(self) -> Matrix:
        """The matrix of `--matrix`, with the chronology of the reader opened before it (else the live index's); a
        missing or invalid file raises `MatrixError` (one line, exit 2)."""
        from harness.matrix.chronology import NOW
        from harness.matrix.expand import load_matrix

        return load_matrix(self.args.matrix, self.chronology or NOW)

    def optional_matrix(self, invalid_is_none: bool = False) -> Matrix | None:
        """The matrix when `--matrix` names a file, else None; an invalid file raises `MatrixError` unless
        `invalid_is_none` (the report and the nightly's steps then go on without upload dates)."""
        if not self.args.matrix.is_file():
            return None
        try:
            return self.matrix
        except MatrixError:
            if invalid_is_none:
                return None
            raise

    def environments(self, matrix: Matrix, disk_budget: int | None = None) -> CellEnvironments:
        """The cells' environments under `--envs`."""
        from harness.matrix.cellenvs import CellEnvironments
        from harness.matrix.envcache import EnvCache

        return CellEnvironments(matrix, EnvCache(self.args.envs), disk_budget)

    def cases(self, patterns: list[str] | None = None) -> tuple[list[Case], list[CaseError]]:
        """The cases of --cases-dir (only the folders whose name contains one of `patterns`, when given: a run of
        one case loads one case)."""
        from harness.model.case import discover

        if not self.args.cases_dir.is_dir():
            raise UsageError(f"--cases-dir {self.args.cases_dir}: no such folder")
        return discover(self.args.cases_dir, patterns)

    def reader(self, writable: bool = False, creates: bool = False) -> Store:
        """What a reading command reads: the record (`--record`) with the local store (`--db`) layered over it;
        with `writable`, the local store is opened to record probes, and with `creates` too an explicit `--db`
        that does not exist is created rather than refused (see harness/session/readers.py)."""
        from harness.model.case import PROBES_DIR, discover
        from harness.session.readers import open_reader

        args = self.args
        store = open_reader(
            args.db,
            args.db_given,
            discover(args.cases_dir)[0],
            args.record,
            writable,
            getattr(args, "probes_dir", None) or PROBES_DIR,
            creates=creates,
        )
        self.chronology = store.chronology
        return store

    def writable(self, option: str) -> Path:
        """The folder `option` (`--record`, `--cases-dir`) names, for a command that writes there; the installed
        wheel's own copy (the default where no clone is around) is refused in one line (exit 2)."""
        from harness.model.basics import packaged

        path = getattr(self.args, option.lstrip("-").replace("-", "_"))
        if packaged(path):
            raise UsageError(
                f"{option} {path}: the installed wheel's own copy, read-only: run from a clone, or name "
                f"a folder of your own with {option}"
            )
        return path

    def sources(self) -> str:
        """Which record answered (and the local store, when there is one): what a reading command says, so that an
        answer from an installed wheel's record, a clone's or a test's is never mistaken for another."""
        store = f" and the store {self.args.db}" if Path(self.args.db).is_file() else ""
        return f"the record in {self.args.record}{store}"

    def store(self) -> Store:
        """The store a command records in: `--db` (default .bugmatrix/results.db), or the null store with
        `--no-store`."""
        from harness.session.store import NullStore, ResultStore

        return NullStore() if getattr(self.args, "no_store", False) else ResultStore(self.args.db)

    def write(self, text: str) -> ExitCode:
        """Write `text` to --output (saying so) or stdout."""
        output = getattr(self.args, "output", None)
        if output:
            output.write_text(text)
            self.printer.wrote(output)
        else:
            self.printer.answer(text, end="")
        return ExitCode.OK


def command_line() -> str:
    """The command line this process was started with, as a run records it."""
    return " ".join(sys.argv)
