"""Where a case's outcome changes along a package's version axis: last reproduced, first fixed, regressions.

Input: results as (cell, Result). Per case x variant x device, each cell gets one status over its world sizes:
`reproduced` if any world size reproduced, `fixed` if every one is fixed, `flaky` if a world size's repeats both
reproduced and were fixed (it reproduces at a rate, its tallies'; never fixed), else `unknown` (error, infra,
timeout, skip, or nothing conclusive). On an axis a flaky point is listed with those that could not say a single
outcome (its rate is read from its results), and never makes a boundary by itself. Cells are placed on a
package's axis by the version the result recorded for that package (a git install sorts at its version, after the
releases of that version); several cells at one version agree or are `mixed`, and a cell that could not say
(`unknown`) never outvotes one that did, nor a flaky one one that said a single outcome.

Every change along an axis is a `Boundary` that states its own precision: *adjacent* ("fixed in 2.1.3 (2.1.2
reproduced)": nothing lies between the two versions that were run), an *interval* ("fixed between 2.0.9 and 2.2.5
(9 releases not run)", which `bugmatrix narrow` can close), or unknown when what lies between cannot be listed (no
index, or a commit without a clone to place it). What lies between comes from a `Between` function
(harness/analysis/precision.py asks the package index and local clones).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import lru_cache
from pathlib import Path

from harness.model.case import cases_dir_option
from harness.model.common import logical_name
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.model.version import PinVersion, short, version_key

REPRODUCED, FIXED, UNKNOWN, MIXED, FLAKY = "reproduced", "fixed", "unknown", "mixed", "flaky"


def cell_status(results: list[Result]) -> str:
    """One status for a cell from its results over world sizes (see module doc)."""
    outcomes = {r.outcome for r in results}
    if Outcome.REPRODUCED in outcomes:
        return REPRODUCED
    if outcomes == {Outcome.FIXED}:
        return FIXED
    if Outcome.FLAKY in outcomes:  # reproduces at a rate: never fixed, never unknown
        return FLAKY
    return UNKNOWN


@dataclass
class Point:
    """One version on the axis and what the cells at that version showed."""

    version: str
    status: str
    cells: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Boundary:
    """Where the outcome changes: `before` (the last version run with the old status) and `after` (the first with
    the new one), the releases between that were not run (`untested`; None when they cannot be listed) and the
    versions between that were run but could not say (`undecided`)."""

    kind: str  # "fixed" | "regressed"
    before: str
    after: str
    untested: tuple[str, ...] | None
    undecided: tuple[str, ...] = ()
    unknown_because: str = ""  # why `untested` is None

    @property
    def adjacent(self) -> bool:
        """A measurement: nothing lies between `before` and `after`."""
        return self.untested == () and not self.undecided

    @property
    def commits(self) -> bool:
        """Whether a side is a commit (`0.4.0.dev0 @ <sha>`): what lies between is commits, not releases."""
        return bool(PinVersion.parse(self.before).commit or PinVersion.parse(self.after).commit)

    @property
    def old(self) -> str:
        """The status before the change."""
        return REPRODUCED if self.kind == "fixed" else FIXED

    def text(self, explain: Explain | None = None) -> str:
        """`fixed in 2.1.3 (2.1.2 reproduced)` when adjacent, else `fixed between A and B (...)` saying why; the
        versions between that could not say as `explain` gives them (each with its cause), else by name."""
        before, after = short(self.before), short(self.after)
        if self.adjacent:
            return f"{self.kind} in {after} ({before} {self.old})"
        notes = []
        if self.untested is None:
            notes.append(f"what lies between is unknown: {self.unknown_because}")
        elif self.untested:
            notes.append(
                f"{len(self.untested)} release{'s' * (len(self.untested) != 1)} not run"
                if not self.commits
                else f"{len(self.untested)} commit(s) not run"
            )
        if self.undecided:
            notes.append(f"could not say: {(explain or listed)(self.undecided)}")
        return f"{self.kind} between {before} and {after} ({'; '.join(notes)})"


@dataclass
class Axis:
    """One case x variant x device along one package's versions."""

    case: str
    variant: str
    device: str
    package: str
    points: list[Point]
    # git installs that could not be dated (no local clone): run, but not placed among the points -- a commit's version
    # string (`0.4.0.dev0 @ <sha>`) says nothing of where it sits in history
    unplaced: list[Point] = field(default_factory=list)
    # a coupled slice's (harness/analysis/slices.py): the primary package and the version all its cells hold
    within: tuple[str, str] | None = None

    @property
    def held(self) -> str:
        """A slice's held pin, ` with lightning 2.6.6`; empty for a whole axis."""
        return f" with {self.within[0]} {short(self.within[1])}" if self.within else ""

    @property
    def label(self) -> str:
        """`case::variant (device) over package` (a slice's: `... over torch with lightning 2.6.6`): how narrow and
        its dry run name the axis."""
        return f"{self.case}::{self.variant} ({self.device}) over {self.package}{self.held}"

    @property
    def reproduced_in(self) -> list[str]:
        return [p.version for p in self.points if p.status == REPRODUCED]

    @property
    def reproduced_unplaced(self) -> bool:
        """Whether a commit that could not be placed in history reproduced (so "never reproduced" would be false)."""
        return any(p.status == REPRODUCED for p in self.unplaced)

    @property
    def unknown_in(self) -> list[str]:
        return [p.version for p in self.points if p.status in (UNKNOWN, MIXED, FLAKY)]

    @property
    def mixed_in(self) -> list[str]:
        """Versions whose cells disagree (some reproduced, some fixed): another package decides there."""
        return [p.version for p in self.points if p.status == MIXED]

    def narrow_command(self, cases_dir: Path | None = None) -> str:
        """The command that closes this axis's interval boundaries (`--cases-dir` when the case lives elsewhere)."""
        return (
            f"bugmatrix {cases_dir_option(cases_dir)}narrow {self.case} --package {self.package} --device {self.device}"
        )

    def boundaries(self, between: Between | None = None) -> list[Boundary]:
        """Each fix and regression along the axis with its precision (see the module docstring)."""
        out = []
        for kind, before, after in self.changes():
            run = [p.version for p in self.points]
            inside = run[run.index(before) + 1 : run.index(after)]  # points run between: all could not say
            candidates = between(self.case, self.package, self.device, before, after) if between else None
            ran = set(run) | {PinVersion.parse(v).commit for v in run}  # a commit is run as `X @ sha` or `git:sha`
            untested = None if candidates is None else tuple(v for v in candidates if v not in ran)
            found = Boundary(kind, before, after, untested, tuple(inside))
            because = (
                "no package index was consulted"
                if between is None
                else "no local clone of the repository to place the commits"
                if found.commits
                else "the index does not list them"
            )
            out.append(replace(found, unknown_because=because) if untested is None else found)
        return out

    def changes(self) -> list[tuple[str, str, str]]:
        """(kind, last version before, first version after) for each fix and regression along the axis."""
        known = [p for p in self.points if p.status in (REPRODUCED, FIXED)]
        out = []
        for before, after in zip(known, known[1:], strict=False):
            if before.status == REPRODUCED and after.status == FIXED:
                out.append(("fixed", before.version, after.version))
            elif before.status == FIXED and after.status == REPRODUCED:
                out.append(("regressed", before.version, after.version))
        return out

    def summary(
        self, between: Between | None = None, cases_dir: Path | None = None, explain: Explain | None = None
    ) -> str:
        """One line: where it reproduces, where it was fixed or came back (each with its precision), what could
        not say (with its cause when `explain` gives one; the narrow command with `--cases-dir` when the case lives
        outside the default folder)."""
        if not self.points:
            return "no results"
        parts = []
        rep = self.reproduced_in
        if rep:
            parts.append(f"reproduces in {span(rep)}")
        elif not self.reproduced_unplaced and not self.mixed_in:  # else the unplaced commits, or the mixed, say
            parts.append("never reproduced")
        for b in self.boundaries(between):
            parts.append(b.text(explain) + (f" — narrow with `{self.narrow_command(cases_dir)}`" if b.untested else ""))
        if self.mixed_in:
            parts.append(
                f"reproduces in some cells, not others: {explain(self.mixed_in)}"
                if explain
                else f"reproduces in some cells, not others (another package decides): {listed(self.mixed_in)}"
            )
        undecided = [v for v in self.unknown_in if v not in self.mixed_in]
        if undecided:
            parts.append(f"could not say: {(explain or listed)(undecided)}")
        if self.unplaced:
            parts.append(self.unplaced_text())
        return "; ".join(parts)

    def unplaced_text(self) -> str:
        """What the commits that could not be dated showed, said as not placed (and how to place them)."""
        shown = ", ".join(f"{short(p.version)} {p.status}" for p in self.unplaced)
        mirror = "BUGMATRIX_MIRROR_" + self.package.upper().replace("-", "_")
        return f"not placed in history (no local clone dates these commits; set {mirror}): {shown}"


