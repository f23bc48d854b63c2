"""`bugmatrix compat`: probe which torch works with which fbgemm-gpu, torchrec, lightning and litgpt, and show,
check or compare the measured table (see harness/analysis/compat.py).

Exit codes: 0 shown, 1 `--check` found a disagreement with matrix.yaml or a probe of this run could not be
established, 2 bad input (an invalid matrix, an explicit --db that does not exist where nothing is probed or
resumed).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.context import Context, add_format, command_line, positive, size
from harness.model.exitcode import ExitCode
from harness.session.basics import NIGHTLY_DB


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `compat` and its options."""
    p = sub.add_parser(
        "compat",
        help="probe which torch works with which fbgemm-gpu, torchrec, lightning "
        "and litgpt, and show the measured table (see harness/analysis/compat.py)",
        parents=[parents[f] for f in ("--db", "--matrix", "--envs", "--jobs", "--record")],
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


def run(args: argparse.Namespace) -> ExitCode:
    """Probe the compatibility grid (unless told to probe nothing), then show, check or compare the measured table:
    0, or 1 when --check finds a disagreement (or a probe of this run could not be established)."""
    from harness.analysis import compat
    from harness.launch.interpreter import machine_name
    from harness.model.cell import COMPAT_CELLS
    from harness.output import compat as view
    from harness.output.console import is_terminal
    from harness.output.progress import LaunchLines, ProgressDisplay, progress_bar
    from harness.session.store import recording
    from harness.workflows.compat import walk
    from harness.workflows.probing import Probing

    ctx = Context(args)
    printer = ctx.printer
    matrix = ctx.matrix
    probing = not (args.no_probe or args.check or args.rows or args.upgrade)
    fills = probing or bool(args.resume_from)
    store = ctx.reader(writable=fills, creates=fills)  # the nightly's compat job names a fresh --db to fill
    unknown = 0
    for source in args.resume_from or ():
        path = source / NIGHTLY_DB if source.is_dir() else source
        if path.is_file():
            added = store.merge([path], COMPAT_CELLS)
            printer.say(f"resumed from {path}: {added} compat result(s) copied", soft_wrap=True, highlight=False)
        else:
            printer.say(f"no store at {path}: nothing to resume from", soft_wrap=True, highlight=False)
    if probing:
        lanes = args.lane or list(compat.LANES)
        ranges = {"torch": args.torch, "fbgemm": args.fbgemm, "lightning": args.lightning, "litgpt": args.litgpt}
        grid = compat.Grid.from_index(matrix, ranges, lanes)
        found = compat.load_probes(args.probes_dir) if args.probes_dir else compat.load_probes()
        probes = {lane: case for lane, case in found.items() if lane in lanes}
        printer.say(
            f"compat grid: torch {', '.join(grid.torch)}; "
            + "; ".join(f"{lane} {', '.join(v)}" for lane, v in grid.partners.items() if lane in lanes),
            soft_wrap=True,
            highlight=False,
        )
        terminal = is_terminal()
        with (
            recording(store, command_line(), machine_name()) as run_id,
            progress_bar(
                "compat", printer.err, transient=True, disable=args.format == "json" or not terminal
            ) as progress,
        ):
            probing = Probing(
                matrix,
                ctx.environments(matrix),
                store,
                run_id,
                cores=args.jobs,
                repeat=args.repeat,
                redo=args.redo,
                observers=[ProgressDisplay(progress) if terminal else LaunchLines(printer.err)],
                say=lambda line: printer.say(line, soft_wrap=True, highlight=False, markup=False),
            )
            done = walk(grid, probes, probing, disk_budget=args.disk_budget)
        unknown = sum(1 for _, r in done if compat.verdict(r)[0] is compat.Kind.UNKNOWN)
        printer.say(
            f"recorded as run {run_id} in {store.path}: {len(done)} probe(s), {unknown} not established",
            soft_wrap=True,
            highlight=False,
        )
    table = compat.measured(store)
    if args.upgrade:
        before, after = (compat.pinned_set(text, matrix) for text in args.upgrade)
        up = compat.upgrade(table, before, after, store.latest())
        return ctx.write(view.upgrade_text(up, markdown=args.format == "markdown"))
    findings = compat.check(table, matrix) if args.check else None
    if args.rows:
        return ctx.write(view.rows_yaml(compat.generated_rows(table, matrix)))
    if args.format == "json":
        code = ctx.write(view.to_json(table, findings))
    elif args.format == "markdown":
        code = ctx.write(view.to_markdown(table, findings))
    elif args.format == "html":
        code = ctx.write(view.to_html(table))
    else:
        if args.output:
            with args.output.open("w") as file:
                _show(printer.to_file(file), view, table, findings)
        else:
            _show(printer.out, view, table, findings)
        code = ExitCode.OK
    if not table:
        printer.say(f"no compat probes in {args.record} or {args.db}", soft_wrap=True)
    return ExitCode.FAILED if findings or unknown else code


def _show(console, view, table, findings) -> None:  # noqa: ANN001
    for grid_table in view.to_table(table):
        console.print(grid_table)
    if findings is not None:
        console.print(view.findings_text(findings), soft_wrap=True, markup=False, highlight=False)
