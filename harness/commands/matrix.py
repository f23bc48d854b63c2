"""`bugmatrix matrix`: the cells of the matrix with their pins, or (`--github`) the nightly's GitHub Actions job
matrix.

Exit codes: 0 shown, 2 an invalid matrix (or a job matrix that cannot be planned).
"""

from __future__ import annotations

import argparse

from harness.commands.context import Context, add_format
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `matrix` and its options."""
    p = sub.add_parser("matrix", help="show the cells of the matrix", parents=[parents["--matrix"]])
    add_format(p, ("table", "json"))
    p.add_argument(
        "--github",
        action="store_true",
        help="print the nightly workflow's GitHub Actions job matrix (one line of JSON)",
    )
    p.add_argument(
        "--cells",
        default="",
        help="with --github: only these cells (names or globs, separated by commas or spaces; default: all)",
    )
    p.add_argument(
        "--cases",
        default="",
        help="with --github: only the cases whose id contains one of "
        "these substrings (separated by commas or spaces; default: all)",
    )


def run(args: argparse.Namespace) -> ExitCode:
    """Print the matrix's cells with their pins (table or JSON)."""
    import json

    from rich.markup import escape

    from harness.output.github import job_matrix
    from harness.output.tables import matrix_rows, matrix_table, to_json

    ctx = Context(args)
    matrix = ctx.matrix  # an invalid matrix: MatrixError, one line, exit 2
    if args.github:
        try:
            ctx.printer.answer(json.dumps(job_matrix(matrix, cells=args.cells, cases=args.cases)))
        except ValueError as exc:
            raise UsageError(f"cannot plan the GitHub job matrix: {exc}") from exc
        return ExitCode.OK
    rows = matrix_rows(matrix)
    if args.format == "json":
        ctx.printer.answer(to_json(rows))
        return ExitCode.OK
    table = matrix_table(rows, f"{len(rows)} cells in {args.matrix}")
    for name, problem in matrix.problems.items():
        ctx.printer.say(f"[yellow]infra[/] {name}: {escape(problem)}", soft_wrap=True)
    ctx.printer.show(table)
    return ExitCode.OK
