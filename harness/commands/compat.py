"""`bugmatrix compat`: probe which torch works with which fbgemm-gpu, torchrec, lightning and litgpt, and show,
check or compare the measured table (see harness/analysis/compat.py).

Exit codes: 0 shown, 1 `--check` found a disagreement with matrix.yaml or a probe of this run could not be
established, 2 bad input (an invalid matrix, an explicit --db that does not exist where nothing is probed or
resumed).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.commands.context import Context, add_format, command_line, launch_mode, positive, size
from harness.model.exitcode import ExitCode
from harness.session.basics import NIGHTLY_DB

if TYPE_CHECKING:
    from harness.matrix.expand import Matrix
    from harness.output.printer import Printer
    from harness.session.contract import Store


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `compat` and its options."""
    p = sub.add_parser(
        "compat",
        help="probe which torch works with which fbgemm-gpu, torchrec, lightning "
        "and litgpt, and show the measured table (see harness/analysis/compat.py)",
        parents=[parents[f] for f in ("--db", "--matrix", "--envs", "--jobs", "--record", "--launch")],
    )
    p.add_argument(
        "--lane",
        action="append",
        choices=["fbgemm", "torchrec", "lightning", "litgpt"],
        help="probe only these lanes (repeatable; default: all)",
    )
    # open-ended: a release uploaded tonight is probed tonight (docs/compat.md's tables name their bounds)
    for lane, default in (("torch", ">=2.4"), ("fbgemm", ">=1.0"), ("lightning", ">=2.0"), ("litgpt", ">=0.4")):
        p.add_argument(
            f"--{lane}",
            default=default,
            metavar="SPEC",
            help=f"{lane} releases to probe, the newest of each minor (default {default!r})",
        )
    p.add_argument(
        "--disk-budget",
        type=size,
        help="e.g. 25G: evict finished environments and cached torch stacks (the walk goes one torch at a time)",
    )
    p.add_argument("--repeat", type=positive, default=1, metavar="K", help="launch each probe K times")
    p.add_argument("--redo", action="store_true", help="probe again what the store already holds")
    p.add_argument(
        "--resume-from",
        type=Path,
        action="append",
        metavar="STORE",
        help="first copy the compat results of this store (a file, or a folder holding "
        f"{NIGHTLY_DB}: last night's) into --db, so that only what is new is probed (repeatable)",
    )
    p.add_argument("--no-probe", action="store_true", help="probe nothing: show the table in the store")
    p.add_argument(
        "--check",
        action="store_true",
        help="probe nothing; exit 1 when a pairing row of "
        "matrix.yaml claims a pairing the measurement contradicts, or misses one that works",
    )
    p.add_argument(
        "--rows",
        action="store_true",
        help="probe nothing; print the pairing rows the measurement supports (matrix.yaml `couplings`)",
    )
    p.add_argument(
        "--upgrade",
        nargs=2,
        metavar=("A", "B"),
        help="probe nothing; what the table says about "
        "moving from pinned set A to B (cell names, or torch=2.7.1,fbgemm-gpu=1.2.0) and which "
        "catalogue cases change outcome between them",
    )
    p.add_argument("--probes-dir", type=Path, help="folder of the probe scripts (default: probes/ beside harness/)")
    add_format(p, ("table", "markdown", "html", "json"))
    p.add_argument("-o", "--output", type=Path, help="write the table to this file instead of stdout")


@dataclass(frozen=True)
class CompatRequest:
    """What `compat` is asked: the lanes and the release ranges to probe (or not: --no-probe, --check, --rows,
    --upgrade), the stores to resume from, how to probe (repeat, redo, cores, disk budget, probe scripts), and how to
    answer (format, --check, --rows, --upgrade)."""

    lanes: tuple[str, ...]
    ranges: dict[str, str]
    disk_budget: int | None
    repeat: int
    redo: bool
    resume_from: tuple[Path, ...]
    no_probe: bool
    check: bool
    rows: bool
    upgrade: tuple[str, str] | None
    probes_dir: Path | None
    jobs: int
    format: str
    launch_mode: str | None = None  # cold | warm (--cold, --warm); None: $BUGMATRIX_LAUNCH_MODE, else the default

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CompatRequest:
        """The request `args` make (no --lane: every lane)."""
        from harness.analysis.compat import LANES

        return cls(
            tuple(args.lane or LANES),
            {"torch": args.torch, "fbgemm": args.fbgemm, "lightning": args.lightning, "litgpt": args.litgpt},
            args.disk_budget,
            args.repeat,
            args.redo,
            tuple(args.resume_from or ()),
            args.no_probe,
            args.check,
            args.rows,
            tuple(args.upgrade) if args.upgrade else None,
            args.probes_dir,
            args.jobs,
            args.format,
            launch_mode(args.launch_mode),
        )

    @property
    def probing(self) -> bool:
        """Whether this run probes (anything but showing, checking or comparing the table)."""
        return not (self.no_probe or self.check or self.rows or self.upgrade)


