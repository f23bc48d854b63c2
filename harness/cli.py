"""The `bugmatrix` command line: list cases, run them (here or across matrix cells), manage environments."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections import Counter
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from harness.commands import UsageError
from harness.launch.execute import default_devices
from harness.launch.interpreter import InterpreterError, inspect_interpreter, machine_name, prefetch_gpus
from harness.matrix.basics import DEFAULT_MATRIX, DEFAULT_ROOT, IndexLookupError, MatrixError
from harness.model.case import Case, discover, select
from harness.model.case_schema import CaseError
from harness.model.outcome import shown
from harness.model.result import Result, counts, misses
from harness.output.console import LOG_WIDTH, is_terminal, make_console
from harness.output.progress import LaunchLines, ProgressDisplay, progress_bar
from harness.output.tables import case_row, cases_table, results_table, to_json, versions_line, whole_columns
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
from harness.session.record import DEFAULT_RECORD
from harness.session.store import DEFAULT_DB, NullStore, ResultStore, StoreError, recording

if TYPE_CHECKING:
    from harness.matrix.cellenvs import CellEnvironments
    from harness.matrix.expand import Matrix


def one_line_errors() -> tuple[type[Exception], ...]:
    """Errors whose message already says what is wrong in one line (the file and field, the run, the package).
    Evaluated only when an exception reaches `main`, so that a command imports only what it uses."""
    from harness.analysis.bisect import BisectError
    from harness.matrix.git import GitError

    return (StoreError, MatrixError, CaseError, IndexLookupError, BisectError, GitError, InterpreterError, UsageError)


def _matrix(path: Path) -> Matrix:
    """The matrix in `path`. The planner is imported here, on first use: a local run never loads it."""
    from harness.matrix.expand import load_matrix

    return load_matrix(path)


def _cell_environments(matrix: Matrix, envs: Path, disk_budget: int | None = None) -> CellEnvironments:
    """The cells' environments under `envs` (imported on first use, as `_matrix`)."""
    from harness.matrix.cellenvs import CellEnvironments
    from harness.matrix.envcache import EnvCache

    return CellEnvironments(matrix, EnvCache(envs), disk_budget)


# `cases/` in the current directory, else the one beside this package (a checkout of bugmatrix).
DEFAULT_CASES = Path("cases") if Path("cases").is_dir() else Path(__file__).resolve().parent.parent / "cases"


