"""The matrix report: a case x cell grid and per-case transitions, as a terminal table, Markdown, HTML or JSON."""

from __future__ import annotations

import html
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from packaging.version import Version
from rich.markup import escape

from harness.analysis.compare import Change
from harness.analysis.intake import Intake, median_wall
from harness.analysis.slices import coupled
from harness.analysis.transitions import (
    Axis,
    Between,
    Boundary,
    Dater,
    Explain,
    axes,
    cell_status,
    span,
)
from harness.analysis.undecided import causes_text, undecided_cause
from harness.matrix.expand import Matrix
from harness.matrix.resolve import dater
from harness.model.case import Case, discover
from harness.model.cell import BISECT_PREFIX
from harness.model.common import item_id, primary_package
from harness.model.outcome import Outcome, shown
from harness.model.result import Result, counts
from harness.model.version import parse_release_or_none
from harness.output.tables import STYLE, Col, FitTable, link_name

SYMBOL = {"reproduced": "R", "fixed": "F", "flaky": "~", "unknown": "?"}
COLOUR = {
    "reproduced": "#d7301f",
    "fixed": "#2b8c3e",
    "flaky": "#e377c2",
    "unknown": "#bdbdbd",
    "infra": "#f0ad4e",
    "error": "#8e44ad",
    "timeout": "#e6a700",
    "skip": "#e0e0e0",
}


@dataclass
class MatrixReport:
    """Latest results per (case, variant, world size, device, cell), the cells in order, and the axes."""

    results: list[tuple[str, Result]]
    cells: list[str]
    rows: list[tuple[str, str, str]]  # (case, variant, device)
    axes: list[Axis]
    primary: dict[str, str]  # case -> the package whose axis the summary shows
    between: Between | None = None  # what lies between two versions (precision); None: unknown
    cases: dict[str, Case] = field(default_factory=dict)  # for the commands that reproduce each verdict
    matrix: Matrix | None = None
    dater: Dater | None = None  # release and commit dates: how the axes were ordered
    _at: dict[tuple[str, tuple[str, str, str]], list[Result]] | None = field(default=None, init=False, repr=False)

    def status(self, row: tuple[str, str, str], cell: str) -> tuple[str, list[Result]]:
        if self._at is None:  # each grid square's results, found once (not a pass over every result per square)
            self._at = defaultdict(list)
            for c, r in self.results:
                self._at[(c, (r.case, r.variant, r.device))].append(r)
        rs = self._at.get((cell, row), [])
        if not rs:
            return "", []
        if all(r.outcome is Outcome.INFRA for r in rs):
            return "infra", rs
        return cell_status(rs), rs

    def unmeasured(self) -> list[tuple[str, str, str, str]]:
        """(case, variant, devices, summary) for every variant of the report's cases on the devices no result
        measured (a CUDA-only case before any GPU run; a job skipped, never launched, because this machine has no
        such device): its rules, said as not measured, never as a verdict. A variant measured on another device
        says on which device it was not."""
        measured = {(r.case, r.variant, r.device) for _, r in self.results}
        out = []
        for case_id, case in sorted(self.cases.items()):
            for name, variant in case.spec.variants.items():
                missing = [d for d in case.spec.devices if (case_id, name, d) not in measured]
                if not missing:
                    continue
                where = "" if len(missing) == len(case.spec.devices) else f" on {', '.join(missing)}"
                out.append(
                    (case_id, name, ", ".join(missing), f"not measured{where}; its rules say: {rules_text(variant)}")
                )
        return out

    def coupled(self, axis: Axis) -> list[tuple[str, Axis]]:
        """Where the primary axis cannot say alone: `(primary version, slice)` for each of its coupled slices
        (harness/analysis/slices.py), read from this report's results."""
        row = (axis.case, axis.variant, axis.device)
        return coupled(axis, self.cases.get(axis.case), lambda cell: self.status(row, cell)[1], self.dater)

    def explain(self, axis: Axis) -> Explain:
        """How `axis`'s versions that could not say are listed: each with its cause, read from the results there
        (harness/analysis/undecided.py)."""
        return lambda versions: causes_text(self.results, axis, versions)

    def summaries(self) -> list[tuple[Axis, str]]:
        """Each case's primary axis and its one-line summary, every boundary with its precision and every version
        that could not say with its cause."""
        return [
            (a, a.summary(self.between, self.cases_dir(a.case), self.explain(a)))
            for a in self.axes
            if a.package == self.primary.get(a.case)
        ]

    def cases_dir(self, case_id: str) -> Path | None:
        """The folder the case was read from (for the commands a report prints), None when unknown."""
        case = self.cases.get(case_id)
        return case.folder.parent if case is not None else None


