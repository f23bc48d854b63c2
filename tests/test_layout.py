"""The harness's layout is its data path: each layer imports only the layers below it, and says what it promises.

Layers, lowest first: case -> cell -> environment -> launch -> outcome -> store (`model`, `launch`, `matrix`,
`session`), what reads the store without launching (`analysis`), what renders (`output`), what launches and writes on
the user's behalf (`workflows`: bisect, narrow, the compat walk, the nightly) and the commands (`commands`), with
`harness/cli.py` dispatching to them. The rules: no upward import, no import cycle, and neither `analysis` nor
`output` imports, even indirectly, anything that launches.
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent.parent / "harness"
LAYERS = ["model", "launch", "matrix", "session", "analysis", "output", "workflows", "commands"]
ENTRY_POINTS = {"cli.py", "pytest_plugin.py", "__main__.py", "__init__.py"}
# What launches a job: the launcher itself, the session pipeline and its scheduler, and every workflow. Not
# launch/interpreter.py (it asks an interpreter what it has installed; the pages in output/ reach it) nor
# launch/processes.py (the tree kill and time bound both it and torchrun.py use).
LAUNCHING = (
    "harness.launch.execute",
    "harness.launch.torchrun",
    "harness.launch.rank_wrapper",
    "harness.launch.warm",
    "harness.launch.warm_parent",
    "harness.session.pipeline",
    "harness.session.scheduler",
    "harness.workflows",
)
READING_ONLY = ("analysis", "output")


def modules() -> list[Path]:
    return sorted(p for p in HARNESS.rglob("*.py") if p.name not in ("rank_wrapper.py", "warm_parent.py"))


def module_name(path: Path, root: Path = HARNESS) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


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


def runtime_imports(tree: ast.Module, known: set[str]) -> set[str]:
    """The harness modules `tree` imports when it runs, at the top or inside a function (an import under
    `if TYPE_CHECKING:` is for the type checker only); `from harness.x import y` counts `harness.x.y` too when y is a
    module."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for other in child.orelse:
                    visit(other)
                continue
            if isinstance(child, ast.ImportFrom) and child.module and child.module.startswith("harness"):
                found.add(child.module)
                found.update(f"{child.module}.{a.name}" for a in child.names if f"{child.module}.{a.name}" in known)
            elif isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.startswith("harness"))
            visit(child)

    visit(tree)
    return found & known


def import_graph(root: Path = HARNESS) -> dict[str, set[str]]:
    """Every harness module under `root` -> the harness modules it imports when it runs."""
    paths = {module_name(p, root): p for p in root.rglob("*.py")}
    return {name: runtime_imports(ast.parse(path.read_text()), set(paths)) for name, path in paths.items()}


def reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules `start` imports, directly or through others."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        for name in graph.get(stack.pop(), ()):
            if name not in seen:
                seen.add(name)
                stack.append(name)
    return seen


def launching_reached(graph: dict[str, set[str]], start: str) -> list[str]:
    """What `start` imports, directly or not, that launches (`LAUNCHING`)."""
    return sorted(m for m in reach(graph, start) if m.startswith(LAUNCHING))


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(HARNESS)))
def test_a_module_imports_only_its_own_layer_and_those_below(path: Path) -> None:
    own = layer_of(path)
    for name in harness_imports(ast.parse(path.read_text())):
        parts = name.split(".")
        target = LAYERS.index(parts[1]) if len(parts) > 1 and parts[1] in LAYERS else len(LAYERS)
        assert target <= own, f"{path.relative_to(HARNESS)} (layer {own}) imports {name} (layer {target})"


def test_no_module_imports_itself_through_others() -> None:
    graph = import_graph()
    cycles = sorted(name for name in graph if name in reach(graph, name) and not name.endswith("__init__"))
    assert not cycles, f"import cycles through: {', '.join(cycles)}"


@pytest.mark.parametrize("layer", READING_ONLY)
def test_reading_layers_import_nothing_that_launches(layer: str) -> None:
    graph = import_graph()
    found = {name: launching_reached(graph, name) for name in graph if name.startswith(f"harness.{layer}")}
    assert not {k: v for k, v in found.items() if v}, f"harness/{layer}/ reaches what launches: {found}"


