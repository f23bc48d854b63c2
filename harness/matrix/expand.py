"""Expanding matrix.yaml into concrete cells: named cells, group axes, and the couplings between packages.

    matrix = load_matrix(path)     # validated spec + every cell, couplings applied (not yet resolved)
    cell = matrix.cell(name)
    matrix.problems                # cell name -> why that cell cannot be formed (its jobs are `infra`)

Couplings fill and check coupled packages: when a coupling's `lead` is pinned, the row whose lead specifier matches
supplies every other package of the row that the cell does not pin, and a pin that contradicts the row is rejected
(`<file>: cells.<name>: torch 2.6.0 breaks the pairing ...`). A cell or group with `unpaired: true` is left as
written: it measures a pairing that no row allows (a coupling case's mismatched releases).

Rule axes (`torch: {releases: ">=2.4", per: minor}`, harness/matrix/spec.py `AxisRule`) are read from the index
here, when the matrix is planned, so a new upload is a new cell with no edit; a matrix without rule axes never
touches the network. Each version a rule picks is an exact pin (and so in the cell's name: `torch-2.15.0`). Written
pins that break or miss a pairing are an error in the file, as before; a cell that a rule made is never refused
that way, nor guessed: it is kept, with the pairing's other packages `unresolved`, and its problem in
`Matrix.problems` (`torchrec 1.10.0 has no row in the pairing ...`), which `resolve_cell` raises, so its jobs are
`infra` with that reason until a measured row covers it. An index that cannot be read, or a rule that names no
release, gives one cell `<template with the axis value "unresolved">` with that reason, and the rest of the matrix
goes on.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from packaging.specifiers import SpecifierSet

from harness.matrix.axes import aware, plan_as_of, rule_versions
from harness.matrix.basics import DEFAULT_MATRIX, IndexLookupError, MatrixError
from harness.matrix.chronology import NOW, Chronology
from harness.matrix.spec import AxisRule, Coupling, GroupSpec, MatrixSpec, index_url
from harness.model.cell import Cell, Pin, exact, pin_text
from harness.model.common import DEVICE_PACKAGES
from harness.model.yamlfile import load_model


@dataclass(frozen=True)
class Matrix:
    """A loaded matrix.yaml: its spec and its cells (couplings applied, not yet resolved)."""

    path: Path
    spec: MatrixSpec
    cells: list[Cell] = field(default_factory=list)
    problems: dict[str, str] = field(default_factory=dict)  # cell name -> why it cannot be formed (-> infra)
    chronology: Chronology = NOW  # what it plans, resolves and dates with (a reader's: its record's snapshot)

    def cell(self, name: str) -> Cell:
        for cell in self.cells:
            if cell.name == name:
                return cell
        raise MatrixError(f"{self.path}: no cell named {name!r} (have: {', '.join(c.name for c in self.cells)})")

    def distribution(self, package: str, device: str) -> str:
        """The distribution that provides logical `package` on `device`."""
        return _distribution(self.spec, package, device)

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


UNRESOLVED = "unresolved"  # the pin of a package a cell cannot have without guessing (see the module docstring)


class PairingError(MatrixError):
    """A pin has no row in a pairing, or contradicts its row."""


def load_matrix(path: Path = DEFAULT_MATRIX, chronology: Chronology = NOW) -> Matrix:
    """Read, validate and expand matrix.yaml, its rule axes read from `chronology` (else the index); any problem is
    a one-line `MatrixError` naming file and field."""
    spec = load_model(path, MatrixSpec, MatrixError)
    cells, problems = plan(spec, path, chronology)
    return Matrix(path=path, spec=spec, cells=cells, problems=problems, chronology=chronology)


def expand(spec: MatrixSpec, path: Path = DEFAULT_MATRIX, chronology: Chronology = NOW) -> list[Cell]:
    """Every cell of the matrix, named cells first, each with its couplings applied; names are unique."""
    return plan(spec, path, chronology)[0]


@dataclass
class _Raw:
    where: str  # field path: cells.0, groups.2
    name: str
    fields: dict[str, Any]
    ruled: bool = False  # some pin came from a rule axis: a pairing problem is this cell's, not the file's
    problem: str = ""


def plan(
    spec: MatrixSpec, path: Path = DEFAULT_MATRIX, chronology: Chronology = NOW
) -> tuple[list[Cell], dict[str, str]]:
    """Every cell (named cells first) and the problems of the cells that cannot be formed, by name (rule axes read
    from `chronology`, else the index)."""
    raw: list[_Raw] = []
    for i, c in enumerate(spec.cells):
        raw.append(
            _Raw(
                f"cells.{i}",
                c.name,
                {
                    "pins": dict(c.pins),
                    "device": c.device,
                    "python": c.python,
                    "index": c.index,
                    "as_of": c.as_of,
                    "group": None,
                    "unpaired": c.unpaired,
                },
            )
        )
    for i, g in enumerate(spec.groups):
        axes, problem, index_name = _group_axes(spec, g, f"{path}: groups.{i}", chronology)
        for combo in _group_combos(g, axes):
            device = combo.pop("device", None)
            try:
                name = g.name.format(**{k: pin_text(v) for k, v in combo.items()}, device=device or "")
            except (KeyError, IndexError) as exc:
                raise MatrixError(f"{path}: groups.{i}.name: unknown placeholder {exc}") from None
            except (ValueError, AttributeError, TypeError) as exc:  # "{", "{torch.x}", "{torch!z}" ...
                raise MatrixError(
                    f"{path}: groups.{i}.name: not a name template like 'torch-{{torch}}': {exc}"
                ) from None
            raw.append(
                _Raw(
                    f"groups.{i}",
                    name,
                    {
                        "pins": {**g.pins, **combo},
                        "device": device,
                        "python": g.python,
                        "index": index_name,
                        "as_of": g.as_of,
                        "group": g.name,
                        "unpaired": g.unpaired,
                    },
                    ruled=bool(g.rules),
                    problem=problem,
                )
            )
    cells: list[Cell] = []
    problems: dict[str, str] = {}
    seen: dict[str, Cell] = {}
    for r in raw:
        f = r.fields
        index_name = f["index"] or spec.defaults.index
        url = index_url(spec, index_name)
        if url is None:
            raise MatrixError(f"{path}: {r.where}: index {index_name!r} is not in `indexes`")
        problem = r.problem
        try:
            pins = (
                dict(f["pins"])
                if f["unpaired"]
                else apply_couplings(spec.couplings, f["pins"], f"{path}: {r.where} ({r.name})")
            )
        except PairingError as exc:
            if not r.ruled:
                raise
            pins, problem = f["pins"], problem or str(exc).removeprefix(f"{path}: {r.where} ({r.name}): ")
        if problem:
            pins = _unresolved_partners(spec.couplings, pins)
        cell = Cell(
            name=r.name,
            device=f["device"] or spec.defaults.device,
            python=f["python"] or spec.defaults.python,
            index_url=url,
            pins=pins,
            as_of=f["as_of"],
            group=f["group"],
        )
        if r.name in seen:
            if r.ruled and (seen[r.name] == cell or r.problem):
                continue  # a rule naming a cell already written (or one more unreadable axis): the same cell
            raise MatrixError(f"{path}: {r.where}: cell name {r.name!r} is used twice")
        seen[r.name] = cell
        cells.append(cell)
        if problem:
            problems[r.name] = problem
    return cells, problems


def _distribution(spec: MatrixSpec, package: str, device: str) -> str:
    per_device = dict(DEVICE_PACKAGES.get(package, {}))
    per_device.update(spec.device_packages.get(package, {}).items())  # the matrix's own win
    return per_device.get(device, package)


def _group_axes(
    spec: MatrixSpec, group: GroupSpec, where: str, chronology: Chronology
) -> tuple[dict[str, list[Any]], str, str | None]:
    """The group's axes as lists (rules read from the index), the problem every cell of the group has (an
    unreadable index, a rule that names nothing: "" when none), and the name of the group's index."""
    rules = group.rules
    if not rules:  # no network for written axes
        return dict(group.axes), "", group.index  # type: ignore[arg-type]
    named = {r.index for r in rules.values() if r.index} | ({group.index} if group.index else set())
    if len(named) > 1:
        raise MatrixError(
            f"{where}: the group's cells install from one index; its rules and `index` name {', '.join(sorted(named))}"
        )
    index_name = next(iter(named), None) or spec.defaults.index
    url = index_url(spec, index_name)
    if url is None:
        package = next((p for p, r in rules.items() if r.index == index_name), "")
        field = f"axes.{package}.index" if package else "index"
        raise MatrixError(f"{where}.{field}: index {index_name!r} is not in `indexes`")
    as_of = min((t for t in (aware(group.as_of), plan_as_of()) if t is not None), default=None)
    device = (group.devices or [spec.defaults.device])[0]
    axes: dict[str, list[Any]] = {}
    problems = []
    for package, axis in group.axes.items():
        if not isinstance(axis, AxisRule):
            axes[package] = list(axis)
            continue
        dist = _distribution(spec, package, device)
        try:
            axes[package] = rule_versions(axis, dist, url, as_of, chronology)
        except IndexLookupError as exc:
            problems.append(f"axis {package} ({_rule_text(axis)}) cannot be read: {exc}")
        else:
            if not axes[package]:
                problems.append(
                    f"axis {package}: no release of {dist} on {url} matches {_rule_text(axis)}"
                    + (f" as of {as_of.isoformat()}" if as_of else "")
                )
        if package not in axes or not axes[package]:
            axes[package] = [UNRESOLVED]
    return axes, "; ".join(problems), index_name if named else None


