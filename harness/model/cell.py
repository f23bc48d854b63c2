"""A cell: one set of package pins on a device, with a Python version and an index; and a pin's forms.

A pin is a version (`2.5.0`), a specifier (`>=1.3,<1.6`) or a git reference (`{git: <sha>}`) of a pure-Python
package. `Cell`s are made from matrix.yaml (harness/matrix/expand.py) or by bisect for one candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
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


BISECT_PREFIX = "bisect-"  # the cells of bisect and narrow probes are named bisect-<package>-<candidate>
# The cells (and probe ids) of `bugmatrix compat`, named compat-torch-<v>-<package>-<v>...: the store keeps their
# results apart from the catalogue's (harness/session/store.py), so report, compare, narrow and expect never see them.
COMPAT_PREFIX = "compat-"


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