def listed(versions: Sequence[str]) -> str:
    """The versions by name, shortened: how a version that could not say is listed without its cause."""
    return ", ".join(map(short, versions))


def span(versions: list[str], digits: int = 12) -> str:
    """`2.0.1 … 2.1.2 (3 versions)`, or the one version; commits cut to `digits` hex digits."""
    first, last = short(versions[0], digits), short(versions[-1], digits)
    return first if len(versions) == 1 else f"{first} … {last} ({len(versions)} versions)"


Dater = Callable[[str, str, str | None], datetime | None]  # (package, version, commit) -> when it was made
# (case, package, device, before, after) -> the releases (or commits) strictly between, oldest first; None: unknown
Between = Callable[[str, str, str, str, str], tuple[str, ...] | None]
# the versions that could not say -> how to list them, each with its cause (harness/analysis/undecided.py)
Explain = Callable[[Sequence[str]], str]


def axes(
    results: list[tuple[str, Result]], packages: dict[str, list[str]] | None = None, dater: Dater | None = None
) -> list[Axis]:
    """Every case x variant x device x package axis with at least one point (optionally only `packages[case]`).
    Points sort by version; on an axis that mixes releases and git installs (whose version strings say little
    about history), by the date `dater` gives (release upload, commit date) where it can tell."""
    grouped: dict[tuple[str, str, str], dict[str, list[Result]]] = defaultdict(lambda: defaultdict(list))
    for cell, result in results:
        grouped[(result.case, result.variant, result.device)][cell].append(result)
    out = []
    for (case, variant, device), by_cell in sorted(grouped.items()):
        cells = {cell: (cell_status(rs), cell_versions(rs)) for cell, rs in by_cell.items()}
        out += cell_axes(case, variant, device, cells, packages.get(case) if packages else None, dater)
    return out


