"""Intake (harness/analysis/intake.py): from the draft's first result to the first adjacent boundary, superseded
results never counting, and no intake for a case whose draft the results do not hold."""

from __future__ import annotations

from harness.analysis.intake import intakes, median_wall
from harness.model.case import Case
from harness.model.job import run_digest
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.model.scaffold import NOT_WRITTEN
from harness.output.reports import intake_markdown
from harness.session.record import current_digests


def _r(
    case: Case,
    torch: str,
    outcome: Outcome,
    at: float,
    digest: str | None = None,
    tallies: dict | None = None,
    reason: str = "",
) -> tuple[str, str, Result]:
    result = Result(
        case=case.id,
        variant="bug",
        nproc=1,
        device="cpu",
        outcome=outcome,
        expected=None,
        reason=reason,
        versions={"torch": torch},
        python="3.11.7",
        started_at=at,
        tallies=tallies or {},
        duration_s=60.0 if at == 4600.0 else 0.0,
        digest=run_digest(case, "bug") if digest is None else digest,
    )
    return (f"run-{at:.0f}", f"torch-{torch}", result)


def _between(releases: list[str]):  # noqa: ANN202 - a transitions.Between over a fixed list of releases
    from packaging.version import Version

    def between(case: str, package: str, device: str, before: str, after: str) -> tuple[str, ...]:
        lo, hi = sorted((Version(before), Version(after)))
        return tuple(v for v in releases if lo < Version(v) < hi)

    return between


def test_intake_runs_from_the_draft_to_the_first_adjacent_boundary(make_case) -> None:  # noqa: ANN001
    case = make_case(
        "print('x')\n",
        case_id="torch-1-intake",
        packages=["torch"],
        variants={"bug": {"expect": [{"outcome": "fixed"}]}},
    )
    draft = _r(case, "2.3.0", Outcome.SKIP, 1000.0, digest="the-draft", reason=f"SKIP: {NOT_WRITTEN}")
    entries = [
        _r(case, "2.0.0", Outcome.REPRODUCED, 500.0),  # before the draft: not part of this intake
        draft,
        _r(case, "2.0.0", Outcome.REPRODUCED, 2000.0, digest="an-earlier-script"),  # superseded: never a side
        _r(case, "2.3.0", Outcome.FIXED, 2100.0, digest="an-earlier-script"),
        _r(case, "2.0.0", Outcome.REPRODUCED, 3000.0),
        _r(case, "2.3.0", Outcome.FIXED, 3100.0),  # an interval: 2.1.0 and 2.2.0 lie between
        _r(case, "2.2.0", Outcome.FIXED, 3600.0, tallies={"fixed": 3}),  # 2.1.0 still untried
        _r(case, "2.1.0", Outcome.REPRODUCED, 4600.0, tallies={"reproduced": 3}),  # adjacent: fixed in 2.2.0 (60 s)
        _r(case, "2.4.0", Outcome.FIXED, 9000.0),
    ]
    between = _between(["2.0.0", "2.1.0", "2.2.0", "2.3.0", "2.4.0"])
    [row] = intakes(entries, [case], current_digests([case]), between)
    assert (row.drafted, row.reached, row.wall_s) == (1000.0, 4660.0, 3660.0)  # until that launch ended
    assert row.launches == 1 + 1 + 1 + 1 + 1 + 3 + 3  # the draft, two superseded, two plain, two of three repeats
    assert row.boundary == "bug along torch: fixed in 2.2.0 (2.1.0 reproduced)"
    # no package index: nothing can be called adjacent, so the intake is not reached (never guessed)
    [unknown] = intakes(entries, [case], current_digests([case]), None)
    assert unknown.drafted == 1000.0 and unknown.reached is None and unknown.wall_s is None


def test_a_case_without_a_recorded_draft_has_no_intake_and_the_median_counts_only_measured_ones(make_case) -> None:  # noqa: ANN001
    case = make_case(
        "print('x')\n", case_id="torch-2-old", packages=["torch"], variants={"bug": {"expect": [{"outcome": "fixed"}]}}
    )
    entries = [_r(case, "2.0.0", Outcome.REPRODUCED, 100.0), _r(case, "2.1.0", Outcome.FIXED, 200.0)]
    rows = intakes(entries, [case], current_digests([case]), _between(["2.0.0", "2.1.0"]))
    assert rows[0].drafted is None and median_wall(rows) is None
    text = intake_markdown(rows)
    assert "**Median: not measured**" in text and "1 case(s) were written before drafts were recorded" in text
    assert "torch-2-old" not in text


def test_a_lightning_case_reaches_its_boundary_along_lightning_not_along_the_torch_its_cells_resolve(make_case) -> None:  # noqa: ANN001
    """Lightning cells resolve the torch of their date: lightning 2.5.0 (torch 2.5.1) reproduces, 2.5.1 (torch 2.6.0)
    does not. That is no adjacent boundary along torch (lightning moved too), only one along lightning once the
    release between is run; within a slice (lightning held) a torch boundary counts, with its held pin."""
    case = make_case(
        "print('x')\n",
        case_id="lightning-1-intake",
        packages=["torch", "lightning"],
        variants={"bug": {"expect": [{"outcome": "fixed"}]}},
    )

    def r(lightning: str, torch: str, outcome: Outcome, at: float, reason: str = "", digest: str | None = None):  # noqa: ANN202
        result = Result(
            case=case.id,
            variant="bug",
            nproc=1,
            device="cpu",
            outcome=outcome,
            expected=None,
            reason=reason,
            versions={"torch": torch, "lightning": lightning},
            python="3.11.7",
            started_at=at,
            digest=run_digest(case, "bug") if digest is None else digest,
        )
        return (f"run-{at:.0f}", f"lightning-{lightning}-torch-{torch}", result)

    between = _between(["2.4.0", "2.5.0", "2.5.0.post0", "2.5.1", "2.6.0"])
    entries = [
        r("2.5.0", "2.5.1", Outcome.SKIP, 1000.0, reason=f"SKIP: {NOT_WRITTEN}", digest="the-draft"),
        r("2.5.0", "2.5.1", Outcome.REPRODUCED, 2000.0),
        r("2.5.1", "2.6.0", Outcome.FIXED, 2100.0),  # adjacent along torch (2.5.1 -> 2.6.0), not along lightning
    ]
    [row] = intakes(entries, [case], current_digests([case]), between)
    assert row.reached is None and row.boundary == ""
    entries.append(r("2.5.0.post0", "2.5.1", Outcome.REPRODUCED, 3000.0))  # the release between: now adjacent
    [row] = intakes(entries, [case], current_digests([case]), between)
    assert row.reached == 3000.0 and row.boundary == "bug along lightning: fixed in 2.5.1 (2.5.0.post0 reproduced)"
    # a coupling: lightning 2.6.0 held, torch moved alone -- a boundary along torch within the slice
    coupled = [
        entries[0],
        r("2.6.0", "2.5.1", Outcome.FIXED, 2000.0),
        r("2.6.0", "2.6.0", Outcome.REPRODUCED, 2100.0),
    ]
    [row] = intakes(coupled, [case], current_digests([case]), between)
    assert row.boundary == "bug along torch with lightning 2.6.0: regressed in 2.6.0 (2.5.1 fixed)"
