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
from pathlib import Path
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from harness.matrix.index import PYPI
from harness.model.cell import Pin, check_pin
from harness.model.common import Device, Strict, check_specifier

PackageName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]
DEFAULT_MATRIX = Path("matrix.yaml")
INDEX_OVERRIDE = "BUGMATRIX_INDEX_URL"  # switches every cell (and bisect, and upload dates) to another index


class MatrixError(Exception):
    """matrix.yaml is invalid, or a cell cannot be formed; the message names the file and the field or cell."""


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


class Defaults(Strict):
    """What a cell does not say: its Python, its device and the name of its index."""

    python: str = "3.11"
    device: Device = "cpu"
    index: str = "pypi"


class CellSpec(Strict):
    """A named cell, written out."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._+-]*$")]
    pins: dict[PackageName, Pin] = Field(min_length=1)
    device: Device | None = None
    python: str | None = None
    index: str | None = None
    as_of: datetime | None = None

    _pins = field_validator("pins")(_check_pins)


class GroupSpec(Strict):
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
                check_pin(package, value)
        return axes

    _pins = field_validator("pins")(_check_pins)


class MatrixSpec(Strict):
    """The whole of matrix.yaml."""

    defaults: Defaults = Field(default_factory=Defaults)
    indexes: dict[str, str] = Field(default_factory=lambda: {"pypi": PYPI})
    # logical package -> device -> distribution, on top of the built-in ones (harness/model/common.py)
    device_packages: dict[PackageName, dict[Device, str]] = Field(default_factory=dict)
    imports: dict[PackageName, str] = Field(default_factory=dict)
    couplings: list[Coupling] = Field(default_factory=list)
    sources: dict[PackageName, Source] = Field(default_factory=dict)
    runners: dict[Device, str | list[str]] = Field(default_factory=lambda: {"cpu": "ubuntu-latest"})
    cells: list[CellSpec] = Field(default_factory=list)
    groups: list[GroupSpec] = Field(default_factory=list)



def index_url(spec: MatrixSpec, name: str | None = None) -> str | None:
    """The URL of index `name` (default: the matrix's default index); $BUGMATRIX_INDEX_URL overrides every one."""
    return os.environ.get(INDEX_OVERRIDE) or spec.indexes.get(name or spec.defaults.index)
