"""The nightly workflow's steps, as code: `bugmatrix nightly plan|cell|baseline|aggregate|issues|record-pr|feed|wheel`.

`.github/workflows/nightly.yml` only calls these; every decision the workflow makes about the matrix lives here,
with unit tests (tests/test_nightly.py), and GitHub's side is reduced to files and annotations:

- `$GITHUB_OUTPUT` (step outputs) and `$GITHUB_STEP_SUMMARY` (the run's summary page) are appended to when they
  are set (`Actions.from_env`); outside a workflow both are skipped, so every step also runs on a laptop;
- `::notice` / `::error` annotations are printed on stdout (`annotation`, escaped like GitHub's toolkit does).

The steps:

plan       `plan_jobs`: `job_matrix` (harness/output/github.py) minus the CUDA cells unless GPU runners are
           enabled (a notice names the cells left out); an empty plan is an error. One selected CPU cell, in
           turn by the night's date (`cold_cell`), is planned twice: as every cell (`launch: ""`, the default
           launch mode) and cold (`launch: cold`, slug `<slug>--cold`). Output `matrix`; the summary lists the
           planned cells and names the one that runs cold tonight.
cell       `run_cell`: what `bugmatrix run [CASES] --cell CELL --db RESULTS/SLUG.db --redo [--cold|--warm]` does,
           driven directly (a `Runner`, never a command line), its exit code kept as
           RESULTS/SLUG.exit-code (and output `exit-code`), an error annotation when it is not 0; the step exits
           with that code, so the cell shows red (the job is continue-on-error: the verdict is the aggregate's).
baseline   `find_baseline`: the newest successful *scheduled* nightly's `bugmatrix-results` artifact, downloaded
           (`gh run download`), with baseline.json naming the run: for comparing with one earlier night by hand
           (`aggregate --baseline`). The nightly's own baseline is the committed record.
aggregate  `aggregate`: the cells' exit codes (summary), `ResultStore.merge` of the shards, the report (Markdown
           into the summary, HTML file), then `compare` with the baseline — the committed record (`record/`, its
           current results), or a store given with `--baseline` — (Markdown into the summary, compare.json) and the
           verdict: exit 1 only on an unexpected regression (or when no cell left results); an empty record is a
           notice. The cold shard is never merged (it would shadow the cell's own results): `warm_cold` compares
           it with its cell's shard (`launch_parity`, a table in the summary), and any difference is an error
           annotation and fails the night too; a missing shard is a notice. Outputs `report` and `regressions`.
issues     `plan_issues`: from compare.json and the open issues, one issue per unexpectedly regressed case:
           a comment on the open issue with the same title, else a new issue; `gh_commands` turns that plan into
           `gh` argument lists (never a shell line), `--dry-run` prints the plan as JSON instead.
record-pr  `open_record_pr`: tonight's store folded into the record (harness/session/folding.py: a re-measured
           result with the same fingerprint and verdict leaves its row unchanged, so a night that changed nothing
           opens nothing), and for every case x variant whose decisive outcome tonight is not the expected one,
           `bugmatrix expect`'s derivation (harness/analysis/expect.py) over everything the record then holds; the
           record, the rewritten case files and the pages' regenerated tables (docs/cases.md, docs/compat.md) go
           on one branch (`bugmatrix/record`, force-pushed from the checkout's HEAD) and one pull request is
           opened or edited, its body the outcome
           changes, the rule diff and, for a bug that came back, the regression (its issue, the run). Its CI: a pull
           request pushed with the workflow's GITHUB_TOKEN starts no workflow, so the step dispatches `ci.yml` on
           the branch (`gh workflow run`; workflow_dispatch is the event GITHUB_TOKEN may start), whose checks then
           show on the pull request's head commit. Variants that cannot be derived are warnings. The step never
           changes the verdict: only a person merging the pull request changes the record and what the nightly
           expects.
feed       `publish_feed`: the committed record's OSV advisories in osv.dev's layout (`osv/PyPI/all.zip`, its
           `modified_id.csv`, one JSON per advisory) and the same under `osv/<date>/`, written into the site
           folder the Pages job deploys.
wheel      `publish_wheel`: the wheel `uv build --wheel` made of the checkout (its record and cases inside), as
           `dist/<wheel>` (the newest) and `dist/<date>/<wheel>` in the site folder, for
           `uvx --from https://OWNER.github.io/REPO/dist/<wheel> bugmatrix audit ...` (docs/affected.md).

`gh` is called through a `Gh` function (argument list in, stdout out, `GhError` on failure): `run_gh` runs the
real CLI (it reads GH_TOKEN / GH_REPO from the environment); tests pass a fake.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import traceback
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

from harness.analysis.compare import compare, comparison, launch_parity
from harness.matrix.basics import MatrixError
from harness.matrix.expand import Matrix
from harness.model.errors import BugmatrixError, StepError
from harness.model.exitcode import ExitCode
from harness.model.result import Result
from harness.output import reports
from harness.output.github import job_matrix, split_list
from harness.output.parity import parity_markdown
from harness.session.basics import NIGHTLY_DB
from harness.session.contract import Store
from harness.session.store import ResultStore

WORKFLOW = "nightly.yml"
RESULTS_ARTIFACT = "bugmatrix-results"  # tonight's results/ folder, for the jobs after aggregate (a week)
BASELINE_FILE = "baseline.json"  # written by `baseline` beside the downloaded store: which run it came from
COMPARE_FILE = "compare.json"
REPORT_FILE = "report.html"
FEED = "osv"  # the OSV feed's folder in the documentation site
DIST = "dist"  # the audit wheel's folder in the documentation site
LABEL = "bugmatrix-regression"
LABEL_COLOR = "B60205"
LABEL_DESCRIPTION = "bugmatrix nightly: a fixed bug came back"
MAX_OPEN_ISSUES = 500

# `bugmatrix run` of (cell, db, case substrings, matrix file) -> its exit code
Runner = Callable[[str, Path, list[str], "Path | None"], int]
Gh = Callable[[list[str]], str]  # `gh` argv (without "gh") -> stdout; raises GhError when gh fails


# --- GitHub's side: outputs, step summary, annotations ----------------------------------------------------------


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def annotation(kind: str, title: str, message: str) -> str:
    """`::error title=T::message`: a workflow command GitHub shows on the run's page (kind: notice/warning/error)."""
    if kind not in ("notice", "warning", "error"):
        raise ValueError(f"not an annotation kind: {kind!r}")
    return f"::{kind} title={_escape_property(title)}::{_escape_data(message)}"