def run(args: argparse.Namespace) -> ExitCode:
    """Probe the compatibility grid (unless told to probe nothing), then show, check or compare the measured table:
    0, or 1 when --check finds a disagreement (or a probe of this run could not be established)."""
    return execute(CompatRequest.from_args(args), Context(args))


def execute(request: CompatRequest, ctx: Context) -> ExitCode:
    """Resume, probe and answer `request`; see `run` for the exit codes."""
    matrix = ctx.matrix
    fills = request.probing or bool(request.resume_from)
    store = ctx.reader(writable=fills, creates=fills)  # the nightly's compat job names a fresh --db to fill
    _resume(request, ctx.printer, store)
    unknown = _probe(request, ctx, matrix, store) if request.probing else 0
    return _answer(request, ctx, matrix, store, unknown)


def _resume(request: CompatRequest, printer: Printer, store: Store) -> None:
    """Copy the compat results of each --resume-from store into `store`, saying how many."""
    from harness.model.cell import COMPAT_CELLS

    for source in request.resume_from:
        path = source / NIGHTLY_DB if source.is_dir() else source
        if path.is_file():
            added = store.merge([path], COMPAT_CELLS)
            printer.say(f"resumed from {path}: {added} compat result(s) copied", soft_wrap=True, highlight=False)
        else:
            printer.say(f"no store at {path}: nothing to resume from", soft_wrap=True, highlight=False)


def _probe(request: CompatRequest, ctx: Context, matrix: Matrix, store: Store) -> int:
    """Walk the grid the request's ranges make, recording every probe; how many could not be established."""
    from harness.analysis import compat
    from harness.launch.interpreter import machine_name
    from harness.output.console import is_terminal
    from harness.output.progress import LaunchLines, ProgressDisplay, progress_bar
    from harness.session.store import recording
    from harness.workflows.compat import walk
    from harness.workflows.probing import Probing

    printer, lanes = ctx.printer, list(request.lanes)
    grid = compat.Grid.from_index(matrix, request.ranges, lanes)
    found = compat.load_probes(request.probes_dir) if request.probes_dir else compat.load_probes()
    probes = {lane: case for lane, case in found.items() if lane in lanes}
    printer.say(
        f"compat grid: torch {', '.join(grid.torch)}; "
        + "; ".join(f"{lane} {', '.join(v)}" for lane, v in grid.partners.items() if lane in lanes),
        soft_wrap=True,
        highlight=False,
    )
    terminal = is_terminal()
    hidden = request.format == "json" or not terminal
    with (
        recording(store, command_line(), machine_name()) as run_id,
        progress_bar("compat", printer.err, transient=True, disable=hidden) as progress,
    ):
        probing = Probing(
            matrix,
            ctx.environments(matrix),
            store,
            run_id,
            cores=request.jobs,
            repeat=request.repeat,
            launch_mode=request.launch_mode,
            redo=request.redo,
            observers=[ProgressDisplay(progress) if terminal else LaunchLines(printer.err)],
            say=lambda line: printer.say(line, soft_wrap=True, highlight=False, markup=False),
        )
        done = walk(grid, probes, probing, disk_budget=request.disk_budget)
    unknown = sum(1 for _, r in done if compat.verdict(r)[0] is compat.Kind.UNKNOWN)
    printer.say(
        f"recorded as run {run_id} in {store.path}: {len(done)} probe(s), {unknown} not established",
        soft_wrap=True,
        highlight=False,
    )
    return unknown


def _answer(request: CompatRequest, ctx: Context, matrix: Matrix, store: Store, unknown: int) -> ExitCode:
    """Show, check or compare the measured table; 1 when --check disagrees or a probe was not established."""
    from harness.analysis import compat
    from harness.output import compat as view

    table = compat.measured(store)
    if request.upgrade:
        before, after = (compat.pinned_set(text, matrix) for text in request.upgrade)
        up = compat.upgrade(table, before, after, store.latest())
        return ctx.write(view.upgrade_text(up, markdown=request.format == "markdown"))
    findings = compat.check(table, matrix) if request.check else None
    if request.rows:
        return ctx.write(view.rows_yaml(compat.generated_rows(table, matrix)))
    if request.format == "json":
        code = ctx.write(view.to_json(table, findings))
    elif request.format == "markdown":
        code = ctx.write(view.to_markdown(table, findings))
    elif request.format == "html":
        code = ctx.write(view.to_html(table))
    else:
        output = ctx.args.output
        if output:
            with output.open("w") as file:
                _show(ctx.printer.to_file(file), view, table, findings)
        else:
            _show(ctx.printer.out, view, table, findings)
        code = ExitCode.OK
    if not table:
        ctx.printer.say(f"no compat probes in {ctx.args.record} or {ctx.args.db}", soft_wrap=True)
    return ExitCode.FAILED if findings or unknown else code


def _show(console, view, table, findings) -> None:  # noqa: ANN001
    for grid_table in view.to_table(table):
        console.print(grid_table)
    if findings is not None:
        console.print(view.findings_text(findings), soft_wrap=True, markup=False, highlight=False)