def rules_text(variant: Any) -> str:
    """A variant's expect rules in a line: 'reproduced where fbgemm-gpu <1.8.0; else fixed'."""
    parts: list[str] = []
    for rule in variant.expect:
        where = ", ".join(f"{k} {v}" for k, v in rule.when.items())
        parts.append(
            f"{rule.outcome.value} where {where}"
            if where
            else (f"else {rule.outcome.value}" if parts else rule.outcome.value)
        )
    return "; ".join(parts)


def build_report(
    results: list[tuple[str, Result]],
    case_packages: dict[str, list[str]],
    cell_order: list[str] | None = None,
    dater: Dater | None = None,
    between: Between | None = None,
    probes: bool = True,
) -> MatrixReport:
    """Assemble the report; each case's primary package is its first non-torch package (torch if none). Every
    result places its case on the axes (bisect and narrow probes too); the grid shows probe cells only with
    `probes`. A job that was never launched and is no `infra` (skipped: this machine has no such device, the
    environment lacks the package) measured nothing: it is left out, so that the case reads as not measured there
    (`unmeasured`), never as a verdict or `?`."""
    results = [(cell, r) for cell, r in results if counts(r)]
    seen_cells = [c for c in dict.fromkeys(c for c, _ in results) if probes or not c.startswith(BISECT_PREFIX)]
    order = [c for c in (cell_order or []) if c in seen_cells] + [c for c in seen_cells if c not in (cell_order or [])]
    rows = sorted({(r.case, r.variant, r.device) for _, r in results})
    primary = {}
    for case in {r.case for _, r in results}:
        packages = case_packages.get(case, [])
        primary[case] = primary_package(packages)
    return MatrixReport(results, order, rows, axes(results, dater=dater), primary, between, dater=dater)


def to_table(report: MatrixReport) -> FitTable:
    """Terminal: one row per case x variant x device, the primary axis summary. On a narrow terminal the variant,
    device and package move under the case and the summary wraps: the case, the variant and the summary stay."""
    columns = [
        Col("case", lead=True),
        Col("variant", under="case"),
        Col("dev", under="case"),
        Col("package", under="case"),
        Col("summary", wrap=True, least=30),
    ]
    rows = [[axis.case, axis.variant, axis.device, axis.package, summary] for axis, summary in report.summaries()]
    rows += [[case, variant, devices, "—", summary] for case, variant, devices, summary in report.unmeasured()]
    title = f"bugmatrix report: {len(report.cells)} cells, {len(report.results)} results"
    return FitTable(title, columns, [[escape(text) for text in row] for row in rows])


