"""A cell: one set of package pins on a device, with a Python version and an index; and a pin's forms.

A pin is a version (`2.5.0`), a specifier (`>=1.3,<1.6`) or a git reference (`{git: <sha>}`) of a pure-Python
package. `Cell`s are made from matrix.yaml (harness/matrix/expand.py) or by bisect for one candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from typing import Any

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version
from pydantic import Field

from harness.model.common import Strict


class GitPin(Strict):
    """Install the package from a commit, tag or branch of its source repository."""

    git: str = Field(min_length=1)


Pin = str | GitPin


def check_pin(package: str, pin: Pin) -> None:
    """Raise `ValueError` naming `package` unless `pin` is a git pin, a version or a specifier."""
    if isinstance(pin, GitPin):
        return
    try:
        Version(pin)
    except InvalidVersion:
        try:
            SpecifierSet(pin)
        except InvalidSpecifier:
            raise ValueError(f"{package}: {pin!r} is neither a version nor a specifier") from None


def pin_text(pin: Any) -> str:
    """A pin as it appears in a cell name: the version or specifier, or `git-<sha prefix>`."""
    return f"git-{pin.git[:10]}" if isinstance(pin, GitPin) else str(pin)


def exact(pin: Pin) -> Version | None:
    """The version a pin names exactly, or None (a specifier or a git pin)."""
    if isinstance(pin, GitPin):
        return None
    try:
        return Version(pin)
    except InvalidVersion:
        return None


LOCAL_CELL = "local"  # the cell recorded for runs in the current (or --python) environment, outside the matrix
BISECT_PREFIX = "bisect-"  # the cells of bisect and narrow probes are named bisect-<package>-<candidate>
# The cells (and probe ids) of `bugmatrix compat`, named compat-torch-<v>-<package>-<v>...: the store keeps their
# results apart from the catalogue's (harness/session/contract.py), so report, compare, narrow and expect never see
# them.
COMPAT_PREFIX = "compat-"


class CellKind(str, Enum):
    """What made a cell, as its name says (`kind_of`, the one place that reads a cell name for it)."""

    LOCAL = "local"  # the current (or --python) environment, outside the matrix (`LOCAL_CELL`)
    MATRIX = "matrix"  # a named environment: a cell of matrix.yaml, or a machine's cell that a fold named
    BISECT = "bisect"  # a bisect or narrow probe (`BISECT_PREFIX`)
    COMPAT = "compat"  # a compatibility probe (`COMPAT_PREFIX`)


Kinds = frozenset[CellKind]  # what a reader of the store asks for
CASE_CELLS: Kinds = frozenset({CellKind.LOCAL, CellKind.MATRIX, CellKind.BISECT})  # the cases' results
COMPAT_CELLS: Kinds = frozenset({CellKind.COMPAT})  # the compatibility probes' results
_PREFIXED = ((COMPAT_PREFIX, CellKind.COMPAT), (BISECT_PREFIX, CellKind.BISECT))


def kind_of(cell: str) -> CellKind:
    """The kind of the cell named `cell` (the names are what the store and the record keep: the kind is read from
    them, never written beside them)."""
    if cell == LOCAL_CELL:
        return CellKind.LOCAL
    for prefix, kind in _PREFIXED:
        if cell.startswith(prefix):
            return kind
    return CellKind.MATRIX


def kind_sql(column: str) -> str:
    """`kind_of` as an SQL expression over the text column `column`: the same table of names, for a store that
    filters in SQL (a test holds the two to the same answers)."""
    cases = " ".join(
        f"WHEN substr({column}, 1, {len(prefix)}) = '{prefix}' THEN '{kind.value}'" for prefix, kind in _PREFIXED
    )
    local, other = CellKind.LOCAL.value, CellKind.MATRIX.value
    return f"(CASE WHEN {column} = '{LOCAL_CELL}' THEN '{local}' {cases} ELSE '{other}' END)"


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

    @property
    def kind(self) -> CellKind:
        """What made this cell (`kind_of` its name)."""
        return kind_of(self.name)
