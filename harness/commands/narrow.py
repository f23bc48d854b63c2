"""`bugmatrix narrow [CASES]`: bisect every interval boundary of the record's and the store's results until it is
between adjacent versions (see harness/workflows/narrow.py).

A boundary with nothing left to launch between its sides (every version there mixed, or measured as the case's
rules expect) is printed with what lies between and not counted as an interval.

Exit codes: 0 every boundary looked at is adjacent afterwards (or measured between), 1 some could not be narrowed
(each says why) or, with --dry-run, an interval is listed, 2 bad input (an explicit --db that does not exist), 5
nothing measured at all.
"""

from __future__ import annotations

import argparse

from harness.commands.context import Context, add_format, command_line, positive
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `narrow` and its options."""
    p = sub.add_parser(
        "narrow",
        help="bisect every interval boundary in the store until it is adjacent",
        parents=[parents[f] for f in ("--db", "--matrix", "--envs", "--jobs", "--record")],
    )
    add_format(p, ("text", "json"))
    p.add_argument("cases", nargs="*", help="case ids (substrings); default: every case with an interval")
    p.add_argument("--package", action="append", help="only boundaries along this package (repeatable)")
    p.add_argument("--device", action="append", choices=["cpu", "cuda"], help="only this device (repeatable)")
    p.add_argument("--commits", action="store_true", help="go on to first-parent commits (local clone)")
    p.add_argument("--repeat", type=positive, default=1, help="run each probe K times; disagreement is flaky")
    p.add_argument("--dry-run", action="store_true", help="list the intervals, launch nothing")


def run(args: argparse.Namespace) -> ExitCode:
    """Narrow every interval boundary of the record's and the store's results (see harness/workflows/narrow.py); 0
    when every boundary it looked at is adjacent afterwards, 1 when some could not be narrowed (each says why) or,
    with --dry-run, while any interval is listed; 5 when there is no result at all."""
    from harness.analysis.precision import between_on_index
    from harness.launch.interpreter import machine_name
    from harness.output.payloads import narrow_json
    from harness.session.store import recording
    from harness.workflows.narrow import comments, interval_targets, measured_between, narrow, selected_axes
    from harness.workflows.probing import Probing

    ctx = Context(args)
    printer = ctx.printer
    cases = {c.id: c for c in ctx.cases(args.cases)[0]}
    if args.cases and not cases:  # never "every boundary is adjacent" over a case it could not read
        raise UsageError(
            f"no case matching {' '.join(args.cases)} in {args.cases_dir} (a case kept elsewhere: "
            "bugmatrix --cases-dir DIR narrow ...)"
        )
    matrix = ctx.matrix
    store = ctx.reader(writable=not args.dry_run)
    between = between_on_index(matrix, cases)
    latest = store.latest()
    if not latest:  # nothing measured is never "every boundary is adjacent"
        printer.say(f"no results in {args.record} or {args.db}: nothing to narrow", soft_wrap=True, highlight=False)
        return ExitCode.NOTHING_RAN
    chosen = selected_axes(
        latest, cases, matrix, set(args.package or ()), set(args.device or ()), set(cases) if args.cases else None
    )
    targets, measured = [], 0
    for target in interval_targets(chosen, between, matrix):
        why = measured_between(target, latest, cases)
        if why:  # nothing left to launch: said, never counted as an interval
            measured += 1
            printer.answer(f"{target.axis.label}: {target.boundary.text()} — nothing left to run, {why}")
        else:
            targets.append(target)
    undated = [axis for axis in chosen if axis.unplaced]
    for axis in undated:  # a boundary may hide among them: never say "every boundary is adjacent" over them
        printer.say(f"{axis.label}: {axis.unplaced_text()}", soft_wrap=True, markup=False, highlight=False)
    if args.dry_run or not targets:
        for t in targets:
            printer.answer(f"{t.axis.label}: {t.boundary.text()}")
        if not targets and undated:
            printer.say(
                f"no interval boundary among the placed results; {len(undated)} axis(es) above hold commits "
                "that cannot be placed without a local clone",
                soft_wrap=True,
            )
            return ExitCode.FAILED
        if not targets:
            unread = sorted(
                {
                    r.case
                    for _, r in latest
                    if r.case not in cases and (not args.cases or any(p in r.case for p in args.cases))
                }
            )
            if unread:  # results of cases not in --cases-dir: their boundaries were not looked at
                printer.say(
                    f"not looked at: the results of {len(unread)} case(s) not in {args.cases_dir} "
                    f"({', '.join(unread[:5])}{' …' if len(unread) > 5 else ''}; pass --cases-dir)",
                    soft_wrap=True,
                    highlight=False,
                )
            also = f" or measured between ({measured} above)" if measured else ""
            printer.say(
                f"no interval boundary to narrow: every boundary of the cases in {args.cases_dir} is adjacent{also}"
                if unread
                else f"no interval boundary to narrow: every boundary in the record and the store is adjacent{also}",
                soft_wrap=True,
                highlight=False,
            )
        return ExitCode.FAILED if targets else ExitCode.OK  # --dry-run: 1 while an interval is left (`expect --check`)
    with recording(store, command_line(), machine_name()) as run_id:
        probing = Probing(
            matrix,
            ctx.environments(matrix),
            store,
            run_id,
            cores=args.jobs,
            repeat=args.repeat,
            say=lambda line: printer.say(line, soft_wrap=True, markup=False, highlight=False),
        )
        done = narrow(targets, cases, probing, commits=args.commits)
    left = [d for d in done if not d.adjacent]
    pasted = comments(done, store.latest(), cases, between, matrix)
    if args.format == "json":
        printer.answer(narrow_json(run_id, pasted, done))
    else:
        for d in done:
            printer.show(f"bugmatrix narrow: {d.line()}", soft_wrap=True, markup=False, highlight=False)
        for text in pasted:
            printer.show("\nPaste upstream:\n" + text, soft_wrap=True, markup=False, highlight=False)
        printer.show(f"{len(done) - len(left)} boundary(ies) narrowed to adjacent versions, {len(left)} not")
    return ExitCode.FAILED if left else ExitCode.OK
