"""The schema of `matrix.yaml` (the version matrix) and the index each cell uses.

A cell is a set of package pins + a device + a Python version + an index. Cells come from `cells:` (named, written
out) and from `groups:` (axes expanded like a GitHub Actions matrix, with `exclude`/`include`); expansion and the
couplings between packages are in harness/matrix/expand.py, resolution and time travel in harness/matrix/resolve.py.
Logical package names map to distributions per device (`fbgemm-gpu` is `fbgemm-gpu-cpu` on CPU: the built-in map
is in harness/model/common.py; `device_packages` adds to it).
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import Annotated, Any, Literal

from packaging.requirements import InvalidRequirement, Requirement
from pydantic import Field, ValidationError, field_validator, model_validator

from harness.matrix.index import PYPI
from harness.model.cell import GitPin, Pin, check_pin
from harness.model.common import Device, Strict, check_specifier
from harness.model.names import CELL
from harness.model.yamlfile import one_line

PackageName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
INDEX_OVERRIDE = "BUGMATRIX_INDEX_URL"  # switches every cell (and bisect, and upload dates) to another index
PLAN_AS_OF = "BUGMATRIX_PLAN_AS_OF"  # plans rule axes as the index was then (an ISO date): replays an old plan


def _check_pins(pins: dict[str, Pin]) -> dict[str, Pin]:
    for package, pin in pins.items():
        check_pin(package, pin)
    return pins


class Source(Strict):
    """Where a pure-Python package's history lives; `mirror` (or $BUGMATRIX_MIRROR_<NAME>) overrides `git`."""

    git: str
    mirror: str | None = None


class Coupling(Strict):
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


class Companion(Strict):
    """Requirements some releases need but do not declare, added to every cell whose versions match `when`.

    `when` maps a package to a PEP 440 specifier, matched against the cell's resolved versions (matrix cells and the
    probe cells of bisect, narrow and compat alike; a git pin never matches). `add` lists requirement strings; left
    unpinned they resolve as of the cell's date like everything else it does not pin."""

    when: dict[PackageName, str] = Field(min_length=1)
    add: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _when(self) -> Companion:
        for package, spec in self.when.items():
            check_specifier(f"when.{package}", spec)
        for i, req in enumerate(self.add):
            try:
                Requirement(req)
            except InvalidRequirement as exc:
                raise ValueError(f"add.{i}: {req!r} is not a requirement ({exc})") from None
        return self


class Defaults(Strict):
    """What a cell does not say: its Python, its device and the name of its index."""

    python: str = "3.11"
    device: Device = "cpu"
    index: str = "pypi"


class CellSpec(Strict):
    """A named cell, written out."""

    name: Annotated[str, Field(pattern=CELL)]
    pins: dict[PackageName, Pin] = Field(min_length=1)
    device: Device | None = None
    python: str | None = None
    index: str | None = None
    as_of: datetime | None = None
    unpaired: bool = False  # pins taken as written: no coupling fills or checks them (see GroupSpec.unpaired)

    _pins = field_validator("pins")(_check_pins)


class AxisRule(Strict):
    """An axis read from the package index when the matrix is planned, instead of a written list.

    `{releases: ">=2.4", per: minor}`: the newest release of each minor version 2.4 and up;
    `{releases: "==2.*", last: 3}`: the newest three; `{releases: ">=2.10.0.dev0", pre: true, index: nightly,
    last: 2}`: the newest two builds of a pre-release channel (an entry of `indexes`). Yanked releases never count;
    releases uploaded after the group's `as_of` (or $BUGMATRIX_PLAN_AS_OF) do not exist yet.
    """

    releases: str  # a PEP 440 specifier, required ("" for every release): `{}` is no rule
    per: Literal["major", "minor"] | None = None  # keep only the newest release of each major / minor version
    last: int | None = Field(default=None, ge=1)  # then keep only the newest N
    pre: bool = False  # pre-releases and dev builds count too
    index: str | None = None  # the entry of `indexes` to read (and to install the group's cells from)

    @field_validator("releases")
    @classmethod
    def _releases(cls, spec: str) -> str:
        check_specifier("releases", spec)
        return spec


