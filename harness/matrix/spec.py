"""`matrix.yaml`: the version matrix, expanded into concrete cells.

A cell is a set of package pins + a device + a Python version + an index. Cells come from `cells:` (named, written
out) and from `groups:` (axes expanded like a GitHub Actions matrix, with `exclude`/`include`). Then:
  1. couplings fill and check coupled packages: when a coupling's `lead` is pinned, the row whose lead specifier
     matches supplies every other package of the row that the cell does not pin, and a pin that contradicts the
     row is rejected (`<file>: cells.<name>: torch 2.6.0 breaks the pairing ...`);
  2. `resolve_cell` turns every specifier pin into the newest matching release on the cell's index, and computes
     the time-travel date `as_of` = the newest upload time among the pinned releases, so that what the cell does
     not pin resolves as it would have on that day (uv --exclude-newer);
  3. git pins (`{git: REF}`) install a pure-Python package from its source repository (or a local mirror).
Logical package names map to distributions per device (`fbgemm-gpu` is `fbgemm-gpu-cpu` on CPU).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any, Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.matrix.index import PYPI, IndexLookupError, matching
from harness.model.case_schema import check_specifier
from harness.model.yamlfile import load_model

Device = Literal["cpu", "cuda"]
PackageName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
DEFAULT_MATRIX = Path("matrix.yaml")


class MatrixError(Exception):
    """matrix.yaml is invalid, or a cell cannot be formed; the message names the file and the field or cell."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class GitPin(_Strict):
    """Install the package from a commit, tag or branch of its source repository."""

    git: str = Field(min_length=1)


Pin = str | GitPin


def _check_pin(package: str, pin: Pin) -> None:
    if isinstance(pin, GitPin):
        return
    try:
        Version(pin)
    except InvalidVersion:
        try:
            SpecifierSet(pin)
        except InvalidSpecifier:
            raise ValueError(f"{package}: {pin!r} is neither a version nor a specifier") from None


def _check_pins(pins: dict[str, Pin]) -> dict[str, Pin]:
    for package, pin in pins.items():
        _check_pin(package, pin)
    return pins


class Source(_Strict):
    """Where a pure-Python package's history lives; `mirror` (or $BUGMATRIX_MIRROR_<NAME>) overrides `git`."""

    git: str
    mirror: str | None = None


class Coupling(_Strict):
    """Packages that only work together, as data: one row of specifiers per compatible set."""

    name: str
    lead: PackageName
    rows: list[dict[str, str]] = Field(min_length=1)

    @model_validator(mode="after")
    def _rows(self) -> Coupling:
        for i, row in enumerate(self.rows):
            if self.lead not in row:
                raise ValueError(f"rows.{i}: has no specifier for the lead package {self.lead}")
            for package, spec in row.items():
                check_specifier(f"rows.{i}.{package}", spec)
        return self


class Defaults(_Strict):
    python: str = "3.11"
    device: Device = "cpu"
    index: str = "pypi"