def main(argv: list[str] | None = None) -> int:
    """Entry point of `bugmatrix` and `python -m harness`; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if "db" in vars(args):  # an explicit --db must exist for a reading command; the default may be absent
        args.db_given = args.db is not None
        args.db = args.db if args.db is not None else DEFAULT_DB
    # Ctrl-C, SIGTERM and SIGHUP all end in the same cleanup. SIGINT is installed explicitly: a parent that ignores it
    # (pytest-xdist workers, some CI runners) would otherwise pass the ignore on and Ctrl-C would do nothing.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    signal.signal(signal.SIGHUP, _sigterm_as_interrupt)  # a closed terminal or a killed job shell: same cleanup
    try:
        return int(args.func(args))
    except one_line_errors() as exc:  # a bad store, matrix, index answer or argument: one line, never a traceback
        make_console(stderr=True).print(f"[red]bugmatrix {args.command}:[/] {escape(str(exc))}", soft_wrap=True,
                                        highlight=False)
        return 2
    except KeyboardInterrupt:
        make_console(stderr=True).print("[yellow]interrupted: launches in flight were killed[/]")
        return 130


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _option(flag: str) -> argparse.ArgumentParser:
    """A parent parser holding one option shared by several commands, declared once."""
    parent = argparse.ArgumentParser(add_help=False)
    if flag == "--json":
        parent.add_argument("--json", action="store_true", help="machine-readable output")
    elif flag == "--db":
        parent.add_argument("--db", type=Path, default=None, help=f"results store (default {DEFAULT_DB}); a "
                            "reading command given one that does not exist stops (exit 2)")
    elif flag == "--record":
        parent.add_argument("--record", type=Path, default=DEFAULT_RECORD,
                            help=f"the committed record that reading commands layer the store over (default "
                            f"{DEFAULT_RECORD})")
    elif flag == "--matrix":
        parent.add_argument("--matrix", type=Path, default=DEFAULT_MATRIX,
                            help=f"matrix file (default {DEFAULT_MATRIX})")
    elif flag == "--envs":
        parent.add_argument("--envs", type=Path, default=DEFAULT_ROOT,
                            help=f"environments folder (default {DEFAULT_ROOT})")
    elif flag == "--jobs":
        parent.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1,
                            help="cores to use (a 2-rank case takes 2)")
    return parent


def build_parser() -> argparse.ArgumentParser:
    """The full `bugmatrix` parser, every command and option registered (the docs' CLI reference is generated
    from it)."""
    parser = argparse.ArgumentParser(prog="bugmatrix", description=__doc__)
    parser.add_argument("--cases-dir", type=Path, default=DEFAULT_CASES, help="folder of case folders")
    sub = parser.add_subparsers(dest="command", required=True)
    json_, db, matrix, envs, jobs, record = (_option(f) for f in ("--json", "--db", "--matrix", "--envs", "--jobs",
                                                                   "--record"))

    p_list = sub.add_parser("list", help="show the cases", parents=[json_])
    p_list.set_defaults(func=cmd_list)

    p_new = sub.add_parser("new", help="draft a case folder from an upstream issue or PR link (no network)")
    p_new.add_argument("url", help="https://github.com/<owner>/<repo>/issues/<N> or .../pull/<N> of pytorch, "
                       "torchrec, FBGEMM, Lightning or LitGPT")
    p_new.add_argument("--slug", required=True, help="a few lowercase words saying what breaks, e.g. "
                       "ddp-bool-buffer: the case is cases/<library>-<N>-<slug>/")
    p_new.add_argument("--packages", help="distributions the case needs, separated by commas (default: the "
                       "library's, e.g. torch,torchrec,fbgemm-gpu for torchrec)")
    p_new.set_defaults(func=cmd_new)

    p_run = sub.add_parser("run", help="run cases x variants x world sizes (here, or in matrix cells)",
                           parents=[json_, db, matrix, envs, jobs])
    p_run.add_argument("cases", nargs="*", help="case ids (substrings); default: all")
    p_run.add_argument("--device", action="append", choices=["cpu", "cuda"], help="default: cuda if present, else cpu")
    p_run.add_argument("--variant", action="append", help="only these variants (repeatable)")
    p_run.add_argument("--nproc", action="append", type=int, help="only these world sizes (repeatable)")
    p_run.add_argument("--python", default=sys.executable, help="interpreter of the environment to run in")
    p_run.add_argument("--cell", action="append", help="run in this matrix cell (repeatable); see `bugmatrix matrix`")
    p_run.add_argument("--all-cells", action="store_true", help="run in every cell of the matrix")
    p_run.add_argument("--disk-budget", type=_size, help="e.g. 30G: evict finished environments and cached torch "
                       "stacks to stay under it")
    p_run.add_argument("--no-store", action="store_true", help="do not record the results")
    p_run.add_argument("--repeat", type=_positive, default=1, metavar="K",
                       help="launch each job K times; if they disagree the result is `flaky`, with the tally")
    p_run.add_argument("--redo", action="store_true", help="launch again what the store already holds for the "
                       "same script, run settings and pins (by default a re-run resumes: it reuses those results)")
    p_run.set_defaults(func=cmd_run)
    p_matrix = sub.add_parser("matrix", help="show the cells of the matrix", parents=[json_, matrix])
    p_matrix.add_argument("--github", action="store_true",
                          help="print the nightly workflow's GitHub Actions job matrix (one line of JSON)")
    p_matrix.add_argument("--cells", default="", help="with --github: only these cells (names or globs, "
                          "separated by commas or spaces; default: all)")
    p_matrix.add_argument("--cases", default="", help="with --github: only the cases whose id contains one of "
                          "these substrings (separated by commas or spaces; default: all)")
    p_matrix.set_defaults(func=cmd_matrix)

    p_env = sub.add_parser("env", help="manage the cells' environments", parents=[matrix, envs])
    p_env.add_argument("action", choices=["list", "build", "prune"])
    p_env.add_argument("cells", nargs="*", help="cells to build (default: all); prune keeps these (default: none)")
    p_env.add_argument("--cache", action="store_true", help="prune: also clean torch stacks from uv's cache")
    p_env.set_defaults(func=cmd_env)

    p_report = sub.add_parser("report", help="the reproduce/fix picture across cells", parents=[db, matrix, record])
    p_report.add_argument("cases", nargs="*", help="case ids (substrings); default: every case in the store")
    p_report.add_argument("--run", help="only this run (default: the newest result of every case x cell)")
    p_report.add_argument("--format", choices=["table", "markdown", "html", "json", "cases"], default="table",
                          help="cases: one Markdown row per case (the README's cases table)")
    p_report.add_argument("-o", "--output", type=Path, help="write to this file instead of stdout")
    p_report.add_argument("--probes", action="store_true", help="include bisect probes (cells named bisect-*)")
    p_report.set_defaults(func=cmd_report)

    p_compare = sub.add_parser("compare", help="what changed between two runs (default: the latest two)",
                               parents=[json_, db, record])
    p_compare.add_argument("runs", nargs="*", help="RUN_A RUN_B (older, newer)")
    p_compare.add_argument("--against", type=Path, help="compare the newest run of --db with the newest of this store")
    p_compare.add_argument("--markdown", action="store_true", help="Markdown output (for a step summary)")
    p_compare.set_defaults(func=cmd_compare)

    p_bisect = sub.add_parser("bisect", help="find the release (and commit) where a case's outcome changes",
                              parents=[json_, db, matrix, envs, jobs, record])
    p_bisect.add_argument("case", help="case id (or a unique part of it)")
    p_bisect.add_argument("--package", required=True, help="the package to move, e.g. torchrec")
    p_bisect.add_argument("--variant", default="bug")
    p_bisect.add_argument("--nproc", type=int, help="world size (default: the case's largest)")
    p_bisect.add_argument("--device", choices=["cpu", "cuda"], default=None, help="default: cuda if present")
    p_bisect.add_argument("--old", "--good", dest="old", help="oldest version (default: the oldest allowed)")
    p_bisect.add_argument("--new", "--bad", dest="new", help="newest version (default: the newest allowed)")
    p_bisect.add_argument("--pre", action="store_true", help="include pre-releases")
    p_bisect.add_argument("--repeat", type=_positive, default=1, help="run each probe K times; disagreement is flaky")
    p_bisect.add_argument("--git", help="source repository (URL or local clone) for the commit-level bisection")
    p_bisect.add_argument("--old-ref", help="bisect commits from this ref (skips the release level)")
    p_bisect.add_argument("--new-ref", help="... to this ref")
    p_bisect.add_argument("--no-commits", action="store_true", help="stop at the release level")
    p_bisect.add_argument("--dates", type=_dates, metavar="START..END",
                          help="bisect the dev builds of these days (YYYY-MM-DD..YYYY-MM-DD) before commits")
    p_bisect.add_argument("--channel", help="the `indexes` entry serving the dev builds (e.g. PyTorch's nightly)")
    p_bisect.set_defaults(func=cmd_bisect)

    p_narrow = sub.add_parser("narrow", help="bisect every interval boundary in the store until it is adjacent",
                              parents=[json_, db, matrix, envs, jobs, record])
    p_narrow.add_argument("cases", nargs="*", help="case ids (substrings); default: every case with an interval")
    p_narrow.add_argument("--package", action="append", help="only boundaries along this package (repeatable)")
    p_narrow.add_argument("--device", action="append", choices=["cpu", "cuda"], help="only this device (repeatable)")
    p_narrow.add_argument("--commits", action="store_true", help="go on to first-parent commits (local clone)")
    p_narrow.add_argument("--repeat", type=_positive, default=1, help="run each probe K times; disagreement is flaky")
    p_narrow.add_argument("--dry-run", action="store_true", help="list the intervals, launch nothing")
    p_narrow.set_defaults(func=cmd_narrow)

    p_expect = sub.add_parser("expect", help="derive each variant's expect rules from the store's boundaries and "
                              "show the diff against case.yaml (--write: rewrite the expect blocks)",
                              parents=[json_, db, matrix, record])
    p_expect.add_argument("cases", nargs="*", help="case ids (substrings); default: every case with results")
    p_expect.add_argument("--variant", action="append", help="only these variants (repeatable)")
    p_expect.add_argument("--run", action="append", help="only the results of this run (repeatable; default: all)")
    p_expect.add_argument("--write", action="store_true", help="rewrite the changed expect blocks (comments, order "
                          "and the rest of the file kept) and record what they rest on in the record's rules.jsonl")
    p_expect.add_argument("--check", action="store_true", help="exit 1 when a case.yaml would change")
    p_expect.set_defaults(func=cmd_expect)

    p_compat = sub.add_parser(
        "compat",
        help="probe which torch works with which fbgemm-gpu, torchrec, lightning "
        "and litgpt, and show the measured table (see harness/analysis/compat.py)",
        parents=[json_, db, matrix, envs, jobs, record],
    )
    p_compat.add_argument(
        "--lane",
        action="append",
        choices=["fbgemm", "torchrec", "lightning", "litgpt"],
        help="probe only these lanes (repeatable; default: all)",
    )
    # open-ended: a release uploaded tonight is probed tonight (the README's table names its bounds)
    for lane, default in (("torch", ">=2.4"), ("fbgemm", ">=1.0"), ("lightning", ">=2.0"), ("litgpt", ">=0.4")):
        p_compat.add_argument(
            f"--{lane}",
            default=default,
            metavar="SPEC",
            help=f"{lane} releases to probe, the newest of each minor (default {default!r})",
        )
    p_compat.add_argument(
        "--disk-budget",
        type=_size,
        help="e.g. 25G: evict finished environments and cached torch stacks (the walk goes one torch at a time)",
    )
    p_compat.add_argument("--repeat", type=_positive, default=1, metavar="K", help="launch each probe K times")
    p_compat.add_argument("--redo", action="store_true", help="probe again what the store already holds")
    p_compat.add_argument("--resume-from", type=Path, action="append", metavar="STORE",
                          help="first copy the compat results of this store (a file, or a folder holding "
                          "nightly.db: last night's) into --db, so that only what is new is probed (repeatable)")
    p_compat.add_argument("--no-probe", action="store_true", help="probe nothing: show the table in the store")
    p_compat.add_argument(
        "--check",
        action="store_true",
        help="probe nothing; exit 1 when a pairing row of "
        "matrix.yaml claims a pairing the measurement contradicts, or misses one that works",
    )
    p_compat.add_argument(
        "--rows",
        action="store_true",
        help="probe nothing; print the pairing rows the measurement supports (matrix.yaml `couplings`)",
    )
    p_compat.add_argument(
        "--upgrade",
        nargs=2,
        metavar=("A", "B"),
        help="probe nothing; what the table says about "
        "moving from pinned set A to B (cell names, or torch=2.7.1,fbgemm-gpu=1.2.0) and which "
        "catalogue cases change outcome between them",
    )
    p_compat.add_argument(
        "--probes-dir", type=Path, help="folder of the probe scripts (default: probes/ beside harness/)"
    )
    p_compat.add_argument("--format", choices=["table", "markdown", "html", "json"], default="table")
    p_compat.add_argument("-o", "--output", type=Path, help="write the table to this file instead of stdout")
    p_compat.set_defaults(func=cmd_compat)

    from harness.commands import record as record_command

    record_command.add_parser(sub, {"--record": record, "--matrix": matrix})
    from harness.commands import audit as audit_command
    from harness.commands import osv as osv_command

    audit_command.add_parser(sub, {"--db": db, "--record": record})
    osv_command.add_parser(sub, {"--db": db, "--record": record})

    p_merge = sub.add_parser("merge", help="fold results stores (e.g. nightly shards) into one, without duplicates",
                             parents=[db])
    p_merge.add_argument("sources", nargs="+", type=Path)
    p_merge.set_defaults(func=cmd_merge)

    p_nightly = sub.add_parser("nightly", help="the nightly workflow's steps (.github/workflows/nightly.yml); "
                               "they write $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY when those are set")
    nightly_steps = p_nightly.add_subparsers(dest="step", required=True)
    n_plan = nightly_steps.add_parser("plan", help="the cell jobs' matrix (one line of JSON, output `matrix`)",
                                      parents=[matrix])
    n_plan.add_argument("--cells", default="", help="names or globs, separated by commas or spaces; default: all")
    n_plan.add_argument("--cases", default="", help="case-id substrings, separated by commas or spaces; "
                        "default: all")
    n_plan.add_argument("--cuda-runners", default="", help="'true': plan the CUDA cells too (a GPU runner is "
                        "registered); anything else leaves them out, with a notice")
    n_plan.set_defaults(func=cmd_nightly_plan)
    n_cell = nightly_steps.add_parser("cell", help="run one cell's cases into RESULTS/SLUG.db, keep the exit code "
                                      "as RESULTS/SLUG.exit-code, exit with it", parents=[matrix])
    n_cell.add_argument("--cell", required=True)
    n_cell.add_argument("--slug", help="file name for the cell (the plan's `slug`; default: the cell's name)")
    n_cell.add_argument("--cases", default="", help="case-id substrings (the plan's `cases`); default: all")
    n_cell.add_argument("--results", type=Path, default=Path("results"), help="folder (default: results)")
    n_cell.set_defaults(func=cmd_nightly_cell)
    n_baseline = nightly_steps.add_parser("baseline", help="download the newest successful scheduled nightly's "
                                          "results (gh) into a folder; output `found`")
    n_baseline.add_argument("--dir", type=Path, default=Path("previous"), help="folder (default: previous)")
    n_baseline.set_defaults(func=cmd_nightly_baseline)
    n_aggregate = nightly_steps.add_parser("aggregate", help="merge the shards, report, compare with the baseline; "
                                           "exit 1 only on an unexpected regression", parents=[matrix])
    n_aggregate.add_argument("--shards", type=Path, default=Path("shards"),
                             help="the cells' SLUG.db and SLUG.exit-code files (default: shards)")
    n_aggregate.add_argument("--results", type=Path, default=Path("results"),
                             help="writes nightly.db, report.html, compare.json here (default: results)")
    n_aggregate.add_argument("--plan", default="", help="the plan step's matrix (JSON): the cells expected")
    n_aggregate.add_argument("--baseline", type=Path, help="compare with this store (or `nightly baseline` "
                             "folder) instead of the committed record (--record), the nightly's baseline")
    n_aggregate.add_argument("--record", type=Path, default=DEFAULT_RECORD,
                             help=f"the committed record: the baseline (default {DEFAULT_RECORD})")
    n_aggregate.set_defaults(func=cmd_nightly_aggregate)
    n_issues = nightly_steps.add_parser("issues", help="open or comment on one issue per unexpectedly regressed "
                                        "case (gh)")
    n_issues.add_argument("--compare", type=Path, default=Path("results/compare.json"),
                          help="the aggregate step's compare.json (default: results/compare.json)")
    n_issues.add_argument("--run-url", required=True, help="the nightly run, linked from each issue")
    n_issues.add_argument("--dry-run", action="store_true", help="print the plan as JSON; open nothing")
    n_issues.set_defaults(func=cmd_nightly_issues)
    n_record = nightly_steps.add_parser("record-pr", help="fold tonight's results into the record and open or "
                                        "update one pull request carrying the record's diff and the expect rules it "
                                        "calls for (git, gh)", parents=[matrix, record])
    n_record.add_argument("--db", type=Path, default=Path("results/nightly.db"),
                          help="tonight's merged store (default: results/nightly.db)")
    n_record.add_argument("--run-url", required=True, help="the nightly run, linked from the pull request")
    n_record.add_argument("--branch", default="bugmatrix/record", help="the pull request's branch "
                          "(default: bugmatrix/record)")
    n_record.add_argument("--page", type=Path, default=Path("README.md"),
                          help="the page whose generated tables the pull request updates (default: README.md)")
    n_record.add_argument("--dry-run", action="store_true", help="print the pull request's body; write nothing")
    n_record.set_defaults(func=cmd_nightly_record_pr)
    return parser


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number")
    return value


def _dates(text: str) -> tuple[date, date]:
    start, sep, end = text.partition("..")
    try:
        first, last = date.fromisoformat(start), date.fromisoformat(end)
    except ValueError:
        first = last = None  # type: ignore[assignment]
    if not sep or first is None or last is None or first > last:
        raise argparse.ArgumentTypeError(f"{text!r} is not a range of days like 2025-08-01..2025-08-31")
    return first, last


def _size(text: str) -> int:
    units = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    number, unit = text.upper().rstrip("B")[:-1], text.upper().rstrip("B")[-1:]
    if unit not in units or not unit.isalpha():
        number, unit = text.upper().rstrip("B"), ""
    try:
        return int(float(number) * units[unit])
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size like 30G") from None


def cmd_list(args: argparse.Namespace) -> int:
    """Print the cases (table or JSON); invalid case folders are listed as errors and make the exit code 1; a
    missing cases folder is an error (2), an empty one lists nothing (5, as pytest says when no test ran)."""
    cases, errors = _cases(args)
    if args.json:
        print(to_json({"cases": [case_row(c) for c in cases], "errors": [str(e) for e in errors]}))
    else:
        console = make_console()
        console.print(cases_table(cases))
        for error in errors:
            console.print(f"[red]invalid case[/] {error}", soft_wrap=True)
    if not cases and not errors:
        make_console(stderr=True).print(f"[red]no cases in {args.cases_dir}[/]", soft_wrap=True)
        return NOTHING_RAN
    return 1 if errors else 0


def cmd_new(args: argparse.Namespace) -> int:
    """Write `cases/<library>-<N>-<slug>/{case.yaml,repro.py}`, a draft that can only skip until a person writes it
    (see `harness.model.scaffold`); an unknown link, a bad slug or an existing folder is a one-line error (2)."""
    from harness.model import scaffold

    try:
        upstream = scaffold.parse_url(args.url)
        case_id = scaffold.case_id(upstream, args.slug)
        packages = scaffold.parse_packages(args.packages, upstream.library)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not args.cases_dir.is_dir():
        raise UsageError(f"--cases-dir {args.cases_dir}: no such folder")
    folder = args.cases_dir / case_id
    if folder.exists():
        raise UsageError(f"{folder} already exists: nothing written (choose another --slug, or edit that case)")
    taken = sorted(p.name for p in args.cases_dir.glob(f"{upstream.library.name}-{upstream.number}-*"))
    folder.mkdir()
    (folder / "case.yaml").write_text(scaffold.render_case_yaml(upstream, args.slug, packages))
    (folder / "repro.py").write_text(scaffold.render_repro(upstream, packages))
    console = make_console()
    console.print(escape(f"wrote {folder}/case.yaml and {folder}/repro.py (packages: {', '.join(packages)})"),
                  soft_wrap=True, highlight=False)
    if taken:
        console.print(f"[yellow]note:[/] {upstream.ref} already has a case: {', '.join(taken)}", soft_wrap=True,
                      highlight=False)
    console.print(f'until both files are written, `bugmatrix run {case_id}` can only skip ("{scaffold.NOT_WRITTEN}"); '
                  'see cases/README.md, "Starting a case"', soft_wrap=True, highlight=False)
    return 0


NOTHING_RAN = 5  # pytest's exit code when no test ran: a selection that matches nothing, a run where nothing could


def _cases(args: argparse.Namespace, patterns: list[str] | None = None) -> tuple[list[Case], list[CaseError]]:
    """The cases of --cases-dir (only the folders whose name contains one of `patterns`, when given: a run of one
    case loads one case)."""
    if not args.cases_dir.is_dir():
        raise UsageError(f"--cases-dir {args.cases_dir}: no such folder")
    return discover(args.cases_dir, patterns)


def cmd_run(args: argparse.Namespace) -> int:
    """Run the selected cases (here, or across matrix cells); exit 0 only when every observed outcome that counts
    equals the expected one (see `harness.model.result.misses`), 5 when the selection matches nothing or nothing
    could run, and record nothing for a selection that matches nothing."""
    prefetch_gpus()  # where only nvidia-smi can count the GPUs, its 0.3-1 s overlaps the loading and listing below
    err = make_console(stderr=True)
    cases, errors = _cases(args, args.cases)
    for error in errors:
        err.print(f"[red]invalid case[/] {error}", soft_wrap=True)
    selection = Selection(cases=tuple(args.cases), variants=tuple(args.variant or ()), nprocs=tuple(args.nproc or ()),
                          devices=tuple(args.device or ()), cells=tuple(args.cell or ()), all_cells=args.all_cells)
    environments: Environments
    if selection.in_matrix:
        try:
            matrix = _matrix(args.matrix)
            jobs = plan_cells(cases, matrix, selection)
        except MatrixError as exc:
            err.print(f"[red]invalid matrix[/] {exc}", soft_wrap=True)
            return 2
        environments = MatrixEnvironments(_cell_environments(matrix, args.envs, args.disk_budget))
        python = None
    else:
        try:
            env = inspect_interpreter(args.python)
        except InterpreterError as exc:
            err.print(f"[red]cannot use the environment[/] {exc}", soft_wrap=True)
            return 2
        jobs = plan_local(cases, selection)
        environments, python = LocalEnvironment(env), env
    if not jobs:
        why = selection.unmatched(cases) or ["the selection leaves no job" + (f" in {args.cases_dir}" if cases
                                                                               else f": no cases in {args.cases_dir}")]
        err.print(f"[red]nothing to run:[/] {'; '.join(why)} (nothing recorded)", soft_wrap=True)
        return NOTHING_RAN
    store = open_store(args)
    collector = Collector()
    terminal = is_terminal()
    observers: list[Observer] = [collector]
    with (
        recording(store, " ".join(sys.argv), machine_name()) as run_id,
        progress_bar("matrix" if selection.in_matrix else "running", err, transient=True,
                     disable=args.json or not terminal) as progress,
    ):
        observers += [Recorder(store, run_id), ProgressDisplay(progress) if terminal else LaunchLines(err)]
        session = Session(environments, resume=Resume(store, redo=args.redo), repeat=args.repeat,
                          observers=observers)
        results = session.run(jobs, cores=args.jobs)
    missed = misses(results)
    counted = [r for r in results if counts(r)]
    code = 0 if not missed and not errors else 1
    if not counted:
        code = NOTHING_RAN
    cells = [job.cell_name for job in jobs]
    if args.json:
        payload: dict[str, object] = {"ok": code == 0, "run_id": run_id, "errors": [str(e) for e in errors],
                                      "reused": [r.item_id for r in collector.reused]}
        if python is not None:
            payload["python"] = python.python
        rows = [{"cell": cell, **r.model_dump(mode="json")} for cell, r in zip(cells, results, strict=True)]
        print(to_json({**payload, "results": rows}))
        return code
    console = make_console()
    console.print(results_table(results, cells=cells if selection.in_matrix else None))
    if run_id:
        console.print(f"recorded as run {run_id} in {store.path}"
                      + ("; `bugmatrix report` shows the matrix" if selection.in_matrix else ""))
    if collector.reused:
        console.print(f"{len(collector.reused)} result(s) reused from earlier runs with the same script, run settings "
                      "and pins (not launched again; `--redo` launches them)")
    if python is not None:
        console.print(f"environment: {python.python} (Python {python.python_version}): {versions_line(results)}")
    console.print(f"[{'green' if code == 0 else 'red'}]{summary_line(results, len(errors))}[/]", soft_wrap=True)
    return code


def summary_line(results: list[Result], invalid: int = 0) -> str:
    """`N as expected, M not[, K skipped: reason (count), ...][, I invalid case(s)]`: skips apart, never as expected."""
    missed = misses(results)
    counted = [r for r in results if counts(r)]
    skipped = Counter(r.reason for r in results if not counts(r))
    line = f"{len(counted) - len(missed)} as expected, {len(missed)} not"
    if skipped:
        reasons = ", ".join(f"{why} ({n})" if len(skipped) > 1 else why for why, n in skipped.most_common(3))
        more = f", and {len(skipped) - 3} more reason(s)" if len(skipped) > 3 else ""
        line += f", {sum(skipped.values())} skipped: {reasons}{more}"
    return line + (f", {invalid} invalid case(s)" if invalid else "")


def open_reader(args: argparse.Namespace, writable: bool = False) -> ResultStore:
    """What a reading command reads: the record (`--record`) with the local store (`--db`) layered over it; with
    `writable`, the local store is opened to record probes (see harness/session/readers.py)."""
    from harness.model.case import PROBES_DIR
    from harness.session.readers import open_reader as layered

    return layered(args.db, args.db_given, discover(args.cases_dir)[0], args.record, writable,
                   getattr(args, "probes_dir", None) or PROBES_DIR)


def open_store(args: argparse.Namespace) -> ResultStore:
    """The store a command records in: `--db` (default .bugmatrix/results.db), or nothing with `--no-store`."""
    return NullStore() if getattr(args, "no_store", False) else ResultStore(args.db)


def cmd_matrix(args: argparse.Namespace) -> int:
    """Print the matrix's cells with their pins (table or JSON)."""
    from harness.output.github import job_matrix

    try:
        matrix = _matrix(args.matrix)
    except MatrixError as exc:
        make_console(stderr=True).print(f"[red]invalid matrix[/] {exc}", soft_wrap=True)
        return 2
    if args.github:
        try:
            print(json.dumps(job_matrix(matrix, cells=args.cells, cases=args.cases)))
        except (MatrixError, ValueError) as exc:
            make_console(stderr=True).print(f"[red]cannot plan the GitHub job matrix[/] {exc}", soft_wrap=True)
            return 2
        return 0
    rows = [{"name": c.name, "device": c.device, "python": c.python, "group": c.group,
             "pins": {k: (v if isinstance(v, str) else f"git:{v.git}") for k, v in c.pins.items()},
             "problem": matrix.problems.get(c.name)}
            for c in matrix.cells]
    if args.json:
        print(to_json(rows))
        return 0
    table = Table(title=f"{len(rows)} cells in {args.matrix}")
    for column in ("cell", "device", "python", "pins"):
        table.add_column(column, overflow="fold")
    whole_columns(table, [[row["name"], row["device"], row["python"],
                           " ".join(f"{k}{_pin_op(v)}" for k, v in sorted(row["pins"].items()))] for row in rows],
                  {"cell"})
    err = make_console(stderr=True)
    for name, problem in matrix.problems.items():
        err.print(f"[yellow]infra[/] {name}: {escape(problem)}", soft_wrap=True)
    make_console().print(table)
    return 0


