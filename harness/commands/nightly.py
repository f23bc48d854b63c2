"""`bugmatrix nightly plan|cell|baseline|aggregate|issues|record-pr|feed|wheel`: the nightly workflow's steps
(.github/workflows/nightly.yml); they write $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY when those are set. What each
step decides is in harness/workflows/nightly.py; the cell step drives `bugmatrix run`'s session directly
(`harness.commands.run.execute`), never through a command line.

Exit codes: as each step says (`plan`: 2 an invalid matrix or an empty plan; `cell`: the run's own code; `aggregate`:
1 only on an unexpected regression, a warm/cold difference or when no cell left results, 2 an invalid plan or shard;
the others 0, or 2 on bad input).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.context import Context
from harness.matrix.basics import MatrixError
from harness.model.errors import BugmatrixError, StepError, UsageError
from harness.model.exitcode import ExitCode
from harness.session.basics import NIGHTLY_DB, RECORD_FALLBACK, default_record


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `nightly` and its steps, with their options."""
    matrix, record = parents["--matrix"], parents["--record"]
    p_nightly = sub.add_parser(
        "nightly",
        help="the nightly workflow's steps (.github/workflows/nightly.yml); "
        "they write $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY when those are set",
    )
    nightly_steps = p_nightly.add_subparsers(dest="step", required=True)
    n_plan = nightly_steps.add_parser(
        "plan", help="the cell jobs' matrix (one line of JSON, output `matrix`)", parents=[matrix]
    )
    n_plan.add_argument("--cells", default="", help="names or globs, separated by commas or spaces; default: all")
    n_plan.add_argument("--cases", default="", help="case-id substrings, separated by commas or spaces; default: all")
    n_plan.add_argument(
        "--cuda-runners",
        default="",
        help="'true': plan the CUDA cells too (a GPU runner is "
        "registered); anything else leaves them out, with a notice",
    )
    n_plan.add_argument(
        "--date",
        default=None,
        help="the night's date, YYYY-MM-DD (default: today, UTC): its turn picks the one CPU cell that also "
        "runs cold, compared by the aggregate step with its default-mode run",
    )
    n_cell = nightly_steps.add_parser(
        "cell",
        help="run one cell's cases into RESULTS/SLUG.db, keep the exit code as RESULTS/SLUG.exit-code, exit with it",
        parents=[matrix],
    )
    n_cell.add_argument("--cell", required=True)
    n_cell.add_argument("--slug", help="file name for the cell (the plan's `slug`; default: the cell's name)")
    n_cell.add_argument("--cases", default="", help="case-id substrings (the plan's `cases`); default: all")
    n_cell.add_argument("--results", type=Path, default=Path("results"), help="folder (default: results)")
    n_cell.add_argument(
        "--launch",
        choices=("cold", "warm", ""),
        default="",
        help="how the jobs launch (the plan's `launch`): cold, warm, or '' for the default mode "
        "($BUGMATRIX_LAUNCH_MODE, else harness/launch/warm.py's default)",
    )
    n_baseline = nightly_steps.add_parser(
        "baseline", help="download the newest successful scheduled nightly's results (gh) into a folder; output `found`"
    )
    n_baseline.add_argument("--dir", type=Path, default=Path("previous"), help="folder (default: previous)")
    n_aggregate = nightly_steps.add_parser(
        "aggregate",
        help="merge the shards, report, compare with the baseline; exit 1 only on an unexpected regression",
        parents=[matrix],
    )
    n_aggregate.add_argument(
        "--shards",
        type=Path,
        default=Path("shards"),
        help="the cells' SLUG.db and SLUG.exit-code files (default: shards)",
    )
    n_aggregate.add_argument(
        "--results",
        type=Path,
        default=Path("results"),
        help=f"writes {NIGHTLY_DB}, report.html, compare.json here (default: results)",
    )
    n_aggregate.add_argument("--plan", default="", help="the plan step's matrix (JSON): the cells expected")
    n_aggregate.add_argument(
        "--baseline",
        type=Path,
        help="compare with this store (or `nightly baseline` "
        "folder) instead of the committed record (--record), the nightly's baseline",
    )
    n_aggregate.add_argument(
        "--record",
        type=Path,
        default=default_record(),
        help=f"the committed record: the baseline (default $BUGMATRIX_RECORD, else {RECORD_FALLBACK})",
    )
    n_issues = nightly_steps.add_parser(
        "issues", help="open or comment on one issue per unexpectedly regressed case (gh)"
    )
    n_issues.add_argument(
        "--compare",
        type=Path,
        default=Path("results/compare.json"),
        help="the aggregate step's compare.json (default: results/compare.json)",
    )
    n_issues.add_argument("--run-url", required=True, help="the nightly run, linked from each issue")
    n_issues.add_argument("--dry-run", action="store_true", help="print the plan as JSON; open nothing")
    n_record = nightly_steps.add_parser(
        "record-pr",
        help="fold tonight's results into the record and open or "
        "update one pull request carrying the record's diff and the expect rules it "
        "calls for (git, gh)",
        parents=[matrix, record],
    )
    n_record.add_argument(
        "--db",
        type=Path,
        default=Path("results") / NIGHTLY_DB,
        help=f"tonight's merged store (default: results/{NIGHTLY_DB})",
    )
    n_record.add_argument("--run-url", required=True, help="the nightly run, linked from the pull request")
    n_record.add_argument(
        "--branch", default="bugmatrix/record", help="the pull request's branch (default: bugmatrix/record)"
    )
    n_record.add_argument(
        "--page",
        type=Path,
        action="append",
        help="a page whose generated tables the pull request updates (repeatable; default: "
        "README.md and the pages under docs/ that hold them)",
    )
    n_record.add_argument("--dry-run", action="store_true", help="print the pull request's body; write nothing")
    n_feed = nightly_steps.add_parser(
        "feed",
        help="the record's OSV advisories in osv.dev's layout under "
        "SITE/osv/ and SITE/osv/DATE/ (PyPI/all.zip, modified_id.csv)",
        parents=[record],
    )
    n_feed.add_argument("--site", type=Path, default=Path("site"), help="the built site folder (default: site)")
    n_feed.add_argument("--date", default=None, help="the dated folder's name, YYYY-MM-DD (default: today, UTC)")
    n_wheel = nightly_steps.add_parser(
        "wheel",
        help="the audit wheel `uv build --wheel` wrote into DIST, under SITE/dist/ and SITE/dist/DATE/ "
        "(`uvx --from URL bugmatrix audit`)",
    )
    n_wheel.add_argument("--dist", type=Path, default=Path("dist"), help="where the wheel was built (default: dist)")
    n_wheel.add_argument("--site", type=Path, default=Path("site"), help="the built site folder (default: site)")
    n_wheel.add_argument("--date", default=None, help="the dated folder's name, YYYY-MM-DD (default: today, UTC)")