@dataclass
class Actions:
    """Where a step's results go: $GITHUB_OUTPUT, $GITHUB_STEP_SUMMARY (each skipped when None), annotations and
    progress lines on `out`."""

    output_file: Path | None = None
    summary_file: Path | None = None
    out: TextIO = field(default_factory=lambda: sys.stdout)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, out: TextIO | None = None) -> Actions:
        env = os.environ if environ is None else environ
        output, summary = env.get("GITHUB_OUTPUT"), env.get("GITHUB_STEP_SUMMARY")
        return cls(Path(output) if output else None, Path(summary) if summary else None, out or sys.stdout)

    def set_output(self, name: str, value: str) -> None:
        if self.output_file is None:
            return
        with self.output_file.open("a") as f:
            if "\n" in value or "\r" in value:
                delimiter = f"ghadelimiter_{uuid.uuid4()}"
                f.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")
            else:
                f.write(f"{name}={value}\n")

    def summary(self, markdown: str) -> None:
        if self.summary_file is None:
            return
        with self.summary_file.open("a") as f:
            f.write(markdown if markdown.endswith("\n") else markdown + "\n")

    def annotate(self, kind: str, title: str, message: str) -> None:
        print(annotation(kind, title, message), file=self.out, flush=True)

    def say(self, line: str) -> None:
        print(line, file=self.out, flush=True)


# --- plan ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The planned cell jobs, and the CUDA cells left out of them."""

    include: list[dict[str, Any]]  # the job matrix's entries (see harness/output/github.py)
    skipped: list[str]  # CUDA cells left out: no GPU runner enabled

    @property
    def matrix(self) -> dict[str, list[dict[str, Any]]]:
        return {"include": self.include}

    @property
    def cold(self) -> str | None:
        """The cell that runs cold tonight (its second entry), or None."""
        return next((e["cell"] for e in self.include if e.get("launch") == "cold"), None)


def truthy(value: str | None) -> bool:
    """A repository variable or input as GitHub compares it: 'true' in any case is true, anything else false."""
    return (value or "").strip().lower() == "true"


def today() -> datetime.date:
    """Today's date in UTC: the night's date."""
    return datetime.datetime.now(datetime.timezone.utc).date()


def plan_jobs(
    matrix: Matrix,
    cells: str | Iterable[str] | None,
    cases: str | Iterable[str] | None,
    cuda_runners: bool,
    day: datetime.date | None = None,
) -> Plan:
    """The `cell` job's matrix: `job_matrix`, without the CUDA cells unless `cuda_runners` (without a GPU runner
    their jobs would wait a day for one); with `day`, the CPU cell whose turn it is runs cold as well. Raises
    MatrixError / ValueError like job_matrix."""
    include = job_matrix(matrix, cells=cells, cases=cases, cold_day=day)["include"]
    if cuda_runners:
        return Plan(include, [])
    return Plan([e for e in include if e["device"] != "cuda"], [e["cell"] for e in include if e["device"] == "cuda"])


def plan_summary(include: list[dict[str, Any]]) -> str:
    """The step summary's table of the planned cells (runner labels joined, `all` when no case is picked, the
    launch mode, `default` unless said) and which cell runs cold tonight."""
    lines = ["## Planned cells", "", "| cell | device | launch | runs on | cases |", "|---|---|---|---|---|"]
    for e in include:
        runs_on = e["runs-on"] if isinstance(e["runs-on"], str) else ", ".join(e["runs-on"])
        launch = e.get("launch") or "default"
        lines.append(f"| {e['cell']} | {e['device']} | {launch} | {runs_on} | {e.get('cases') or 'all'} |")
    cold = Plan(include, []).cold
    lines.append("")
    if cold is None:
        lines.append("No CPU cell is planned: none runs cold tonight (no warm/cold comparison).")
    else:
        lines.append(
            f"Runs cold tonight (one CPU cell a night, in turn): **{cold}**. The aggregate step compares its cold "
            "results with its default ones and fails the night on any difference."
        )
    return "\n".join(lines) + "\n"