def _rule_text(rule: AxisRule) -> str:
    return "{" + ", ".join(f"{k}: {v!r}" for k, v in rule.model_dump(exclude_defaults=True).items()) + "}"


def _unresolved_partners(couplings: list[Coupling], pins: dict[str, Pin]) -> dict[str, Pin]:
    """`pins` with every package paired with a pinned lead, that the cell does not pin, marked `unresolved`: the
    cell keeps the jobs of cases that need them (as `infra`) and no version is guessed."""
    pins = dict(pins)
    for coupling in couplings:
        if coupling.lead in pins:
            for row in coupling.rows:
                for package in row:
                    pins.setdefault(package, UNRESOLVED)
    return pins


def _group_combos(group: GroupSpec, axes: dict[str, list[Any]]) -> list[dict[str, Any]]:
    axes = dict(axes)
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


def pairing_row(coupling: Coupling, package: str, version: Any) -> dict[str, str] | None:
    """The row of `coupling` that pairs `package` at `version` with the others: the *first* row (in file order)
    whose specifier for `package` contains it, or None. Rows are in order of preference: where several rows allow
    a version (a torchrec measured to work with two torch minors), the first one is what a cell pinning only that
    package gets. Cell expansion and bisect probes both pick rows here, so they always agree."""
    for row in coupling.rows:
        if package in row and SpecifierSet(row[package]).contains(version, prereleases=True):
            return row
    return None