def run(args: argparse.Namespace) -> ExitCode:
    """Carry out the step asked for; bad input is annotated for the workflow's page (the title a `StepError`
    gives) before harness/cli.py prints its line and exits with its code."""
    from harness.workflows import nightly

    steps = {
        "plan": plan,
        "cell": cell,
        "baseline": baseline,
        "aggregate": aggregate,
        "issues": issues,
        "record-pr": record_pr,
        "feed": feed,
        "wheel": wheel,
    }
    try:
        return ExitCode(steps[args.step](args))
    except BugmatrixError as exc:
        title = exc.title if isinstance(exc, StepError) else f"bugmatrix nightly {args.step}"
        nightly.Actions.from_env().annotate("error", title, str(exc))
        raise


def plan(args: argparse.Namespace) -> int:
    """`nightly plan`: the job matrix of the nightly's cell jobs."""
    from harness.workflows import nightly

    try:
        matrix = Context(args).matrix
    except MatrixError as exc:
        raise StepError("Invalid matrix", str(exc)) from exc
    import datetime

    day = datetime.date.fromisoformat(_day(args))
    return nightly.run_plan(
        matrix, args.cells, args.cases, nightly.truthy(args.cuda_runners), nightly.Actions.from_env(), day
    )


def cell(args: argparse.Namespace) -> int:
    """`nightly cell`: `bugmatrix run` in one cell (its session driven directly, launched as `--launch` says), its
    exit code kept for the aggregate job."""
    from dataclasses import replace

    from harness.commands.run import RunOptions, execute
    from harness.workflows import nightly

    def runner(cell: str, db: Path, cases: list[str], matrix: Path | None) -> int:
        options = RunOptions(
            cases_dir=args.cases_dir, cases=cases, cell=[cell], db=db, redo=True, launch_mode=args.launch or None
        )
        return execute(options if matrix is None else replace(options, matrix=matrix))

    return nightly.run_cell(
        args.cell,
        args.slug or args.cell,
        args.cases,
        args.results,
        runner,
        nightly.Actions.from_env(),
        matrix=args.matrix,
        launch=args.launch,
    )