def _pin_op(pin: str) -> str:
    return f" {pin}" if pin[:1] in "=<>~!" else f"=={pin}" if not pin.startswith("git:") else f" @ {pin}"


def cmd_env(args: argparse.Namespace) -> int:
    """`env list|build|prune`: show, build (with progress) or delete the cells' environments."""
    from harness.matrix.envcache import EnvCache, clean_cache, disk_usage
    from harness.matrix.resolve import resolve_cell

    cache = EnvCache(args.envs)
    console = make_console()
    if args.action == "list":
        table = Table(title=f"environments in {args.envs}")
        for column in ("key", "cell", "versions", "as of", "size"):
            table.add_column(column, overflow="fold")
        rows = [[str(env["key"]), str(env["cell"]),
                 " ".join(f"{k}=={v}" for k, v in sorted(env["versions"].items())),  # type: ignore[union-attr]
                 str(env["as_of"] or "-"), f"{disk_usage(cache.path(str(env['key']))) / (1 << 30):.2f} GiB"]
                for env in cache.list()]
        console.print(whole_columns(table, rows, {"key", "cell"}))
        return 0
    try:
        matrix = _matrix(args.matrix)
        cells = [matrix.cell(n) for n in args.cells] if args.cells else matrix.cells
    except MatrixError as exc:
        console.print(f"[red]invalid matrix[/] {exc}", soft_wrap=True)
        return 2
    if args.action == "prune":
        keep = {resolve_cell(matrix, c).key for c in cells} if args.cells else set()
        removed = cache.prune(keep)
        console.print(f"removed {len(removed)} environment(s)")
        if args.cache:
            console.print(clean_cache() or "uv cache: nothing to clean")
        return 0
    failed = 0
    with progress_bar("building", console) as progress:
        task = progress.add_task("", total=len(cells))
        for cell in cells:
            progress.update(task, description=cell.name)
            try:
                status = cache.build(resolve_cell(matrix, cell))
            except MatrixError as exc:
                status = None
                progress.console.print(f"[yellow]infra[/] {cell.name}: {exc}", soft_wrap=True)
            if status is not None:
                line = "reused" if status.reused else f"built in {status.seconds:.1f}s"
                if status.ok:
                    progress.console.print(f"[green]ok[/] {cell.name}: {line} ({status.key})")
                else:
                    progress.console.print(f"[yellow]infra[/] {cell.name}: {status.error}", soft_wrap=True)
            failed += status is None or not status.ok
            progress.advance(task)
    return 1 if failed else 0


