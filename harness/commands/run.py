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
from typing import TYPE_CHECKING

from harness.commands.context import Context, add_format, command_line, launch_mode, positive, size
from harness.matrix.basics import DEFAULT_MATRIX, default_envs
from harness.model.exitcode import ExitCode
from harness.session.basics import default_db

if TYPE_CHECKING:
    from harness.model.case import Case
    from harness.model.case_schema import CaseError
    from harness.model.environment import Environment
    from harness.model.job import Job
    from harness.model.result import Result
    from harness.output.printer import Printer
    from harness.session.contract import Store
    from harness.session.pipeline import Environments
    from harness.session.plan import Selection


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `run` and its options."""
    p = sub.add_parser(
        "run",
        help="run cases x variants x world sizes (here, or in matrix cells)",
        parents=[parents[f] for f in ("--db", "--matrix", "--envs", "--jobs", "--launch")],
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


@dataclass(frozen=True)
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
    launch_mode: str | None = None  # cold | warm (--cold, --warm); None: $BUGMATRIX_LAUNCH_MODE, else the default
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


@dataclass
class _Planned:
    """What a run plans before it launches: the cases' errors, the selection, its jobs and their environments (and
    the interpreter, for a run here rather than in matrix cells)."""

    cases: list[Case]
    errors: list[CaseError]
    selection: Selection
    jobs: list[Job]
    environments: Environments
    python: Environment | None


@dataclass
class _Ran:
    """What a run leaves: its id (empty when nothing was recorded), its results, those reused and the store."""

    run_id: str
    results: list[Result]
    reused: list[Result]
    store: Store


def execute(options: RunOptions, ctx: Context | None = None) -> ExitCode:
    """Run the selected cases (here, or across matrix cells); exit 0 only when every observed outcome that counts
    equals the expected one (see `harness.model.result.misses`), 5 when the selection matches nothing or nothing
    could run, and record nothing for a selection that matches nothing. `ctx` defaults to the options' own (the
    nightly's cell step drives a run without a command line)."""
    from harness.launch.execute import unrunnable
    from harness.launch.interpreter import prefetch_gpus
    from harness.model.result import counts, misses
    from harness.session.store import NullStore

    prefetch_gpus()  # where only nvidia-smi can count the GPUs, its 0.3-1 s overlaps the loading and listing below
    ctx = ctx or Context(options)  # type: ignore[arg-type]  # RunOptions has every attribute the context reads
    planned = _plan(options, ctx)
    if not planned.jobs:
        why = planned.selection.unmatched(planned.cases) or [
            "the selection leaves no job"
            + (f" in {options.cases_dir}" if planned.cases else f": no cases in {options.cases_dir}")
        ]
        ctx.printer.say(f"[red]nothing to run:[/] {'; '.join(why)} (nothing recorded)", soft_wrap=True)
        return ExitCode.NOTHING_RAN
    python = planned.python
    if python is not None and all(unrunnable(job, python) for job in planned.jobs):
        store: Store = NullStore()  # a run that launches nothing records nothing (each job says why it skips)
    else:
        store = ctx.store()
    ran = _launch(options, ctx, planned, store)
    code = ExitCode.OK if not misses(ran.results) and not planned.errors else ExitCode.FAILED
    if not any(counts(r) for r in ran.results):
        code = ExitCode.NOTHING_RAN
    _show(options, ctx.printer, planned, ran, code)
    return code


