"""Coupled slices: where a case's primary axis cannot say alone, the axes along the package that decides.

At a primary version whose cells disagree (`mixed`: lightning 2.6.6 reproduces with torch 2.5.1 and not with torch
2.11.0), another package decides. The cells at that version, and only those, make a *slice*: an axis along each of
the case's other packages (those the variant's `reproduced` rules name, when they name any) that holds the primary
package at that version (`Axis.within`). Its boundaries are boundaries like any axis's, with their precision: the
report states them ("with lightning 2.6.6, torch between 2.5.1 and 2.11.0 (7 releases not run)") and `narrow`
closes them, every probe keeping the pins of the slice's cells (lightning 2.6.6, torch the candidate).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

from harness.analysis.transitions import MIXED, Axis, Dater, cell_axes, cell_status, cell_versions
from harness.model.case import Case
from harness.model.common import logical_name
from harness.model.outcome import Outcome
from harness.model.result import Result

ResultsIn = Callable[[str], list[Result]]  # cell -> the results of the axis's case x variant x device in that cell


def coupled(axis: Axis, case: Case | None, results_in: ResultsIn, dater: Dater | None = None) -> list[tuple[str, Axis]]:
    """For each version of `axis` whose cells disagree, the slices along the case's other packages (those the
    variant's `reproduced` rules name, when they name any) over those cells only: `(primary version, slice)` for
    each slice that holds a point, its `within` set to (the primary package, that version)."""
    packages = case.spec.recorded_packages if case else []  # a rule may name one outside `packages`
    others = [logical_name(p) for p in packages if logical_name(p) != axis.package]
    if case is not None and axis.variant in case.spec.variants:  # the packages its rules make the bug depend on
        variant = case.spec.variants[axis.variant]
        named = {logical_name(k) for k in variant.packages_named(axis.device, Outcome.REPRODUCED)}
        others = [p for p in others if p in named] or others
    out = []
    for point in axis.points:
        if point.status != MIXED:
            continue
        cells = {cell: (cell_status(rs), cell_versions(rs)) for cell in point.cells for rs in [results_in(cell)] if rs}
        for sub in cell_axes(axis.case, axis.variant, axis.device, cells, others, dater):
            if sub.points:
                sub.within = (axis.package, point.version)
                out.append((point.version, sub))
    return out


def by_row(results: list[tuple[str, Result]]) -> dict[tuple[str, str, str], dict[str, list[Result]]]:
    """(case, variant, device) -> cell -> its results there (each world size): what `coupled` reads per axis."""
    out: dict[tuple[str, str, str], dict[str, list[Result]]] = defaultdict(lambda: defaultdict(list))
    for cell, r in results:
        out[(r.case, r.variant, r.device)][cell].append(r)
    return out


def slices(
    primaries: list[Axis], results: list[tuple[str, Result]], cases: dict[str, Case], dater: Dater | None = None
) -> list[Axis]:
    """Every slice of the `primaries` axes in `results`, in their order (each primary axis's slices together)."""
    rows = by_row(results)
    out = []
    for axis in primaries:
        cells = rows.get((axis.case, axis.variant, axis.device), {})
        out += [sub for _, sub in coupled(axis, cases.get(axis.case), _lookup(cells), dater)]
    return out


def _lookup(cells: dict[str, list[Result]]) -> ResultsIn:
    return lambda cell: cells.get(cell, [])