def apply_couplings(couplings: list[Coupling], pins: dict[str, Pin], where: str) -> dict[str, Pin]:
    """Fill coupled packages from the lead's first row (`pairing_row`) that the written pins fit, and reject pins
    that break every row that allows the lead."""
    pins = dict(pins)
    for coupling in couplings:
        lead = exact(pins.get(coupling.lead, ""))
        if lead is None:
            continue
        rows = [r for r in coupling.rows if SpecifierSet(r[coupling.lead]).contains(lead, prereleases=True)]
        if not rows:
            raise PairingError(
                f"{where}: {coupling.lead} {lead} has no row in the pairing {coupling.name!r} "
                f"(nothing is guessed: a measured row for {coupling.lead} {lead} in `couplings` "
                "covers it)"
            )
        # the first row whose written pins all fit (pins that no row allows break the first row)
        row = next((r for r in rows if _fits(r, pins)), None)
        if row is None:
            row = rows[0]
            package, spec = next((p, s) for p, s in row.items() if p != coupling.lead and not _fits({p: s}, pins))
            raise PairingError(
                f"{where}: {package} {exact(pins[package])} breaks the pairing {coupling.name!r}: "
                f"{coupling.lead} {row[coupling.lead]} needs {package} {spec}"
            )
        for package, spec in row.items():
            pins.setdefault(package, spec)
    return pins


def _fits(row: dict[str, str], pins: dict[str, Pin]) -> bool:
    """Whether every exact pin among `row`'s packages is allowed by the row."""
    for package, spec in row.items():
        version = exact(pins[package]) if package in pins else None
        if version is not None and not SpecifierSet(spec).contains(version, prereleases=True):
            return False
    return True
