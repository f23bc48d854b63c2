"""`bugmatrix bisect CASE --package P`: the release (then the commit) where a case's outcome changes.

Exit codes: 0 a boundary was found, 1 the bisection was refused or the boundary is ambiguous, 2 a case or variant
that does not exist, an explicit --db that does not exist (or another bad input).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from harness.commands.context import (
    Context,
    add_format,
    add_repeats,
    command_line,
    dates,
    flaky_policy,
    launch_mode,
    size,
)
from harness.matrix.basics import MatrixError
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode

if TYPE_CHECKING:
    from harness.model.case import Case
    from harness.output.printer import Printer
    from harness.workflows.bisect import BisectRequest


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `bisect` and its options."""
    p = sub.add_parser(
        "bisect",
        help="find the release (and commit) where a case's outcome changes",
        parents=[parents[f] for f in ("--db", "--matrix", "--envs", "--jobs", "--record", "--launch")],
    )
    add_format(p, ("text", "json"))
    p.add_argument("case", help="case id (or a unique part of it)")
    p.add_argument("--package", required=True, help="the package to move, e.g. torchrec")
    p.add_argument("--variant", default="bug")
    p.add_argument("--nproc", type=int, help="world size (default: the case's largest)")
    p.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if present")
    p.add_argument("--old", "--good", dest="old", help="oldest version (default: the oldest allowed)")
    p.add_argument("--new", "--bad", dest="new", help="newest version (default: the newest allowed)")
    p.add_argument("--pre", action="store_true", help="include pre-releases")
    add_repeats(p)
    p.add_argument(
        "--disk-budget",
        type=size,
        help="e.g. 30G: evict finished probes' environments and cached torch stacks to stay under it",
    )
    p.add_argument("--git", help="source repository (URL or local clone) for the commit-level bisection")
    p.add_argument("--old-ref", help="bisect commits from this ref (skips the release level)")
    p.add_argument("--new-ref", help="... to this ref")
    p.add_argument("--no-commits", action="store_true", help="stop at the release level")
    p.add_argument(
        "--dates",
        type=dates,
        metavar="START..END",
        help="bisect the dev builds of these days (YYYY-MM-DD..YYYY-MM-DD) before commits",
    )
    p.add_argument("--channel", help="the `indexes` entry serving the dev builds (e.g. PyTorch's nightly)")


@dataclass(frozen=True)
class BisectCommand:
    """What `bisect` is asked: the case (an id or a unique part of it), its variant and world size, the package to
    move and its range, the levels, how often to probe, the cores and the format. It becomes the workflow's
    `BisectRequest` once the case is found."""

    case: str
    package: str
    variant: str
    nproc: int | None
    device: str | None
    old: str | None
    new: str | None
    pre: bool
    repeat: int | str  # K, or `auto` (adaptive repeats for a flaky case)
    git: str | None
    old_ref: str | None
    new_ref: str | None
    commits: bool
    dates: tuple[date, date] | None
    channel: str | None
    jobs: int
    format: str
    launch_mode: str | None = None  # cold | warm (--cold, --warm); None: $BUGMATRIX_LAUNCH_MODE, else the default
    max_launches: int | None = None  # --max-launches: with --repeat auto, one version's launches at most
    disk_budget: int | None = None  # bytes (--disk-budget): finished probes' environments are evicted over it

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> BisectCommand:
        """The request `args` make."""
        return cls(
            args.case,
            args.package,
            args.variant,
            args.nproc,
            args.device,
            args.old,
            args.new,
            args.pre,
            args.repeat,
            args.git,
            args.old_ref,
            args.new_ref,
            not args.no_commits,
            args.dates,
            args.channel,
            args.jobs,
            args.format,
            launch_mode(args.launch_mode),
            max_launches=args.max_launches,
            disk_budget=args.disk_budget,
        )

    def workflow(self, case: Case) -> BisectRequest:
        """The bisection workflow's request for `case` (the device defaults to cuda where present)."""
        from harness.launch.execute import default_devices
        from harness.workflows.bisect import BisectRequest

        return BisectRequest(
            case,
            self.variant,
            self.nproc or max(case.spec.nproc),
            self.device or default_devices()[0],
            self.package,
            self.old,
            self.new,
            self.pre,
            git=self.git,
            old_ref=self.old_ref,
            new_ref=self.new_ref,
            commits=self.commits,
            dates=self.dates,
            channel=self.channel,
        )


