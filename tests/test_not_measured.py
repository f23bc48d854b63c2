"""A case no result has measured (a CUDA-only case before any GPU run) shows in `bugmatrix report` with its rules,
said as not measured, never as a verdict."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness.output import reports

ROOT = Path(__file__).resolve().parent.parent
CASE = "fbgemm-5816-uvm-to-cpu-host-mapped"


def test_the_report_lists_an_unmeasured_case_with_its_rules() -> None:
    report = reports.report_for([], ROOT / "cases", [])
    rows = {(case, variant): (devices, summary) for case, variant, devices, summary in report.unmeasured()}
    rules = "not measured; its rules say: reproduced where fbgemm-gpu <1.8.0; else fixed"
    assert rows[(CASE, "bug")] == ("cuda", rules)
    assert rows[(CASE, "control-managed")] == ("cuda", "not measured; its rules say: fixed")
    assert "| fbgemm-5816-uvm-to-cpu-host-mapped | bug | cuda | — | not measured" in reports.to_markdown(report)


def test_asking_the_report_for_an_unmeasured_case_says_so(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "report", "fbgemm-5816", "--format", "markdown"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "| fbgemm-5816-uvm-to-cpu-host-mapped | bug | cuda | — | not measured; its rules say: reproduced where "
        "fbgemm-gpu <1.8.0; else fixed |" in proc.stdout
    )
    nothing = subprocess.run(
        [sys.executable, "-m", "harness", "report", "no-such-case"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert nothing.returncode == 5 and "no results" in nothing.stderr  # NOTHING_RAN, as every reading command


def test_a_never_launched_device_skip_in_the_store_leaves_the_case_not_measured(tmp_path: Path) -> None:
    """`bugmatrix run` on a machine without CUDA stores a never-launched `skip: needs a CUDA device` row for a
    CUDA-only case. It measured nothing: the report still says "not measured" with the rules (7ca3bef: `?`, which
    is what the README's test command met after its main job had filled `.bugmatrix/results.db`)."""
    from harness.launch.execute import skip_result
    from harness.model.case import load_case
    from harness.model.job import Job
    from harness.session.store import ResultStore, recording

    case = load_case(ROOT / "cases" / CASE / "case.yaml")
    store = ResultStore(tmp_path / "results.db")
    with recording(store, "bugmatrix run", "test") as run_id:
        for variant in case.spec.variants:
            job = Job(case=case, variant=variant, nproc=1, device="cuda")
            store.save(run_id, skip_result(job, "needs a CUDA device; this machine has none"))
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "report", "fbgemm-5816", "--format", "markdown", "--db", str(store.path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert (
        "| fbgemm-5816-uvm-to-cpu-host-mapped | bug | cuda | — | not measured; its rules say: reproduced where "
        "fbgemm-gpu <1.8.0; else fixed |" in proc.stdout
    )
    assert "| ? |" not in proc.stdout


def test_the_tests_never_read_the_users_store() -> None:
    """The README's first command fills `.bugmatrix/results.db`; the tests (this process and what it starts) read
    a store of their own (tests/conftest.py), whatever the folder holds."""
    from harness.session.basics import default_db

    assert default_db() != Path(".bugmatrix/results.db") and "bugmatrix-tests-" in str(default_db())
