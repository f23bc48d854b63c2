"""What is known of packages' history before an index or a clone is asked: an object, never module state.

    chronology = Chronology()                              # nothing known: the live index and clones answer
    chronology = Chronology(releases, dates, positions)    # a record's snapshot (harness/session/readers.py)
    matrix = load_matrix(path, chronology)                 # the matrix plans, resolves and dates with it

A reader of the record carries the record's snapshot (release listings with their upload dates, commit dates and
first-parent positions), so that the record reads the same offline; a command that measures carries an empty one,
so that a release uploaded tonight is planned tonight. Two readers of two records in one process each answer from
their own; opening one changes nothing for the rest of the process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from harness.matrix.basics import PYPI

if TYPE_CHECKING:
    from harness.matrix.index import Release


@dataclass(frozen=True)
class Chronology:
    """Release listings by distribution (canonical name -> releases, oldest first), committer dates by commit or
    release, and first-parent positions by (package, commit or release); what it does not hold, the index and the
    local clones answer."""

    releases: Mapping[str, tuple[Release, ...]] = field(default_factory=dict)
    dates: Mapping[str, datetime] = field(default_factory=dict)
    positions: Mapping[tuple[str, str], int] = field(default_factory=dict)

    @staticmethod
    def of(
        releases: Mapping[str, tuple[Release, ...]],
        dates: Mapping[str, datetime],
        positions: Mapping[tuple[str, str], int],
    ) -> Chronology:
        """A snapshot of `releases` (by any spelling of a distribution's name), `dates` and `positions`, copied."""
        listed: dict[str, tuple[Release, ...]] = {
            canonicalize_name(n): tuple(sorted(r, key=lambda r: r.version)) for n, r in releases.items()
        }
        return Chronology(listed, dict(dates), dict(positions))

    def knows(self, name: str) -> bool:
        """Whether the snapshot lists the releases of `name` (the index is then never asked for them)."""
        return canonicalize_name(name) in self.releases

    def releases_of(self, name: str, index_url: str = PYPI) -> tuple[Release, ...]:
        """Every release of `name`, oldest first: the snapshot's, else `index_url`'s (raises `IndexLookupError`
        when the index cannot tell)."""
        from harness.matrix import index

        known = self.releases.get(canonicalize_name(name))
        return known if known is not None else index.releases(name, index_url)

    def matching(self, name: str, spec: str, index_url: str = PYPI, prereleases: bool = False) -> list[Release]:
        """The non-yanked releases of `name` that satisfy the specifier `spec`, oldest first."""
        specifier = SpecifierSet(spec)
        return [
            r
            for r in self.releases_of(name, index_url)
            if not r.yanked and specifier.contains(r.version, prereleases=prereleases or None)
        ]

    def commit_date(self, url: str, ref: str) -> datetime | None:
        """The committer date of `ref` (a commit, or a release's tag): the snapshot's, else a local clone's at
        `url` (None for a remote source: unknown without cloning)."""
        from harness.matrix import git

        known = self.dates.get(ref)
        return known if known is not None else git.commit_date(url, ref)

    def position(self, package: str, ref: str) -> int | None:
        """The first-parent position (commits from the root) of `ref` of `package` in the snapshot, or None."""
        return self.positions.get((package, ref))


NOW = Chronology()  # nothing known: what a measuring command asks (the live index, the local clones)