def cmd_merge(args: argparse.Namespace) -> int:
    """Fold other stores into --db; prints how many results were new."""
    try:
        added = ResultStore(args.db).merge(args.sources)
    except StoreError as exc:
        make_console(stderr=True).print(f"[red]cannot merge[/] {exc}", soft_wrap=True)
        return 2
    make_console().print(f"merged {len(args.sources)} store(s) into {args.db}: {added} new result(s)")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """Render the matrix report from the store (newest result per case x cell, or one run)."""
    from harness.output import reports as matrix_report

    results = open_reader(args).latest(args.run)
    if args.cases:
        results = [(cell, r) for cell, r in results if any(part in r.case for part in args.cases)]
    if not results:
        which = f" for run {args.run}" if args.run else ""
        make_console(stderr=True).print(f"[yellow]no results in {args.record} or {args.db}{which}[/]")
        return 1
    try:
        matrix = _matrix(args.matrix) if args.matrix.is_file() else None
    except MatrixError:
        matrix = None
    report = matrix_report.report_for(results, args.cases_dir, [c.name for c in matrix.cells] if matrix else [],
                                      matrix, probes=args.probes or bool(args.run))
    if args.cases:  # the cases asked for, also those with no result (said as not measured)
        report.cases = {k: c for k, c in report.cases.items() if any(part in k for part in args.cases)}
    if args.format == "table":
        console = Console(file=args.output.open("w"), width=LOG_WIDTH) if args.output else make_console()
        console.print(matrix_report.to_table(report))
        return 0
    text = {"markdown": matrix_report.to_markdown, "html": matrix_report.to_html,
            "json": matrix_report.to_json, "cases": matrix_report.to_cases_markdown}[args.format](report)
    if args.output:
        args.output.write_text(text)
        make_console(stderr=True).print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    """Print fixes, regressions and changed errors between two runs; exit 1 on an unexpected regression."""
    from harness.analysis.compare import compare, comparison
    from harness.output import reports as matrix_report

    err = make_console(stderr=True)
    store = open_reader(args)
    if args.against:
        if not args.against.is_file():
            err.print(f"[yellow]no previous results at {args.against}: nothing to compare[/]")
            return 0
        old, new = ResultStore(args.against, readonly=True).latest(), store.latest()
        names = (str(args.against), str(args.db))
    else:
        runs = [r.run_id for r in store.runs(with_results=True)]  # an empty run is never compared
        names = tuple(args.runs) if len(args.runs) == 2 else tuple(runs[-2:])
        if len(names) != 2 or any(n not in runs for n in names):
            err.print(f"[red]need two runs with results to compare[/] (in {args.db}: {', '.join(runs) or 'none'})",
                      soft_wrap=True)
            return 2
        old, new = store.latest(names[0]), store.latest(names[1])
    changes = compare(old, new)
    unexpected = [c for c in changes if c.unexpected]
    if args.json:
        print(to_json(comparison(changes, names[0], names[1])))
    elif args.markdown:
        sys.stdout.write(matrix_report.to_markdown_changes(changes, names))
    else:
        console = make_console()
        console.print(f"comparing {names[0]} -> {names[1]}: {len(changes)} change(s)")
        marks = {"regressed": "[bold red]+[/]", "fixed": "[green]-[/]", "flaky": "[magenta]~[/]",
                 "changed": "[yellow]x[/]"}
        for c in changes:
            note = " [bold red](unexpected)[/]" if c.unexpected else f" ({c.tally})" if c.tally else ""
            console.print(f"{marks[c.kind]} {c.kind:9} {c.item}: {shown(c.before)} -> {shown(c.after)}{note}",
                          soft_wrap=True)
    return 1 if unexpected else 0


