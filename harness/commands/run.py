"""`bugmatrix run`: run cases x variants x world sizes, here or in matrix cells, and record the results.

Exit codes: 0 every observed outcome that counts equals the expected one (`harness.model.result.misses`), 1 one does
not (or an invalid case folder was skipped), 2 an invalid matrix or an interpreter that cannot be used, 5 the
selection matches nothing or nothing could run (a selection that matches nothing records nothing).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path

from harness.commands.context import Context, add_format, command_line, positive, size
from harness.matrix.basics import DEFAULT_MATRIX, default_envs
from harness.model.exitcode import ExitCode
from harness.session.basics import default_db


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `run` and its options."""
    p = sub.add_parser(
        "run",
        help="run cases x variants x world sizes (here, or in matrix cells)",
        parents=[parents[f] for f in ("--db", "--matrix", "--envs", "--jobs")],
    )
    add_format(p, ("table", "json"))
    p.add_argument("cases", nargs="*", help="case ids (substrings); default: all")
    p.add_argument("--device", action="append", choices=["cpu", "cuda"], help="default: cuda if present, else cpu")
    p.add_argument("--variant", action="append", help="only these variants (repeatable)")
    p.add_argument("--nproc", action="append", type=int, help="only these world sizes (repeatable)")
    p.add_argument("--python", default=sys.executable, help="interpreter of the environment to run in")
    p.add_argument("--cell", action="append", help="run in this matrix cell (repeatable); see `bugmatrix matrix`")
    p.add_argument("--all-cells", action="store_true", help="run in every cell of the matrix")
    p.add_argument(
        "--disk-budget",
        type=size,
        help="e.g. 30G: evict finished environments and cached torch stacks to stay under it",
    )
    p.add_argument("--no-store", action="store_true", help="do not record the results")
    p.add_argument(
        "--repeat",
        type=positive,
        default=1,
        metavar="K",
        help="launch each job K times; if they disagree the result is `flaky`, with the tally",
    )
    p.add_argument(
        "--redo",
        action="store_true",
        help="launch again what the store already holds for the "
        "same script, run settings and pins (by default a re-run resumes: it reuses those results)",
    )


@dataclass
class RunOptions:
    """What `bugmatrix run` is asked, as its options name it: built from the command line (`from_args`) or by the
    nightly's cell step, which drives the same run without a command line."""

    cases_dir: Path
    cases: list[str] = field(default_factory=list)
    device: list[str] | None = None
    variant: list[str] | None = None
    nproc: list[int] | None = None
    python: str = sys.executable
    cell: list[str] | None = None
    all_cells: bool = False
    disk_budget: int | None = None
    no_store: bool = False
    repeat: int = 1
    redo: bool = False
    format: str = "table"  # or "json"
    db: Path = field(default_factory=default_db)
    matrix: Path = DEFAULT_MATRIX
    envs: Path = field(default_factory=default_envs)
    jobs: int = field(default_factory=lambda: os.cpu_count() or 1)

    @property
    def json(self) -> bool:
        """Whether the run answers in JSON (`--format json`, `--json`)."""
        return self.format == "json"

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunOptions:
        """The options of a parsed `bugmatrix run` command line."""
        return cls(**{name: getattr(args, name) for name in cls.__dataclass_fields__})


def run(args: argparse.Namespace) -> ExitCode:
    """Run the selected cases as the command line asks (see `execute`)."""
    return execute(RunOptions.from_args(args))


