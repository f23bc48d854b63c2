"""Axes read from the package index: which releases an `AxisRule` names, as of when.

    versions = select(releases(dist, url), rule, as_of)            # pure: exact version strings, oldest first
    versions = rule_versions(rule, dist, url, as_of, chronology)   # the same, read from the chronology or the index

`select` keeps the releases that match the rule's specifier (pre-releases only with `pre`), not yanked and uploaded
by `as_of` (a release without an upload time counts as always there), then the newest of each major or minor
(`per`), then the newest `last`. Index pages are cached per process (harness/matrix/index.py); so is a failure,
so an unreachable index costs one timeout per process, not one per axis.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime, timezone

from packaging.specifiers import SpecifierSet

from harness.matrix import index as _index
from harness.matrix.basics import IndexLookupError, MatrixError
from harness.matrix.chronology import NOW, Chronology
from harness.matrix.index import Release
from harness.matrix.spec import PLAN_AS_OF, AxisRule

_failed: dict[tuple[str, str], str] = {}


def select(releases: Iterable[Release], rule: AxisRule, as_of: datetime | None = None) -> list[str]:
    """The versions `rule` names among `releases`, oldest first (see the module docstring)."""
    spec = SpecifierSet(rule.releases)
    cutoff = aware(as_of)
    kept = [
        r
        for r in releases
        if not r.yanked
        and (rule.pre or not r.version.is_prerelease)
        and spec.contains(r.version, prereleases=rule.pre or None)
        and (cutoff is None or r.uploaded is None or r.uploaded <= cutoff)
    ]
    kept.sort(key=lambda r: r.version)
    if rule.per:
        width = 1 if rule.per == "major" else 2
        newest = {}
        for r in kept:  # oldest first: the last one of each series wins
            newest[(r.version.release + (0, 0))[:width]] = r
        kept = sorted(newest.values(), key=lambda r: r.version)
    if rule.last:
        kept = kept[-rule.last :]
    return [str(r.version) for r in kept]


def rule_versions(
    rule: AxisRule,
    distribution: str,
    index_url: str,
    as_of: datetime | None = None,
    chronology: Chronology = NOW,
) -> list[str]:
    """`select` over the releases of `distribution` that `chronology` knows, else the index's; `IndexLookupError`
    (one line) when it cannot tell."""
    key = (distribution, index_url)
    if key in _failed and not chronology.knows(distribution):
        raise IndexLookupError(_failed[key])
    try:
        found = chronology.releases_of(distribution, index_url)
    except IndexLookupError as exc:
        _failed[key] = str(exc)
        raise
    return select(found, rule, as_of)


def plan_as_of() -> datetime | None:
    """$BUGMATRIX_PLAN_AS_OF as an aware datetime (UTC when no zone is given), or None."""
    text = os.environ.get(PLAN_AS_OF, "").strip()
    if not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise MatrixError(f"${PLAN_AS_OF}: {text!r} is not an ISO date like 2025-08-01 or 2025-08-01T12:00Z") from None
    return aware(when)


def aware(when: datetime | None) -> datetime | None:
    """`when` with a time zone (UTC when it has none), so it compares with the index's upload times."""
    return when if when is None or when.tzinfo else when.replace(tzinfo=timezone.utc)


def forget() -> None:
    """Drop the per-process caches (the index pages and the failures), as a new process would start."""
    _failed.clear()
    _index.releases.cache_clear()
    _index.files.cache_clear()