def cmd_narrow(args: argparse.Namespace) -> int:
    """Narrow every interval boundary of the record's and the store's results (see harness/analysis/narrow.py); 0
    when every boundary it looked at is adjacent afterwards, 1 when some could not be narrowed (each says why) or,
    with --dry-run, while any interval is listed; 5 when there is no result at all."""
    from harness.analysis.narrow import comments, interval_targets, narrow, selected_axes
    from harness.analysis.precision import between_on_index

    err = make_console(stderr=True)
    cases = {c.id: c for c in _cases(args, args.cases)[0]}
    matrix = _matrix(args.matrix)
    store = open_reader(args, writable=not args.dry_run)
    between = between_on_index(matrix, cases)
    latest = store.latest()
    if not latest:  # nothing measured is never "every boundary is adjacent"
        err.print(f"no results in {args.record} or {args.db}: nothing to narrow", soft_wrap=True, highlight=False)
        return NOTHING_RAN
    chosen = selected_axes(latest, cases, matrix, set(args.package or ()), set(args.device or ()),
                           set(cases) if args.cases else None)
    targets = interval_targets(chosen, between, matrix)
    undated = [axis for axis in chosen if axis.unplaced]
    for axis in undated:  # a boundary may hide among them: never say "every boundary is adjacent" over them
        err.print(f"{axis.case}::{axis.variant} ({axis.device}) over {axis.package}: {axis.unplaced_text()}",
                  soft_wrap=True, markup=False, highlight=False)
    if args.dry_run or not targets:
        for t in targets:
            print(f"{t.axis.case}::{t.axis.variant} ({t.axis.device}) over {t.axis.package}: {t.boundary.text()}")
        if not targets and undated:
            err.print(f"no interval boundary among the placed results; {len(undated)} axis(es) above hold commits "
                      "that cannot be placed without a local clone", soft_wrap=True)
            return 1
        if not targets:
            err.print("no interval boundary to narrow: every boundary in the record and the store is adjacent",
                      soft_wrap=True, highlight=False)
        return 1 if targets else 0  # --dry-run: exit 1 while an interval is left (as `expect --check`)
    with recording(store, " ".join(sys.argv), machine_name()) as run_id:
        done = narrow(targets, cases, matrix, _cell_environments(matrix, args.envs), store, run_id,
                      commits=args.commits, cores=args.jobs, repeat=args.repeat,
                      say=lambda line: err.print(line, soft_wrap=True, markup=False, highlight=False))
    left = [d for d in done if d.found is None or d.found.ambiguous]
    pasted = comments(done, store.latest(), cases, between, matrix)
    if args.json:
        print(to_json({"run_id": run_id, "comments": pasted, "narrowed": [
            {"case": d.target.axis.case, "variant": d.target.axis.variant, "device": d.target.axis.device,
             "package": d.target.axis.package, "before": d.target.boundary.text(), "after": d.line(),
             "level": d.level, "probes": [{"candidate": c, "outcome": o.value} for c, o, _ in d.probes],
             "why_not": d.why_not} for d in done]}))
    else:
        console = make_console()
        for d in done:
            console.print(f"bugmatrix narrow: {d.line()}", soft_wrap=True, markup=False, highlight=False)
        for text in pasted:
            console.print("\nPaste upstream:\n" + text, soft_wrap=True, markup=False, highlight=False)
        console.print(f"{len(done) - len(left)} boundary(ies) narrowed to adjacent versions, {len(left)} not")
    return 1 if left else 0


