"""Launch parity (harness/analysis/compare.py `launch_parity`) for people: per cell, then every difference.

    parity_markdown(parity, ("cold", "warm"))   # the nightly's step summary; tools/warm_parity.py --format markdown
    parity_tables(parity, ("record", "store"))  # tools/warm_parity.py --format table (rich tables)

Both show the same rows: per cell of the other side its jobs, how they were launched (launched results by mode, on
each side), how many matched equal, differ and had no match; then each difference with both outcomes (a flaky
one with its tally) and both reasons; then how many jobs only the reference holds.
"""

from __future__ import annotations

from rich.markup import escape

from harness.analysis.compare import CellParity, Pair, Parity
from harness.model.result import Result
from harness.output.tables import Col, FitTable


def _launches(counted: dict[str, int]) -> str:
    return ", ".join(f"{mode} {n}" for mode, n in counted.items()) or "none"


def _outcome(r: Result) -> str:
    return f"{r.outcome.value} ({r.tally})" if r.tally else r.outcome.value


def cell_headers(names: tuple[str, str]) -> list[str]:
    """The per-cell table's columns."""
    return ["cell", "jobs", f"launches ({names[1]})", f"launches ({names[0]})", "equal", "differ", "unmatched"]


def cell_row(c: CellParity) -> list[str]:
    """One cell's row (see `cell_headers`)."""
    return [
        c.cell,
        str(c.jobs),
        _launches(c.launches),
        _launches(c.reference_launches),
        str(c.equal),
        str(c.differ),
        str(c.unmatched),
    ]


def difference_headers(names: tuple[str, str]) -> list[str]:
    """The differences table's columns."""
    return ["cell", "job", names[0], names[1], f"reason ({names[0]})", f"reason ({names[1]})"]


def difference_row(p: Pair) -> list[str]:
    """One difference's row (see `difference_headers`)."""
    return [p.cell, p.other.item_id, _outcome(p.reference), _outcome(p.other), p.reference.reason, p.other.reason]


def only_line(parity: Parity, names: tuple[str, str]) -> str:
    """The jobs found on one side only, in one sentence ('' when none)."""
    parts = []
    if parity.only_other:
        parts.append(f"{len(parity.only_other)} job(s) of {names[1]} not in {names[0]}")
    if parity.only_reference:
        parts.append(f"{len(parity.only_reference)} job(s) of {names[0]} not in {names[1]}")
    return "; ".join(parts) + ("." if parts else "")


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _md_table(headers: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return lines + ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]


def parity_markdown(parity: Parity, names: tuple[str, str]) -> str:
    """Markdown: the per-cell table, every difference, the one-side-only count (`names`: the reference's, the
    other's)."""
    lines = _md_table(cell_headers(names), [cell_row(c) for c in parity.cells()]) + [""]
    differences = parity.differences
    if differences:
        lines += [f"**{len(differences)} difference(s)** ({names[0]} → {names[1]}):", ""]
        lines += _md_table(difference_headers(names), [difference_row(p) for p in differences]) + [""]
    else:
        lines += [f"No difference: {parity.equal} of {parity.matched} matched job(s) equal.", ""]
    if only_line(parity, names):
        lines += [only_line(parity, names), ""]
    return "\n".join(lines)


def parity_tables(parity: Parity, names: tuple[str, str]) -> list[FitTable]:
    """The per-cell table and, when any, the differences table, for a terminal (text escaped: a reason's
    `[2, 8]` is no markup)."""
    cells = FitTable(
        f"{escape(names[0])} → {escape(names[1])}",
        [Col(h, lead=i == 0) for i, h in enumerate(cell_headers(names))],
        [[escape(x) for x in cell_row(c)] for c in parity.cells()],
    )
    if not parity.differences:
        return [cells]
    heads = difference_headers(names)
    columns = [Col(heads[0]), Col(heads[1], lead=True), Col(heads[2]), Col(heads[3])]
    columns += [Col(h, wrap=True) for h in heads[4:]]
    differences = FitTable(
        f"{len(parity.differences)} difference(s)",
        columns,
        [[escape(x) for x in difference_row(p)] for p in parity.differences],
    )
    return [cells, differences]
