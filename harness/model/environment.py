"""What an interpreter has installed, as data: each distribution's version and git commit (`Installed`) and the
whole environment (`Environment`); harness/launch/interpreter.py lists one, a result's versions give one back
(harness/model/expectations.py), and expect rules are evaluated against it."""

from __future__ import annotations

from packaging.utils import canonicalize_name
from pydantic import BaseModel

from harness.model.common import distributions
from harness.model.version import PinVersion


class Installed(BaseModel):
    """One installed distribution: its version and, when installed from git, the commit."""

    name: str
    version: str
    commit: str | None = None


class Environment(BaseModel):
    """An interpreter the harness can launch cases with, and what it has installed."""

    python: str
    python_version: str
    packages: dict[str, Installed]

    def get(self, package: str) -> Installed | None:
        """The installed distribution providing `package` (aliases such as fbgemm-gpu -> fbgemm-gpu-cpu)."""
        for name in distributions(package):
            found = self.packages.get(canonicalize_name(name))
            if found:
                return found
        return None

    def missing(self, packages: list[str]) -> list[str]:
        """The names in `packages` that this environment does not provide."""
        return [p for p in packages if self.get(p) is None]

    def versions_of(self, packages: list[str]) -> dict[str, str]:
        """`{package: "version"}` (or `"version @ commit"`) for the installed ones among `packages`."""
        out: dict[str, str] = {}
        for package in packages:
            found = self.get(package)
            if found:
                out[found.name] = str(PinVersion.of(found.version, found.commit))
        return out