def cmd_expect(args: argparse.Namespace) -> int:
    """Derive expect rules from the store (see harness/analysis/expect.py): print each variant's rules and the diff
    against case.yaml, or write it; 0 when every variant with results was derived, 1 when one was refused (each
    says why) or, with --check, a file would change; 5 when the store holds no result for the cases."""
    import datetime

    from harness.analysis.expect import derive_all, measurements, rewrite, write_case
    from harness.analysis.precision import between_on_index

    err = make_console(stderr=True)
    cases = _cases(args, args.cases)[0]
    matrix = _matrix(args.matrix) if args.matrix.is_file() else None
    between = between_on_index(matrix, {c.id: c for c in cases}) if matrix is not None else None
    derivations = derive_all(cases, measurements(open_reader(args), args.run), between, args.variant or ())
    if not derivations:
        err.print(f"no results in {args.record} or {args.db} for the selected cases and variants", soft_wrap=True)
        return NOTHING_RAN
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    edits, written = [], []
    for case in cases:
        edit = rewrite(case, [d for d in derivations if d.case.id == case.id], today)
        if edit is not None:
            edits.append(edit)
            if args.write:
                write_case(edit)
                written.append(str(edit.path))
    if args.write and edits:  # what the new rules rest on: in the record, not in the hand-written case file
        from harness.session.record import load, write

        record = load(args.record)
        for d in derivations:
            if d.changed and d.new is not None:
                record.set_rules(d.provenance(today))
        written += [str(args.record / name) for name in write(args.record, record)]
    refused = [d for d in derivations if d.new is None]
    if args.json:
        print(to_json({"derivations": [{"case": d.case.id, "variant": d.variant, "package": d.package,
                                        "refused": d.refused or None, "changed": d.changed,
                                        "rules": None if d.new is None else [r.model_dump(mode="json") for r in d.new],
                                        "boundaries": d.boundaries, "notes": d.notes} for d in derivations],
                       "diffs": {str(e.path): e.diff for e in edits}, "written": written}))
    else:
        for d in derivations:
            print(d.summary())
            for note in d.notes:
                print(f"  note: {note}")
        for edit in edits:
            sys.stdout.write(edit.diff)
        for path in written:
            err.print(f"wrote {path}", soft_wrap=True, highlight=False, markup=False)
        if edits and not args.write:
            err.print(f"{len(edits)} case file(s) would change: `bugmatrix expect --write` rewrites them",
                      soft_wrap=True, highlight=False, markup=False)
    return 1 if refused or (args.check and edits and not args.write) else 0


