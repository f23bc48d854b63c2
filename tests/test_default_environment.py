"""The default environment's pins have one home, pyproject.toml's `default-env` group; every other place that names
them (uv.lock, matrix.yaml's `default` and `default-cuda` cells, the README's quick start) is checked against it."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from harness.model.common import logical_name

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package (pip-audit brings it)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def default_pins() -> dict[str, str]:
    """{distribution: version} of pyproject.toml's `default-env` group, each an exact `==` pin."""
    group = tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"]["default-env"]
    pins = {}
    for line in group:
        req = Requirement(line)
        [spec] = req.specifier
        assert spec.operator == "==", f"pyproject.toml: default-env: {line} is not an exact pin"
        pins[canonicalize_name(req.name)] = spec.version
    return pins


def test_the_lock_resolves_the_default_pins() -> None:
    locked = {
        canonicalize_name(p["name"]): p["version"] for p in tomllib.loads((ROOT / "uv.lock").read_text())["package"]
    }
    assert {name: locked.get(name) for name in default_pins()} == default_pins()


def test_the_matrix_default_cells_pin_the_default_environment() -> None:
    """matrix.yaml's `default` (CPU) and `default-cuda` cells: the same versions, by logical package name
    (fbgemm-gpu-cpu is the CPU build of `fbgemm-gpu`)."""
    expected = {logical_name(name): version for name, version in default_pins().items()}
    cells = {c["name"]: c for c in yaml.safe_load((ROOT / "matrix.yaml").read_text())["cells"]}
    for name in ("default", "default-cuda"):
        pins = {canonicalize_name(k): str(v) for k, v in cells[name]["pins"].items()}
        assert pins == expected, f"matrix.yaml: cell {name}: {pins} != pyproject.toml default-env {expected}"


def test_the_readme_names_the_default_pins() -> None:
    """Where the README (or docs/) says what the default environment is, it lists exactly the pinned versions."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    named = []
    for page in pages:
        text = " ".join(page.read_text().split())
        said = r"the default environment, the newest mutually compatible releases — ([^(]*)\("
        for listing in re.findall(said, text):
            named.append({canonicalize_name(n): v for n, v in re.findall(r"([\w-]+) (\d[\w.]*)", listing)})
    assert named, "README.md: the quick start no longer says which versions the default environment pins"
    assert all(listing == default_pins() for listing in named), (named, default_pins())
