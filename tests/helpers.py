"""Helpers the harness's tests share (fixtures are in tests/conftest.py): no test module imports from another.

leftovers, run_one                      real launches of small fake cases (test_launch and the launch tests)
record_result, record_store, two_cells  results and stores of the committed-record tests
audit_row, osv_docs, RUN, DAY           rows of the synthetic records that audit and OSV are asked of
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import psutil

from harness.analysis.osv import documents
from harness.launch.execute import execute
from harness.launch.interpreter import Environment
from harness.model.case import Case
from harness.model.job import run_digest
from harness.model.outcome import Outcome, RankState, RankStatus
from harness.model.result import Result
from harness.session.plan import Selection, plan_local
from harness.session.readers import open_reader
from harness.session.record import load, to_row
from harness.session.store import ResultStore

MakeCase = Callable[..., Case]

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "cases"


def leftovers(marker: str) -> list[psutil.Process]:
    """Live processes whose command line mentions `marker` (a test's tmp path) or that run in a folder under it: a
    warm launch's ranks and their forks carry their parent's command line, but run in the case's folder."""
    found = []
    for proc in psutil.process_iter(["cmdline", "cwd", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE and proc.info["cwd"] is None:
                continue
            if marker in " ".join(proc.info["cmdline"] or []) or (proc.info["cwd"] or "").startswith(marker):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def run_one(make_case: MakeCase, env: Environment, script: str, **fields: object) -> Result:
    """Launch a fake case made of `script` and `fields` once, on CPU, and return its result."""
    case = make_case(script, **fields)
    [job] = plan_local([case], Selection(devices=("cpu",)))
    return execute(job, env)


# --- the committed record --------------------------------------------------------------------------------------------

MACHINE = json.dumps({"host": "h", "os": "Linux", "arch": "x86_64", "cpu": "Test CPU", "cores": 2})


def record_result(
    case: Case,
    version: str,
    outcome: Outcome,
    started: float,
    digest: str | None = None,
    variant: str = "bug",
    tallies: dict | None = None,
) -> Result:
    """A result of `case` at torch `version`, with a rank's output around its verdict line."""
    line = "[rank 0] REPRODUCED: FAKE-BUG-SIGNATURE seen" if outcome is Outcome.REPRODUCED else "[rank 0] FIXED: ok"
    return Result(
        case=case.id,
        variant=variant,
        nproc=1,
        device="cpu",
        outcome=outcome,
        expected=Outcome.FIXED,
        reason=line if outcome is Outcome.REPRODUCED else "every rank exited 0",
        versions={"torch": version},
        python="3.11.7",
        ranks=[RankStatus(rank=0, state=RankState.FIXED, exit_code=0, finished_at=1.0)],
        duration_s=8.04,
        log_excerpt=f"--- rank 0 ---\nnoise\n{line}\nmore noise\n",
        stacks="stack",
        started_at=started,
        tallies=tallies or {},
        fingerprint=f"fp-{version}-{variant}",
        digest=run_digest(case, variant) if digest is None else digest,
    )


def record_store(path: Path, case: Case, results: list[tuple[str, Result]]) -> ResultStore:
    """A store at `path` holding `results` (cell, result) as one complete run."""
    store = ResultStore(path)
    run = store.begin_run("bugmatrix run --all-cells", MACHINE, run_id="20261125T000000-h-aaaaaa")
    for cell, r in results:
        store.save(run, r, cell)
    store.end_run(run)
    return store


def two_cells(case: Case) -> list[tuple[str, Result]]:
    """`case` reproduced at torch 2.0.1 and fixed at 2.1.2, one cell each."""
    return [
        ("torch-2.0.1", record_result(case, "2.0.1", Outcome.REPRODUCED, 1000.0)),
        ("torch-2.1.2", record_result(case, "2.1.2", Outcome.FIXED, 1010.0)),
    ]


# --- audit and OSV ---------------------------------------------------------------------------------------------------

RUN = "20261201T000000-test-aaaaaa"
DAY = 1_790_000_000.0


def audit_row(
    case: Case,
    variant: str,
    cell: str,
    versions: dict[str, str],
    outcome: Outcome,
    started: float,
    device: str = "cpu",
    nproc: int = 1,
    digest: str | None = None,
) -> dict:
    """A record row of `case` (run RUN, machine m-test) measured in `cell` with `versions`."""
    result = Result(
        case=case.id,
        variant=variant,
        nproc=nproc,
        device=device,
        outcome=outcome,
        expected=None,
        reason="",
        versions=versions,
        python="3.11.7",
        started_at=started,
        fingerprint=f"fp-{cell}-{variant}-{device}-{nproc}",
        digest=run_digest(case, variant) if digest is None else digest,
    )
    return to_row(RUN, cell, result, "m-test")


def osv_docs(world: dict) -> dict[str, dict]:
    """The OSV advisories exported from a synthetic record (the `world` or `gated` fixture)."""
    store = open_reader(world["tmp"] / "absent.db", False, world["cases"], world["root"])
    return documents(store.latest(), world["cases"], load(world["root"]).releases)


def flaky_results(case: Case, fixed_runs: int) -> list[tuple[str, Result]]:
    """A flaky bug along torch: 2.6.0 fixed in 40 launches, 2.7.0 and 2.7.1 flaky (9/24 and 8/24 reproduced), 2.8.0
    fixed in `fixed_runs` launches (one: too few to call it fixed next to a rate of 0.35)."""
    rows = [
        ("2.6.0", Outcome.FIXED, {"fixed": 40}),
        ("2.7.0", Outcome.FLAKY, {"reproduced": 9, "fixed": 15}),
        ("2.7.1", Outcome.FLAKY, {"reproduced": 8, "fixed": 16}),
        ("2.8.0", Outcome.FIXED, {"fixed": fixed_runs} if fixed_runs > 1 else {}),
    ]
    return [
        (
            f"torch-{torch}",
            Result(
                case=case.id,
                variant="bug",
                nproc=1,
                device="cpu",
                outcome=outcome,
                expected=None,
                reason="",
                versions={"torch": torch},
                python="3.11.7",
                started_at=DAY + i,
                tallies=tallies,
                launched=True,
                fingerprint=f"fp-{torch}",
                digest=run_digest(case, "bug"),
            ),
        )
        for i, (torch, outcome, tallies) in enumerate(rows)
    ]
