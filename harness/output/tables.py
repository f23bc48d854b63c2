"""Showing cases and results: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from rich.markup import escape
from rich.table import Table

from harness.model.case import Case
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
    from rich.text import Text

    return Text.from_markup(markup).plain


def case_row(case: Case) -> dict[str, Any]:
    """The JSON form of a case for `bugmatrix list --json`."""
    spec = case.spec
    return {
        "id": case.id,
        "title": spec.title,
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


def cases_table(cases: list[Case]) -> Table:
    """One row per case: id, title, variants, world sizes, devices, upstream link."""
    table = Table(title=f"{len(cases)} cases", show_lines=False)
    for column in ("case", "title", "variants", "nproc", "devices", "upstream"):
        table.add_column(column, overflow="fold")
    rows = [
        [
            case.id,
            case.spec.title,
            ", ".join(case.spec.variants),
            ",".join(map(str, case.spec.nproc)),
            ",".join(case.spec.devices),
            case.spec.upstream[0],
        ]
        for case in cases
    ]
    return whole_columns(table, rows, {"case", "upstream"})


def results_table(results: list[Result], cells: list[str] | None = None) -> Table:
    """One row per result: observed vs expected outcome (mismatches marked), versions, time, reason."""
    table = Table(title="bugmatrix results", show_lines=False)
    columns = ("cell",) * bool(cells) + ("case", "variant", "dev", "n", "outcome", "expected", "", "time", "reason")
    for column in columns:
        table.add_column(column, overflow="fold")
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
                *([cells[i]] if cells else []),
                r.case,
                r.variant,
                r.device,
                str(r.nproc),
                f"[{STYLE[r.outcome]}]{r.outcome.value}[/]",
                r.expected.value if r.expected else "-",
                mark,
                f"{r.duration_s:.1f}s" if r.launched else "",
                escape(r.reason[:160]),  # a log line may hold "[...]"
            ]
        )
    return whole_columns(table, rows, {"cell", "case", "variant", "dev", "n", "outcome", "expected"})


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


def matrix_table(rows: list[dict[str, Any]], title: str) -> Table:
    """`bugmatrix matrix`: the rows of `matrix_rows` as a table, cell names and pins whole."""
    table = Table(title=title)
    for column in ("cell", "device", "python", "pins"):
        table.add_column(column, overflow="fold")
    return whole_columns(
        table,
        [
            [
                row["name"],
                row["device"],
                row["python"],
                " ".join(f"{k}{_pin_op(v)}" for k, v in sorted(row["pins"].items())),
            ]
            for row in rows
        ],
        {"cell"},
    )


def _pin_op(pin: str) -> str:
    return f" {pin}" if pin[:1] in "=<>~!" else f"=={pin}" if PinVersion.parse(pin).kind != COMMIT else f" @ {pin}"