def cell_axes(
    case: str,
    variant: str,
    device: str,
    cells: dict[str, tuple[str, dict[str, str]]],
    wanted: Collection[str] | None = None,
    dater: Dater | None = None,
) -> list[Axis]:
    """The axes of one case x variant x device (only along `wanted` packages, when given), from its cells' status
    and versions: cell -> (`cell_status`, `cell_versions`)."""
    names: set[str] = set().union(*(versions for _, versions in cells.values()))
    out = []
    for package in sorted(names):
        if wanted is not None and package not in wanted:
            continue
        at: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for cell, (status, versions) in cells.items():
            version = versions.get(package)
            if version is not None:
                at[version].append((cell, status))

        def point(version: str, at: dict[str, list[tuple[str, str]]] = at) -> Point:
            # a cell that could not say (infra, error, skip) does not outvote one that did at the same version
            said = {s for _, s in at[version]} - {UNKNOWN}
            if len(said) > 1:
                said.discard(FLAKY)  # a cell that said one outcome there decides over a flaky one
            status = UNKNOWN if not said else said.pop() if len(said) == 1 else MIXED
            return Point(version, status, sorted(c for c, _ in at[version]))

        ordered, undated = _ordered(package, list(at), dater)
        out.append(Axis(case, variant, device, package, [point(v) for v in ordered], [point(v) for v in undated]))
    return out


def _ordered(package: str, versions: list[str], dater: Dater | None) -> tuple[list[str], list[str]]:
    """(the versions in history order, the git installs that cannot be placed). Releases alone sort by version; with
    git installs among them, everything sorts by the date `dater` gives (upload, commit date) when it can date them
    all, else the releases sort by version and the commits are left unplaced, never sorted by their version strings."""
    commits = [v for v in versions if PinVersion.parse(v).commit]
    releases = list(_releases_in_order(frozenset(v for v in versions if v not in commits)))
    if not commits:
        return releases, []
    if dater is not None:
        dates = {v: dater(package, p.release_text, p.commit or None) for v in versions for p in [PinVersion.parse(v)]}
        if all(d is not None for d in dates.values()):
            return sorted(versions, key=lambda v: (dates[v], version_key(v))), []
    return releases, sorted(commits, key=version_key)


@lru_cache(maxsize=1024)  # every variant of a case has the same points: sorted once
def _releases_in_order(releases: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted(releases, key=version_key))  # the text breaks ties: `2.6` before `2.6.0`


def cell_versions(results: list[Result]) -> dict[str, str]:
    """A cell's versions from its results over world sizes: logical package -> the version the first recorded."""
    out: dict[str, str] = {}
    seen: list[dict[str, str]] = []
    for r in results:
        if r.versions in seen:  # the world sizes of a cell record the same pins: named once
            continue
        seen.append(r.versions)
        for name, version in r.versions.items():
            out.setdefault(logical_name(name), version)
    return out