def run_plan(
    matrix: Matrix, cells: str, cases: str, cuda_runners: bool, gh: Actions, day: datetime.date | None = None
) -> ExitCode:
    """The plan step: prints the job matrix (one line of JSON) and sets the output `matrix`; 1 when nothing runs,
    a `StepError` (exit 2) when the selection is invalid. `day`: the night's date (default: today, UTC), whose
    turn decides the cell that runs cold."""
    try:
        plan = plan_jobs(matrix, cells, cases, cuda_runners, day or today())
    except (MatrixError, ValueError) as exc:
        raise StepError("Cannot plan the cells", str(exc)) from exc
    if plan.skipped:
        gh.annotate(
            "notice",
            "CUDA cells skipped",
            f"{', '.join(plan.skipped)} (set the repository variable "
            "BUGMATRIX_CUDA_RUNNERS to true once a GPU runner is registered)",
        )
    if not plan.include:
        gh.annotate(
            "error",
            "Nothing to run",
            f"no cell to run (cells: {cells!r}): every selected cell is a CUDA "
            "cell and BUGMATRIX_CUDA_RUNNERS is not true",
        )
        return ExitCode.FAILED
    line = json.dumps(plan.matrix)
    gh.say(line)
    gh.set_output("matrix", line)
    gh.summary(plan_summary(plan.include))
    return ExitCode.OK


# --- cell ------------------------------------------------------------------------------------------------------


def exit_code_file(results: Path, slug: str) -> Path:
    """Where a cell keeps `bugmatrix run`'s exit code, beside its store (both travel in its artifact)."""
    return results / f"{slug}.exit-code"


def run_cell(
    cell: str,
    slug: str,
    cases: str | None,
    results: Path,
    runner: Runner,
    gh: Actions,
    matrix: Path | None = None,
    launch: str = "",
) -> int:
    """The cell step: run the cell's cases into RESULTS/SLUG.db and keep the exit code beside it (the aggregate
    job reads it); returns that exit code (0: every outcome as expected). `launch` (the runner launches so) names
    the run in the summary and annotation: `CELL (cold)`."""
    results.mkdir(parents=True, exist_ok=True)
    try:
        rc = int(runner(cell, results / f"{slug}.db", split_list(cases), matrix))
    except BugmatrixError as exc:  # bad input (an invalid matrix or cell): its one line and its code, 2
        print(f"bugmatrix nightly cell: {exc}", file=sys.stderr)
        rc = exc.exit_code
    except Exception:  # a crash is that cell's failure, recorded like any other; the other cells go on
        traceback.print_exc()
        rc = 1
    exit_code_file(results, slug).write_text(f"{rc}\n")
    gh.set_output("exit-code", str(rc))
    name = f"{cell} ({launch})" if launch else cell
    gh.summary(f"**{name}**: `bugmatrix run` exited {rc} (0: every outcome as expected)")
    if rc != 0:
        gh.annotate(
            "error",
            name,
            f"bugmatrix run exited {rc} (1: an outcome differs from the expected one or the "
            "cell could not be built; 2: invalid input; 5: nothing ran; see the log)",
        )
    return rc


# --- baseline --------------------------------------------------------------------------------------------------


class GhError(RuntimeError):
    """A `gh` command failed."""


def run_gh(args: list[str]) -> str:
    """The GitHub CLI (`gh` on PATH, authenticated by $GH_TOKEN, repository $GH_REPO); stdout, or GhError."""
    return _run_tool("gh", args, shown=2)


