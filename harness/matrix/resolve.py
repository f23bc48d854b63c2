"""Resolving a cell: every specifier pin becomes the newest matching release on the cell's index, and the
time-travel date `as_of` is the newest upload among the pinned releases, so that what the cell does not pin resolves
as it would have on that day (uv --exclude-newer). Git pins install a pure-Python package from its repository.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from packaging.specifiers import SpecifierSet

from harness.matrix.basics import IndexLookupError, MatrixError
from harness.matrix.expand import Matrix
from harness.matrix.git import git_url
from harness.model.cell import Cell, GitPin, exact
from harness.model.version import COMMIT, GIT_PIN, PinVersion


@dataclass(frozen=True)
class ResolvedCell:
    """A cell with every release pin exact, its requirements for uv, and its environment key."""

    cell: Cell
    versions: dict[str, str]  # logical package -> exact version, or "git:<ref>"
    requirements: list[str]
    overrides: list[str]
    imports: list[str]
    as_of: datetime | None

    @property
    def key(self) -> str:
        """Identical pins, device, Python, index and date -> the same key -> one shared environment."""
        blob = json.dumps(
            [
                self.requirements,
                self.overrides,
                self.cell.python,
                self.cell.index_url,
                self.as_of.isoformat() if self.as_of else None,
            ],
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def resolve_cell(matrix: Matrix, cell: Cell) -> ResolvedCell:
    """Exact versions for every pin (newest release matching a specifier), uv requirements, and `as_of`.
    A cell the matrix could not form (`Matrix.problems`: a pairing with no row yet, an unreadable rule axis) is a
    `MatrixError` with that reason."""
    problem = matrix.problems.get(cell.name)
    if problem and matrix.cells and cell in matrix.cells:
        raise MatrixError(f"{matrix.path}: cell {cell.name}: {problem}")
    versions: dict[str, str] = {}
    requirements: list[str] = []
    stamps: list[datetime] = []
    for package, pin in sorted(cell.pins.items()):
        dist = matrix.distribution(package, cell.device)
        if isinstance(pin, GitPin):
            url = cell.sources.get(package) or matrix.source(package)
            if url is None:
                raise MatrixError(f"{matrix.path}: cell {cell.name}: {package} is pinned to git but has no `sources`")
            versions[package] = f"{GIT_PIN}{pin.git}"
            requirements.append(f"{dist} @ git+{git_url(url)}@{pin.git}")
            stamp = matrix.chronology.commit_date(url, pin.git)
            if stamp:
                stamps.append(stamp)
            continue
        spec = f"=={pin}" if exact(pin) is not None else str(pin)
        try:
            found = matrix.chronology.matching(dist, spec, cell.index_url)
        except IndexLookupError as exc:
            raise MatrixError(f"{matrix.path}: cell {cell.name}: {exc}") from None
        if not found:
            raise MatrixError(f"{matrix.path}: cell {cell.name}: no release of {dist} matches {spec}")
        release = found[-1]
        versions[package] = str(release.version)
        requirements.append(f"{dist}=={release.version}")
        if release.uploaded:
            stamps.append(release.uploaded)
    # A device build with another name (fbgemm-gpu-cpu for fbgemm-gpu) provides the same modules: requirements on
    # the logical name (every torchrec wheel requires the CUDA fbgemm-gpu) are dropped with a never-true marker.
    overrides = [
        f"{package}; sys_platform == 'never'"
        for package in sorted(cell.pins)
        if matrix.distribution(package, cell.device) != package
    ]
    requirements += companions(matrix, versions)
    as_of = cell.as_of or (max(stamps) if stamps else None)
    imports = [matrix.import_name(p) for p in sorted(cell.pins)]
    return ResolvedCell(cell, versions, requirements, overrides, imports, as_of)


def companions(matrix: Matrix, versions: dict[str, str]) -> list[str]:
    """The `companions` requirements whose `when` every one of `versions` satisfies (each once, in file order)."""
    added: list[str] = []
    for companion in matrix.spec.companions:
        if all(
            package in versions
            and PinVersion.parse(versions[package]).kind != COMMIT
            and SpecifierSet(spec).contains(versions[package], prereleases=True)
            for package, spec in companion.when.items()
        ):
            added += [req for req in companion.add if req not in added]
    return added


def dater(matrix: Matrix) -> Callable[[str, str, str | None], datetime | None]:
    """`made_at` bound to `matrix`: how the report, narrow and every reader of an axis order its points (a git
    install by its commit date, a release by its upload), so they all see the same history."""
    return functools.partial(made_at, matrix)


def made_at(matrix: Matrix, package: str, version: str, commit: str | None) -> datetime | None:
    """When a release was uploaded (from the default index) or a commit was made (from a local clone), or None; the
    matrix's chronology answers first."""
    if commit:
        url = matrix.source(package)
        return matrix.chronology.commit_date(url, commit) if url else None
    try:
        found = matrix.chronology.matching(package, f"=={version}", matrix.index_url())
    except (IndexLookupError, ValueError):
        return None
    return found[-1].uploaded if found else None


def exclude_newer(as_of: datetime) -> str:
    """uv's cutoff for `as_of`: exclusive, whole seconds, so one second past the newest pinned upload."""
    return (as_of.astimezone(timezone.utc) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