def run(args: argparse.Namespace) -> ExitCode:
    """Release-level, then commit-level bisection; 0 when a boundary was found, 1 when refused or ambiguous."""
    return execute(BisectCommand.from_args(args), Context(args))


def execute(request: BisectCommand, ctx: Context) -> ExitCode:
    """Bisect `request` in the matrix's environments, record its probes and show its boundary."""
    from harness.launch.interpreter import machine_name
    from harness.matrix.git import GitError
    from harness.model.result import Result
    from harness.session.store import recording
    from harness.workflows.bisect import BisectError, bisect, bisect_commands, bisect_summary
    from harness.workflows.probing import Probing
    from harness.workflows.search import BisectRefused

    printer = ctx.printer
    case = _case(request, ctx.args.cases_dir)
    repeat, policy = flaky_policy(request.repeat, request.max_launches)
    store = ctx.reader(writable=True)
    probed: dict[str, Result] = {}  # each candidate's result, reused probes included
    with recording(store, command_line(), machine_name()) as run_id:
        try:
            matrix = ctx.matrix
            probing = Probing(
                matrix,
                ctx.environments(matrix, request.disk_budget),
                store,
                run_id,
                cores=request.jobs,
                repeat=repeat,
                policy=policy,
                launch_mode=request.launch_mode,
                say=lambda line: printer.say(line, soft_wrap=True),
            )
            levels = bisect(probing, request.workflow(case), probed)
        except (BisectError, BisectRefused, MatrixError, GitError) as exc:  # a refusal is a complete, recorded run
            printer.say(f"[red]bisect refused:[/] {exc}", soft_wrap=True)
            return ExitCode.FAILED
    summary = bisect_summary(case.id, request.variant, request.package, levels, probed, case.spec.packages)
    text = levels and request.format != "json"  # the commands reproducing each side are said in text only
    commands = bisect_commands(case, levels[-1][1], store.results(run_id), matrix, probed) if text else []
    _show(request, printer, summary, levels, commands, run_id)
    return ExitCode.FAILED if any(r.ambiguous or not r.decided for _, r in levels) else ExitCode.OK


def _case(request: BisectCommand, cases_dir: Path) -> Case:
    """The one case `request` names, with its variant and the package it moves; anything else is refused."""
    from harness.model.case import discover, select
    from harness.model.common import logical_name

    cases, _ = discover(cases_dir)
    matches = [c for c in cases if c.id == request.case] or select(cases, [request.case])
    if not matches:
        raise UsageError(f"no case in {cases_dir} matches {request.case!r} (`bugmatrix list` shows them)")
    if len(matches) > 1:
        raise UsageError(f"case {request.case!r} matches {len(matches)} cases ({', '.join(c.id for c in matches)})")
    case = matches[0]
    if request.variant not in case.spec.variants:
        raise UsageError(f"{case.id} has no variant {request.variant!r} ({', '.join(case.spec.variants)})")
    if logical_name(request.package) not in {logical_name(p) for p in case.spec.packages}:
        # moving a package the case does not install cannot change its outcome: refused before a run is begun
        raise UsageError(
            f"--package {request.package}: {case.id} installs {', '.join(case.spec.packages)}; bisect one of those"
        )
    return case


def _show(
    request: BisectCommand, printer: Printer, summary: str, levels: list, commands: list[str], run_id: str
) -> None:
    """The bisection's answer: its JSON, or each level's probes, the summary and the commands reproducing each side."""
    from harness.output.payloads import bisect_json

    if request.format == "json":
        printer.answer(bisect_json(run_id, summary, levels))
        return
    for level, r in levels:
        printer.show(
            f"{level} level: {len(r.probes)} probes: " + ", ".join(f"{c}={o.value}" for c, o in r.probes)
            if r.verdict is None
            else f"{level} level: {len(r.tallies)} versions launched: "
            + "; ".join(f"{c}: {t.text()}" for c, t in r.tallies.items()),
            soft_wrap=True,
        )
    printer.show(summary, soft_wrap=True, markup=False, highlight=False)
    if levels:
        printer.show("\nTo reproduce each side anywhere:", highlight=False)
        for command in commands:
            printer.show(command, soft_wrap=True, markup=False, highlight=False)
