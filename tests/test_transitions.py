"""Transitions along an axis that mixes releases and git installs are ordered by date, not by version string."""

from __future__ import annotations

from datetime import datetime, timezone

from harness.analysis.transitions import axes
from harness.model.outcome import Outcome
from harness.model.result import Result

HISTORY = [  # (version recorded, outcome, date): main's version string says nothing about history
    ("0.3.0", Outcome.FIXED, 1),
    ("0.4.0.dev0 @ " + "b" * 40, Outcome.FIXED, 2),
    ("0.4.0.dev0 @ " + "a" * 40, Outcome.REPRODUCED, 3),
    ("0.4.0.dev0 @ " + "c" * 40, Outcome.FIXED, 4),
    ("0.3.1", Outcome.FIXED, 5),
]


def results() -> list[tuple[str, Result]]:
    return [
        (
            f"cell-{i}",
            Result(
                case="c",
                variant="bug",
                nproc=1,
                device="cpu",
                outcome=o,
                expected=None,
                reason="",
                versions={"litgpt": v},
            ),
        )
        for i, (v, o, _) in enumerate(HISTORY)
    ]


def test_commits_are_placed_by_date() -> None:
    dates = {v.partition(" @ ")[2] or v: datetime(2024, 4, d, tzinfo=timezone.utc) for v, _, d in HISTORY}
    [axis] = axes(results(), dater=lambda package, version, commit: dates[commit or version])
    assert axis.changes() == [("regressed", HISTORY[1][0], HISTORY[2][0]), ("fixed", HISTORY[2][0], HISTORY[3][0])]
    assert "regressed between 0.4.0.dev0 @ bbbbbbbbbbbb and 0.4.0.dev0 @ aaaaaaaaaaaa" in axis.summary()


def test_commits_that_cannot_be_dated_are_not_placed_by_their_version_string() -> None:
    """No local clone: the releases are ordered by version, the commits are left unplaced and said so, and no fix or
    regression is claimed from them (by version string they would sort after 0.3.1 and by SHA among themselves)."""
    release_dates = {v: datetime(2024, 4, d, tzinfo=timezone.utc) for v, _, d in HISTORY if " @ " not in v}
    for dater in (None, lambda package, version, commit: None if commit else release_dates[version]):
        [axis] = axes(results(), dater=dater)
        assert [p.version for p in axis.points] == ["0.3.0", "0.3.1"]
        assert [p.version for p in axis.unplaced] == [HISTORY[2][0], HISTORY[1][0], HISTORY[3][0]]  # a, b, c
        assert axis.changes() == []
        summary = axis.summary()
        assert "regressed" not in summary and "never reproduced" not in summary, summary
        assert summary == (
            "not placed in history (no local clone dates these commits; set BUGMATRIX_MIRROR_LITGPT): "
            "0.4.0.dev0 @ aaaaaaaaaaaa reproduced, 0.4.0.dev0 @ bbbbbbbbbbbb fixed, "
            "0.4.0.dev0 @ cccccccccccc fixed"
        )


def test_a_pinned_commit_whose_environment_could_not_be_made_is_still_dated() -> None:
    """An `infra` probe of a git install records its pin (`git:<sha>`), no version: it is dated by its commit like
    the others, so one failed build does not leave every commit of the axis unplaced (narrow crashed on it)."""
    broken = ("git:" + "d" * 40, Outcome.INFRA, 3)
    history = [*HISTORY[:3], broken, *HISTORY[3:]]
    dates = {}
    for v, _, d in history:
        dates[v.partition(" @ ")[2] or v.removeprefix("git:")] = datetime(
            2024, 4, d, 12 if v == broken[0] else 0, tzinfo=timezone.utc
        )
    rows = [
        (
            f"cell-{i}",
            Result(
                case="c",
                variant="bug",
                nproc=1,
                device="cpu",
                outcome=o,
                expected=None,
                reason="",
                versions={"litgpt": v},
            ),
        )
        for i, (v, o, _) in enumerate(history)
    ]
    seen: list[tuple[str, str | None]] = []

    def dater(package: str, version: str, commit: str | None) -> datetime:
        seen.append((version, commit))
        return dates[commit or version]

    [axis] = axes(rows, dater=dater)
    assert axis.unplaced == [] and [p.version for p in axis.points][3] == broken[0]
    assert ("", "d" * 40) in seen  # dated by its commit
    assert axis.changes() == [("regressed", HISTORY[1][0], HISTORY[2][0]), ("fixed", HISTORY[2][0], HISTORY[3][0])]
    # between a and c the clone lists d and e: d was tried (it could not say), e never was
    between = {(HISTORY[2][0], HISTORY[3][0]): ("d" * 40, "e" * 40)}
    fixed = axis.boundaries(lambda case, package, device, old, new: between.get((old, new), ()))[1]
    assert fixed.untested == ("e" * 40,) and fixed.undecided == (broken[0],)
    assert "(1 commit(s) not run; could not say: git:dddddddddddd)" in fixed.text()