def to_markdown(report: MatrixReport, changes: list[Change] | None = None) -> str:
    """Markdown fit for a GitHub step summary: summaries, then the grid with one letter per cell."""
    lines = ["## bugmatrix report", ""]
    if changes is not None:
        lines += _changes_markdown(changes)
    lines += ["| case | variant | dev | package | summary |", "|---|---|---|---|---|"]
    for axis, summary in report.summaries():
        lines.append(f"| {axis.case} | {axis.variant} | {axis.device} | {axis.package} | {summary} |")
    for case, variant, devices, summary in report.unmeasured():
        lines.append(f"| {case} | {variant} | {devices} | — | {summary} |")
    lines += ["", "R reproduced · F fixed · ? could not say (error/timeout/skip) · I infra · blank: not run", ""]
    lines.append("| case · variant | " + " | ".join(report.cells) + " |")
    lines.append("|---|" + "---|" * len(report.cells))
    for row in report.rows:
        marks = [{"infra": "I"}.get(s, SYMBOL.get(s, "")) for s, _ in (report.status(row, c) for c in report.cells)]
        lines.append(f"| {row[0]} · {row[1]} ({row[2]}) | " + " | ".join(marks) + " |")
    return "\n".join(lines) + "\n"


def to_cases_markdown(report: MatrixReport) -> str:
    """The cases table (docs/cases.md): one row per case on its primary package's axis — where the bug reproduces,
    where it was fixed and where it came back, each boundary with its precision (adjacent or an interval), per bug
    variant (variants with the same story share a line), and the workarounds with what they showed."""
    by_case: dict[str, list[tuple[Axis, list[Boundary]]]] = defaultdict(list)
    for axis in report.axes:
        if axis.package == report.primary.get(axis.case):
            by_case[axis.case].append((axis, axis.boundaries(report.between)))
    lines = [
        "| case | upstream | package: run in | reproduces in | fixed in | came back in | workarounds (come out "
        "`fixed`) |",
        "|---|---|---|---|---|---|---|",
    ]
    for case_id in sorted(set(by_case) | set(report.cases)):
        case = report.cases.get(case_id)
        if case_id not in by_case:  # a case the results never reached: said, never left out
            links = ", ".join(f"[{link_name(u)}]({u})" for u in case.spec.upstream) if case else ""
            lines.append(
                f"| `{case_id}` — {case.spec.title if case else ''}{_anchor(case_id)} | {links} | not measured | "
                f"not measured ({', '.join(case.spec.devices) if case else ''}) | — | — | — |"
            )
            continue
        workaround = {name for name, v in case.spec.variants.items() if v.workaround} if case else set()
        bugs: dict[tuple[str, str, str], list[str]] = defaultdict(list)
        arounds = []
        for axis, boundaries in sorted(by_case[case_id], key=lambda ab: (ab[0].variant, ab[0].device)):
            label = axis.variant if axis.device == "cpu" else f"{axis.variant} ({axis.device})"
            if axis.variant in workaround:
                arounds.append(
                    f"`{axis.variant}`"
                    + ("" if not axis.reproduced_in else f" (reproduces in {_span_text(axis.reproduced_in)})")
                )
                continue
            coupled = report.coupled(axis)
            placed = (
                [_span_text(axis.reproduced_in)]
                if axis.reproduced_in
                else []
                if axis.reproduced_unplaced or axis.mixed_in
                else ["never"]
            )
            explain = report.explain(axis)
            fixed = [_boundary_cell(b, explain) for b in boundaries if b.kind == "fixed"]
            regressed = [_boundary_cell(b, explain) for b in boundaries if b.kind == "regressed"]
            for version, sub in coupled:  # the primary version alone cannot say: along the other package
                at = f"with {axis.package} {_span_text([version])}, {sub.package} "
                if sub.reproduced_in:
                    placed.append(at + _span_text(sub.reproduced_in))
                for b in sub.boundaries(report.between):
                    (fixed if b.kind == "fixed" else regressed).append(at + _boundary_cell(b, report.explain(sub)))
            explained = {version for version, sub in coupled if sub.reproduced_in}
            placed += [
                f"{axis.package} {_span_text([v])}: in some cells, not others (no other package of the case "
                "tells them apart)"
                for v in axis.mixed_in
                if v not in explained
            ]
            if axis.unplaced:
                placed.append(axis.unplaced_text())
            story = ("; ".join(placed), "; ".join(fixed) or "—", "; ".join(regressed) or "—")
            bugs[story].append(label)
        columns: list[list[str]] = [[], [], []]
        for story, variants in bugs.items():
            prefix = "" if len(bugs) == 1 else f"`{', '.join(variants)}`: "
            for column, text in zip(columns, story, strict=True):
                column.append(prefix + text)
        title = (f"`{case_id}` — {case.spec.title}" if case else f"`{case_id}`") + _anchor(case_id)
        links = ", ".join(f"[{link_name(u)}]({u})" for u in case.spec.upstream) if case else ""
        widest = max((axis for axis, _ in by_case[case_id]), key=lambda axis: len(axis.points))
        ordered = list(
            dict.fromkeys(
                [p.version for p in widest.points] + [p.version for axis, _ in by_case[case_id] for p in axis.points]
            )
        )
        package = f"{report.primary.get(case_id, '')}: {_span_text(ordered)}"
        lines.append(
            f"| {title} | {links} | {package} | "
            + " | ".join("<br>".join(c) for c in columns)
            + f" | {', '.join(arounds) or '—'} |"
        )
    return "\n".join(lines) + "\n"


