"""The cases table and `bugmatrix report` name the cause of each version that could not say: what its results say
(a module the environment lacks, a skip's reason), or the other package that decides (harness/analysis/undecided.py).
On 93b7231 they printed "could not say: 2.2.0" with no cause (issue 37 item 1)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from harness.analysis.transitions import axes
from harness.cli import main
from harness.model.case import Case
from harness.model.outcome import Outcome
from harness.output.reports import build_report
from harness.session.readers import open_reader
from harness.session.record import Record, to_row, write
from harness.session.store import ResultStore
from tests.helpers import record_result

ROOT = Path(__file__).resolve().parent.parent
RUN = "20261201T000000-t-aaaaaa"
SETUPTOOLS = (
    "SKIP: torch 2.1.1+cpu's Inductor imports setuptools (torch.utils.cpp_extension) and this environment has none"
)


def _record(tmp_path: Path, case: Case, rows: list[tuple[str, dict[str, str], Outcome, str]]) -> Path:
    """A record in tmp_path of `case`'s `bug` results: (cell, versions, outcome, reason) each."""
    results = [
        to_row(
            RUN,
            cell,
            record_result(case, "0", outcome, 1.0 + i).model_copy(update={"versions": versions, "reason": reason}),
            "m-t",
        )
        for i, (cell, versions, outcome, reason) in enumerate(rows)
    ]
    write(tmp_path / "rec", Record(rows=results, runs={RUN: {"started": "x", "machine": "m-t", "command": "t"}}))
    return tmp_path / "rec"


def _table_row(tmp_path: Path, record: Path, case: Case) -> str:
    """The case's row of the cases table (docs/cases.md's generated region) that `bugmatrix docs` writes."""
    from harness.output import pages

    table = pages.generated_tables(record, tmp_path / "cases", tmp_path / "no-matrix.yaml")["cases-table"]
    [row] = [line for line in table.splitlines() if f"`{case.id}`" in line]
    return row