def baseline(args: argparse.Namespace) -> int:
    """`nightly baseline`: the previous successful scheduled nightly's results, downloaded with gh."""
    from harness.workflows import nightly

    return nightly.fetch_baseline(args.dir, nightly.run_gh, nightly.Actions.from_env())


def aggregate(args: argparse.Namespace) -> int:
    """`nightly aggregate`: merge, report, compare, decide."""
    from harness.session.contract import StoreError
    from harness.workflows import nightly

    actions = nightly.Actions.from_env()
    try:
        include = nightly.read_plan(args.plan)
    except (ValueError, KeyError, TypeError) as exc:
        raise StepError("Invalid plan", f"--plan is not the plan step's matrix: {exc}") from exc
    matrix = Context(args).optional_matrix(invalid_is_none=True)  # no matrix: the report has no upload dates
    try:
        decided = nightly.aggregate(
            args.shards, args.results, include, args.baseline, args.cases_dir, actions, matrix, record_root=args.record
        )
    except StoreError as exc:
        raise StepError("Cannot merge", str(exc)) from exc
    return decided.exit_code


def issues(args: argparse.Namespace) -> int:
    """`nightly issues`: one issue per unexpectedly regressed case, opened or commented on with gh."""
    from harness.workflows import nightly

    return nightly.open_issues(
        args.compare, args.run_url, nightly.run_gh, nightly.Actions.from_env(), dry_run=args.dry_run
    )


def record_pr(args: argparse.Namespace) -> int:
    """`nightly record-pr`: one pull request with tonight's results folded into the record, and the expect rules
    they call for."""
    from harness.workflows import nightly

    # no matrix: every boundary is then unknown: nothing is derived, each variant says why
    matrix = Context(args).optional_matrix(invalid_is_none=True)
    request = nightly.RecordRequest(
        args.db,
        args.record,
        args.cases_dir,
        matrix,
        args.run_url,
        branch=args.branch,
        dry_run=args.dry_run,
        pages=args.page,
        refresh=matrix is not None,
    )
    return nightly.open_record_pr(request, nightly.run_gh, nightly.run_git, nightly.Actions.from_env())


def _day(args: argparse.Namespace) -> str:
    """`--date` checked (YYYY-MM-DD), or today in UTC: the name of the dated folder a step publishes into, the
    night whose turn picks the cell the plan runs cold."""
    import datetime

    from harness.workflows.nightly import today

    day = args.date or today().isoformat()
    try:
        if datetime.date.fromisoformat(day).isoformat() != day:
            raise ValueError(day)
    except ValueError:
        raise UsageError(f"--date {day!r}: not a date (YYYY-MM-DD)") from None
    return day


def feed(args: argparse.Namespace) -> int:
    """`nightly feed`: the record's OSV advisories beside the documentation site, dated."""
    from harness.workflows import nightly

    day = _day(args)
    if not args.cases_dir.is_dir():
        raise UsageError(f"--cases-dir {args.cases_dir}: no such folder")
    return nightly.publish_feed(args.record, args.cases_dir, args.site, day, nightly.Actions.from_env())


def wheel(args: argparse.Namespace) -> int:
    """`nightly wheel`: the audit wheel beside the documentation site, dated."""
    from harness.workflows import nightly

    day = _day(args)
    wheels = sorted(args.dist.glob("bugmatrix-*.whl")) if args.dist.is_dir() else []
    if len(wheels) != 1:
        raise UsageError(f"--dist {args.dist}: holds {len(wheels)} bugmatrix wheels, not one (uv build --wheel)")
    return nightly.publish_wheel(wheels[0], args.site, day, nightly.Actions.from_env())