def _axis(package: str, value: Any) -> list[Pin] | AxisRule:
    """A written list (checked as before) or a rule mapping; every problem a one-line ValueError naming `package`."""
    if isinstance(value, AxisRule):
        return value
    if isinstance(value, dict):
        try:
            return AxisRule.model_validate(value)
        except ValidationError as exc:
            raise ValueError(f"{package}: {one_line(exc)}") from None
    if not isinstance(value, list):
        raise ValueError(f"{package}: an axis is a list of versions or a rule like {{releases: '>=2.4', per: minor}}")
    if not value:
        raise ValueError(f"{package}: an axis needs at least one value")
    pins: list[Pin] = []
    for i, item in enumerate(value):
        if isinstance(item, dict | GitPin):
            try:
                item = item if isinstance(item, GitPin) else GitPin.model_validate(item)
            except ValidationError as exc:
                raise ValueError(f"{package}.{i}: {one_line(exc)}") from None
        elif not isinstance(item, str):
            raise ValueError(f"{package}.{i}: must be a version, a specifier or {{git: <ref>}}")
        check_pin(package, item)
        pins.append(item)
    return pins


class GroupSpec(Strict):
    """Cells from axes: the product of `axes` values (and `devices`), minus `exclude`, plus `include`.

    An axis is a list of pins, or an `AxisRule` resolved from the index when the matrix is planned."""

    name: str = Field(min_length=1)
    axes: dict[PackageName, list[Pin] | AxisRule] = Field(min_length=1)
    pins: dict[PackageName, Pin] = Field(default_factory=dict)
    devices: list[Device] | None = None
    python: str | None = None
    index: str | None = None
    as_of: datetime | None = None
    exclude: list[dict[str, str]] = Field(default_factory=list)
    include: list[dict[str, Pin]] = Field(default_factory=list)
    # True: the cells' pins are taken as written, and no coupling fills or checks them: cells that measure a
    # pairing of releases that no row allows (a coupling case: torchrec 1.1 with fbgemm-gpu 1.2). Write every
    # coupled package's pin; uv still refuses what the packages' own requirements exclude.
    unpaired: bool = False

    @field_validator("axes", mode="before")
    @classmethod
    def _axes(cls, axes: Any) -> Any:
        if not isinstance(axes, dict):
            return axes  # pydantic says what is wrong
        return {package: _axis(str(package), value) for package, value in axes.items()}

    @property
    def rules(self) -> dict[str, AxisRule]:
        """The axes that are rules, by package."""
        return {p: v for p, v in self.axes.items() if isinstance(v, AxisRule)}

    _pins = field_validator("pins")(_check_pins)


Runners = dict[Device, str | list[str]]  # device -> the CI runner label(s) its cells run on


class MatrixSpec(Strict):
    """The whole of matrix.yaml."""

    defaults: Defaults = Field(default_factory=Defaults)
    indexes: dict[str, str] = Field(default_factory=lambda: {"pypi": PYPI})
    # logical package -> device -> distribution, on top of the built-in ones (harness/model/common.py)
    device_packages: dict[PackageName, dict[Device, str]] = Field(default_factory=dict)
    imports: dict[PackageName, str] = Field(default_factory=dict)
    couplings: list[Coupling] = Field(default_factory=list)
    companions: list[Companion] = Field(default_factory=list)
    sources: dict[PackageName, Source] = Field(default_factory=dict)
    runners: Runners = Field(default_factory=lambda: Runners({"cpu": "ubuntu-latest"}))
    cells: list[CellSpec] = Field(default_factory=list)
    groups: list[GroupSpec] = Field(default_factory=list)


def index_url(spec: MatrixSpec, name: str | None = None) -> str | None:
    """The URL of index `name` (default: the matrix's default index); $BUGMATRIX_INDEX_URL overrides every one."""
    return os.environ.get(INDEX_OVERRIDE) or spec.indexes.get(name or spec.defaults.index)