def _report(tmp_path: Path, record: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What `bugmatrix report --format markdown` prints over the record alone."""
    ResultStore(tmp_path / "none.db")  # an empty store, over the record
    argv = ["--cases-dir", str(tmp_path / "cases"), "report", "--format", "markdown"]
    capsys.readouterr()
    assert main([*argv, "--record", str(record), "--db", str(tmp_path / "none.db")]) == 0
    return capsys.readouterr().out


def test_a_version_that_could_not_say_for_want_of_a_module_names_it(
    make_case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # noqa: ANN001
    """lightning-21244 at 2.2.0 (it imports `requests` undeclared) and torch-181366 at 2.9.0-2.10.0 (no setuptools):
    environment causes that `narrow` printed and the table did not."""
    case = make_case("print('x')\n", case_id="torch-9-environment")
    record = _record(
        tmp_path,
        case,
        [
            ("torch-2.0.0", {"torch": "2.0.0"}, Outcome.REPRODUCED, "REPRODUCED: FAKE-BUG-SIGNATURE"),
            (
                "torch-2.1.0",
                {"torch": "2.1.0"},
                Outcome.ERROR,
                "rank 0: uncaught ModuleNotFoundError: No module named 'requests'",
            ),
            ("torch-2.1.1", {"torch": "2.1.1"}, Outcome.SKIP, SETUPTOOLS),
            ("torch-2.2.0", {"torch": "2.2.0"}, Outcome.FIXED, "every rank exited 0"),
        ],
    )
    row = _table_row(tmp_path, record, case)
    assert (
        "could not say: 2.1.0 — error: the environment lacks the module `requests`; 2.1.1 — skip (SKIP: torch "
        "2.1.1+cpu's Inductor imports setuptools (torch.utils.cpp_extension) and this environment has none)" in row
    ), row
    report = _report(tmp_path, record, capsys)  # `report` says the same where it says "could not say"
    assert "could not say: 2.1.0 — error: the environment lacks the module `requests`; 2.1.1 — skip" in report
    # and so does the comment `narrow` prints to paste upstream
    from harness.analysis.reproduce import upstream_comment

    latest = open_reader(None, False, [case], record).latest()
    [axis] = axes(latest)
    [boundary] = axis.boundaries()
    assert "could not say: 2.1.0 — error: the environment lacks the module `requests`" in upstream_comment(
        case, axis, boundary, latest
    )


def test_versions_whose_causes_differ_only_by_their_own_version_share_one(make_case, tmp_path: Path) -> None:  # noqa: ANN001
    """torch-181366's 2.9.0, 2.9.1 and 2.10.0 skip for the same reason, each naming its own `torch X+cu128`."""
    case = make_case("print('x')\n", case_id="torch-9-same-reason")
    skips = [
        (f"torch-{v}", {"torch": v}, Outcome.SKIP, SETUPTOOLS.replace("2.1.1", v) + " (torch >= 2.11 requires it)" * 3)
        for v in ("2.9.0", "2.9.1", "2.10.0")
    ]  # long: the 2.10.0 one is cut to its gist at a different place
    record = _record(
        tmp_path,
        case,
        [
            ("torch-2.8.0", {"torch": "2.8.0"}, Outcome.FIXED, "every rank exited 0"),
            *skips,
            ("torch-2.11.0", {"torch": "2.11.0"}, Outcome.REPRODUCED, "REPRODUCED: FAKE-BUG-SIGNATURE"),
        ],
    )
    row = _table_row(tmp_path, record, case)
    assert "could not say: 2.9.0, 2.9.1, 2.10.0 — skip (SKIP: torch 2.9.0+cpu's Inductor imports setuptools" in row


def test_a_mixed_version_names_the_package_that_decides(
    make_case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # noqa: ANN001
    """litgpt-2156 at 0.5.11: fixed with transformers 4.51.3, reproduced with 4.52.1. The cause names transformers
    and its versions on each side (the slice to narrow along, litgpt fixed at 0.5.11)."""
    case = make_case("print('x')\n", case_id="litgpt-9-mixed", packages=["litgpt", "transformers"])
    rep, fix = "REPRODUCED: FAKE-BUG-SIGNATURE", "every rank exited 0"
    record = _record(
        tmp_path,
        case,
        [
            (
                "litgpt-0.5.10",
                {"litgpt": "0.5.10", "transformers": "4.52.1", "torch": "2.8.0"},
                Outcome.REPRODUCED,
                rep,
            ),
            (
                "litgpt-0.5.11-t-4.51.3",
                {"litgpt": "0.5.11", "transformers": "4.51.3", "torch": "2.8.0"},
                Outcome.FIXED,
                fix,
            ),
            (
                "litgpt-0.5.11-t-4.52.1",
                {"litgpt": "0.5.11", "transformers": "4.52.1", "torch": "2.8.0"},
                Outcome.REPRODUCED,
                rep,
            ),
            ("litgpt-0.5.12", {"litgpt": "0.5.12", "transformers": "4.52.1", "torch": "2.8.0"}, Outcome.FIXED, fix),
        ],
    )
    decides = "0.5.11 — another package decides: transformers (4.51.3 fixed; 4.52.1 reproduced)"
    row = _table_row(tmp_path, record, case)
    assert (
        "between 0.5.10 and 0.5.12 (what lies between is unknown: no package index was consulted; "
        f"could not say: {decides})" in row
    ), row
    assert f"reproduces in some cells, not others: {decides}" in _report(tmp_path, record, capsys)
    # the cause says which package, with its versions on each side: what narrowing along it starts from
    from harness.analysis.undecided import PACKAGE, undecided_cause  # (new in this change: imported after the table)

    latest = open_reader(None, False, [case], record).latest()
    [axis] = [a for a in axes(latest) if a.package == "litgpt"]
    cause = undecided_cause(latest, axis, "0.5.11")
    assert (cause.kind, cause.package, cause.sides) == (
        PACKAGE,
        "transformers",
        (("fixed", ("4.51.3",)), ("reproduced", ("4.52.1",))),
    )


def test_cells_that_disagree_with_no_package_to_tell_them_apart_say_so(make_case, tmp_path: Path) -> None:  # noqa: ANN001
    case = make_case("print('x')\n", case_id="torch-9-disagree")
    record = _record(
        tmp_path,
        case,
        [
            ("torch-2.5.1", {"torch": "2.5.1"}, Outcome.REPRODUCED, "REPRODUCED: FAKE-BUG-SIGNATURE"),
            ("local", {"torch": "2.5.1"}, Outcome.FIXED, "every rank exited 0"),
        ],
    )
    latest = open_reader(None, False, [case], record).latest()
    report = build_report(latest, {case.id: ["torch"]})
    [(axis, summary)] = report.summaries()
    assert "2.5.1 — reproduces in some cells, not others, and no other recorded package tells them apart" in summary
    from harness.analysis.undecided import CELLS, undecided_cause  # (new in this change: imported after the summary)

    assert undecided_cause(latest, axis, "2.5.1").kind == CELLS


ROWS = {  # the committed record's three versions that could not say (issue 37), and what the table must name
    "lightning-21244-save-last-stale-after-topk": (
        "could not say: 2.2.0 — error: the environment lacks the module `requests`"
    ),
    "torch-181366-inductor-cpu-pad-interpolate-cpp-compile-error": (
        "could not say: 2.9.0, 2.9.1, 2.10.0 — skip (SKIP: torch 2.9.0+cu128's Inductor imports setuptools"
    ),
    "litgpt-2156-gemma3-hf-prefix-transformers": (
        "could not say: 0.5.11 — another package decides: transformers (4.51.3 fixed; 4.52.1 reproduced)"
    ),
}


@pytest.mark.parametrize("case_id", sorted(ROWS))
def test_the_committed_cases_table_names_the_cause_of_each_could_not_say(case_id: str) -> None:
    """Read from docs/cases.md's generated table (`bugmatrix docs --check`, tests/test_docs.py, keeps it what the
    record generates)."""
    text = (ROOT / "docs" / "cases.md").read_text()
    [row] = [line for line in text.splitlines() if line.startswith(f"| `{case_id}` — ")]  # its cases-table row
    assert ROWS[case_id] in row
    assert not re.search(r"could not say: [^—)]*\)", row), "a version that could not say without its cause"