def _run_tool(tool: str, args: list[str], shown: int) -> str:
    """`tool ARGS`'s stdout; a GhError naming the tool and its first `shown` arguments when it fails."""
    try:
        proc = subprocess.run([tool, *args], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise GhError(f"{tool} {' '.join(args[:shown])}: {exc}") from None
    if proc.returncode != 0:
        raise GhError(f"{tool} {' '.join(args[:shown])} exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout


@dataclass(frozen=True)
class Baseline:
    """The nightly run whose results are tonight's baseline."""

    run_id: str
    url: str


def run_url(run_id: str, environ: Mapping[str, str] | None = None) -> str:
    """A workflow run's page, from the runner's $GITHUB_SERVER_URL and $GITHUB_REPOSITORY."""
    env = os.environ if environ is None else environ
    server = env.get("GITHUB_SERVER_URL", "https://github.com")
    return f"{server}/{env.get('GITHUB_REPOSITORY') or env.get('GH_REPO', '')}/actions/runs/{run_id}"


def find_baseline(gh: Gh, dest: Path, environ: Mapping[str, str] | None = None) -> tuple[Baseline | None, str]:
    """Download the newest successful scheduled nightly's results into `dest`: (baseline, '') or (None, why not)."""
    # schedules run on the default branch; the run in progress is not `success` yet, so never its own baseline
    listing = [
        "run",
        "list",
        "--workflow",
        WORKFLOW,
        "--event",
        "schedule",
        "--status",
        "success",
        "--limit",
        "1",
        "--json",
        "databaseId,url",
    ]
    try:
        runs = json.loads(gh(listing) or "[]")
    except (GhError, json.JSONDecodeError) as exc:
        return None, f"cannot list the earlier nightlies: {exc}"
    if not runs:
        return None, "no earlier successful scheduled nightly"
    run_id = str(runs[0]["databaseId"])
    url = runs[0].get("url") or run_url(run_id, environ)
    try:
        gh(["run", "download", run_id, "--name", RESULTS_ARTIFACT, "--dir", str(dest)])
    except GhError as exc:
        return None, f"nightly run {run_id} has no {RESULTS_ARTIFACT} artifact to download ({exc})"
    if not (dest / NIGHTLY_DB).is_file():
        return None, f"nightly run {run_id}: its {RESULTS_ARTIFACT} artifact holds no {NIGHTLY_DB}"
    baseline = Baseline(run_id, url)
    (dest / BASELINE_FILE).write_text(json.dumps(asdict(baseline)) + "\n")
    return baseline, ""


def fetch_baseline(dest: Path, gh: Gh, actions: Actions, environ: Mapping[str, str] | None = None) -> ExitCode:
    """The baseline step: never fails (the aggregate step says when there is nothing to compare with)."""
    baseline, why = find_baseline(gh, dest, environ)
    actions.set_output("found", "true" if baseline else "false")
    actions.say(f"baseline: nightly run {baseline.run_id} ({baseline.url})" if baseline else f"no baseline: {why}")
    return ExitCode.OK


def load_baseline(folder: Path | None) -> tuple[Path, Baseline | None] | None:
    """(the store, the run it came from if known) of a baseline folder (or a store file), or None: no store."""
    if folder is not None and folder.is_file():
        return folder, None
    if folder is None or not (folder / NIGHTLY_DB).is_file():
        return None
    info = folder / BASELINE_FILE
    if info.is_file():
        doc = json.loads(info.read_text())
        return folder / NIGHTLY_DB, Baseline(str(doc["run_id"]), str(doc["url"]))
    return folder / NIGHTLY_DB, None


# --- aggregate -------------------------------------------------------------------------------------------------


def cells_summary(include: list[dict[str, Any]], shards: Path) -> str:
    """Each planned cell with its `bugmatrix run` exit code, or why there is none (the cold run: `CELL (cold)`)."""
    lines = ["## Cells", "", "| cell | `bugmatrix run` exit code |", "|---|---|"]
    for e in include:
        path = exit_code_file(shards, e["slug"])
        code = path.read_text().strip() if path.is_file() else ""
        name = f"{e['cell']} ({e['launch']})" if e.get("launch") else e["cell"]
        lines.append(f"| {name} | {code or 'no results (the job failed, timed out or was cancelled)'} |")
    return "\n".join(lines) + "\n\n"


@dataclass(frozen=True)
class Verdict:
    """What the aggregate step decided."""

    exit_code: ExitCode
    report: bool = False  # the report was written (results/ is worth keeping)
    regressions: int | None = None  # unexpected regressions; None: not compared
    launch_differences: int | None = None  # jobs whose cold and warm outcomes differ; None: not compared


def verdict(
    shards: list[Path], merged: int, compared: dict[str, Any] | None, launch_differences: int | None = None
) -> Verdict:
    """Fail without shards or results; else fail only on an unexpected regression or a warm/cold difference."""
    if not shards or not merged:
        return Verdict(ExitCode.FAILED)
    n = None if compared is None else int(compared["unexpected_regressions"])
    failed = bool(n) or bool(launch_differences)
    return Verdict(ExitCode.FAILED if failed else ExitCode.OK, True, n, launch_differences)


def cold_slugs(include: list[dict[str, Any]]) -> set[str]:
    """The slugs of the plan's cold entries: shards that are compared (`warm_cold`), never merged."""
    return {e["slug"] for e in include if e.get("launch") == "cold"}


def warm_cold(shards: Path, include: list[dict[str, Any]], gh: Actions) -> int | None:
    """Tonight's warm/cold parity: each cold shard compared with its cell's own shard (`launch_parity`, the cold
    results the reference), a table in the summary, and an error annotation "Warm/cold difference" on any
    difference. The number of jobs that differ, or None when nothing was compared (no cold entry planned; a shard
    missing or empty: a notice "warm/cold not compared: ...")."""
    differ: int | None = None
    cold_ones = cold_slugs(include)
    for cold in [e for e in include if e["slug"] in cold_ones]:
        cell = cold["cell"]
        warm = next((e for e in include if e["cell"] == cell and e["slug"] not in cold_ones), None)
        sides = _parity_sides(shards, cold, warm)
        if isinstance(sides, str):
            gh.annotate("notice", "Warm/cold not compared", f"warm/cold not compared: {cell}: {sides}")
            gh.summary(f"\n## Warm/cold parity\n\nwarm/cold not compared: {cell}: {sides}\n")
            continue
        parity = launch_parity(*sides)
        gh.summary(
            f"\n## Warm/cold parity\n\n`{cell}` ran twice tonight: cold (`{cold['slug']}`) and as every cell "
            f"(`{warm['slug'] if warm else ''}`, the default launch mode; the launches columns say how each result "
            "started). Only the latter is merged.\n\n" + parity_markdown(parity, ("cold", "warm"))
        )
        differ = (differ or 0) + len(parity.differences)
        if parity.differences:
            items = ", ".join(p.other.item_id for p in parity.differences[:5])
            more = f" and {len(parity.differences) - 5} more" if len(parity.differences) > 5 else ""
            gh.annotate(
                "error",
                "Warm/cold difference",
                f"{cell}: {len(parity.differences)} job(s) whose outcome differs between the cold and the warm "
                f"launch: {items}{more}; see the summary",
            )
    return differ


def _parity_sides(
    shards: Path, cold: dict[str, Any], warm: dict[str, Any] | None
) -> tuple[list[tuple[str, Result]], list[tuple[str, Result]]] | str:
    """(the cold shard's current results, the warm shard's), or why they cannot be compared."""
    if warm is None:
        return "the plan has no entry that runs it in the default mode"
    sides = []
    for entry in (cold, warm):
        db = shards / f"{entry['slug']}.db"
        if not db.is_file():
            return f"no shard {db.name} (its job failed, timed out or was cancelled)"
        results = ResultStore(db, readonly=True).latest()
        if not results:
            return f"the shard {db.name} holds no result"
        sides.append(results)
    return sides[0], sides[1]


def record_baseline(record_root: Path, cases_dir: Path) -> Store | None:
    """The committed record as the night's baseline (a read-only store of its current results), or None when the
    record holds no result."""
    from harness.model.case import discover
    from harness.session.readers import record_store
    from harness.session.record import load

    record = load(record_root)
    return record_store(record, discover(cases_dir)[0], record_root) if record.rows else None


def publish_feed(record_root: Path, cases_dir: Path, site: Path, day: str, gh: Actions) -> ExitCode:
    """The committed record's OSV advisories in osv.dev's layout beside the documentation site: `site/osv/`
    (the newest: `PyPI/all.zip`, `PyPI/modified_id.csv`, one JSON per advisory) and `site/osv/<day>/` (the
    same, dated), for `pip-audit --osv-url`-style clients through `osv serve` and offline scanners (docs/osv.md)."""
    from harness.analysis.osv import documents
    from harness.model.case import every_case
    from harness.output.osv import write_feed
    from harness.session.readers import open_reader
    from harness.session.record import load

    cases = every_case(cases_dir)
    docs = documents(open_reader(None, False, cases, record_root).latest(), cases, load(record_root).releases)
    for root in (site / FEED, site / FEED / day):
        write_feed(docs, root)
    gh.summary(
        f"OSV feed: {len(docs)} advisories, `{FEED}/PyPI/all.zip` and `{FEED}/{day}/PyPI/all.zip` beside "
        "the documentation site\n"
    )
    gh.say(f"{site / FEED}: {len(docs)} advisories ({day})")
    return ExitCode.OK


def publish_wheel(wheel: Path, site: Path, day: str, gh: Actions) -> ExitCode:
    """The audit wheel beside the documentation site: `site/dist/<wheel>` (the newest) and `site/dist/<day>/<wheel>`
    (dated); a wheel keeps its own file name (an installer reads the name and version from it)."""
    import hashlib
    import shutil

    for folder in (site / DIST, site / DIST / day):
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(wheel, folder / wheel.name)
    sha256 = hashlib.sha256(wheel.read_bytes()).hexdigest()
    gh.summary(
        f"Audit wheel: `{DIST}/{wheel.name}` and `{DIST}/{day}/{wheel.name}` beside the documentation site "
        f"(sha256 `{sha256}`)\n"
    )
    gh.say(f"{site / DIST}: {wheel.name} ({day}, sha256 {sha256})")
    return ExitCode.OK


def aggregate(
    shards: Path,
    results: Path,
    include: list[dict[str, Any]],
    baseline: Path | None,
    cases_dir: Path,
    gh: Actions,
    matrix: Matrix | None = None,
    record_root: Path | None = None,
) -> Verdict:
    """The aggregate step: merge the shards into RESULTS/NIGHTLY_DB, report, compare with the baseline (a store
    given with `baseline`, else the committed record under `record_root`), write compare.json, and decide (see
    `verdict`)."""
    results.mkdir(parents=True, exist_ok=True)
    gh.summary(cells_summary(include, shards))
    cold = cold_slugs(include)  # compared with their cells' own shards below, never merged
    found = sorted(p for p in shards.glob("*.db") if p.stem not in cold) if shards.is_dir() else []
    if not found:
        gh.annotate("error", "No results", "no cell uploaded a results store")
        return verdict(found, 0, None)
    db = results / NIGHTLY_DB
    store = ResultStore(db)
    added = store.merge(found)
    gh.say(f"merged {len(found)} store(s) into {db}: {added} new result(s)")
    latest = store.latest()
    if not latest:
        gh.annotate("error", "No results", f"the cells' stores hold no result ({len(found)} store(s))")
        return verdict(found, 0, None)
    cells = list(dict.fromkeys(e["cell"] for e in include))
    report = reports.report_for(latest, cases_dir, cells, matrix)
    gh.summary(reports.to_markdown(report))
    (results / REPORT_FILE).write_text(reports.to_html(report))
    gh.say(f"wrote {results / REPORT_FILE}")

    previous = load_baseline(baseline)
    recorded = record_baseline(record_root, cases_dir) if previous is None and record_root is not None else None
    compared: dict[str, Any] | None = None
    if previous is None and recorded is None:
        gh.annotate("notice", "No baseline", "no baseline store and no result in the record: nothing to compare")
    else:
        if previous is not None:
            old_db, origin = previous
            if origin is not None:
                gh.summary(f"\nCompared with nightly run [{origin.run_id}]({origin.url}).\n")
            before, name = ResultStore(old_db, readonly=True).latest(), str(old_db)
        else:
            assert recorded is not None and record_root is not None
            gh.summary(f"\nCompared with the committed record ({record_root}).\n")
            before, name = recorded.latest(), str(record_root)
        changes = compare(before, latest)
        gh.summary(reports.to_markdown_changes(changes, (name, str(db))))
        compared = comparison(changes, name, str(db))
        (results / COMPARE_FILE).write_text(json.dumps(compared, indent=2) + "\n")
    decided = verdict(found, len(latest), compared, warm_cold(shards, include, gh))
    if decided.regressions:
        gh.annotate(
            "error",
            "Unexpected regression",
            f"{decided.regressions} unexpected regression(s): a bug "
            "its case expects fixed reproduces again; see the summary",
        )
    gh.set_output("report", "true")
    if decided.regressions is not None:
        gh.set_output("regressions", str(decided.regressions))
    return decided


# --- issues ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IssueAction:
    """Open an issue for a regressed case, or comment on the open one (`number`)."""

    case: str
    title: str
    body: str
    number: int | None = None

    @property
    def kind(self) -> str:
        return "comment" if self.number is not None else "create"


def issue_title(case: str) -> str:
    """The title of a case's regression issue: how a later night finds the open one."""
    return f"bugmatrix: {case} regressed"


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)


def issue_body(case: str, changes: list[dict[str, Any]], url: str) -> str:
    """Markdown: the run, and one row per regressed result of the case (cell, variant, ranks, versions)."""
    lines = [
        f"The nightly matrix ([run]({url})) saw `{case}` reproduce where its metadata expects it fixed.",
        "",
        "| cell | variant | device | ranks | before | after | versions |",
        "|---|---|---|---|---|---|---|",
    ]
    for c in changes:
        versions = ", ".join(f"{k} {v}" for k, v in (c.get("versions") or {}).items())
        lines.append(
            f"| {c['cell']} | {c['variant']} | {c['device']} | {c['nproc']} | {_cell(c.get('before'))} | "
            f"{_cell(c.get('after'))} | {versions} |"
        )
    return "\n".join(lines)


def plan_issues(compared: dict[str, Any], open_issues: list[dict[str, Any]], url: str) -> list[IssueAction]:
    """One action per unexpectedly regressed case (sorted): comment on the open issue titled for it, else open one."""
    unexpected = [c for c in compared.get("changes", []) if c.get("unexpected")]
    by_title: dict[str, int] = {}
    for issue in open_issues:
        by_title.setdefault(issue["title"], int(issue["number"]))  # gh lists the newest first
    actions = []
    for case in sorted({c["case"] for c in unexpected}):
        title = issue_title(case)
        body = issue_body(case, [c for c in unexpected if c["case"] == case], url)
        actions.append(IssueAction(case, title, body, by_title.get(title)))
    return actions


def label_command() -> list[str]:
    """`gh label create`: the regression label, created or updated (--force), before any issue uses it."""
    return ["label", "create", LABEL, "--color", LABEL_COLOR, "--description", LABEL_DESCRIPTION, "--force"]


def list_issues_command() -> list[str]:
    """`gh issue list`: the open regression issues, number and title."""
    return [
        "issue",
        "list",
        "--label",
        LABEL,
        "--state",
        "open",
        "--limit",
        str(MAX_OPEN_ISSUES),
        "--json",
        "number,title",
    ]


def gh_commands(actions: list[IssueAction]) -> list[list[str]]:
    """The `gh` argument lists that carry out the plan (the label first, when there is anything to do)."""
    commands = [label_command()] if actions else []
    for a in actions:
        if a.number is not None:
            commands.append(["issue", "comment", str(a.number), "--body", a.body])
        else:
            commands.append(["issue", "create", "--title", a.title, "--label", LABEL, "--body", a.body])
    return commands


def open_issues(compare_file: Path, url: str, gh: Gh, actions: Actions, dry_run: bool = False) -> ExitCode:
    """The issues step: 0 when every issue was opened or commented on (or, dry, the plan printed), 1 when gh
    failed; a `StepError` (exit 2) when there is no comparison."""
    if not compare_file.is_file():
        raise StepError("No comparison", f"{compare_file} is missing: nothing to open issues for")
    try:
        existing = json.loads(gh(list_issues_command()) or "[]")
        plan = plan_issues(json.loads(compare_file.read_text()), existing, url)
        if dry_run:
            actions.say(json.dumps([asdict(a) | {"kind": a.kind} for a in plan], indent=2))
            return ExitCode.OK
        for command in gh_commands(plan):
            gh(command)
    except GhError as exc:
        actions.annotate("error", "Cannot open issues", str(exc))
        return ExitCode.FAILED
    for a in plan:
        actions.say(f"{a.case}: {'commented on #' + str(a.number) if a.number is not None else 'opened an issue'}")
    return ExitCode.OK


def read_plan(text: str | None) -> list[dict[str, Any]]:
    """The plan job's `matrix` output, as the aggregate job gets it: its entries (none when empty)."""
    if not text or not text.strip():
        return []
    return list(json.loads(text)["include"])


# --- record-pr -------------------------------------------------------------------------------------------------

RECORD_BRANCH = "bugmatrix/record"
RECORD_TITLE = "bugmatrix: the nightly's measurements for the record"
CI_WORKFLOW = "ci.yml"  # dispatched on the branch: a pull request pushed with GITHUB_TOKEN triggers no workflow
BOT = ("github-actions[bot]", "41898282+github-actions[bot]@users.noreply.github.com")
Git = Callable[[list[str]], str]  # `git` argv (without "git") -> stdout; raises GhError when git fails


def run_git(args: list[str]) -> str:
    """`git` in the current directory (the checkout); stdout, or GhError."""
    return _run_tool("git", args, shown=1)


@dataclass
class RecordPlan:
    """What the record-pr step found: the record with tonight folded in (and the files that changed), the outcome
    changes it records, the rewritten case files, the variants it could not derive (and why), the results that
    contradicted their expectations, and the pull request's body."""

    record: Any = None  # harness.session.record.Record
    files: list[str] = field(default_factory=list)  # record files that change
    added: int = 0
    replaced: int = 0
    changes: list[Any] = field(default_factory=list)  # harness.analysis.compare.Change: record before -> after
    edits: list[Any] = field(default_factory=list)  # harness.analysis.expect.Edit
    derivations: list[Any] = field(default_factory=list)  # harness.analysis.expect.Derivation
    contradicted: list[tuple[str, Any]] = field(default_factory=list)  # (cell, Result)
    body: str = ""

    @property
    def refused(self) -> list[Any]:
        return [d for d in self.derivations if d.new is None]


def contradicted(latest: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """Tonight's results whose decisive outcome (reproduced, fixed, a launched skip) the case's rules do not
    expect: what a change of the rules could settle (an error or infra result never is)."""
    from harness.model.outcome import Outcome
    from harness.model.result import misses

    missed = {id(r) for r in misses([r for _, r in latest])}
    decisive = (Outcome.REPRODUCED, Outcome.FIXED, Outcome.SKIP)
    return [(c, r) for c, r in latest if id(r) in missed and r.outcome in decisive]


@dataclass(frozen=True)
class RecordRequest:
    """What the record-pr step is asked: tonight's store (`db`), the record and the cases it is folded into, the
    matrix (None: every boundary unknown, nothing derived), the night's run URL, the pull request's branch, whether
    dry (the body printed, nothing written), the day the rules are dated (default: today, UTC), the pages whose
    record tables are regenerated (None: README.md and docs/ of the current folder) and whether the versions are
    refreshed from the index."""

    db: Path
    record_root: Path
    cases_dir: Path
    matrix: Matrix | None
    url: str
    branch: str = RECORD_BRANCH
    dry_run: bool = False
    today: str = ""
    pages: list[Path] | None = None
    refresh: bool = True


def plan_record(request: RecordRequest, issues: dict[str, int]) -> RecordPlan:
    """Fold tonight's store into the record (in memory), derive new rules for every case x variant that tonight's
    results contradict (from everything the record then holds), and write the pull request's body."""
    from harness.analysis.expect import derive, measurements, rewrite
    from harness.analysis.precision import between_on_index
    from harness.model.case import PROBES_DIR, discover
    from harness.session.folding import fold_store, refresh_versions
    from harness.session.readers import record_store
    from harness.session.record import RecordStore, load, render

    db, record_root, matrix, today = request.db, request.record_root, request.matrix, request.today
    cases = discover(request.cases_dir)[0]
    plan = RecordPlan(record=load(record_root))
    before_files = render(plan.record)
    layer = record_store(plan.record, cases, record_root)
    before = layer.latest()
    tonight = ResultStore(db, readonly=True)
    plan.added, plan.replaced = fold_store(plan.record, tonight, cases + discover(PROBES_DIR)[0])
    if request.refresh:
        refresh_versions(plan.record, matrix)
    folded = RecordStore(plan.record, layer.digests, record_root, layer.judge)  # the same cases, tonight folded in
    plan.changes = compare(before, folded.latest())
    plan.contradicted = contradicted([(c, layer.judge(r)) for c, r in tonight.latest()])
    pairs = sorted({(r.case, r.variant) for _, r in plan.contradicted})
    by_id = {c.id: c for c in cases}
    if pairs:
        measured = measurements(folded)
        between = between_on_index(matrix, by_id) if matrix is not None else None
        plan.derivations = [derive(by_id[c], v, measured, between) for c, v in pairs if c in by_id]
        for case in cases:
            edit = rewrite(case, [d for d in plan.derivations if d.case.id == case.id], today)
            if edit is not None:
                plan.edits.append(edit)
        for d in plan.derivations:
            if d.changed and d.new is not None:
                plan.record.set_rules(d.provenance(today))
    after_files = render(plan.record)
    plan.files = sorted(
        name for name in set(before_files) | set(after_files) if before_files.get(name, "") != after_files.get(name, "")
    )
    plan.body = record_pr_body(plan, request.url, issues)
    return plan


def record_pr_body(plan: RecordPlan, url: str, issues: dict[str, int]) -> str:
    """Markdown: the night (its run), what the record gains (results added or changed, and every change of
    outcome), then per changed variant what was measured (a fix, or a bug that came back, with its issue), the
    rule diff, and what could not be derived."""
    from harness.model.common import item_id, logical_name
    from harness.model.outcome import Outcome

    lines = [
        f"The nightly matrix ([run]({url})) measured what this pull request adds to the committed record "
        f"(`record/`): **{plan.added} result(s) new, {plan.replaced} changed**, in {len(plan.files)} file(s). "
        "Results re-measured with the same script, pins and verdict leave their rows unchanged. Merging it makes "
        "this night the permanent record. Nothing is merged by the bot: **a bug that came back keeps failing "
        "the nightly until a person merges this**.",
        "",
    ]
    if plan.changes:
        lines += ["### Outcomes that change in the record", ""]
        lines += [
            f"- `{item_id(c.case, c.variant, c.device, c.nproc)}` in `{c.cell}`: "
            f"{c.before.value if c.before else '-'} → {c.after.value}" + (" (**unexpected**)" if c.unexpected else "")
            for c in plan.changes
        ]
        lines.append("")
    lines += ["### Files", "", *[f"- `{name}`" for name in plan.files], ""]
    for d in [d for d in plan.derivations if d.changed]:
        lines.append(f"### Expect rules: `{d.case.id}` · `{d.variant}`")
        lines.append("")
        for cell, r in plan.contradicted:
            if (r.case, r.variant) != (d.case.id, d.variant):
                continue
            version = next((v for k, v in r.versions.items() if logical_name(k) == logical_name(d.package)), "?")
            where = f"{d.package} {version} (cell `{cell}`, {r.device}, nproc {r.nproc})"
            if r.outcome is Outcome.REPRODUCED and r.expected is Outcome.FIXED:
                issue = issues.get(issue_title(d.case.id))
                lines.append(
                    f"- **came back** in {where}: a regression, expected fixed"
                    + (f"; issue #{issue}" if issue else "")
                    + f"; [nightly run]({url})"
                )
            elif r.outcome is Outcome.FIXED and r.expected is Outcome.REPRODUCED:
                lines.append(f"- **fixed** in {where}, expected reproduced")
            else:
                lines.append(f"- {r.outcome.value} in {where}, expected {r.expected.value if r.expected else '-'}")
        for b in d.boundaries:
            lines.append(f"- boundary: {b}")
        lines.append(
            f"- new rules: {' · '.join(d.summary().split(': ', 1)[1:])} (what they rest on: `record/rules.jsonl`)"
        )
        lines.append("")
    for edit in plan.edits:
        lines += ["```diff", edit.diff.rstrip("\n"), "```", ""]
    if plan.refused:
        lines += ["### Rules not derived", ""]
        lines += [f"- `{d.case.id}::{d.variant}`: {d.refused}" for d in plan.refused]
    return "\n".join(lines).rstrip("\n") + "\n"


def record_pr_commands(paths: list[str], branch: str, body: str) -> tuple[list[list[str]], list[list[str]]]:
    """(git, gh) argument lists that put the changed files on `branch` (from the checkout's HEAD, force-pushed: one
    branch, rewritten each night) and let gh push with the run's token."""
    git = [
        ["checkout", "-B", branch],
        ["add", "--", *paths],
        ["-c", f"user.name={BOT[0]}", "-c", f"user.email={BOT[1]}", "commit", "-m", RECORD_TITLE, "-m", body[:60000]],
        ["push", "--force", "origin", f"HEAD:refs/heads/{branch}"],
    ]
    gh = [["auth", "setup-git"]]
    return git, gh


def open_record_pr(request: RecordRequest, gh: Gh, git: Git, actions: Actions) -> ExitCode:
    """The record-pr step: fold tonight's store into the record, rewrite the rules it contradicts, regenerate the
    record's tables in the request's pages, and open or update one pull request with all of it; then dispatch CI on
    the branch (a pull request pushed with the workflow's GITHUB_TOKEN triggers no workflow, but a
    `workflow_dispatch` does). 0 when there was nothing to change or the pull request was opened or updated (or,
    dry, its body printed), 1 when git or gh failed; a `StepError` (exit 2) without tonight's store. It never
    touches the verdict."""
    import dataclasses
    import datetime

    if not request.db.is_file():
        raise StepError("No results", f"{request.db} is missing: nothing to record")
    today = request.today or datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    request = dataclasses.replace(request, today=today)
    try:
        listed = json.loads(gh(list_issues_command()) or "[]") if not request.dry_run else []
    except GhError:
        listed = []  # linking the regression issue is a courtesy; the pull request does not wait for it
    plan = plan_record(request, {i["title"]: int(i["number"]) for i in reversed(listed)})
    for d in plan.refused:
        actions.annotate("warning", f"Expectations not derived: {d.case.id}::{d.variant}", d.refused)
    if not plan.edits and not plan.files:
        actions.say(
            "nothing new for the record" + (f" ({len(plan.refused)} variant(s) not derived)" if plan.refused else "")
        )
        actions.set_output("pull-request", "")
        return ExitCode.OK
    if request.dry_run:
        actions.say(plan.body)
        return ExitCode.OK
    paths = write_record(plan, request)
    try:
        link = push_record_pr(paths, request.branch, plan.body, gh, git)
    except GhError as exc:
        actions.annotate("error", "Cannot open the record pull request", str(exc))
        return ExitCode.FAILED
    actions.set_output("pull-request", link)
    actions.summary(
        f"## The record\n\nPull request {link}: {plan.added} result(s) new, {plan.replaced} changed; "
        f"{len(plan.edits)} case file(s).\n"
    )
    actions.say(f"pull request {link}: {', '.join(paths)}")
    return ExitCode.OK


def write_record(plan: RecordPlan, request: RecordRequest) -> list[str]:
    """Write what `plan` changes: the case files, the record and the record's tables in the request's pages; the
    paths written, for the commit."""
    from harness.analysis.expect import write_case
    from harness.output.pages import page_files, regenerate_page
    from harness.session.record import write

    for edit in plan.edits:
        write_case(edit)
    write(request.record_root, plan.record)
    paths = [str(request.record_root), *(str(e.path) for e in plan.edits)]
    matrix_path = request.matrix.path if request.matrix is not None else Path("-")
    for page in request.pages if request.pages is not None else page_files(Path(".")):
        if page.is_file() and regenerate_page(page, request.record_root, request.cases_dir, matrix_path):
            paths.append(str(page))
    return paths


def push_record_pr(paths: list[str], branch: str, body: str, gh: Gh, git: Git) -> str:
    """Commit `paths` on `branch`, push it, open or update its pull request and dispatch CI on it; the pull
    request's link. GhError when git or gh fails."""
    git_cmds, gh_cmds = record_pr_commands(paths, branch, body)
    for command in gh_cmds:
        gh(command)
    for command in git_cmds:
        git(command)
    found = json.loads(gh(["pr", "list", "--head", branch, "--state", "open", "--json", "number,url"]) or "[]")
    if found:
        number = str(found[0]["number"])
        gh(["pr", "edit", number, "--title", RECORD_TITLE, "--body", body])
        link = found[0].get("url") or number
    else:
        link = gh(["pr", "create", "--head", branch, "--title", RECORD_TITLE, "--body", body]).strip()
    gh(["workflow", "run", CI_WORKFLOW, "--ref", branch])
    return str(link)
