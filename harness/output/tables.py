"""Showing cases and results: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, JustifyMethod, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from harness.model.case import Case
from harness.model.common import ranks_shown
from harness.model.outcome import Outcome
from harness.model.result import Result, counts, misses
from harness.model.version import COMMIT, GIT_PIN, PinVersion

if TYPE_CHECKING:
    from harness.matrix.expand import Matrix

STYLE = {
    Outcome.REPRODUCED: "bold red",
    Outcome.FIXED: "green",
    Outcome.ERROR: "bold magenta",
    Outcome.SKIP: "dim",
    Outcome.TIMEOUT: "bold yellow",
    Outcome.INFRA: "yellow",
    Outcome.FLAKY: "bold cyan",
}


def whole_columns(table: Table, rows: list[list[str]], whole: set[str]) -> Table:
    """Add `rows` to `table`; the columns named in `whole` (ids, variants, cells, versions) are never folded or
    cropped: they keep the width of their longest entry, and the other columns give way."""
    for i, column in enumerate(table.columns):
        if str(column.header) in whole:
            column.no_wrap = True
            column.min_width = max([len(str(column.header))] + [len(_plain(row[i])) for row in rows])
    for row in rows:
        table.add_row(*row)
    return table


def _plain(markup: str) -> str:
    return Text.from_markup(markup).plain


def _width(markup: str) -> int:
    """The widest line of a cell, in terminal cells."""
    return max((cell_len(line) for line in _plain(markup).split("\n")), default=0)


@dataclass(frozen=True)
class Col:
    """A column of a `FitTable` and how it gives way on a narrow terminal.

    `lead`: the row's id (a case): whole while it fits, folded only when nothing else can give. `wrap`: text (a
    summary, a reason) that wraps, never narrower than `least`; `line`: text kept on one line, cut with an ellipsis.
    `under`: on a narrow terminal the column moves into that column's cell, on a line of its own (a variant under
    its case). `drop`: on a narrow terminal the column is left out, the lowest number first (None: never)."""

    header: str
    lead: bool = False
    wrap: bool = False
    line: bool = False
    least: int = 24
    under: str | None = None
    drop: int | None = None
    justify: JustifyMethod = "left"


class FitTable:
    """A table that fits the console it is printed on: a rich renderable built at the width it is given.

    In a log or a pipe (harness/output/console.py: width 1000) every row is one line. On a terminal too narrow for
    every column, in this order: text columns wrap down to their least width, the `under` columns move under the
    column they name, the `drop` columns are left out (the caption names them), and last the lead column folds.
    Ids in the other columns and outcome words are never folded."""

    BORDER = 3  # a column's rule and its padding of one on each side (rich's default box); one more for the edge

    def __init__(self, title: str | None, columns: list[Col], rows: list[list[str]]) -> None:
        self.title, self.columns, self.rows = title, columns, rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(1, options.max_width)

    def table(self, width: int) -> Table:
        """The rich table for a console `width` columns wide."""
        columns, rows = list(self.columns), [list(row) for row in self.rows]
        if self._need(self._least(columns, rows), columns) > width and any(c.under for c in columns):
            columns, rows = self._stacked(columns, rows)
        left_out = []
        for col in sorted((c for c in columns if c.drop is not None), key=lambda c: c.drop or 0):
            if self._need(self._least(columns, rows), columns) <= width:
                break
            i = columns.index(col)
            columns.pop(i)
            for row in rows:
                row.pop(i)
            left_out.append(col.header)
        them = "them" if left_out[1:] else "it"
        caption = f"left out at {width} columns: {', '.join(left_out)} (a wider terminal shows {them})"
        table = Table(title=self.title, caption=caption if left_out else None)
        sizes = self._sizes(columns, rows, width)
        for col in columns:
            table.add_column(
                col.header,
                justify=col.justify,
                no_wrap=not (col.wrap or col.lead),
                overflow="ellipsis" if col.line else "fold",
                width=sizes.get(col.header),
            )
        for row in rows:
            table.add_row(*row)
        return table

    def _sizes(self, columns: list[Col], rows: list[list[str]], width: int) -> dict[str, int]:
        """Each column's width when the natural ones do not fit (none when they do): the lead takes what the text
        columns at their least leave (folding only under its ids' width), and the text columns share the rest in
        proportion to their natural widths."""
        natural = self._natural(columns, rows)
        if self._need(natural, columns) <= width:
            return {}
        text = [c.header for c in columns if c.wrap or c.line]
        lead = next((c.header for c in columns if c.lead), None)
        least = self._least(columns, rows)
        sizes = {c.header: natural[c.header] for c in columns if c.header not in text and c.header != lead}
        room = width - self._need({**sizes, **dict.fromkeys([*text, *([lead] if lead else [])], 0)}, columns)
        if lead is not None:
            sizes[lead] = max(min(room - sum(least[h] for h in text), natural[lead]), 12)
            room -= sizes[lead]
        total = sum(natural[h] for h in text) or 1
        for h in text:
            sizes[h] = max(least[h], room * natural[h] // total)
        return sizes

    def _least(self, columns: list[Col], rows: list[list[str]]) -> dict[str, int]:
        """The narrowest each column should be: text at its `least`, the lead as wide as its ids (the first line of
        its cells: what moved under it may wrap), the others whole."""
        natural = self._natural(columns, rows)
        least = {c.header: min(c.least, natural[c.header]) if c.wrap or c.line else natural[c.header] for c in columns}
        for i, c in enumerate(columns):
            if c.lead:
                ids = [_width(row[i].split("\n")[0]) for row in rows]
                least[c.header] = max([cell_len(c.header.split(" ")[0]), *ids])
        return least

    def _natural(self, columns: list[Col], rows: list[list[str]]) -> dict[str, int]:
        return {c.header: max([cell_len(c.header)] + [_width(row[i]) for row in rows]) for i, c in enumerate(columns)}

    def _need(self, widths: dict[str, int], columns: list[Col]) -> int:
        return sum(widths[c.header] for c in columns) + self.BORDER * len(columns) + 1

    def _stacked(self, columns: list[Col], rows: list[list[str]]) -> tuple[list[Col], list[list[str]]]:
        """The `under` columns moved under the column they name, on one line below its text (its header says so)."""
        kept = [c for c in columns if not c.under]
        index = {c.header: i for i, c in enumerate(columns)}
        out_rows = []
        for row in rows:
            cells = {c.header: row[index[c.header]] for c in kept}
            moved: dict[str, list[str]] = {}
            for c in columns:
                if c.under and row[index[c.header]]:
                    moved.setdefault(c.under, []).append(row[index[c.header]])
            for target, parts in moved.items():
                cells[target] += "\n" + " · ".join(parts)
            out_rows.append([cells[c.header] for c in kept])
        headers = {c.header: c.header for c in kept}
        for c in columns:
            if c.under:
                headers[c.under] += f" · {c.header}"
        return [replace(c, header=headers[c.header]) for c in kept], out_rows


def case_row(case: Case) -> dict[str, Any]:
    """The JSON form of a case for `bugmatrix list --json`."""
    spec = case.spec
    return {
        "id": case.id,
        "title": spec.title,
        "class": spec.bug_class,
        "upstream": spec.upstream,
        "fixed_by": spec.fixed_by,
        "packages": spec.packages,
        "nproc": spec.nproc,
        "devices": spec.devices,
        "timeout": spec.timeout,
        "variants": {
            name: {"args": v.args, "workaround": v.workaround, "description": v.description}
            for name, v in spec.variants.items()
        },
    }


def link_name(url: str) -> str:
    """`pytorch#103585` / `lightning PR #19152` from an issue or pull-request link."""
    parts = url.rstrip("/").split("/")
    if len(parts) >= 5 and parts[-2] in ("issues", "pull") and parts[2] == "github.com":
        repo = {"pytorch-lightning": "lightning"}.get(parts[-3], parts[-3])
        return f"{repo}#{parts[-1]}" if parts[-2] == "issues" else f"{repo} PR #{parts[-1]}"
    return url


def cases_table(cases: list[Case], long: bool = False) -> FitTable:
    """One line per case: id, devices, world sizes, how many variants, upstream issue, title (cut to the line).
    With `long`, each case's variants one per line, the whole title and every upstream link."""
    if long:
        columns = [
            Col("case", lead=True),
            Col("title", wrap=True, least=20),
            Col("variants"),
            Col("nproc", under="case"),
            Col("devices", under="case"),
            Col("upstream", wrap=True, least=20, drop=1),
        ]
        rows = [
            [
                escape(case.id),
                escape(case.spec.title),
                "\n".join(map(escape, case.spec.variants)),
                ",".join(map(str, case.spec.nproc)),
                ",".join(case.spec.devices),
                "\n".join(case.spec.upstream),
            ]
            for case in cases
        ]
        return FitTable(f"{len(cases)} cases", columns, rows)
    columns = [
        Col("case", lead=True),
        Col("devices"),
        Col("nproc", drop=2),
        Col("variants", justify="right", drop=3),
        Col("upstream", drop=1),
        Col("title", line=True, least=14),
    ]
    rows = [
        [
            escape(case.id),
            ",".join(case.spec.devices),
            ",".join(map(str, case.spec.nproc)),
            str(len(case.spec.variants)),
            escape(link_name(case.spec.upstream[0])) if case.spec.upstream else "",
            escape(case.spec.title),
        ]
        for case in cases
    ]
    return FitTable(f"{len(cases)} cases (--long: each variant)", columns, rows)


def outcome_text(outcome: Outcome) -> str:
    """An outcome word in its colour (the colour shows on a terminal only)."""
    return f"[{STYLE[outcome]}]{outcome.value}[/]"


def results_table(results: list[Result], cells: list[str] | None = None) -> FitTable:
    """One row per result: observed vs expected outcome (mismatches marked), versions, time, reason. On a narrow
    terminal the cell, variant, device and world size move under the case, then time, reason and expected go."""
    columns = [
        *([Col("cell", under="case")] if cells else []),
        Col("case", lead=True),
        Col("variant", under="case"),
        Col("dev", under="case"),
        Col("n", under="case"),
        Col("outcome"),
        Col("expected", drop=3),
        Col(""),
        Col("time", justify="right", drop=1),
        Col("reason", wrap=True, least=20, drop=2),
    ]
    rows = []
    for i, r in enumerate(results):
        if not counts(r):
            mark = ""
        elif r.outcome is Outcome.INFRA:
            mark = "[yellow]no env[/]"
        else:
            mark = "[green]ok[/]" if r.ok else "[bold red]MISMATCH[/]"
        rows.append(
            [
                *([escape(cells[i])] if cells else []),
                escape(r.case),
                escape(r.variant),
                r.device,
                ranks_shown(r.nproc, r.nnodes),
                outcome_text(r.outcome),
                outcome_text(r.expected) if r.expected else "-",
                mark,
                f"{r.duration_s:.1f}s" if r.launched else "",
                escape(r.reason[:160]),  # a log line may hold "[...]"
            ]
        )
    return FitTable("bugmatrix results", columns, rows)


def versions_line(results: list[Result]) -> str:
    """The distinct package versions the results ran against, one line."""
    seen: dict[str, str] = {}
    for r in results:
        seen.update(r.versions)
    return ", ".join(f"{k}=={v}" for k, v in sorted(seen.items()))


def to_json(payload: Any) -> str:
    """Stable, indented JSON of results, cases or errors."""
    return json.dumps(payload, indent=2, sort_keys=False, default=str)


def summary_line(results: list[Result], invalid: int = 0) -> str:
    """`N as expected, M not[, K skipped: reason (count), ...][, I invalid case(s)]`: skips apart, never as expected."""
    missed = misses(results)
    counted = [r for r in results if counts(r)]
    skipped = Counter(r.reason for r in results if not counts(r))
    line = f"{len(counted) - len(missed)} as expected, {len(missed)} not"
    if skipped:
        reasons = ", ".join(f"{why} ({n})" if len(skipped) > 1 else why for why, n in skipped.most_common(3))
        more = f", and {len(skipped) - 3} more reason(s)" if len(skipped) > 3 else ""
        line += f", {sum(skipped.values())} skipped: {reasons}{more}"
    return line + (f", {invalid} invalid case(s)" if invalid else "")


def run_json(
    ok: bool,
    run_id: str,
    errors: list[str],
    reused: list[str],
    python: str | None,
    cells: list[str],
    results: list[Result],
) -> str:
    """`bugmatrix run --json`: the run, what it reused, the interpreter of a local run, and each result by cell."""
    payload: dict[str, object] = {"ok": ok, "run_id": run_id, "errors": errors, "reused": reused}
    if python is not None:
        payload["python"] = python
    rows = [{"cell": cell, **r.model_dump(mode="json")} for cell, r in zip(cells, results, strict=True)]
    return to_json({**payload, "results": rows})


def matrix_rows(matrix: Matrix) -> list[dict[str, Any]]:
    """`bugmatrix matrix --json`: each cell with its device, Python, group, pins and infrastructure problem."""
    return [
        {
            "name": c.name,
            "device": c.device,
            "python": c.python,
            "group": c.group,
            "pins": {k: (v if isinstance(v, str) else f"{GIT_PIN}{v.git}") for k, v in c.pins.items()},
            "problem": matrix.problems.get(c.name),
        }
        for c in matrix.cells
    ]


def matrix_table(rows: list[dict[str, Any]], title: str) -> FitTable:
    """`bugmatrix matrix`: the rows of `matrix_rows` as a table, cell names whole (device and Python under them on a
    narrow terminal), the pins wrapped."""
    columns = [Col("cell", lead=True), Col("device", under="cell"), Col("python", under="cell"), Col("pins", wrap=True)]
    return FitTable(
        title,
        columns,
        [
            [
                escape(row["name"]),
                row["device"],
                str(row["python"]),
                escape(" ".join(f"{k}{_pin_op(v)}" for k, v in sorted(row["pins"].items()))),
            ]
            for row in rows
        ],
    )


def _pin_op(pin: str) -> str:
    return f" {pin}" if pin[:1] in "=<>~!" else f"=={pin}" if PinVersion.parse(pin).kind != COMMIT else f" @ {pin}"
