"""`bugmatrix report`: the reproduce/fix picture across cells, from the record with the store layered over it.

Exit codes: 0 shown, 2 an explicit --db that does not exist, 5 no results for the selection (as `expect` and
`narrow`: nothing measured).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from harness.commands.context import Context, add_format
from harness.model.exitcode import ExitCode

if TYPE_CHECKING:
    from harness.output.reports import MatrixReport


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `report` and its options."""
    p = sub.add_parser(
        "report",
        help="the reproduce/fix picture across cells",
        parents=[parents["--db"], parents["--matrix"], parents["--record"]],
    )
    p.add_argument("cases", nargs="*", help="case ids (substrings); default: every case in the store")
    p.add_argument("--run", help="only this run (default: the newest result of every case x cell)")
    add_format(
        p,
        ("table", "markdown", "html", "json", "cases"),
        help="cases: one Markdown row per case (the table of docs/cases.md)",
    )
    p.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    p.add_argument("--probes", action="store_true", help="include bisect probes (cells named bisect-*)")


def run(args: argparse.Namespace) -> ExitCode:
    """Render the matrix report from the store (newest result per case x cell, or one run)."""
    from harness.model.case import discover
    from harness.output import reports as matrix_report

    ctx = Context(args)
    results = ctx.reader().latest(args.run)
    if args.cases:
        results = [(cell, r) for cell, r in results if any(part in r.case for part in args.cases)]
    cases, invalid = discover(args.cases_dir)
    for error in invalid:  # a report is read while a case is written: said, not refused (audit refuses)
        ctx.printer.say(f"[yellow]invalid case, left out of the report:[/] {error}", soft_wrap=True, highlight=False)
    asked_unmeasured = args.cases and any(
        part in case.id for case in cases for part in args.cases
    )  # shown as not measured below
    if not results and not asked_unmeasured:
        which = f" for run {args.run}" if args.run else ""
        ctx.printer.say(f"[yellow]no results in {args.record} or {args.db}{which}[/]")
        return ExitCode.NOTHING_RAN
    ctx.printer.say(f"report of {ctx.sources()}", soft_wrap=True, highlight=False)
    matrix = ctx.optional_matrix(invalid_is_none=True)
    report = matrix_report.report_for(
        results,
        args.cases_dir,
        [c.name for c in matrix.cells] if matrix else [],
        matrix,
        probes=args.probes or bool(args.run),
    )
    if args.cases:  # the cases asked for, also those with no result (said as not measured)
        report.cases = {k: c for k, c in report.cases.items() if any(part in k for part in args.cases)}
    if args.format == "table":
        if args.output:
            with args.output.open("w") as file:
                ctx.printer.to_file(file).print(matrix_report.to_table(report))
        else:
            ctx.printer.show(matrix_report.to_table(report))
        return ExitCode.OK
    renderers: dict[str, Callable[[MatrixReport], str]] = {
        "markdown": matrix_report.to_markdown,
        "html": matrix_report.to_html,
        "json": matrix_report.to_json,
        "cases": matrix_report.to_cases_markdown,
    }
    text = renderers[args.format](report)
    if args.output:
        args.output.write_text(text)
        ctx.printer.say(f"wrote {args.output}")
    else:
        ctx.printer.answer(text, end="")
    return ExitCode.OK
