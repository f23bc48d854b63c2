"""Tables for people: each terminal table at 80 and 160 columns keeps its key columns (case, variant, the outcome word
whole, the summary); `list` is one line per case; the progress display names the jobs running; the HTML report and
the pages the docs show (harness/output/reports.py, harness/output/pages.py)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from rich.progress import Progress

from harness.cli import main
from harness.model.job import Job
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.output.progress import ProgressDisplay, Running, interrupted_text
from harness.output.tables import cases_table, results_table

from .conftest import MakeCase

ROOT = Path(__file__).resolve().parent.parent
LONG_ID = "lightning-18086-ddp-static-graph-manual-opt"  # 43 characters, as long as the catalogue's are


def render(renderable: object, width: int) -> str:
    """What a `width`-column console prints (no colour: not a terminal)."""
    out = io.StringIO()
    Console(file=out, width=width).print(renderable)
    return out.getvalue()


def column_text(text: str, column: int) -> str:
    """The text of one column of a rendered table (as a list index over the text between box rules), its wrapped
    lines joined by spaces: what a reader reads in it."""
    cells = [line.split("│")[column].strip() for line in text.splitlines() if line.count("│") > 2]
    return " ".join(c for c in cells if c)


@pytest.mark.parametrize("width", [80, 160])
def test_the_report_keeps_the_summary_at_80_and_160_columns(width: int, capsys, monkeypatch) -> None:
    """`bugmatrix report lightning-18086` on an 80-column terminal showed case, variant and part of `dev`: the
    summary, with the fix release, was cut off the right edge. Now the case, each variant and the summary with
    `fixed in 2.6.0 (2.5.6 reproduced)` stay, at 80 and at 160 columns."""
    monkeypatch.setenv("COLUMNS", str(width))
    record = ["--record", str(ROOT / "record"), "--matrix", str(ROOT / "matrix.yaml")]
    assert main(["--cases-dir", str(ROOT / "cases"), "report", *record, "lightning-18086"]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= width
    assert LONG_ID in out
    for variant in ("bug", "workaround-automatic", "workaround-dynamic-graph"):
        assert re.search(rf"\b{variant}\b", out), variant
    summary = " ".join(column_text(out, -2).split())
    assert "fixed in 2.6.0 (2.5.6 reproduced)" in summary, out


def a_result(case: str, outcome: Outcome, expected: Outcome, reason: str) -> Result:
    return Result(case=case, variant="workaround-dynamic-graph", nproc=2, device="cpu", outcome=outcome,
                  expected=expected, reason=reason, duration_s=12.5, launched=True)  # fmt: skip


@pytest.mark.parametrize("width", [80, 160])
def test_the_results_table_keeps_case_variant_and_whole_outcome_words(width: int) -> None:
    """`bugmatrix run` at 80 columns printed `reprod` with expected, time and reason gone. The case id and variant
    stay whole, the outcome word whole, the mismatch mark; at 160 the reason too."""
    results = [
        a_result(LONG_ID, Outcome.REPRODUCED, Outcome.FIXED, "RuntimeError: Your training step ran backward twice"),
        a_result("fake-2-short", Outcome.FIXED, Outcome.FIXED, "no error"),
    ]
    out = render(results_table(results, cells=["lightning-2.5.6-torch-2.6.0", "default"]), width)
    assert max(len(line) for line in out.splitlines()) <= width
    for word in (LONG_ID, "workaround-dynamic-graph", "reproduced", "fixed", "MISMATCH", "lightning-2.5.6-torch-2.6.0"):
        assert word in out, (word, out)
    if width == 160:
        assert "ran backward twice" in column_text(out, -2) and "12.5s" in out


def test_the_outcome_words_are_coloured_on_a_terminal_and_not_in_a_pipe() -> None:
    """Observed and expected outcomes in their colours on a terminal; a pipe gets plain text."""
    table = results_table([a_result("c", Outcome.REPRODUCED, Outcome.FIXED, "")])
    piped = render(table, 160)
    assert "\x1b[" not in piped
    out = io.StringIO()
    Console(file=out, width=160, force_terminal=True, color_system="standard").print(table)
    coloured = out.getvalue()
    assert "\x1b[1;31mreproduced" in coloured and "\x1b[32mfixed" in coloured  # expected in its colour too


@pytest.mark.parametrize("width", [80, 160])
def test_list_prints_one_line_per_case(width: int, make_case: MakeCase) -> None:
    """`bugmatrix list` at 160 columns printed 1,359 lines for 56 cases (titles wrapped at 5 characters); at 80 its
    title, variants, nproc and devices columns had no width. One line per case, the id whole, the title cut."""
    title = "a title long enough to wrap many times over in any column narrower than the whole line " * 2
    cases = [
        make_case("pass\n", case_id=f"fake-{i}-a-case-id-of-thirty-chars", title=title, devices=["cpu", "cuda"])
        for i in range(5)
    ]
    out = render(cases_table(cases), width)
    body = [line for line in out.splitlines() if line.startswith("│")]
    assert len(body) == len(cases)  # one line per case (the header is drawn with ┃)
    for case in cases:
        assert case.id in out
    assert "a title long" in out and "cpu,cuda" in out
    long = render(cases_table(cases, long=True), width)
    assert long.count("bug") == len(cases)  # --long: each variant


def job(make_case: MakeCase, case_id: str) -> Job:
    return Job(make_case("pass\n", case_id=case_id), "bug", 1, "cpu")


def test_the_progress_names_the_jobs_running(make_case: MakeCase) -> None:
    """The run's progress sat at `0/3` for a minute without naming what runs: it names the jobs in flight."""
    a, b = job(make_case, "fake-1-first"), job(make_case, "fake-2-second")
    progress = Progress(disable=True)
    display = ProgressDisplay(progress)
    display.run_started([a, b])
    display.job_started(a)
    display.job_started(b)
    [task] = progress.tasks
    assert "fake-1-first::bug" in task.description and "fake-2-second::bug" in task.description
    result = Result(
        case=a.case.id, variant="bug", nproc=1, device="cpu", outcome=Outcome.REPRODUCED, expected=None, reason=""
    )
    display.result_ready(a, result, reused=False)
    assert "fake-1-first" not in task.description and "fake-2-second" in task.description


def test_an_interrupted_run_says_what_finished_what_was_killed_and_how_to_resume(make_case: MakeCase) -> None:
    """Ctrl-C printed one line; it says what finished, what was killed, the run id and the command that resumes."""
    a, b, c = (job(make_case, f"fake-{i}-case") for i in range(3))
    running = Running()
    running.run_started([a, b, c])
    running.job_started(a)
    running.job_started(b)
    result = Result(
        case=a.case.id, variant="bug", nproc=1, device="cpu", outcome=Outcome.REPRODUCED, expected=None, reason=""
    )
    running.result_ready(a, result, reused=False)
    text = interrupted_text(running, "20261127-2240-abcd", "bugmatrix run fake")
    assert "1 of 3 job(s) finished: fake-0-case::bug[cpu-1] reproduced" in text
    assert "killed in flight: fake-1-case::bug[cpu-1]" in text
    assert "not started: 1" in text
    assert "20261127-2240-abcd" in text and "resume with: bugmatrix run fake" in text