def test_a_planted_launching_import_in_output_is_caught(tmp_path: Path) -> None:
    """The rule above is not vacuous: a copy of the harness with one `output` module importing the bisect workflow
    through a function-level import (the kind a reviewer misses) fails it."""
    import shutil

    copy = tmp_path / "harness"
    shutil.copytree(HARNESS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    planted = copy / "output" / "tables.py"
    planted.write_text(
        planted.read_text() + "\n\ndef _planted() -> None:\n"
        "    from harness.workflows.bisect import bisect  # noqa: F401\n"
    )
    graph = import_graph(copy)
    assert "harness.workflows.bisect" in launching_reached(graph, "harness.output.tables")
    assert launching_reached(graph, "harness.output.reports")  # and whatever imports it, indirectly
    assert not launching_reached(import_graph(), "harness.output.tables")


def test_rule_evaluation_lives_below_every_layer_that_reads_it() -> None:
    """Evaluating a variant's expect rules launches nothing: it is model/expectations.py (it was launch/, so that
    analysis/ reached into launch/ for it, and for the `Environment` it judges, now model/environment.py)."""
    graph = import_graph()
    assert "harness.model.expectations" in graph and "harness.launch.expectations" not in graph
    for reader in ("harness.analysis.audit", "harness.analysis.expect"):
        reached = sorted(m for m in reach(graph, reader) if m.startswith("harness.launch."))
        assert not {"harness.launch.interpreter", "harness.launch.expectations"} & set(reached), (reader, reached)


def test_the_interpreter_listing_a_reader_reaches_kills_its_tree_without_the_launcher(tmp_path: Path) -> None:
    """The pages (output/) name the machine through launch/interpreter.py, whose time bound kills a listing's whole
    tree with launch/processes.py; taking that kill from torchrun.py, where it was written first, would make output/
    reach the launcher (a copy of the harness with that import fails the rule)."""
    import shutil

    assert {"harness.launch.interpreter", "harness.launch.processes"} <= reach(import_graph(), "harness.output.pages")
    copy = tmp_path / "harness"
    shutil.copytree(HARNESS, copy, ignore=shutil.ignore_patterns("__pycache__"))
    planted = copy / "launch" / "interpreter.py"
    planted.write_text(
        planted.read_text().replace(
            "from harness.launch.processes import run_bounded",
            "from harness.launch.torchrun import run_abortable as run_bounded",
        )
    )
    assert launching_reached(import_graph(copy), "harness.output.pages") == [
        "harness.launch.torchrun",
        "harness.launch.warm",  # torchrun.py forks warm launches through it
    ]


def test_nothing_reenters_the_command_line() -> None:
    """The nightly and every command drive the layers below; none calls `harness.cli` (its `main(argv)`)."""
    graph = import_graph()
    callers = sorted(name for name, imported in graph.items() if "harness.cli" in imported)
    assert callers == ["harness.__main__"], callers


def test_every_layer_is_a_package_the_layout_page_describes() -> None:
    """docs/layout.md is generated from the docstrings (tests/test_docs.py fails when it drifts)."""
    layout = (HARNESS.parent / "docs" / "layout.md").read_text()
    for layer in LAYERS:
        init = HARNESS / layer / "__init__.py"
        assert init.is_file()
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert len(doc.split()) >= 12 and doc.strip(". ") != layer, (
            f"harness/{layer}/__init__.py: the package docstring must say what the layer holds and promises, "
            f"not just its name: {doc!r}"
        )
        assert f"### `harness/{layer}/`" in layout, f"docs/layout.md does not describe harness/{layer}/"
    flat = {p.name for p in HARNESS.glob("*.py")}
    assert flat <= ENTRY_POINTS, f"modules outside a layer: {sorted(flat - ENTRY_POINTS)}"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(HARNESS)))
def test_every_module_and_public_function_says_what_it_promises(path: Path) -> None:
    tree = ast.parse(path.read_text())
    assert ast.get_docstring(tree), f"{path.relative_to(HARNESS)}: no module docstring"
    missing = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
        and not node.name.startswith(("_", "pytest_"))  # pytest's hooks are documented by pytest
        and not ast.get_docstring(node)
    ]
    assert not missing, f"{path.relative_to(HARNESS)}: no docstring on {', '.join(missing)}"


