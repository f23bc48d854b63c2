"""tools/audit_check.py's comparison of `audit --json` answers with a run's results: what agrees, what contradicts
(affected where the case measured fixed or could not run; not affected where it reproduced; no precision), what the
audit could not say and what the run did not measure."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.model.outcome import Outcome
from harness.model.result import Result

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import audit_check  # noqa: E402


def _result(variant: str, outcome: Outcome, nproc: int = 1, launched: bool = True, reason: str = "") -> Result:
    return Result(
        case="c", variant=variant, nproc=nproc, device="cpu", outcome=outcome, expected=None, reason=reason,
        launched=launched,
    )  # fmt: skip


def _answer(variant: str, why: str = "", precision: str = "measured at these exact pins") -> dict:
    return {"case": "c", "variant": variant, "why": why, "precision": precision, "basis": "exact"}


def test_each_pairing_of_answer_and_measurement() -> None:
    audit = {
        "affected": [_answer("hit"), _answer("gone"), _answer("cannot-run"), _answer("unlaunched")],
        "not_affected": [_answer("fixed", "fixed"), _answer("absent", "absent"), _answer("wrong", "fixed")],
        "cannot_say": [_answer("untestable", "untestable at torch 2.2.1")],
    }
    results = [
        _result("hit", Outcome.FIXED, 1),
        _result("hit", Outcome.REPRODUCED, 2),  # one world size reproducing is reproduced
        _result("gone", Outcome.FIXED),
        _result("cannot-run", Outcome.SKIP, reason="FSDP2 is not in torch 2.2.1"),
        _result("unlaunched", Outcome.SKIP, launched=False, reason="not installed: litgpt"),
        _result("fixed", Outcome.FIXED),
        _result("absent", Outcome.SKIP),
        _result("wrong", Outcome.REPRODUCED),
        _result("untestable", Outcome.REPRODUCED),
    ]
    rows = {r.variant: r for r in audit_check.compare(audit, results)}
    verdicts = {name: row.verdict for name, row in rows.items()}
    assert verdicts == {
        "hit": "agree",
        "gone": "contradict",
        "cannot-run": "contradict",
        "unlaunched": "not measured",
        "fixed": "agree",
        "absent": "agree",
        "wrong": "contradict",
        "untestable": "could not say",
    }
    assert rows["cannot-run"].reason == "FSDP2 is not in torch 2.2.1"
    out: list[str] = []
    assert audit_check.report(list(rows.values()), out) == {
        "agree": 3,
        "contradict": 3,
        "could not say": 1,
        "not measured": 1,
    }
    assert out[-2] == "8 answers: agree 3, contradict 3, could not say 1, not measured 1"
    assert out[-1] == "by basis: exact agree 3, exact contradict 3, exact could not say 1, exact not measured 1"


def test_an_answer_without_precision_contradicts() -> None:
    rows = audit_check.compare({"not_affected": [_answer("v", "fixed", precision="")]}, [_result("v", Outcome.FIXED)])
    assert [r.verdict for r in rows] == ["contradict"]


@pytest.mark.parametrize("text", ["torch", "torch==", "==2.2.1"])
def test_bad_pins_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not PKG==VERSION"):
        audit_check.parse_pins([text])
    assert audit_check.parse_pins(["fbgemm-gpu-cpu==1.2.0"]) == {"fbgemm-gpu": "1.2.0"}