class CellSpec(_Strict):
    """A named cell, written out."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")]
    pins: dict[PackageName, Pin] = Field(min_length=1)
    device: Device | None = None
    python: str | None = None
    index: str | None = None
    as_of: datetime | None = None

    _pins = field_validator("pins")(_check_pins)


class GroupSpec(_Strict):
    """Cells from axes: the product of `axes` values (and `devices`), minus `exclude`, plus `include`."""

    name: str = Field(min_length=1)
    axes: dict[PackageName, list[Pin]] = Field(min_length=1)
    pins: dict[PackageName, Pin] = Field(default_factory=dict)
    devices: list[Device] | None = None
    python: str | None = None
    index: str | None = None
    as_of: datetime | None = None
    exclude: list[dict[str, str]] = Field(default_factory=list)
    include: list[dict[str, Pin]] = Field(default_factory=list)

    @field_validator("axes")
    @classmethod
    def _axes(cls, axes: dict[str, list[Pin]]) -> dict[str, list[Pin]]:
        for package, values in axes.items():
            if not values:
                raise ValueError(f"{package}: an axis needs at least one value")
            for value in values:
                _check_pin(package, value)
        return axes

    _pins = field_validator("pins")(_check_pins)


class MatrixSpec(_Strict):
    """The whole of matrix.yaml."""

    defaults: Defaults = Field(default_factory=Defaults)
    indexes: dict[str, str] = Field(default_factory=lambda: {"pypi": PYPI})
    device_packages: dict[PackageName, dict[Device, str]] = Field(default_factory=dict)
    imports: dict[PackageName, str] = Field(default_factory=dict)
    couplings: list[Coupling] = Field(default_factory=list)
    sources: dict[PackageName, Source] = Field(default_factory=dict)
    runners: dict[Device, str | list[str]] = Field(default_factory=lambda: {"cpu": "ubuntu-latest"})
    cells: list[CellSpec] = Field(default_factory=list)
    groups: list[GroupSpec] = Field(default_factory=list)


@dataclass(frozen=True)
class Cell:
    """One concrete cell: pins by logical package name (before or after `resolve_cell`)."""

    name: str
    device: str
    python: str
    index_url: str
    pins: dict[str, Pin]
    as_of: datetime | None = None
    group: str | None = None
    sources: dict[str, str] = field(default_factory=dict)  # per-cell git source overrides (bisect --git)


@dataclass(frozen=True)
class Matrix:
    """A loaded matrix.yaml: its spec and its cells (couplings applied, not yet resolved)."""

    path: Path
    spec: MatrixSpec
    cells: list[Cell] = field(default_factory=list)

    def cell(self, name: str) -> Cell:
        for cell in self.cells:
            if cell.name == name:
                return cell
        raise MatrixError(f"{self.path}: no cell named {name!r} (have: {', '.join(c.name for c in self.cells)})")

    def distribution(self, package: str, device: str) -> str:
        """The distribution that provides logical `package` on `device`."""
        return self.spec.device_packages.get(package, {}).get(device, package)  # type: ignore[call-overload]

    def import_name(self, package: str) -> str:
        return self.spec.imports.get(package, package.replace("-", "_"))

    def source(self, package: str) -> str | None:
        """Where to install `package` from git: $BUGMATRIX_MIRROR_<NAME>, else the matrix's mirror, else git URL."""
        env = os.environ.get("BUGMATRIX_MIRROR_" + package.upper().replace("-", "_"))
        src = self.spec.sources.get(package)
        return env or (src.mirror or src.git if src else None)


def load_matrix(path: Path = DEFAULT_MATRIX) -> Matrix:
    """Read, validate and expand matrix.yaml; any problem is a one-line `MatrixError` naming file and field."""
    spec = load_model(path, MatrixSpec, MatrixError)
    return Matrix(path=path, spec=spec, cells=expand(spec, path))


def expand(spec: MatrixSpec, path: Path = DEFAULT_MATRIX) -> list[Cell]:
    """Every cell of the matrix, named cells first, each with its couplings applied; names are unique."""
    raw: list[tuple[str, str, dict[str, Any]]] = []  # (field path, name, fields)
    for i, c in enumerate(spec.cells):
        raw.append((f"cells.{i}", c.name, {"pins": dict(c.pins), "device": c.device, "python": c.python,
                                           "index": c.index, "as_of": c.as_of, "group": None}))
    for i, g in enumerate(spec.groups):
        for combo in _group_combos(g):
            device = combo.pop("device", None)
            try:
                name = g.name.format(**{k: _pin_text(v) for k, v in combo.items()}, device=device or "")
            except (KeyError, IndexError) as exc:
                raise MatrixError(f"{path}: groups.{i}.name: unknown placeholder {exc}") from None
            except (ValueError, AttributeError, TypeError) as exc:  # "{", "{torch.x}", "{torch!z}" ...
                raise MatrixError(f"{path}: groups.{i}.name: not a name template like 'torch-{{torch}}': "
                                  f"{exc}") from None
            raw.append((f"groups.{i}", name, {"pins": {**g.pins, **combo}, "device": device, "python": g.python,
                                              "index": g.index, "as_of": g.as_of, "group": g.name}))
    cells: list[Cell] = []
    seen: set[str] = set()
    for where, name, f in raw:
        if name in seen:
            raise MatrixError(f"{path}: {where}: cell name {name!r} is used twice")
        seen.add(name)
        index_name = f["index"] or spec.defaults.index
        index_url = os.environ.get("BUGMATRIX_INDEX_URL") or spec.indexes.get(index_name)
        if index_url is None:
            raise MatrixError(f"{path}: {where}: index {index_name!r} is not in `indexes`")
        pins = apply_couplings(spec.couplings, f["pins"], f"{path}: {where} ({name})")
        cells.append(Cell(name=name, device=f["device"] or spec.defaults.device,
                          python=f["python"] or spec.defaults.python, index_url=index_url, pins=pins,
                          as_of=f["as_of"], group=f["group"]))
    return cells