def _anchor(case_id: str) -> str:
    """An anchor named after the case, for links to its row of the cases page (`cases/#<case id>`: the HTML report's
    case links)."""
    return f'<a id="{case_id}"></a>'


def _span_text(versions: list[str]) -> str:
    """A span as the cases table (docs/cases.md) shows it (commits cut to 8 hex digits)."""
    return span(versions, digits=8)


def _boundary_cell(boundary: Boundary, explain: Explain | None = None) -> str:
    """`**2.1.3** (2.1.2 reproduced)` for a measured adjacent boundary; an interval says so in words, each version
    between that could not say as `explain` gives it."""
    text = boundary.text(explain).removeprefix(f"{boundary.kind} ")
    if boundary.adjacent:
        after, _, rest = text.removeprefix("in ").partition(" (")
        return f"**{after}** ({rest}"
    return text


def to_markdown_changes(changes: list[Change], names: tuple[str, ...]) -> str:
    """Markdown of a comparison, for a step summary."""
    head = f"## bugmatrix compare\n\n{names[0]} → {names[1]}\n\n" if len(names) == 2 else ""
    return head + "\n".join(_changes_markdown(changes)) + "\n"


def _changes_markdown(changes: list[Change]) -> list[str]:
    if not changes:
        return ["No outcome changed since the previous run.", ""]
    lines = ["| change | cell | case | before | after | expected |", "|---|---|---|---|---|---|"]
    for c in changes:
        flag = "**unexpected regression**" if c.unexpected else c.kind
        after = f"{shown(c.after)} ({c.tally})" if c.tally else shown(c.after)
        lines.append(
            f"| {flag} | {c.cell} | {item_id(c.case, c.variant, c.device, c.nproc)} | "
            f"{shown(c.before)} | {after} | {shown(c.expected)} |"
        )
    return lines + [""]


def cell_order(cells: list[str]) -> list[str]:
    """Cells in version order: grouped by their first word (in the order the matrix names them: default, torch,
    torchrec, ...), then by the versions in their names, compared as versions (lightning 2.5.0 before 2.5.6 before
    2.6.6; `2.0.9.post0` and `1.10.0` where they belong), then by the other words (`-cuda` after the plain cell)."""
    first: dict[str, int] = {}
    for cell in cells:
        first.setdefault(cell.split("-")[0], len(first))

    def key(cell: str) -> tuple[int, tuple[Version, ...], tuple[str, ...]]:
        versions, words = [], []
        for part in cell.split("-"):
            version = parse_release_or_none(part)
            if version is None:
                words.append(part)
            else:
                versions.append(version)
        return first[cell.split("-")[0]], tuple(versions), tuple(words)

    return sorted(cells, key=key)