def execute(options: RunOptions) -> ExitCode:
    """Run the selected cases (here, or across matrix cells); exit 0 only when every observed outcome that counts
    equals the expected one (see `harness.model.result.misses`), 5 when the selection matches nothing or nothing
    could run, and record nothing for a selection that matches nothing."""
    from harness.launch.execute import unrunnable
    from harness.launch.interpreter import inspect_interpreter, machine_name, prefetch_gpus
    from harness.model.result import counts, misses
    from harness.output.console import is_terminal
    from harness.output.progress import LaunchLines, ProgressDisplay, Running, interrupted_text, progress_bar
    from harness.output.tables import results_table, run_json, summary_line, versions_line
    from harness.session.pipeline import (
        Collector,
        Environments,
        LocalEnvironment,
        MatrixEnvironments,
        Observer,
        Recorder,
        Resume,
        Session,
    )
    from harness.session.plan import Selection, plan_cells, plan_local
    from harness.session.store import NullStore, Store, recording

    prefetch_gpus()  # where only nvidia-smi can count the GPUs, its 0.3-1 s overlaps the loading and listing below
    ctx = Context(options)  # type: ignore[arg-type]  # RunOptions has every attribute the context reads
    printer = ctx.printer
    cases, errors = ctx.cases(options.cases)
    for error in errors:
        printer.say(f"[red]invalid case[/] {error}", soft_wrap=True)
    selection = Selection(
        cases=tuple(options.cases),
        variants=tuple(options.variant or ()),
        nprocs=tuple(options.nproc or ()),
        devices=tuple(options.device or ()),
        cells=tuple(options.cell or ()),
        all_cells=options.all_cells,
    )
    environments: Environments
    if (
        selection.in_matrix
    ):  # an invalid matrix or cell: MatrixError; an unusable interpreter: InterpreterError (exit 2)
        matrix = ctx.matrix
        jobs = plan_cells(cases, matrix, selection)
        environments = MatrixEnvironments(ctx.environments(matrix, options.disk_budget))
        python = None
    else:
        env = inspect_interpreter(options.python)
        jobs = plan_local(cases, selection)
        environments, python = LocalEnvironment(env), env
    if not jobs:
        why = selection.unmatched(cases) or [
            "the selection leaves no job"
            + (f" in {options.cases_dir}" if cases else f": no cases in {options.cases_dir}")
        ]
        printer.say(f"[red]nothing to run:[/] {'; '.join(why)} (nothing recorded)", soft_wrap=True)
        return ExitCode.NOTHING_RAN
    if python is not None and all(unrunnable(job, python) for job in jobs):
        store: Store = NullStore()  # a run that launches nothing records nothing (each job says why it skips)
    else:
        store = ctx.store()
    collector = Collector()
    terminal = is_terminal()
    observers: list[Observer] = [collector]
    run_id, running = "", Running()
    try:
        with (
            recording(store, command_line(), machine_name()) as run_id,
            progress_bar(
                "matrix" if selection.in_matrix else "running",
                printer.err,
                transient=True,
                disable=options.json or not terminal,
            ) as progress,
        ):
            running = ProgressDisplay(progress) if terminal else Running()
            observers += [Recorder(store, run_id), running, *([] if terminal else [LaunchLines(printer.err)])]
            session = Session(
                environments, resume=Resume(store, redo=options.redo), repeat=options.repeat, observers=observers
            )
            results = session.run(jobs, cores=options.jobs)
    except KeyboardInterrupt:
        resume = "bugmatrix " + shlex.join(a for a in sys.argv[1:] if a != "--redo")
        printer.say(interrupted_text(running, run_id, resume), soft_wrap=True, markup=False, highlight=False)
        raise
    missed = misses(results)
    counted = [r for r in results if counts(r)]
    code = ExitCode.OK if not missed and not errors else ExitCode.FAILED
    if not counted:
        code = ExitCode.NOTHING_RAN
    cells = [job.cell_name for job in jobs]
    if options.json:
        printer.answer(
            run_json(
                code == ExitCode.OK,
                run_id,
                [str(e) for e in errors],
                [r.item_id for r in collector.reused],
                None if python is None else python.python,
                cells,
                results,
            )
        )
        return code
    printer.show(results_table(results, cells=cells if selection.in_matrix else None))
    if run_id:
        printer.show(
            f"recorded as run {run_id} in {store.path}"
            + ("; `bugmatrix report` shows the matrix" if selection.in_matrix else "")
        )
    if collector.reused:
        printer.show(
            f"{len(collector.reused)} result(s) reused from earlier runs with the same script, run settings "
            "and pins (not launched again; `--redo` launches them)"
        )
    if python is not None:
        printer.show(f"environment: {python.python} (Python {python.python_version}): {versions_line(results)}")
    printer.show(
        f"[{'green' if code == ExitCode.OK else 'red'}]{summary_line(results, len(errors))}[/]", soft_wrap=True
    )
    return code
