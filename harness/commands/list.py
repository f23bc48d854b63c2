"""`bugmatrix list`: the cases of --cases-dir, as a table or JSON.

Exit codes: 0 listed, 1 an invalid case folder (listed as an error), 2 no such cases folder, 5 an empty one.
"""

from __future__ import annotations

import argparse

from harness.commands.context import Context, add_format
from harness.model.exitcode import ExitCode


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `list`."""
    p = sub.add_parser("list", help="show the cases, one line each")
    add_format(p, ("table", "json"))
    p.add_argument("--long", action="store_true", help="each case's variants, whole title and upstream links")


def run(args: argparse.Namespace) -> ExitCode:
    """Print the cases (table or JSON); invalid case folders are listed as errors and make the exit code 1; a
    missing cases folder is an error (2), an empty one lists nothing (5, as pytest says when no test ran)."""
    from harness.output.tables import case_row, cases_table, to_json

    ctx = Context(args)
    cases, errors = ctx.cases()
    if args.format == "json":
        ctx.printer.answer(to_json({"cases": [case_row(c) for c in cases], "errors": [str(e) for e in errors]}))
    else:
        ctx.printer.show(cases_table(cases, long=args.long))
        for error in errors:
            ctx.printer.show(f"[red]invalid case[/] {error}", soft_wrap=True)
    if not cases and not errors:
        ctx.printer.say(f"[red]no cases in {args.cases_dir}[/]", soft_wrap=True)
        return ExitCode.NOTHING_RAN
    return ExitCode.FAILED if errors else ExitCode.OK
