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
    proc = subprocess.run([sys.executable, "-m", "harness", "report", "fbgemm-5816", "--format", "markdown"],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "| fbgemm-5816-uvm-to-cpu-host-mapped | bug | cuda | — | not measured; its rules say: reproduced where " \
           "fbgemm-gpu <1.8.0; else fixed |" in proc.stdout
    nothing = subprocess.run([sys.executable, "-m", "harness", "report", "no-such-case"], cwd=ROOT,
                             capture_output=True, text=True, check=False)
    assert nothing.returncode == 1 and "no results" in nothing.stderr
