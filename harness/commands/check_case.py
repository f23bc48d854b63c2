"""`bugmatrix check-case`: does a case folder follow cases/README.md? Checked statically, nothing launched.

    bugmatrix check-case                          # every case under --cases-dir (default cases/)
    bugmatrix check-case torch-162692 lightning   # the cases whose folder name contains one of these
    bugmatrix check-case cases/torch-162692-dtensor-mean-uneven   # a case folder by its path (tab completion)
    bugmatrix check-case --cases-dir ~/my-cases

For each case, the rules of the case linter (harness/analysis/caselint.py): `case.yaml` validates, every `skip`
rule says why it skips, no version/outcome pair its `evidence` states (the grammar is harness/analysis/evidence.py's)
is contradicted by the record's current results (`--record`), `repro.py` follows the canonical set-up and every
documented path of it is run by a variant. The script is parsed with `ast`, never imported or run.

Exit codes: 0 every case checked follows the rules, 1 a case breaks one (each problem one line:
`cases/<id>/<file>: <problem>`), 2 a folder or pattern that names nothing (one line), 5 no case to check.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from harness.analysis.caselint import case_problems, current_results
from harness.commands.context import Context
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode

CLEAN, PROBLEMS, NOTHING = ExitCode.OK, ExitCode.FAILED, ExitCode.NOTHING_RAN


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `check-case` and its options."""
    p = sub.add_parser(
        "check-case",
        help="check case folders against cases/README.md (the canonical set-up, "
        "every documented flag run by a variant, a valid case.yaml, evidence the record does not contradict); "
        "launches nothing",
        parents=[parents["--record"]],
    )
    p.add_argument(
        "patterns",
        nargs="*",
        metavar="CASE",
        help="case folder names, or parts of them, or paths of case folders (default: all)",
    )
    # Also accepted after the command; the global `bugmatrix --cases-dir DIR check-case` works too.
    p.add_argument("--cases-dir", type=Path, default=argparse.SUPPRESS, help="folder of case folders")
    p.set_defaults(func=cmd_check_case)


def run(args: argparse.Namespace) -> ExitCode:
    """Check the selected case folders (see the module docstring); the exit code says what was found."""
    return ExitCode(cmd_check_case(args))


def cmd_check_case(args: argparse.Namespace) -> int:
    """Check the selected case folders; print one line per problem and a summary."""
    root: Path = args.cases_dir
    if not root.is_dir():
        raise UsageError(f"--cases-dir {root}: no such folder")
    folders = sorted(p.parent for p in root.glob("*/case.yaml"))
    paths = [Path(p) for p in args.patterns if (Path(p) / "case.yaml").is_file()]  # a case folder named by its path
    names = [p for p in args.patterns if not (Path(p) / "case.yaml").is_file()]
    for pattern in names:
        if not any(pattern in f.name for f in folders):
            raise UsageError(f"{pattern}: no case folder in {root} matches, and it is not a case folder's path")
    if args.patterns:
        folders = sorted({*paths, *(f for f in folders if any(p in f.name for p in names))})
    printer = Context(args).printer
    if not folders:
        printer.note(f"no cases in {root}")
        return NOTHING
    latest = current_results(root, args.record)
    bad = 0
    for folder in folders:
        problems = case_problems(folder, latest)
        bad += bool(problems)
        for problem in problems:
            printer.answer(problem)
    printer.note(f"{len(folders)} case(s) checked, {bad} with problems")
    return PROBLEMS if bad else CLEAN


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run as `bugmatrix check-case ...`")