def cmd_compat(args: argparse.Namespace) -> int:
    """Probe the compatibility grid (unless told to probe nothing), then show, check or compare the measured table:
    0, or 1 when --check finds a disagreement (or a probe of this run could not be established)."""
    from harness.analysis import compat
    from harness.output import compat as view

    err = make_console(stderr=True)
    matrix = _matrix(args.matrix)
    probing = not (args.no_probe or args.check or args.rows or args.upgrade)
    store = open_reader(args, writable=probing or bool(args.resume_from))
    unknown = 0
    for source in args.resume_from or ():
        path = source / "nightly.db" if source.is_dir() else source
        if path.is_file():
            added = store.merge([path], compat_only=True)
            err.print(f"resumed from {path}: {added} compat result(s) copied", soft_wrap=True, highlight=False)
        else:
            err.print(f"no store at {path}: nothing to resume from", soft_wrap=True, highlight=False)
    if probing:
        lanes = args.lane or list(compat.LANES)
        ranges = {"torch": args.torch, "fbgemm": args.fbgemm, "lightning": args.lightning, "litgpt": args.litgpt}
        grid = compat.Grid.from_index(matrix, ranges, lanes)
        found = compat.load_probes(args.probes_dir) if args.probes_dir else compat.load_probes()
        probes = {lane: case for lane, case in found.items() if lane in lanes}
        err.print(
            f"compat grid: torch {', '.join(grid.torch)}; "
            + "; ".join(f"{lane} {', '.join(v)}" for lane, v in grid.partners.items() if lane in lanes),
            soft_wrap=True,
            highlight=False,
        )
        terminal = is_terminal()
        with (
            recording(store, " ".join(sys.argv), machine_name()) as run_id,
            progress_bar("compat", err, transient=True, disable=args.json or not terminal) as progress,
        ):
            done = compat.walk(
                grid,
                probes,
                matrix,
                _cell_environments(matrix, args.envs),
                store,
                run_id,
                cores=args.jobs,
                repeat=args.repeat,
                redo=args.redo,
                disk_budget=args.disk_budget,
                observers=[ProgressDisplay(progress) if terminal else LaunchLines(err)],
                say=lambda line: err.print(line, soft_wrap=True, highlight=False, markup=False),
            )
        unknown = sum(1 for _, r in done if compat.verdict(r)[0] is compat.Kind.UNKNOWN)
        err.print(
            f"recorded as run {run_id} in {store.path}: {len(done)} probe(s), {unknown} not established",
            soft_wrap=True,
            highlight=False,
        )
    table = compat.measured(store)
    if args.upgrade:
        before, after = (compat.pinned_set(text, matrix) for text in args.upgrade)
        up = compat.upgrade(table, before, after, store.latest())
        text = view.upgrade_text(up, markdown=args.format == "markdown")
        return _write(args, text)
    findings = compat.check(table, matrix) if args.check else None
    if args.rows:
        return _write(args, view.rows_yaml(compat.generated_rows(table, matrix)))
    if args.json or args.format == "json":
        code = _write(args, view.to_json(table, findings))
    elif args.format == "markdown":
        code = _write(args, view.to_markdown(table, findings))
    elif args.format == "html":
        code = _write(args, view.to_html(table))
    else:
        console = Console(file=args.output.open("w"), width=LOG_WIDTH) if args.output else make_console()
        for grid_table in view.to_table(table):
            console.print(grid_table)
        if findings is not None:
            console.print(view.findings_text(findings), soft_wrap=True, markup=False, highlight=False)
        code = 0
    if not table:
        err.print(f"no compat probes in {args.record} or {args.db}", soft_wrap=True)
    return 1 if findings or unknown else code