def _plan(options: RunOptions, ctx: Context) -> _Planned:
    """The cases (each invalid one said), the selection the options make, its jobs and their environments; an
    invalid matrix or cell raises MatrixError, an unusable interpreter InterpreterError (exit 2)."""
    from harness.launch.interpreter import inspect_interpreter
    from harness.session.pipeline import LocalEnvironment, MatrixEnvironments
    from harness.session.plan import Selection, plan_cells, plan_local

    cases, errors = ctx.cases(options.cases)
    for error in errors:
        ctx.printer.say(f"[red]invalid case[/] {error}", soft_wrap=True)
    selection = Selection(
        cases=tuple(options.cases),
        variants=tuple(options.variant or ()),
        nprocs=tuple(options.nproc or ()),
        devices=tuple(options.device or ()),
        cells=tuple(options.cell or ()),
        all_cells=options.all_cells,
    )
    if selection.in_matrix:
        matrix = ctx.matrix
        environments = MatrixEnvironments(ctx.environments(matrix, options.disk_budget))
        return _Planned(cases, errors, selection, plan_cells(cases, matrix, selection), environments, None)
    env = inspect_interpreter(options.python)
    return _Planned(cases, errors, selection, plan_local(cases, selection), LocalEnvironment(env), env)


def _launch(options: RunOptions, ctx: Context, planned: _Planned, store: Store) -> _Ran:
    """Launch the planned jobs with progress (a bar on a terminal, a line per launch in a log), recording each
    result; Ctrl-C says what finished, what was killed and the command that resumes, then goes on up."""
    from harness.launch.interpreter import machine_name
    from harness.output.console import is_terminal
    from harness.output.progress import LaunchLines, ProgressDisplay, Running, interrupted_text, progress_bar
    from harness.session.observer import Observer
    from harness.session.pipeline import Collector, Recorder, Resume, Session
    from harness.session.store import recording

    printer, collector, terminal = ctx.printer, Collector(), is_terminal()
    observers: list[Observer] = [collector]
    run_id, running = "", Running()
    try:
        with (
            recording(store, command_line(), machine_name()) as run_id,
            progress_bar(
                "matrix" if planned.selection.in_matrix else "running",
                printer.err,
                transient=True,
                disable=options.json or not terminal,
            ) as progress,
        ):
            running = ProgressDisplay(progress) if terminal else Running()
            observers += [Recorder(store, run_id), running, *([] if terminal else [LaunchLines(printer.err)])]
            session = Session(
                planned.environments,
                resume=Resume(store, redo=options.redo),
                repeat=options.repeat,
                launch_mode=launch_mode(options.launch_mode),
                observers=observers,
            )
            results = session.run(planned.jobs, cores=options.jobs)
    except KeyboardInterrupt:
        resume = "bugmatrix " + shlex.join(a for a in sys.argv[1:] if a != "--redo")
        printer.say(interrupted_text(running, run_id, resume), soft_wrap=True, markup=False, highlight=False)
        raise
    return _Ran(run_id, results, collector.reused, store)


def _show(options: RunOptions, printer: Printer, planned: _Planned, ran: _Ran, code: ExitCode) -> None:
    """The run's answer: its JSON, or the results table, where they were recorded, what was reused, the
    interpreter and the summary line."""
    from harness.output.tables import results_table, run_json, summary_line, versions_line

    cells = [job.cell_name for job in planned.jobs]
    python, in_matrix = planned.python, planned.selection.in_matrix
    if options.json:
        printer.answer(
            run_json(
                code == ExitCode.OK,
                ran.run_id,
                [str(e) for e in planned.errors],
                [r.item_id for r in ran.reused],
                None if python is None else python.python,
                cells,
                ran.results,
            )
        )
        return
    printer.show(results_table(ran.results, cells=cells if in_matrix else None))
    if ran.run_id:
        printer.show(
            f"recorded as run {ran.run_id} in {ran.store.path}"
            + ("; `bugmatrix report` shows the matrix" if in_matrix else "")
        )
    if ran.reused:
        printer.show(
            f"{len(ran.reused)} result(s) reused from earlier runs with the same script, run settings "
            "and pins (not launched again; `--redo` launches them)"
        )
    if python is not None:
        printer.show(f"environment: {python.python} (Python {python.python_version}): {versions_line(ran.results)}")
    printer.show(
        f"[{'green' if code == ExitCode.OK else 'red'}]{summary_line(ran.results, len(planned.errors))}[/]",
        soft_wrap=True,
    )
