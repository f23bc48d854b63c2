"""`bugmatrix compare [RUN_A RUN_B]`: what changed between two runs (default: the latest two), or between the newest
run of --db and of another store (`--against`).

Exit codes: 0 no unexpected regression, 1 an unexpected regression, 2 fewer than two runs to compare (or an
explicit --db that does not exist).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.context import Context, add_format
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `compare` and its options."""
    p = sub.add_parser(
        "compare",
        help="what changed between two runs (default: the latest two)",
        parents=[parents["--db"], parents["--record"]],
    )
    p.add_argument("runs", nargs="*", help="RUN_A RUN_B (older, newer)")
    p.add_argument("--against", type=Path, help="compare the newest run of --db with the newest of this store")
    add_format(p, ("table", "markdown", "json"), help="markdown: for a step summary")
    p.add_argument(
        "--markdown",
        dest="format",
        action="store_const",
        const="markdown",
        default=argparse.SUPPRESS,
        help="the same as --format markdown",
    )


def run(args: argparse.Namespace) -> ExitCode:
    """Print fixes, regressions and changed errors between two runs; exit 1 on an unexpected regression."""
    from harness.analysis.compare import compare, comparison
    from harness.model.outcome import shown
    from harness.output import reports as matrix_report
    from harness.output.tables import to_json
    from harness.session.store import ResultStore

    ctx = Context(args)
    printer = ctx.printer
    store = ctx.reader()
    if args.against:
        if not args.against.is_file():
            printer.say(f"[yellow]no previous results at {args.against}: nothing to compare[/]")
            return ExitCode.OK
        old, new = ResultStore(args.against, readonly=True).latest(), store.latest()
        names: tuple[str, ...] = (str(args.against), str(args.db))
    else:
        runs = [r.run_id for r in store.runs(with_results=True)]  # an empty run is never compared
        names = tuple(args.runs) if len(args.runs) == 2 else tuple(runs[-2:])
        if len(names) != 2 or any(n not in runs for n in names):
            raise UsageError(f"need two runs with results to compare (in {args.db}: {', '.join(runs) or 'none'})")
        old, new = store.latest(names[0]), store.latest(names[1])
    changes = compare(old, new)
    unexpected = [c for c in changes if c.unexpected]
    if args.format == "json":
        printer.answer(to_json(comparison(changes, names[0], names[1])))
    elif args.format == "markdown":
        printer.answer(matrix_report.to_markdown_changes(changes, names), end="")
    else:
        printer.show(f"comparing {names[0]} -> {names[1]}: {len(changes)} change(s)")
        marks = {
            "regressed": "[bold red]+[/]",
            "fixed": "[green]-[/]",
            "flaky": "[magenta]~[/]",
            "changed": "[yellow]x[/]",
        }
        for c in changes:
            note = " [bold red](unexpected)[/]" if c.unexpected else f" ({c.tally})" if c.tally else ""
            printer.show(
                f"{marks[c.kind]} {c.kind:9} {c.item}: {shown(c.before)} -> {shown(c.after)}{note}", soft_wrap=True
            )
    return ExitCode.FAILED if unexpected else ExitCode.OK
