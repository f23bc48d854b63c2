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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.commands.context import (
    Context,
    add_format,
    add_repeats,
    command_line,
    flaky_policy,
    launch_mode,
)
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode

if TYPE_CHECKING:
    from harness.analysis.transitions import Between, Boundary
    from harness.matrix.expand import Matrix
    from harness.model.case import Case
    from harness.output.printer import Printer
    from harness.session.contract import Store


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `narrow` and its options."""
    p = sub.add_parser(
        "narrow",
        help="bisect every interval boundary in the store until it is adjacent",
        parents=[parents[f] for f in ("--db", "--matrix", "--envs", "--jobs", "--record", "--launch")],
    )
    add_format(p, ("text", "json"))
    p.add_argument("cases", nargs="*", help="case ids (substrings); default: every case with an interval")
    p.add_argument("--package", action="append", help="only boundaries along this package (repeatable)")
    p.add_argument("--device", action="append", choices=["cpu", "cuda"], help="only this device (repeatable)")
    p.add_argument("--commits", action="store_true", help="go on to first-parent commits (local clone)")
    add_repeats(p)
    p.add_argument("--dry-run", action="store_true", help="list the intervals, launch nothing")


@dataclass(frozen=True)
class NarrowRequest:
    """What `narrow` is asked: the cases (parts of ids; none: every case with an interval), the packages and devices
    whose boundaries to look at (none: all), whether to go on to commits, how often to probe, the cores, whether
    only to list, and the format."""

    cases: tuple[str, ...]
    packages: frozenset[str]
    devices: frozenset[str]
    commits: bool
    repeat: int | str  # K, or `auto` (adaptive repeats for a flaky case)
    dry_run: bool
    jobs: int
    format: str
    launch_mode: str | None = None  # cold | warm (--cold, --warm); None: $BUGMATRIX_LAUNCH_MODE, else the default
    max_launches: int | None = None  # --max-launches: with --repeat auto, one version's launches at most

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> NarrowRequest:
        """The request `args` make."""
        return cls(
            tuple(args.cases),
            frozenset(args.package or ()),
            frozenset(args.device or ()),
            args.commits,
            args.repeat,
            args.dry_run,
            args.jobs,
            args.format,
            launch_mode(args.launch_mode),
            max_launches=args.max_launches,
        )


@dataclass
class _Read:
    """What the narrowing reads once: the cases, the matrix, the store, its current results and what lies between
    two versions on the index."""

    cases: dict[str, Case]
    matrix: Matrix
    store: Store
    latest: list
    between: Between


def run(args: argparse.Namespace) -> ExitCode:
    """Narrow every interval boundary of the record's and the store's results (see harness/workflows/narrow.py); 0
    when every boundary it looked at is adjacent afterwards, 1 when some could not be narrowed (each says why) or,
    with --dry-run, while any interval is listed; 5 when there is no result at all."""
    return execute(NarrowRequest.from_args(args), Context(args))


def execute(request: NarrowRequest, ctx: Context) -> ExitCode:
    """Narrow the boundaries `request` selects, recording every probe; see `run` for the exit codes."""
    from harness.launch.interpreter import machine_name
    from harness.session.store import recording
    from harness.workflows.narrow import comments, narrow, selected_axes
    from harness.workflows.probing import Probing

    printer = ctx.printer
    repeat, policy = flaky_policy(request.repeat, request.max_launches)
    read = _read(request, ctx)
    if not read.latest:  # nothing measured is never "every boundary is adjacent"
        printer.say(
            f"no results in {ctx.args.record} or {ctx.args.db}: nothing to narrow", soft_wrap=True, highlight=False
        )
        return ExitCode.NOTHING_RAN
    cases_only = set(read.cases) if request.cases else None
    chosen = selected_axes(
        read.latest, read.cases, read.matrix, set(request.packages), set(request.devices), cases_only
    )
    targets, measured = _targets(printer, chosen, read)
    undated = [axis for axis in chosen if axis.unplaced]
    for axis in undated:  # a boundary may hide among them: never say "every boundary is adjacent" over them
        printer.say(f"{axis.label}: {axis.unplaced_text()}", soft_wrap=True, markup=False, highlight=False)
    if request.dry_run or not targets:
        return _listed(request, ctx, read, targets, len(undated), measured)
    with recording(read.store, command_line(), machine_name()) as run_id:
        probing = Probing(
            read.matrix,
            ctx.environments(read.matrix),
            read.store,
            run_id,
            cores=request.jobs,
            repeat=repeat,
            policy=policy,
            launch_mode=request.launch_mode,
            say=lambda line: printer.say(line, soft_wrap=True, markup=False, highlight=False),
        )
        done = narrow(targets, read.cases, probing, commits=request.commits)
    pasted = comments(done, read.store.latest(), read.cases, read.between, read.matrix)
    return _show(request, printer, done, pasted, run_id)


def _read(request: NarrowRequest, ctx: Context) -> _Read:
    """The cases `request` names (none matching is refused in one line), the matrix, the store and its results."""
    from harness.analysis.precision import between_on_index

    cases = {c.id: c for c in ctx.cases(list(request.cases))[0]}
    if request.cases and not cases:  # never "every boundary is adjacent" over a case it could not read
        raise UsageError(
            f"no case matching {' '.join(request.cases)} in {ctx.args.cases_dir} (a case kept elsewhere: "
            "bugmatrix --cases-dir DIR narrow ...)"
        )
    store = ctx.reader(writable=not request.dry_run)  # before the matrix: a dry run's matrix dates with the record
    matrix = ctx.matrix
    between = between_on_index(matrix, cases)
    return _Read(cases, matrix, store, store.latest(), between)


def _targets(printer: Printer, chosen: list, read: _Read) -> tuple[list, int]:
    """The boundaries on `chosen` with something left to launch between their sides, and how many have nothing
    left (each said, never counted as an interval)."""
    from harness.workflows.narrow import interval_targets, measured_between

    targets, measured = [], 0
    for target in interval_targets(chosen, read.between, read.matrix):
        why = measured_between(target, read.latest, read.cases)
        if why:  # nothing left to launch: said, never counted as an interval
            measured += 1
            printer.answer(f"{target.axis.label}: {target.boundary.text()} — nothing left to run, {why}")
        else:
            targets.append(target)
    return targets, measured


def _listed(request: NarrowRequest, ctx: Context, read: _Read, targets: list, undated: int, measured: int) -> ExitCode:
    """--dry-run, or nothing to narrow: list the intervals, or say why there are none; 1 while an interval is left
    (what `expect --check` reads) or a boundary may hide among unplaced commits, else 0."""
    printer, cases_dir = ctx.printer, ctx.args.cases_dir
    for t in targets:
        printer.answer(f"{t.axis.label}: {t.boundary.text()}{_not_run(t.boundary)}")
    if targets:
        return ExitCode.FAILED
    if undated:
        printer.say(
            f"no interval boundary among the placed results; {undated} axis(es) above hold commits "
            "that cannot be placed without a local clone",
            soft_wrap=True,
        )
        return ExitCode.FAILED
    asked = request.cases
    unread = sorted(
        {r.case for _, r in read.latest if r.case not in read.cases and (not asked or any(p in r.case for p in asked))}
    )
    if unread:  # results of cases not in --cases-dir: their boundaries were not looked at
        printer.say(
            f"not looked at: the results of {len(unread)} case(s) not in {cases_dir} "
            f"({', '.join(unread[:5])}{' …' if len(unread) > 5 else ''}; pass --cases-dir)",
            soft_wrap=True,
            highlight=False,
        )
    also = f" or measured between ({measured} above)" if measured else ""
    printer.say(
        f"no interval boundary to narrow: every boundary of the cases in {cases_dir} is adjacent{also}"
        if unread
        else f"no interval boundary to narrow: every boundary in the record and the store is adjacent{also}",
        soft_wrap=True,
        highlight=False,
    )
    return ExitCode.OK


def _not_run(boundary: Boundary, most: int = 12) -> str:
    """` — not run: 2.6.0, 2.7.0, …`: what a narrowing would choose among (the first `most`), "" when nothing."""
    from harness.model.version import short

    left = boundary.untested or ()
    if not left:
        return ""
    shown = ", ".join(short(v) for v in left[:most])
    return f" — not run: {shown}{f', … ({len(left) - most} more)' if len(left) > most else ''}"


def _show(request: NarrowRequest, printer: Printer, done: list, pasted: list[str], run_id: str) -> ExitCode:
    """The narrowing's answer (its JSON, or each boundary, the comments to paste and the count); 1 when a boundary
    could not be narrowed to adjacent versions, else 0."""
    from harness.output.payloads import narrow_json

    left = [d for d in done if not d.adjacent]
    if request.format == "json":
        printer.answer(narrow_json(run_id, pasted, done))
    else:
        for d in done:
            printer.show(f"bugmatrix narrow: {d.line()}", soft_wrap=True, markup=False, highlight=False)
        for text in pasted:
            printer.show("\nPaste upstream:\n" + text, soft_wrap=True, markup=False, highlight=False)
        printer.show(f"{len(done) - len(left)} boundary(ies) narrowed to adjacent versions, {len(left)} not")
    return ExitCode.FAILED if left else ExitCode.OK
