"""Showing cases and results: rich tables for people, JSON for machines."""

from __future__ import annotations

import json
from typing import Any

from rich.table import Table

from harness.model.case import Case
from harness.model.outcome import Outcome
from harness.model.result import Result

STYLE = {
    Outcome.REPRODUCED: "bold red",
    Outcome.FIXED: "green",
    Outcome.ERROR: "bold magenta",
    Outcome.SKIP: "dim",
    Outcome.TIMEOUT: "bold yellow",
    Outcome.INFRA: "yellow",
    Outcome.FLAKY: "bold cyan",
}


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
    for case in cases:
        spec = case.spec
        table.add_row(
            case.id, spec.title, ", ".join(spec.variants), ",".join(map(str, spec.nproc)),
            ",".join(spec.devices), spec.upstream[0],
        )
    return table


def results_table(results: list[Result], cells: list[str] | None = None) -> Table:
    """One row per result: observed vs expected outcome (mismatches marked), versions, time, reason."""
    table = Table(title="bugmatrix results", show_lines=False)
    columns = ("cell",) * bool(cells) + ("case", "variant", "dev", "n", "outcome", "expected", "", "time", "reason")
    for column in columns:
        table.add_column(column, overflow="fold")
    for i, r in enumerate(results):
        shown = r.launched or r.outcome is Outcome.INFRA
        if not shown:
            mark = ""
        elif r.outcome is Outcome.INFRA:
            mark = "[yellow]no env[/]"
        else:
            mark = "[green]ok[/]" if r.ok else "[bold red]MISMATCH[/]"
        table.add_row(
            *([cells[i]] if cells else []), r.case, r.variant, r.device, str(r.nproc),
            f"[{STYLE[r.outcome]}]{r.outcome.value}[/]",
            r.expected.value if r.expected else "-", mark,
            f"{r.duration_s:.1f}s" if r.launched else "", r.reason[:160],
        )
    return table


def versions_line(results: list[Result]) -> str:
    """The distinct package versions the results ran against, one line."""
    seen: dict[str, str] = {}
    for r in results:
        seen.update(r.versions)
    return ", ".join(f"{k}=={v}" for k, v in sorted(seen.items()))


def to_json(payload: Any) -> str:
    """Stable, indented JSON of results, cases or errors."""
    return json.dumps(payload, indent=2, sort_keys=False, default=str)
