"""The harness's layout is its data path: each layer imports only the layers below it, and says what it promises."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"
# case -> cell -> environment -> launch -> outcome -> store -> report/compare/bisect, as packages, lowest first
LAYERS = ["model", "launch", "matrix", "session", "analysis", "output", "commands"]
ENTRY_POINTS = {"cli.py", "pytest_plugin.py", "__main__.py", "__init__.py"}


def modules() -> list[Path]:
    return sorted(p for p in HARNESS.rglob("*.py") if p.name != "rank_wrapper.py")


def layer_of(path: Path) -> int:
    relative = path.relative_to(HARNESS)
    return LAYERS.index(relative.parts[0]) if len(relative.parts) > 1 else len(LAYERS)


def harness_imports(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("harness"):
            found.append(node.module)
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("harness")]
    return found


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(HARNESS)))
def test_a_module_imports_only_its_own_layer_and_those_below(path: Path) -> None:
    own = layer_of(path)
    for name in harness_imports(ast.parse(path.read_text())):
        parts = name.split(".")
        target = LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)
        assert target <= own, f"{path.relative_to(HARNESS)} (layer {own}) imports {name} (layer {target})"


def test_every_layer_is_a_package_the_layout_page_describes() -> None:
    """docs/layout.md is generated from the docstrings (tests/test_docs.py fails when it drifts)."""
    layout = (HARNESS.parent / "docs" / "layout.md").read_text()
    for layer in LAYERS:
        assert (HARNESS / layer / "__init__.py").is_file()
        assert f"### `harness/{layer}/`" in layout, f"docs/layout.md does not describe harness/{layer}/"
    flat = {p.name for p in HARNESS.glob("*.py")}
    assert flat <= ENTRY_POINTS, f"modules outside a layer: {sorted(flat - ENTRY_POINTS)}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(HARNESS)))
def test_every_module_and_public_function_says_what_it_promises(path: Path) -> None:
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree), f"{path.relative_to(HARNESS)}: no module docstring"
    missing = [
        node.name for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
        and not node.name.startswith(("_", "pytest_"))  # pytest's hooks are documented by pytest
        and not ast.get_docstring(node)
    ]
    assert not missing, f"{path.relative_to(HARNESS)}: no docstring on {', '.join(missing)}"
