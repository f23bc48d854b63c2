"""Intake: how long a case took to come in, from its draft to its first adjacent boundary, read from the results.

    rows = intakes(entries, cases, digests, between, dater)   # entries: (run, cell, result), superseded ones included
    median_wall(rows)

A case's intake starts at its draft's first result: the `skip` that `bugmatrix new`'s draft gives ("TODO: this case
is not written yet"). `new` launches nothing: it ends with the `bugmatrix run` command for the draft, and a draft
its author never ran leaves the intake "not measured". It ends at the first result after which the case's
current results (its committed script's: superseded ones never count) hold an *adjacent* boundary: a fix or a
regression with no release (or commit) left untried between its two sides (`transitions.Boundary.adjacent`). Its
cost is the wall time between the two and the launches made meanwhile (a result of `--repeat 3` is three). A case
whose draft the results do not hold (written before drafts were recorded) has no intake: "not measured", never a
guess from its first measurement.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from harness.analysis.slices import slices
from harness.analysis.transitions import Between, Dater, axes
from harness.model.case import Case
from harness.model.common import primary_package
from harness.model.result import Result
from harness.model.scaffold import NOT_WRITTEN

Digests = Callable[[str, str], str | None]  # (case, variant) -> the digest the committed case gives now


@dataclass(frozen=True)
class Intake:
    """One case's intake: when its draft first ran, the first adjacent boundary and when it stood, the launches."""

    case: str
    drafted: float | None = None
    reached: float | None = None  # when the result that completed the boundary was known (its end)
    boundary: str = ""  # "<variant> along <package>: fixed in 2.6.0 (2.5.1 reproduced)"
    launches: int = 0

    @property
    def wall_s(self) -> float | None:
        """Seconds from the draft to the boundary; None when either is not in the results."""
        return None if self.drafted is None or self.reached is None else self.reached - self.drafted


def launches_of(result: Result) -> int:
    """How many launches a result stands for: its repeats' tally, one for a plain launch, none if not launched."""
    return sum(result.tallies.values()) if result.tallies else int(result.launched)


def _first_adjacent(
    latest: dict[tuple, tuple[str, Result]], case: Case, between: Between | None, dater: Dater | None
) -> str:
    """The first adjacent boundary along the case's primary package, or along another package within a coupled
    slice (the primary held at one version), as the cases table reads them: a lightning case's cells resolve
    different torches, and a change between two lightning releases is no boundary along torch."""
    results = list(latest.values())
    primaries = axes(results, {case.id: [primary_package(list(case.spec.packages))]}, dater)
    for axis in [*primaries, *slices(primaries, results, {case.id: case}, dater)]:
        for boundary in axis.boundaries(between):
            if boundary.adjacent:
                return f"{axis.variant} along {axis.package}{axis.held}: {boundary.text()}"
    return ""


def intake_of(
    case: Case,
    entries: list[tuple[str, str, Result]],
    digests: Digests,
    between: Between | None = None,
    dater: Dater | None = None,
) -> Intake:
    """`case`'s intake from its `(run, cell, result)` entries (every result of the case, superseded included)."""
    ordered = sorted(entries, key=lambda e: (e[2].started_at, e[0]))
    drafts = [e for e in ordered if NOT_WRITTEN in e[2].reason]
    if not drafts:
        return Intake(case.id)
    start = drafts[0][2].started_at
    latest: dict[tuple, tuple[str, Result]] = {}
    launches = 0
    for _, cell, result in ordered:
        if result.started_at < start:
            continue
        launches += launches_of(result)
        current = digests(case.id, result.variant)
        if not result.digest or current is None or result.digest != current:
            continue  # the draft, and every result of an earlier script: not what the case now measures
        key = (cell, result.variant, result.nproc, result.device)
        if key not in latest or result.started_at >= latest[key][1].started_at:
            latest[key] = (cell, result)
        found = _first_adjacent(latest, case, between, dater)
        if found:
            return Intake(case.id, start, result.started_at + result.duration_s, found, launches)  # once known
    return Intake(case.id, start, None, "", launches)


def intakes(
    entries: list[tuple[str, str, Result]],
    cases: list[Case],
    digests: Digests,
    between: Between | None = None,
    dater: Dater | None = None,
) -> list[Intake]:
    """Every case's intake, in case order (see the module docstring)."""
    by_case: dict[str, list[tuple[str, str, Result]]] = defaultdict(list)
    for entry in entries:
        by_case[entry[2].case].append(entry)
    return [intake_of(c, by_case.get(c.id, []), digests, between, dater) for c in sorted(cases, key=lambda c: c.id)]


def median_wall(rows: list[Intake]) -> float | None:
    """The median wall time over the cases whose intake was measured; None when none was."""
    walls = [r.wall_s for r in rows if r.wall_s is not None]
    return statistics.median(walls) if walls else None