def test_a_cell_that_could_not_say_does_not_hide_one_that_did() -> None:
    """Two cells at lightning 2.6.6: `default` reproduced, a coupling cell could not be built (infra). The version
    reproduces (it read "never reproduced; could not say: 2.6.6" before); two verdicts that differ are `mixed`."""

    def at(cell: str, version: str, outcome: Outcome) -> tuple[str, Result]:
        return (
            cell,
            Result(
                case="c",
                variant="bug",
                nproc=1,
                device="cpu",
                outcome=outcome,
                expected=None,
                reason="",
                versions={"lightning": version},
            ),
        )

    [axis] = axes(
        [
            at("lightning-2.5.6", "2.5.6", Outcome.FIXED),
            at("default", "2.6.6", Outcome.REPRODUCED),
            at("lightning-2.6.6-torch-2.5.1", "2.6.6", Outcome.INFRA),
        ]
    )
    assert [(p.version, p.status) for p in axis.points] == [("2.5.6", "fixed"), ("2.6.6", "reproduced")]
    assert axis.changes() == [("regressed", "2.5.6", "2.6.6")]
    [axis] = axes([at("a", "2.6.6", Outcome.FIXED), at("b", "2.6.6", Outcome.REPRODUCED)])
    assert axis.points[0].status == "mixed"


def test_a_coupling_is_read_along_its_second_package_never_as_never_reproduced(make_case) -> None:  # noqa: ANN001
    """lightning 2.6.6 fixed with torch 2.11 and reproduced with 2.12: along lightning alone the point is mixed, and
    the table used to print "never". It must say where it reproduces and the boundary along torch, with lightning
    2.6.6 fixed in the sentence."""
    from harness.output.reports import build_report, to_cases_markdown

    case = make_case(
        "print('x')\n",
        case_id="lightning-9-coupled",
        packages=["torch", "lightning"],
        variants={"bug": {"expect": [{"when": {"torch": ">=2.12"}, "outcome": "reproduced"}, {"outcome": "fixed"}]}},
    )
    cells = [
        ("lightning-2.5.6", "2.5.6", "2.9.1", Outcome.FIXED),
        ("lightning-2.6.6-torch-2.11.0", "2.6.6", "2.11.0", Outcome.FIXED),
        ("lightning-2.6.6-torch-2.12.0", "2.6.6", "2.12.0", Outcome.REPRODUCED),
    ]
    found = [
        (
            cell,
            Result(
                case=case.id,
                variant="bug",
                nproc=1,
                device="cpu",
                outcome=o,
                expected=None,
                reason="",
                versions={"lightning": light, "torch": torch},
                tallies={o.value: 3},
            ),
        )
        for cell, light, torch, o in cells
    ]
    report = build_report(
        found, {case.id: ["torch", "lightning"]}, between=lambda c, package, device, a, b: ()
    )  # every pair adjacent
    report.cases = {case.id: case}
    [row] = [line for line in to_cases_markdown(report).splitlines() if case.id in line]
    assert "never" not in row
    assert "with lightning 2.6.6, torch 2.12.0" in row  # where it reproduces
    assert "with lightning 2.6.6, torch **2.12.0** (2.11.0 fixed)" in row  # the regression, adjacent, along torch
    [summary] = [text for axis, text in report.summaries() if axis.variant == "bug"]  # `report`'s own line
    assert "never reproduced" not in summary
    # the version that cannot say alone names the package that decides and its versions on each side
    assert "not others: 2.6.6 — another package decides: torch (2.11.0 fixed; 2.12.0 reproduced)" in summary
    # the JSON holds the same: the axis along torch at lightning 2.6.6, its boundary adjacent, both sides tallied
    import json

    from harness.output.reports import to_json

    [axis] = [a for a in json.loads(to_json(report))["axes"] if a["package"] == "lightning"]
    [coupled] = axis["coupled"]
    assert (coupled["at"], coupled["package"]) == ("2.6.6", "torch")
    [boundary] = coupled["boundaries"]
    assert (boundary["kind"], boundary["before"], boundary["after"], boundary["adjacent"]) == (
        "regressed",
        "2.11.0",
        "2.12.0",
        True,
    )
    assert boundary["tallies"] == {"before": {"fixed": 3}, "after": {"reproduced": 3}}