def _when(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _row_html(report: MatrixReport, row: tuple[str, str, str], cells: list[str], docs: str) -> str:
    """One grid row: the case (linked to its docs anchor and its upstream issue), then a square per cell."""
    tds, seen = [], set()
    for cell in cells:
        status, rs = report.status(row, cell)
        if not rs:
            tds.append('<td class="na"></td>')
            continue
        seen.add(status)
        tip = "\n".join(
            f"{cell} n={r.nproc}: {r.outcome.value} (expected {shown(r.expected)}) — {r.reason[:200]}\n"
            + ", ".join(f"{k}=={v}" for k, v in sorted(r.versions.items()))
            for r in rs
        )
        mark = {"infra": "I"}.get(status, SYMBOL.get(status, ""))
        tds.append(f'<td class="s-{html.escape(status)}" title="{html.escape(tip)}">{html.escape(mark)}</td>')
    return (
        f'<tr {_row_data(report, row[0], seen)}><th class="row">{_case_links(report, row[0], docs)} · '
        f"{html.escape(row[1])} ({html.escape(row[2])})</th>{''.join(tds)}</tr>"
    )


def _row_data(report: MatrixReport, case_id: str, statuses: set[str]) -> str:
    package = report.primary.get(case_id) or primary_package(
        list(report.cases[case_id].spec.packages) if case_id in report.cases else []
    )
    return (
        f'data-case="{html.escape(case_id)}" data-package="{html.escape(package)}" '
        f'data-status="{html.escape(" ".join(sorted(statuses)))}"'
    )


def _case_links(report: MatrixReport, case_id: str, docs: str) -> str:
    """The case id linked to its row of the docs' cases page, then its upstream issue."""
    name = html.escape(case_id)
    out = f'<a href="{html.escape(docs)}#{name}" title="its row on the cases page">{name}</a>'
    case = report.cases.get(case_id)
    for url in case.spec.upstream[:1] if case else []:
        out += f' <a class="up" href="{html.escape(url)}" title="upstream">↗ {html.escape(link_name(url))}</a>'
    return out


HTML_STYLE = """
body { font: 14px system-ui, sans-serif; margin: 16px 24px; color: #222; }
a { color: #1a5fb4; text-decoration: none; } a:hover { text-decoration: underline; }
.bar { position: sticky; top: 0; z-index: 5; background: #fff; padding: 8px 0; border-bottom: 1px solid #ddd; }
.bar input, .bar select { font: inherit; padding: 3px 6px; margin-right: 10px; }
.scroll { overflow: auto; max-height: 85vh; border: 1px solid #eee; }
table.grid { border-collapse: separate; border-spacing: 0; }
.grid td { min-width: 20px; height: 20px; text-align: center; color: #fff; font-weight: 600; border: 1px solid #fff; }
.grid td.na { background: #f7f7f7; }
.grid thead th { position: sticky; top: 0; z-index: 2; background: #fff; }
.grid th.row { position: sticky; left: 0; z-index: 1; background: #fff; text-align: right; padding-right: 8px;
  font-weight: 500; white-space: nowrap; }
.grid thead th.corner { left: 0; z-index: 3; }
.grid th.cell { height: 130px; vertical-align: bottom; }
.grid th.cell div { writing-mode: vertical-rl; transform: rotate(180deg); font-weight: 500; white-space: nowrap; }
a.up { font-size: 12px; color: #666; }
table.sum { border-collapse: collapse; margin-top: 8px; }
.sum th { position: sticky; top: 46px; background: #fff; }
.sum td, .sum th { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; }
.sum td.interval { background: #fff3cd; border-left: 4px solid #e6a700; }
.key { display: inline-block; width: 14px; height: 14px; margin: 0 4px 0 12px; vertical-align: middle; }
.hidden { display: none; }
"""

HTML_SCRIPT = """
const q = document.getElementById('q'), pkg = document.getElementById('pkg'), out = document.getElementById('out');
function shown(tr) {
  const text = q.value.trim().toLowerCase();
  return (!text || tr.textContent.toLowerCase().includes(text)) && (!pkg.value || tr.dataset.package === pkg.value)
    && (!out.value || tr.dataset.status.split(' ').includes(out.value));
}
function apply() {
  let rows = 0;
  document.querySelectorAll('tr[data-case]').forEach(tr => {
    const on = shown(tr); tr.classList.toggle('hidden', !on); if (on && tr.closest('.grid')) rows++;
  });
  document.querySelectorAll('section.pkg').forEach(sec => {
    const trs = [...sec.querySelectorAll('tbody tr')].filter(tr => !tr.classList.contains('hidden'));
    sec.classList.toggle('hidden', trs.length === 0);
    const heads = sec.querySelectorAll('thead th.cell');
    heads.forEach((th, i) => {  // a column no shown row has a result in is left out
      const used = trs.some(tr => !tr.children[i + 1].classList.contains('na'));
      th.classList.toggle('hidden', !used);
      sec.querySelectorAll('tbody tr').forEach(tr => tr.children[i + 1].classList.toggle('hidden', !used));
    });
  });
  document.getElementById('count').textContent = rows + ' case variant(s) shown';
  const state = new URLSearchParams();
  if (q.value) state.set('q', q.value); if (pkg.value) state.set('package', pkg.value);
  if (out.value) state.set('outcome', out.value);
  history.replaceState(null, '', state.toString() ? '#' + state : location.pathname);
}
const given = new URLSearchParams(location.hash.slice(1));
q.value = given.get('q') || given.get('case') || ''; pkg.value = given.get('package') || '';
out.value = given.get('outcome') || '';
[q, pkg, out].forEach(el => el.addEventListener('input', apply));
document.getElementById('clear').addEventListener('click', () => { q.value = pkg.value = out.value = ''; apply(); });
apply();
"""


def to_html(report: MatrixReport, title: str = "bugmatrix report", docs: str = "cases/") -> str:
    """One self-contained page (no script or style from elsewhere): per package, a case x cell heatmap with only
    the cells its cases ran in, in version order (hover a square for details), then the transition summaries.
    Filters by package, outcome and text (a case id: `report.html#q=lightning-18086` opens filtered), sticky
    headers, each case linked to its row of the docs' cases page (`docs`, relative to where the page is published:
    beside the documentation) and its upstream issue, and the date of the newest result."""
    cells = cell_order(report.cells)
    by_package: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for row in report.rows:
        by_package[report.primary.get(row[0], "")].append(row)
    sections = []
    for package, rows in sorted(by_package.items()):
        used = [c for c in cells if any(report.status(row, c)[1] for row in rows)]
        head = "".join(f'<th class="cell"><div>{html.escape(c)}</div></th>' for c in used)
        body = "".join(_row_html(report, row, used, docs) for row in rows)
        sections.append(
            f'<section class="pkg" data-package="{html.escape(package)}"><h2>{html.escape(package or "other")} '
            f"<small>({len(rows)} case variants × {len(used)} cells)</small></h2>"
            f'<div class="scroll"><table class="grid"><thead><tr><th class="corner"></th>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div></section>"
        )
    summaries = "".join(
        f"<tr {_row_data(report, a.case, {report.status((a.case, a.variant, a.device), c)[0] for c in cells} - {''})}>"
        f"<td>{_case_links(report, a.case, docs)}</td><td>{html.escape(a.variant)}</td><td>{a.device}</td>"
        f"<td>{html.escape(a.package)}</td>"
        + (
            f'<td class="interval" title="an interval: not every version between was run">{html.escape(s)}</td>'
            if any(not b.adjacent for b in a.boundaries(report.between))
            else f"<td>{html.escape(s)}</td>"
        )
        + "</tr>"
        for a, s in report.summaries()
    )
    legend = "".join(
        f'<span class="key" style="background:{COLOUR[k]}"></span>{k} '
        for k in ("reproduced", "fixed", "flaky", "unknown", "infra")
    )
    colours = "".join(f".grid td.s-{k} {{ background: {v}; }}\n" for k, v in COLOUR.items())
    packages = "".join(f'<option value="{html.escape(p)}">{html.escape(p)}</option>' for p in sorted(by_package) if p)
    outcomes = "".join(
        f'<option value="{k}">{k}</option>' for k in ("reproduced", "fixed", "flaky", "unknown", "infra")
    )
    case_ids = "".join(f'<option value="{html.escape(c)}">' for c in sorted({row[0] for row in report.rows}))
    newest = max((r.started_at for _, r in report.results if r.started_at), default=0.0)
    dated = f"newest result {_when(newest)}" if newest else "no result dated"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>{HTML_STYLE}{colours}</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{len(report.rows)} case variants × {len(cells)} cells; {dated}; made {_when(datetime.now(timezone.utc).timestamp())}.
Hover a square for outcomes, versions and reasons; a case id opens its row of the <a href="{html.escape(docs)}">cases
page</a>, ↗ its upstream issue. {legend} <span class="key" style="background:#f7f7f7"></span>not run</p>
<div class="bar"><input id="q" type="search" placeholder="search: case, variant" list="cases" size="32">
<datalist id="cases">{case_ids}</datalist>
<label>package <select id="pkg"><option value="">all</option>{packages}</select></label>
<label>outcome <select id="out"><option value="">any</option>{outcomes}</select></label>
<button id="clear" type="button">clear</button> <span id="count"></span></div>
{"".join(sections)}
<h2>Where each case changes</h2>
<p>A boundary reads <b>fixed in B (A reproduced)</b> when nothing lies between A and B: a measurement.
<span style="background:#fff3cd;border-left:4px solid #e6a700;padding:0 6px">Highlighted</span> summaries hold an
interval, <b>fixed between A and B</b>, with versions between that were not run (or could not say).</p>
<table class="sum"><thead><tr><th>case</th><th>variant</th><th>device</th><th>package</th><th>where it changes</th>
</tr></thead><tbody>{summaries}</tbody></table>
<script>{HTML_SCRIPT}</script>
</body></html>
"""


def to_json(report: MatrixReport) -> str:
    """Every axis with its points and changes (each boundary with the tallies of its two sides, and, where the
    primary package's cells disagree, the axes along the package that decides: `coupled`), every result with its
    cell, and the class of each case the report knows (`class:` in case.yaml; null where unset) with their counts."""
    classes = {case_id: case.spec.bug_class for case_id, case in sorted(report.cases.items())}
    payload: dict[str, Any] = {
        "cells": report.cells,
        "classes": classes,
        "class_counts": dict(sorted(Counter(c for c in classes.values() if c).items())),
        "axes": [
            {
                **_axis_json(report, a),
                "coupled": [{"at": version, **_axis_json(report, sub)} for version, sub in report.coupled(a)],
            }
            for a in report.axes
        ],
        "results": [
            {"cell": c, **r.model_dump(mode="json", exclude={"log_excerpt", "stacks"})} for c, r in report.results
        ],
    }
    return json.dumps(payload, indent=2)


def _axis_json(report: MatrixReport, a: Axis) -> dict[str, Any]:
    return {
        "case": a.case,
        "variant": a.variant,
        "device": a.device,
        "package": a.package,
        "summary": a.summary(report.between, report.cases_dir(a.case), report.explain(a)),
        "reproduced_in": a.reproduced_in,
        "unknown_in": a.unknown_in,
        "changes": [{"kind": k, "last_before": b, "first_after": f} for k, b, f in a.changes()],
        "boundaries": [
            {
                "kind": b.kind,
                "before": b.before,
                "after": b.after,
                "adjacent": b.adjacent,
                "not_run": None if b.untested is None else list(b.untested),
                "could_not_say": list(b.undecided),
                "could_not_say_why": {v: undecided_cause(report.results, a, v).text for v in b.undecided},
                "text": b.text(report.explain(a)),
                "narrow": None if b.adjacent else a.narrow_command(report.cases_dir(a.case)),
                "tallies": _tallies(report, a, b),
                "reproduce": _commands(report, a, b),
            }
            for b in a.boundaries(report.between)
        ],
        "points": [{"version": p.version, "status": p.status, "cells": p.cells} for p in a.points],
        "unplaced": [{"version": p.version, "status": p.status, "cells": p.cells} for p in a.unplaced],
    }


def _tallies(report: MatrixReport, axis: Axis, boundary: Boundary) -> dict[str, dict[str, int]]:
    """How often each side of `boundary` gave its outcome, summed over the side's results at the world size both
    sides ran (`sides`): `{"before": {"reproduced": 3}, "after": {"fixed": 3}}`."""
    from harness.analysis.reproduce import sides

    out: dict[str, dict[str, int]] = {}
    for side, r in zip(("before", "after"), sides(report.results, axis, boundary), strict=True):
        if r is not None:
            out[side] = dict(r.tallies) if r.tallies else {r.outcome.value: 1}
    return out


def _commands(report: MatrixReport, axis: Axis, boundary: Boundary) -> dict[str, str]:
    """The command that reproduces the verdict on each side of `boundary` (when the case is known), both at one world
    size (`sides`)."""
    from harness.analysis.reproduce import repro_command, sides

    case = report.cases.get(axis.case)
    if case is None:
        return {}
    found = zip(("before", "after"), sides(report.results, axis, boundary), strict=True)
    return {side: repro_command(case, r, report.matrix) for side, r in found if r is not None}


__all__ = [
    "STYLE",
    "MatrixReport",
    "build_report",
    "to_cases_markdown",
    "to_html",
    "to_json",
    "to_markdown",
    "to_markdown_changes",
    "to_table",
]


def report_for(
    results: list[tuple[str, Result]],
    cases_dir: Path,
    cell_order: list[str],
    matrix: Matrix | None = None,
    probes: bool = False,
) -> MatrixReport:
    """`build_report` as `bugmatrix report` calls it: each case's packages from its case.yaml; with a matrix, upload
    dates and the releases between two versions from its index (each boundary's precision)."""
    from harness.analysis.precision import between_on_index

    cases, _ = discover(cases_dir)
    order_by = dater(matrix) if matrix is not None else None
    between = between_on_index(matrix, {c.id: c for c in cases}) if matrix is not None else None
    report = build_report(results, {c.id: list(c.spec.packages) for c in cases}, cell_order, order_by, between, probes)
    report.cases, report.matrix = {c.id: c for c in cases}, matrix
    return report


def intake_markdown(rows: list[Intake]) -> str:
    """The intake table (`harness/analysis/intake.py`): each case whose draft the results hold, its wall time and
    launches to its first adjacent boundary, then the median; how many cases have no recorded draft."""

    def wall(seconds: float) -> str:
        minutes = round(seconds / 60)
        return f"{minutes // 60} h {minutes % 60:02d} min" if minutes >= 60 else f"{minutes} min"

    measured = [r for r in rows if r.drafted is not None]
    lines = ["| case | draft to first adjacent boundary | launches | the boundary |", "|---|---|---|---|"]
    for r in measured:
        took = wall(r.wall_s) if r.wall_s is not None else "not reached yet"
        lines.append(f"| `{r.case}` | {took} | {r.launches} | {r.boundary or '—'} |")
    median = median_wall(rows)
    reached = sum(r.wall_s is not None for r in measured)
    lines += [
        "",
        f"**Median: {wall(median) if median is not None else 'not measured'}** over the {reached} "
        f"case(s) whose draft and first adjacent boundary the record holds; {len(rows) - len(measured)} "
        "case(s) were written before drafts were recorded (not measured).",
    ]
    return "\n".join(lines) + "\n"
