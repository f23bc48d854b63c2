"""Expanding matrix.yaml into concrete cells: named cells, group axes, and the couplings between packages.

    matrix = load_matrix(path)     # validated spec + every cell, couplings applied (not yet resolved)
    cell = matrix.cell(name)

Couplings fill and check coupled packages: when a coupling's `lead` is pinned, the row whose lead specifier matches
supplies every other package of the row that the cell does not pin, and a pin that contradicts the row is rejected
(`<file>: cells.<name>: torch 2.6.0 breaks the pairing ...`).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from harness.matrix.spec import DEFAULT_MATRIX, Coupling, GroupSpec, MatrixError, MatrixSpec, index_url
from harness.model.cell import Cell, Pin, exact, pin_text
from harness.model.common import DEVICE_PACKAGES
from harness.model.yamlfile import load_model


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
        per_device = {**DEVICE_PACKAGES.get(package, {}), **self.spec.device_packages.get(package, {})}
        return per_device.get(device, package)

    def index_url(self, name: str | None = None) -> str:
        """The URL of index `name` (default: the matrix's default index), or $BUGMATRIX_INDEX_URL when set."""
        url = index_url(self.spec, name)
        if url is None:
            raise MatrixError(f"{self.path}: index {name!r} is not in `indexes`")
        return url

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
                name = g.name.format(**{k: pin_text(v) for k, v in combo.items()}, device=device or "")
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
        url = index_url(spec, index_name)
        if url is None:
            raise MatrixError(f"{path}: {where}: index {index_name!r} is not in `indexes`")
        pins = apply_couplings(spec.couplings, f["pins"], f"{path}: {where} ({name})")
        cells.append(Cell(name=name, device=f["device"] or spec.defaults.device,
                          python=f["python"] or spec.defaults.python, index_url=url, pins=pins,
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
    return all(pin_text(combo.get(k)) == pin_text(v) for k, v in pattern.items())

def apply_couplings(couplings: list[Coupling], pins: dict[str, Pin], where: str) -> dict[str, Pin]:
    """Fill coupled packages from the lead's row and reject pins that break a declared pairing."""
    pins = dict(pins)
    for coupling in couplings:
        lead = exact(pins.get(coupling.lead, ""))
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
            version = exact(pins[package])
            if version is not None and not SpecifierSet(spec).contains(version, prereleases=True):
                raise MatrixError(
                    f"{where}: {package} {version} breaks the pairing {coupling.name!r}: "
                    f"{coupling.lead} {row[coupling.lead]} needs {package} {spec}"
                )
    return pins
