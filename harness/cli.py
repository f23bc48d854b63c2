"""The `bugmatrix` command line: `list` the cases, `run` them in the current environment."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.cases import discover, select
from harness.environment import ProbeError, machine_name, probe
from harness.report import case_row, cases_table, results_table, to_json, versions_line
from harness.result import Result
from harness.run import default_devices, plan, run_jobs, run_ok
from harness.store import DEFAULT_DB, ResultStore

# `cases/` in the current directory, else the one beside this package (a checkout of bugmatrix).
DEFAULT_CASES = Path("cases") if Path("cases").is_dir() else Path(__file__).resolve().parent.parent / "cases"


def main(argv: list[str] | None = None) -> int:
    """Entry point of `bugmatrix` and `python -m harness`; returns the process exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        Console(stderr=True).print("[yellow]interrupted: launches in flight were killed[/]")
        return 130


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bugmatrix", description=__doc__)
    parser.add_argument("--cases-dir", type=Path, default=DEFAULT_CASES, help="folder of case folders")
    sub = parser.add_subparsers(dest="command", required=True)

    p_list = sub.add_parser("list", help="show the cases")
    p_list.add_argument("--json", action="store_true", help="machine-readable output")
    p_list.set_defaults(func=cmd_list)

    p_run = sub.add_parser("run", help="run cases x variants x world sizes in one environment")
    p_run.add_argument("cases", nargs="*", help="case ids (substrings); default: all")
    p_run.add_argument("--device", action="append", choices=["cpu", "cuda"], help="default: cuda if present, else cpu")
    p_run.add_argument("--variant", action="append", help="only these variants (repeatable)")
    p_run.add_argument("--nproc", action="append", type=int, help="only these world sizes (repeatable)")
    p_run.add_argument("--python", default=sys.executable, help="interpreter of the environment to run in")
    p_run.add_argument(
        "-j", "--jobs", type=int, default=os.cpu_count() or 1, help="cores to use (a 2-rank case takes 2)"
    )
    p_run.add_argument("--db", type=Path, default=DEFAULT_DB, help=f"results store (default {DEFAULT_DB})")
    p_run.add_argument("--no-store", action="store_true", help="do not record the results")
    p_run.add_argument("--json", action="store_true", help="machine-readable output")
    p_run.set_defaults(func=cmd_run)
    return parser


def cmd_list(args: argparse.Namespace) -> int:
    """Print the cases (table or JSON); invalid case folders are listed as errors and make the exit code 1."""
    cases, errors = discover(args.cases_dir)
    if args.json:
        print(to_json({"cases": [case_row(c) for c in cases], "errors": [str(e) for e in errors]}))
    else:
        console = Console()
        console.print(cases_table(cases))
        for error in errors:
            console.print(f"[red]invalid case[/] {error}", soft_wrap=True)
    return 1 if errors else 0


def cmd_run(args: argparse.Namespace) -> int:
    """Run the selected cases; exit 0 only when every observed outcome equals the expected one."""
    err = Console(stderr=True)
    cases, errors = discover(args.cases_dir)
    cases = select(cases, args.cases)
    for error in errors:
        err.print(f"[red]invalid case[/] {error}", soft_wrap=True)
    try:
        env = probe(args.python)
    except ProbeError as exc:
        err.print(f"[red]cannot use the environment[/] {exc}", soft_wrap=True)
        return 2
    store = None if args.no_store else ResultStore(args.db)
    run_id = store.begin_run(" ".join(sys.argv), machine_name()) if store else ""
    jobs = [
        job for job in plan(cases, args.device or default_devices())
        if (not args.variant or job.variant in args.variant) and (not args.nproc or job.nproc in args.nproc)
    ]
    with Progress(
        TextColumn("[bold]running"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("{task.description}"), console=err, transient=True, disable=args.json,
    ) as progress:
        task = progress.add_task("", total=len(jobs))

        def record(result: Result) -> None:
            if store:
                store.save(run_id, result)
            progress.update(task, advance=1, description=f"{result.item_id}: {result.outcome.value}")

        try:
            results = run_jobs(jobs, env, cores=args.jobs, on_result=record)
        except BaseException:
            if store:
                store.end_run(run_id, "interrupted")
            raise
    if store:
        store.end_run(run_id)
    ok = run_ok(results) and not errors
    if args.json:
        payload = {"ok": ok, "run_id": run_id, "python": env.python, "errors": [str(e) for e in errors]}
        print(to_json({**payload, "results": [r.model_dump(mode="json") for r in results]}))
    else:
        console = Console()
        console.print(results_table(results))
        if store:
            console.print(f"recorded as run {run_id} in {args.db}")
        console.print(f"environment: {env.python} (Python {env.python_version}): {versions_line(results)}")
        mismatched = [r for r in results if r.launched and not r.ok]
        console.print(
            f"[{'green' if ok else 'red'}]{len(results) - len(mismatched)} as expected, {len(mismatched)} not"
            + (f", {len(errors)} invalid case(s)" if errors else "") + "[/]"
        )
    return 0 if ok else 1