def _write(args: argparse.Namespace, text: str) -> int:
    """Write `text` to --output (saying so) or stdout; 0."""
    if getattr(args, "output", None):
        args.output.write_text(text)
        make_console(stderr=True).print(f"wrote {args.output}", soft_wrap=True, highlight=False)
    else:
        sys.stdout.write(text)
    return 0


def cmd_bisect(args: argparse.Namespace) -> int:
    """Release-level, then commit-level bisection; 0 when a boundary was found, 1 when refused or ambiguous."""
    from harness.analysis.bisect import BisectError, BisectRequest, bisect, bisect_commands, bisect_summary
    from harness.analysis.search import BisectRefused
    from harness.matrix.git import GitError

    err = make_console(stderr=True)
    cases, _ = discover(args.cases_dir)
    matches = [c for c in cases if c.id == args.case] or select(cases, [args.case])
    if len(matches) != 1:
        err.print(f"[red]case {args.case!r} matches {len(matches)} cases[/] ({', '.join(c.id for c in matches)})")
        return 2
    case = matches[0]
    if args.variant not in case.spec.variants:
        err.print(f"[red]{case.id} has no variant {args.variant!r}[/] ({', '.join(case.spec.variants)})")
        return 2
    request = BisectRequest(
        case, args.variant, args.nproc or max(case.spec.nproc), args.device or default_devices()[0], args.package,
        args.old, args.new, args.pre, args.repeat, args.jobs, args.git, args.old_ref, args.new_ref,
        commits=not args.no_commits, dates=args.dates, channel=args.channel,
    )
    store = open_reader(args, writable=True)
    with recording(store, " ".join(sys.argv), machine_name()) as run_id:
        try:
            matrix = _matrix(args.matrix)
            levels = bisect(matrix, _cell_environments(matrix, args.envs), request, store, run_id,
                            say=lambda line: err.print(line, soft_wrap=True))
        except (BisectError, BisectRefused, MatrixError, GitError) as exc:  # a refusal is a complete, recorded run
            err.print(f"[red]bisect refused:[/] {exc}", soft_wrap=True)
            return 1
    summary = bisect_summary(case.id, args.variant, args.package, levels)
    if args.json:
        print(to_json({"run_id": run_id, "summary": summary, "levels": [
            {"level": level, "old": r.old.value, "new": r.new.value, "last_old": str(r.last_old),
             "first_new": str(r.first_new), "ambiguous": [str(a) for a in r.ambiguous],
             "first_new_subject": getattr(r.first_new, "subject", None),
             "probes": [{"candidate": str(c), "outcome": o.value} for c, o in r.probes]} for level, r in levels]}))
    else:
        console = make_console()
        for level, r in levels:
            console.print(f"{level} level: {len(r.probes)} probes: "
                          + ", ".join(f"{c}={o.value}" for c, o in r.probes), soft_wrap=True)
        console.print(summary, soft_wrap=True, markup=False, highlight=False)
        if levels:
            console.print("\nTo reproduce each side anywhere:", highlight=False)
            for command in bisect_commands(case, levels[-1][1], store.results(run_id), matrix):
                console.print(command, soft_wrap=True, markup=False, highlight=False)
    return 1 if any(r.ambiguous for _, r in levels) else 0


def cmd_nightly_plan(args: argparse.Namespace) -> int:
    """`nightly plan`: the job matrix of the nightly's cell jobs (see harness/output/nightly.py)."""
    from harness.output import nightly

    actions = nightly.Actions.from_env()
    try:
        matrix = _matrix(args.matrix)
    except MatrixError as exc:
        actions.annotate("error", "Invalid matrix", str(exc))
        return 2
    return nightly.run_plan(matrix, args.cells, args.cases, nightly.truthy(args.cuda_runners), actions)


def cmd_nightly_cell(args: argparse.Namespace) -> int:
    """`nightly cell`: `bugmatrix run` in one cell, its exit code kept for the aggregate job."""
    from harness.output import nightly

    def runner(argv: list[str]) -> int:
        return main(["--cases-dir", str(args.cases_dir), *argv])

    return nightly.run_cell(args.cell, args.slug or args.cell, args.cases, args.results, runner,
                            nightly.Actions.from_env(), matrix=args.matrix)


def cmd_nightly_baseline(args: argparse.Namespace) -> int:
    """`nightly baseline`: the previous successful scheduled nightly's results, downloaded with gh."""
    from harness.output import nightly

    return nightly.fetch_baseline(args.dir, nightly.run_gh, nightly.Actions.from_env())


def cmd_nightly_aggregate(args: argparse.Namespace) -> int:
    """`nightly aggregate`: merge, report, compare, decide."""
    from harness.output import nightly

    actions = nightly.Actions.from_env()
    try:
        include = nightly.read_plan(args.plan)
    except (ValueError, KeyError, TypeError) as exc:
        actions.annotate("error", "Invalid plan", f"--plan is not the plan step's matrix: {exc}")
        return 2
    try:
        matrix = _matrix(args.matrix) if args.matrix.is_file() else None
    except MatrixError:
        matrix = None  # the report then has no upload dates
    try:
        decided = nightly.aggregate(args.shards, args.results, include, args.baseline, args.cases_dir, actions,
                                    matrix, record_root=args.record)
    except StoreError as exc:
        actions.annotate("error", "Cannot merge", str(exc))
        return 2
    return decided.exit_code


def cmd_nightly_issues(args: argparse.Namespace) -> int:
    """`nightly issues`: one issue per unexpectedly regressed case, opened or commented on with gh."""
    from harness.output import nightly

    return nightly.open_issues(args.compare, args.run_url, nightly.run_gh, nightly.Actions.from_env(),
                               dry_run=args.dry_run)


def cmd_nightly_record_pr(args: argparse.Namespace) -> int:
    """`nightly record-pr`: one pull request with tonight's results folded into the record, and the expect rules
    they call for."""
    from harness.output import nightly

    try:
        matrix = _matrix(args.matrix) if args.matrix.is_file() else None
    except MatrixError:
        matrix = None  # every boundary is then unknown: nothing is derived, each variant says why
    return nightly.open_record_pr(args.db, args.record, args.cases_dir, matrix, args.run_url, nightly.run_gh,
                                  nightly.run_git, nightly.Actions.from_env(), branch=args.branch,
                                  dry_run=args.dry_run, page=args.page, refresh=matrix is not None)