def _group_combos(group: GroupSpec) -> list[dict[str, Any]]:
    axes: dict[str, list[Any]] = dict(group.axes)
    if group.devices:
        axes["device"] = list(group.devices)
    combos = [dict(zip(axes, values, strict=True)) for values in itertools.product(*axes.values())]
    combos = [c for c in combos if not any(_matches(c, ex) for ex in group.exclude)]
    for extra in group.include:
        if not any(_matches(c, extra) for c in combos):
            combos.append(dict(extra))
    return combos


def _matches(combo: dict[str, Any], pattern: dict[str, Any]) -> bool:
    return all(_pin_text(combo.get(k)) == _pin_text(v) for k, v in pattern.items())


def _pin_text(pin: Any) -> str:
    return f"git-{pin.git[:10]}" if isinstance(pin, GitPin) else str(pin)


def _exact(pin: Pin) -> Version | None:
    if isinstance(pin, GitPin):
        return None
    try:
        return Version(pin)
    except InvalidVersion:
        return None


def apply_couplings(couplings: list[Coupling], pins: dict[str, Pin], where: str) -> dict[str, Pin]:
    """Fill coupled packages from the lead's row and reject pins that break a declared pairing."""
    pins = dict(pins)
    for coupling in couplings:
        lead = _exact(pins.get(coupling.lead, ""))
        if lead is None:
            continue
        rows = [r for r in coupling.rows if SpecifierSet(r[coupling.lead]).contains(lead, prereleases=True)]
        if not rows:
            raise MatrixError(f"{where}: {coupling.lead} {lead} has no row in the pairing {coupling.name!r}")
        row = rows[0]
        for package, spec in row.items():
            if package == coupling.lead:
                continue
            if package not in pins:
                pins[package] = spec
                continue
            version = _exact(pins[package])
            if version is not None and not SpecifierSet(spec).contains(version, prereleases=True):
                raise MatrixError(
                    f"{where}: {package} {version} breaks the pairing {coupling.name!r}: "
                    f"{coupling.lead} {row[coupling.lead]} needs {package} {spec}"
                )
    return pins


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
            [self.requirements, self.overrides, self.cell.python, self.cell.index_url,
             self.as_of.isoformat() if self.as_of else None],
            sort_keys=True,
        )
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def resolve_cell(matrix: Matrix, cell: Cell) -> ResolvedCell:
    """Exact versions for every pin (newest release matching a specifier), uv requirements, and `as_of`."""
    versions: dict[str, str] = {}
    requirements: list[str] = []
    stamps: list[datetime] = []
    for package, pin in sorted(cell.pins.items()):
        dist = matrix.distribution(package, cell.device)
        if isinstance(pin, GitPin):
            url = cell.sources.get(package) or matrix.source(package)
            if url is None:
                raise MatrixError(f"{matrix.path}: cell {cell.name}: {package} is pinned to git but has no `sources`")
            versions[package] = f"git:{pin.git}"
            requirements.append(f"{dist} @ git+{_git_url(url)}@{pin.git}")
            stamp = _commit_date(url, pin.git)
            if stamp:
                stamps.append(stamp)
            continue
        spec = f"=={pin}" if _exact(pin) is not None else str(pin)
        try:
            found = matching(dist, spec, cell.index_url)
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
    as_of = cell.as_of or (max(stamps) if stamps else None)
    imports = [matrix.import_name(p) for p in sorted(cell.pins)]
    return ResolvedCell(cell, versions, requirements, overrides, imports, as_of)


def made_at(matrix: Matrix, package: str, version: str, commit: str | None) -> datetime | None:
    """When a release was uploaded (from the default index) or a commit was made (from a local clone), or None."""
    if commit:
        url = matrix.source(package)
        return _commit_date(url, commit) if url else None
    index = os.environ.get("BUGMATRIX_INDEX_URL") or matrix.spec.indexes.get(matrix.spec.defaults.index, PYPI)
    try:
        found = matching(package, f"=={version}", index)
    except (IndexLookupError, ValueError):
        return None
    return found[-1].uploaded if found else None


def _git_url(url: str) -> str:
    if "://" in url:
        return url
    return Path(url).resolve().as_uri()  # a local mirror folder


def _commit_date(url: str, ref: str) -> datetime | None:
    """The committer date of `ref` when the source is a local clone (else unknown without cloning)."""
    if "://" in url and not url.startswith("file://"):
        return None
    repo = url.removeprefix("file://")
    try:
        out = subprocess.run(["git", "-C", repo, "show", "-s", "--format=%cI", ref], capture_output=True,
                             text=True, timeout=30, check=True).stdout.strip()
        return datetime.fromisoformat(out).astimezone(timezone.utc)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
