"""Tables for people: each terminal table at 80 and 160 columns keeps its key columns (case, variant, the outcome word
whole, the summary); `list` is one line per case; the progress display names the jobs running; the HTML report and
the pages the docs show (harness/output/reports.py, harness/output/pages.py)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from html.parser import HTMLParser
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


class Page(HTMLParser):
    """The parts of an HTML page a test reads: every start tag with its attributes, in order, and the text under
    each element that has a class."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.text: list[tuple[str, str]] = []  # (class of the innermost classed element, text)
        self._classes: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.tags.append((tag, found))
        if tag not in ("br", "input", "meta", "option"):
            self._classes.append(found.get("class", self._classes[-1] if self._classes else ""))

    def handle_endtag(self, tag: str) -> None:
        if tag not in ("br", "input", "meta", "option") and self._classes:
            self._classes.pop()

    def handle_data(self, data: str) -> None:
        if data.strip():
            self.text.append((self._classes[-1] if self._classes else "", data.strip()))


@pytest.fixture(scope="module")
def record_report():  # noqa: ANN201 - MatrixReport
    from harness.matrix.expand import load_matrix
    from harness.model.case import discover
    from harness.output.reports import report_for
    from harness.session.readers import open_reader

    matrix = load_matrix(ROOT / "matrix.yaml")
    store = open_reader(None, False, discover(ROOT / "cases")[0], ROOT / "record")
    return report_for(store.latest(), ROOT / "cases", [c.name for c in matrix.cells], matrix)


def test_the_html_report_filters_orders_links_and_dates(record_report) -> None:  # noqa: ANN001
    """The HTML report had no filter, search or links, cells out of order (lightning 2.5.6, 2.6.6, then 2.5.0) and
    no date. One self-contained file: filters by package, outcome and text; versions in order; sticky headers; each
    case linked to its docs anchor and upstream issue; the newest result's date."""
    from harness.output.reports import to_html

    text = to_html(record_report)
    page = Page(text)
    assert not [a for tag, a in page.tags if tag in ("script", "img", "link") and (a.get("src") or a.get("href"))]
    ids = {a.get("id") for _, a in page.tags}
    assert {"q", "pkg", "out", "clear"} <= ids  # search, package, outcome
    assert "position: sticky" in text
    heads = [t for cls, t in page.text if cls == "cell"]
    lightning = [h for h in heads if re.fullmatch(r"lightning-[\d.]+(post\d)?", h)]
    assert lightning.index("lightning-2.5.0") < lightning.index("lightning-2.5.6") < lightning.index("lightning-2.6.6")
    hrefs = [a.get("href", "") for tag, a in page.tags if tag == "a"]
    assert f"cases/#{LONG_ID}" in hrefs
    assert "https://github.com/Lightning-AI/pytorch-lightning/issues/18086" in hrefs
    rows = [a for tag, a in page.tags if tag == "tr" and a.get("data-case") == LONG_ID]
    assert rows and all(a["data-package"] == "lightning" for a in rows)
    assert re.search(r"newest result 20\d\d-\d\d-\d\d \d\d:\d\d UTC", text)


def test_the_html_report_dates_on_python_3_10() -> None:
    """bugmatrix requires Python >= 3.10, but the HTML report imported `datetime.UTC` (new in 3.11): on 3.10 the
    module did not import (found by mypy at python_version 3.10). Here a 3.10 `datetime` is the one without it."""
    code = "import datetime; del datetime.UTC\nfrom harness.output.reports import _when\nprint(_when(0))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1970-01-01 00:00 UTC"


def test_the_cases_page_has_an_anchor_per_case_and_the_docs_link_the_report_and_colour_the_compat_grid() -> None:
    """The cases page had no anchor per case, the docs did not link the HTML report, and the compatibility page
    showed letters with footnotes where compat.html shows a coloured grid."""
    from harness.model.case import discover

    cases_page = (ROOT / "docs" / "cases.md").read_text()
    for case in discover(ROOT / "cases")[0]:
        assert f'<a id="{case.id}"></a>' in cases_page, case.id
    assert 'href="../report.html"' in cases_page
    compat_page = (ROOT / "docs" / "compat.md").read_text()
    grid = compat_page[compat_page.index("<!-- compat-tables:") : compat_page.index("<!-- /compat-tables -->")]
    assert '<table class="compat-grid">' in grid and 'class="compat-works"' in grid
    assert 'href="../compat.html"' in compat_page
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text()
    assert ".compat-works" in css and "overflow-wrap: anywhere" in css
