"""Why the results could not say at a version of an axis, read from the results there.

    undecided_cause(results, axis, "2.2.0").text     # error: the environment lacks the module `requests`
    undecided_cause(results, axis, "0.5.11").text    # another package decides: transformers (4.51.3 fixed; ...)
    causes_text(results, axis, ["2.9.0", "2.9.1"])   # 2.9.0, 2.9.1 — skip (SKIP: ...): what a table shows

A version an axis could not say about is either *measured without a verdict* (every cell there errored, timed out,
skipped or could not be built: the cause is what its results say, `gist`, the telling end of the reason; a missing
module is named as what the environment lacks) or *mixed* (its cells disagree). A mixed version's cause is another
recorded package when that package's versions tell the reproduced cells from the fixed ones (`another package
decides: X`, with X's versions on each side: the slice along X, where the first package is fixed, is where to read or
narrow the boundary), else that nothing recorded tells them apart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from harness.analysis.transitions import FIXED, MIXED, REPRODUCED, Axis, cell_status, cell_versions
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.model.version import short, version_key

MEASURED, PACKAGE, CELLS, NONE = "measured", "package", "cells", "none"  # `Cause.kind`
NOT_INSTALLED = ""  # a cell that recorded no version of the package: it is not installed there
MISSING_MODULE = re.compile(r"No module named '([\w.]+)'")


@dataclass(frozen=True)
class Cause:
    """Why `version` could not say: `kind` is `measured` (what its results say), `package` (another package decides:
    `package`, whose versions on each side are `sides`: (status, versions) in version order), `cells` (the cells
    disagree and no recorded package tells them apart) or `none` (no result there); `text` says it in words (a
    reason cut to its gist; `full`, when set, is the same uncut)."""

    version: str
    kind: str
    text: str
    package: str = ""
    sides: tuple[tuple[str, tuple[str, ...]], ...] = ()
    full: str = ""


def undecided_cause(results: list[tuple[str, Result]], axis: Axis, version: str) -> Cause:
    """Why `axis` could not say at `version`, from the results of its cells there (see the module docstring)."""
    point = next((p for p in axis.points + axis.unplaced if p.version == version), None)
    by_cell: dict[str, list[Result]] = {}
    for cell, r in results:
        if point is not None and cell in point.cells and (r.case, r.variant, r.device) == _row(axis):
            by_cell.setdefault(cell, []).append(r)
    if not by_cell:
        return Cause(version, NONE, "no result")
    if point is not None and point.status == MIXED:
        return _mixed(axis, version, by_cell)
    found = [r for rs in by_cell.values() for r in rs]
    measured = [r for r in found if r.outcome is not Outcome.INFRA] or found  # infra: the environment was not made
    r = max(measured, key=lambda r: r.nproc)
    module = missing_module(r.reason)
    if module:
        return Cause(version, MEASURED, f"{r.outcome.value}: the environment lacks the module `{module}`")
    full = f"{r.outcome.value} ({gist(r.reason, len(r.reason))})"
    return Cause(version, MEASURED, f"{r.outcome.value} ({gist(r.reason)})", full=full)


def causes_text(results: list[tuple[str, Result]], axis: Axis, versions: Sequence[str]) -> str:
    """The versions that could not say, each with its cause (`undecided_cause`): versions whose causes read the same
    but for their own version (and its local tag, `+cu128`) share one (`2.9.0, 2.9.1, 2.10.0 — skip (SKIP: torch
    2.9.0+cu128's ...)`, the first one's words), in order."""
    groups: dict[str, tuple[list[str], str]] = {}
    for version in versions:
        cause = undecided_cause(results, axis, version)
        own = re.compile(re.escape(short(version)) + r"(\+[\w.]+)?(?![\w.])")  # 2.9.0+cu128 too, never 2.9.0.post0
        shown, _ = groups.setdefault(own.sub("\0", cause.full or cause.text), ([], cause.text))
        shown.append(short(version))
    return "; ".join(f"{', '.join(shown)} — {text}" for shown, text in groups.values())


def missing_module(reason: str) -> str:
    """The module a result's reason says could not be imported (`No module named 'requests'`), "" when none."""
    found = MISSING_MODULE.search(reason)
    return found.group(1) if found else ""


def gist(reason: str, limit: int = 160) -> str:
    """The telling end of a reason: a traceback's last line rather than its first (`... | ` joins lines), cut after
    `limit` characters (an exception's message opens with what failed; a long one ends in lists)."""
    last = reason.strip().rsplit(" | ", 1)[-1].strip()
    return last if len(last) <= limit else last[:limit] + "…"


def _row(axis: Axis) -> tuple[str, str, str]:
    return (axis.case, axis.variant, axis.device)


def _mixed(axis: Axis, version: str, by_cell: dict[str, list[Result]]) -> Cause:
    """A version whose cells disagree: the other recorded packages whose versions tell the reproduced cells from the
    fixed ones (a cell that recorded none has it not installed); the first of them, by name, is `package`."""
    cells = [(cell_status(rs), cell_versions(rs)) for rs in by_cell.values()]
    said = [(status, versions) for status, versions in cells if status in (REPRODUCED, FIXED)]
    names = sorted({name for _, versions in said for name in versions} - {axis.package})
    deciding: list[tuple[str, tuple[tuple[str, tuple[str, ...]], ...]]] = []
    for name in names:
        on = {
            status: tuple(sorted({v.get(name, NOT_INSTALLED) for s, v in said if s == status}, key=_order))
            for status in (REPRODUCED, FIXED)
        }
        if not set(on[REPRODUCED]) & set(on[FIXED]):
            sides = tuple(sorted(on.items(), key=lambda side: _order(side[1][0])))
            deciding.append((name, sides))
    if not deciding:
        return Cause(
            version, CELLS, "reproduces in some cells, not others, and no other recorded package tells them apart"
        )
    text = " or ".join(
        f"{name} ({'; '.join(f'{_versions(vs)} {status}' for status, vs in sides)})" for name, sides in deciding
    )
    name, sides = deciding[0]
    return Cause(version, PACKAGE, f"another package decides: {text}", name, sides)


def _order(version: str) -> tuple[bool, object]:
    """Not installed first, then releases in version order."""
    return (version != NOT_INSTALLED, version_key(version) if version else ())


def _versions(versions: tuple[str, ...]) -> str:
    return ", ".join(short(v) if v else "not installed" for v in versions)
