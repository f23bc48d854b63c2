"""What lies between two versions that were run: the releases on the index (or the first-parent commits of a local
clone) that a case could run at, so that a boundary can say whether it is adjacent or an interval.

    between = between_on_index(matrix, cases)      # a `Between` for transitions.Axis.boundaries / summary
    between(case_id, package, device, "2.0.9", "2.2.5") -> ("2.1.0", "2.1.1", ...) or None when unknown
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from packaging.specifiers import SpecifierSet

from harness.analysis.transitions import Between
from harness.matrix.basics import IndexLookupError, MatrixError
from harness.matrix.expand import Matrix
from harness.matrix.git import resolve_ref
from harness.model.case import Case
from harness.model.version import PinVersion, parse_release


def allowed_releases(
    matrix: Matrix, case: Case, package: str, device: str, pre: bool = False, supports: bool = True
) -> list[str]:
    """Released versions of `package` on the matrix's index, oldest first, that the case (`supports`, unless
    `supports` is False) and the matrix's pairings allow (not yanked; pre-releases only with `pre`): what a
    bisection or narrowing may probe."""
    dist = matrix.distribution(package, device)
    allowed = SpecifierSet(case.spec.supports.get(package, "") if supports else "")
    leads = [c for c in matrix.spec.couplings if c.lead == package]
    versions = []
    for release in matrix.chronology.releases_of(dist, matrix.index_url()):
        v = release.version
        if release.yanked or (v.is_prerelease and not pre) or not allowed.contains(v, prereleases=True):
            continue
        if leads and not all(any(SpecifierSet(r[package]).contains(v, True) for r in c.rows) for c in leads):
            continue
        versions.append(str(v))
    return versions


def between_on_index(matrix: Matrix, cases: dict[str, Case]) -> Between:
    """A `Between` that lists the releases the matrix's index holds (those the case's `supports` and the pairings
    allow) strictly between two released versions, and the first-parent commits of a local clone between two
    commits or a release and a commit; None when the index cannot be read or no local clone is known."""
    listed: dict[tuple[str, str, str, bool], list[str] | None] = {}

    def releases(case: Case, package: str, device: str, pre: bool) -> list[str] | None:
        key = (case.id, package, device, pre)
        if key not in listed:
            try:
                listed[key] = allowed_releases(matrix, case, package, device, pre)
            except (IndexLookupError, MatrixError, OSError):
                listed[key] = None
        return listed[key]

    def between(case_id: str, package: str, device: str, before: str, after: str) -> tuple[str, ...] | None:
        case = cases.get(case_id)
        if case is None:
            return None
        sides = PinVersion.parse(before), PinVersion.parse(after)
        if any(side.commit for side in sides):
            return _commits_between(matrix, package, before, after)
        low, high = (side.release for side in sides)
        if low is None or high is None:
            return None
        found = releases(case, package, device, low.is_prerelease or high.is_prerelease)
        if found is None:
            return None
        lo, hi = min(low, high), max(low, high)
        return tuple(v for v in found if lo < parse_release(v) < hi)

    return between


def _commits_between(matrix: Matrix, package: str, before: str, after: str) -> tuple[str, ...] | None:
    """First-parent commits strictly between two points (`1.2.0` or `0.4.0.dev0 @ <sha>`) in a local clone, as
    `<version> @ <sha>` would not be known for them: returned as bare SHAs; None without a local clone."""
    source = matrix.source(package)
    if not source or ("://" in source and not source.startswith("file://")):
        return _counted_between(matrix, package, before, after)
    repo = Path(source.removeprefix("file://"))
    ends = []
    for point in map(PinVersion.parse, (before, after)):
        ends.append(resolve_ref(repo, point.commit or point.release_text))
    if None in ends:
        return _counted_between(matrix, package, before, after)
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--first-parent", "--reverse", f"{ends[0]}..{ends[1]}"],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        return None
    return tuple(proc.stdout.split()[:-1])


def _counted_between(matrix: Matrix, package: str, before: str, after: str) -> tuple[str, ...] | None:
    """Without a clone: as many placeholders as the record's first-parent positions (the matrix's chronology) put
    between the two points (`commit #<position>`), so a boundary's precision reads the same offline; None when a
    position is unknown."""
    first, last = (
        matrix.chronology.position(package, point.commit or point.release_text)
        for point in map(PinVersion.parse, (before, after))
    )
    if first is None or last is None:
        return None
    low, high = sorted((first, last))
    return tuple(f"commit #{n}" for n in range(low + 1, high))