def test_the_entry_point_is_a_dispatcher() -> None:
    """harness/cli.py parses and dispatches; what each command does lives in harness/commands/<name>.py."""
    assert len((HARNESS / "cli.py").read_text().splitlines()) <= 150


def test_the_dispatcher_imports_only_the_command_it_is_given() -> None:
    """`bugmatrix list` loads harness/commands/list.py and what it uses, no other command (start-up stays small);
    `build_parser()` still registers every command, for the CLI reference."""
    import subprocess
    import sys

    from harness.cli import build_parser
    from harness.commands import COMMANDS

    probe = (
        "import sys\nfrom harness.cli import main\nmain(['list', '--json'])\n"
        "print(sorted(m for m in sys.modules if m.startswith('harness.commands.')), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=HARNESS.parent, check=True)
    assert done.stderr.strip().splitlines()[-1] == "['harness.commands.context', 'harness.commands.list']"
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert tuple(sub.choices) == COMMANDS
    stubs = [name for name, parser in sub.choices.items() if len(parser._actions) < 2]  # only -h: not registered
    assert not stubs, f"build_parser() leaves out the options of {stubs}"


def test_an_error_of_a_dispatched_command_line_lists_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    """The parser `main` builds for one command still names them all, as the full one does (its usage line)."""
    from harness.cli import main
    from harness.commands import COMMANDS

    with pytest.raises(SystemExit) as stopped:
        main(["record", "fold", "--no-such-option"])
    assert stopped.value.code == 2
    assert "{" + ",".join(COMMANDS) + "}" in capsys.readouterr().err


def _test_module_imports(path: Path) -> list[str]:
    """The test modules (tests/test_*.py) that the test file `path` imports from, absolute or relative."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names = (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else ([a.name for a in node.names] if isinstance(node, ast.Import) else [])
        )
        found += [n for n in names if n.split(".")[-1].startswith("test_")]
    return found


def test_no_test_module_imports_from_another() -> None:
    """Shared helpers live in tests/helpers.py and fixtures in tests/conftest.py: a test module imported by another
    runs its import-time code twice and ties the two together (7317000: seven test files did, test_osv re-importing
    test_audit's fixtures under noqa: F811)."""
    tests = Path(__file__).resolve().parent
    assert {p.name: _test_module_imports(p) for p in sorted(tests.glob("*.py")) if _test_module_imports(p)} == {}


# --- function size: none new over 60 lines or 6 parameters ---------------------------------------------------------

MAX_LINES, MAX_PARAMETERS = 60, 6
# The ones there are, each with why it is still whole (issue 35): a new one is split, or listed here with its reason.
LONG_FUNCTIONS = {
    "analysis/audit.py::Auditor.answer": "one answer's sources in precedence order (exact cell, interpolated, rules)",
    "analysis/audit.py::Auditor._measured": "interpolation and extrapolation along each deciding package: to split",
    "analysis/caselint.py::check_script": "one paragraph per rule of cases/README.md over one parse: to split by rule",
    "analysis/expect.py::_derive": "a derivation's refusals in the order they are said: to split",
    "analysis/expect.py::_adjacent": "a boundary passed as its parts (9): to take the boundary",
    "analysis/osv.py::document": "the OSV document field by field, in the schema's order: to split by section",
    "commands/nightly.py::add_parser": "argparse declarations of seven steps: long but flat",
    "commands/record.py::add_parser": "argparse declarations of the record's actions: long but flat",
    "launch/classify.py::rank_status": "model/outcome.py's per-rank rules in their documented order",
    "launch/logscan.py::scan_log": "keyword-only buffer sizes (tests shrink them): defaults everywhere else",
    "launch/torchrun.py::launch": "the launch's inputs; rewritten by the warm-launch issue (36)",
    "launch/torchrun.py::_launch_once": "rewritten by the warm-launch issue (36)",
    "matrix/expand.py::plan": "the matrix file's expansion (groups, placeholders, pairings) in one pass: to split",
    "output/osv.py::make_handler": "the OSV server's handler class in a closure: rewritten by the OSV handler's issue",
    "output/reports.py::to_cases_markdown": "a renderer, one section after another (the tables item redoes it)",
    "output/reports.py::to_html": "a renderer, one section after another (the tables item redoes it)",
    "output/tables.py::run_json": "the run's JSON fields as parameters (7): to take the run's outcome",
    "session/folding.py::fold_payload": "a payload's fold inputs (7): to take a request",
    "session/readers.py::open_reader": "the reading options (8): the results-store contract item reshapes it",
    "workflows/bisect.py::release_candidates": "bisect's request in parts (7): to take BisectRequest",
    "workflows/bisect.py::probe_cell": "a probe's pins in parts (8): to take the request and the candidate",
    "workflows/bisect.py::bisect": "the release, commit and date levels in turn: to split by level",
    "workflows/compat.py::walk": "the compatibility walk's loop with its resume and recording: to split",
    "workflows/datebisect.py::date_line": "the date range's inputs (8): to take BisectRequest",
    "workflows/narrow.py::intervals": "selected_axes' filters passed through (7): to take a selection",
    "workflows/narrow.py::narrow": "the narrowing loop with its recording: to split",
    "workflows/nightly.py::run_cell": "the cell step's options (7): to take a request, as record-pr does",
    "workflows/nightly.py::aggregate": "the aggregate step's options (8) and its steps: to take a request",
}


def long_functions(root: Path = HARNESS) -> dict[str, tuple[int, int]]:
    """Every function and method under `root` over `MAX_LINES` lines or `MAX_PARAMETERS` parameters (self and cls
    not counted): `path::Class.name` -> (lines, parameters)."""
    found: dict[str, tuple[int, int]] = {}

    def visit(node: ast.AST, path: str, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                a = child.args
                names = [x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs] if x.arg not in ("self", "cls")]
                parameters = len(names) + (a.vararg is not None) + (a.kwarg is not None)
                lines = (child.end_lineno or child.lineno) - child.lineno + 1
                if lines > MAX_LINES or parameters > MAX_PARAMETERS:
                    found[f"{path}::{prefix}{child.name}"] = (lines, parameters)
                visit(child, path, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                visit(child, path, f"{prefix}{child.name}.")

    for file in sorted(root.rglob("*.py")):
        visit(ast.parse(file.read_text()), file.relative_to(root).as_posix(), "")
    return found


def test_no_new_function_over_60_lines_or_6_parameters() -> None:
    """New code splits a long function or takes a request object; the existing ones are listed with why, and the
    list stays true (one split is taken off it)."""
    found = long_functions()
    new = {name: size for name, size in found.items() if name not in LONG_FUNCTIONS}
    assert not new, f"(lines, parameters) over {MAX_LINES} or {MAX_PARAMETERS}: split them: {new}"
    gone = sorted(set(LONG_FUNCTIONS) - set(found))
    assert not gone, f"no longer over the limits, take them off LONG_FUNCTIONS: {gone}"


def test_the_size_check_sees_a_long_function_and_a_long_signature(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        "def short(a, b):\n    return a\n\n\nclass C:\n    def wide(self, a, b, c, d, e, f, *rest):\n        pass\n\n\n"
        "def tall():\n" + "    x = 1\n" * 60
    )
    assert long_functions(tmp_path) == {"m.py::C.wide": (2, 7), "m.py::tall": (61, 0)}


# What writes to a stream directly: a command writes through its `Printer` (harness/output/printer.py) alone.
DIRECT_OUTPUT = {"print", "sys.stdout.write", "sys.stderr.write", "make_console", "Console"}


def direct_output(root: Path = HARNESS) -> list[str]:
    """Every call in the commands and the entry point that writes to stdout/stderr (or makes a console) itself."""
    found = []
    for path in [*sorted((root / "commands").glob("*.py")), root / "cli.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in DIRECT_OUTPUT:
                found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node.func)}")
    return found


def test_commands_write_only_through_the_printer() -> None:
    assert direct_output() == []


def test_the_output_check_sees_a_print_and_a_stream_write(tmp_path: Path) -> None:
    (tmp_path / "commands").mkdir()
    (tmp_path / "commands" / "c.py").write_text(
        "import sys\n\n\ndef run(printer):\n    printer.answer('ok')\n    print('x')\n    sys.stderr.write('y')\n"
    )
    (tmp_path / "cli.py").write_text("def main():\n    return 0\n")
    assert direct_output(tmp_path) == ["commands/c.py:6: print", "commands/c.py:7: sys.stderr.write"]