def test_cells_that_disagree_with_nothing_to_tell_them_apart_are_said_so_not_never(make_case) -> None:  # noqa: ANN001
    from harness.output.reports import build_report, to_cases_markdown

    case = make_case(
        "print('x')\n",
        case_id="torch-9-disagree",
        packages=["torch"],
        variants={"bug": {"expect": [{"outcome": "fixed"}]}},
    )
    found = [
        (
            cell,
            Result(
                case=case.id,
                variant="bug",
                nproc=1,
                device="cpu",
                outcome=o,
                expected=None,
                reason="",
                versions={"torch": "2.5.1"},
            ),
        )
        for cell, o in (("torch-2.5.1", Outcome.REPRODUCED), ("local", Outcome.FIXED))
    ]
    report = build_report(found, {case.id: ["torch"]})
    report.cases = {case.id: case}
    [row] = [line for line in to_cases_markdown(report).splitlines() if case.id in line]
    assert "never" not in row and "torch 2.5.1: in some cells, not others" in row


def test_the_cases_table_and_narrow_read_one_slice(make_case, tmp_path) -> None:  # noqa: ANN001
    """lightning-20307 in small, as the record holds it before any narrowing: the cases table's row is word for word
    what it was when the slice was computed in output/ (issue 37), and the interval it names is the one `narrow`
    selects (harness/analysis/slices.py: one computation), on the slice, never on the whole torch axis."""
    import yaml

    from harness.analysis.slices import coupled
    from harness.matrix.expand import load_matrix
    from harness.output.reports import build_report, to_cases_markdown
    from harness.workflows.narrow import intervals

    case = make_case(
        "print('x')\n",
        case_id="lightning-8-slice",
        packages=["torch", "lightning"],
        variants={"bug": {"expect": [{"when": {"lightning": "<2.6"}, "outcome": "reproduced"}, {"outcome": "fixed"}]}},
    )
    cells = [
        ("lightning-2.5.6", "2.5.6", "2.9.0", Outcome.REPRODUCED),
        ("lightning-2.3.3-torch-2.5.1", "2.3.3", "2.5.1", Outcome.REPRODUCED),
        ("lightning-2.6.0", "2.6.0", "2.9.1", Outcome.FIXED),
        ("lightning-2.6.6", "2.6.6", "2.14.0", Outcome.FIXED),
        ("lightning-2.6.6-torch-2.5.1", "2.6.6", "2.5.1", Outcome.REPRODUCED),
        ("lightning-2.6.6-torch-2.11.0", "2.6.6", "2.11.0", Outcome.FIXED),
    ]
    found = [
        (
            cell,
            Result(
                case=case.id,
                variant="bug",
                nproc=1,
                device="cpu",
                outcome=o,
                expected=None,
                reason="",
                versions={"lightning": light, "torch": torch},
            ),
        )
        for cell, light, torch, o in cells
    ]
    torch_between = ("2.6.0", "2.7.0", "2.7.1", "2.8.0", "2.9.0", "2.9.1", "2.10.0")

    def between(case_id: str, package: str, device: str, a: str, b: str) -> tuple[str, ...]:
        return torch_between if (package, a, b) == ("torch", "2.5.1", "2.11.0") else ()

    report = build_report(found, {case.id: ["torch", "lightning"]}, between=between)
    report.cases = {case.id: case}
    [row] = [line for line in to_cases_markdown(report).splitlines() if case.id in line]
    assert row.split(" | ")[3:6] == [
        "2.3.3 … 2.5.6 (2 versions); with lightning 2.6.6, torch 2.5.1",
        "**2.6.0** (2.5.6 reproduced); with lightning 2.6.6, torch between 2.5.1 and 2.11.0 (7 releases not run)",
        "—",
    ]
    [axis] = [a for a in report.axes if a.package == "lightning"]
    [(at, sub)] = report.coupled(axis)
    assert (at, sub.package, sub.within, [p.version for p in sub.points]) == (
        "2.6.6",
        "torch",
        ("lightning", "2.6.6"),
        ["2.5.1", "2.11.0", "2.14.0"],  # the slice's cells alone: not lightning 2.3.3's torch 2.5.1
    )
    assert coupled(axis, case, lambda cell: report.status((case.id, "bug", "cpu"), cell)[1]) == [(at, sub)]

    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "lightning-{lightning}", "axes": {"lightning": ["2.6.6"]}}]})
    )
    matrix = load_matrix(tmp_path / "matrix.yaml")
    for packages in (None, {"torch"}):
        [target] = intervals(found, {case.id: case}, between, matrix, packages=packages)
        assert target.axis.label == "lightning-8-slice::bug (cpu) over torch with lightning 2.6.6"
        assert target.boundary.text() == "fixed between 2.5.1 and 2.11.0 (7 releases not run)"
