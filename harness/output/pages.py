"""The generated parts of the pages (README.md and docs/): regions between markers a page keeps,
`<!-- NAME: ... -->` ... `<!-- /NAME -->`, each made from its one home and never edited by hand.

    cases-table     the committed record (`report --format cases`), never a local store     docs/cases.md
    catalogue-figures  the case folders and the committed record: counts and size           docs/cases.md
    compat-tables   the committed record (`compat --no-probe`, as coloured HTML grids)      docs/compat.md
    layout-table    the harness package's own docstrings, walked generically                docs/layout.md
    cli-reference   the `bugmatrix` argument parser (every command, step and option)        docs/reference/cli.md
    commands-table  the same parser: one row per command                                     README.md

`bugmatrix docs` rewrites every region (`--check`: exit 1 on drift, and tests/test_docs.py fails), `bugmatrix record
tables` the two the record makes, and the nightly's record pull request regenerates those with the record it carries.
"""

from __future__ import annotations

import argparse
import ast
import re
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.model.case import Case
    from harness.model.result import Result
    from harness.session.record import Record

REGION = re.compile(r"(<!-- (?P<name>[a-z][a-z-]*):[^>]*-->\n)(?P<body>.*?)(<!-- /(?P=name) -->)", re.DOTALL)
RECORD_REGIONS = ("cases-table", "compat-tables", "intake-table", "catalogue-figures")
CODE_REGIONS = ("layout-table", "cli-reference", "commands-table")
CLI_PAGE = "reference/cli.md"  # under docs/: where the README's command table links


def page_files(root: Path) -> list[Path]:
    """The pages that may hold generated regions: README.md and every Markdown file under docs/."""
    readme = root / "README.md"
    return ([readme] if readme.is_file() else []) + sorted((root / "docs").rglob("*.md"))


def regions_in(text: str) -> list[str]:
    """The names of the generated regions `text` holds, in order."""
    return [m.group("name") for m in REGION.finditer(text)]


def generated_tables(record_root: Path, cases_dir: Path, matrix_path: Path) -> dict[str, str]:
    """The regions the record generates: `cases-table` (`report --format cases`), `compat-tables`
    (`compat --no-probe`'s grids, coloured: `to_docs`) and `intake-table` (`intake_markdown`), from the record
    alone (never a local store)."""
    from harness.analysis import compat
    from harness.analysis.intake import intakes
    from harness.matrix.expand import load_matrix
    from harness.model.case import discover
    from harness.output import compat as view
    from harness.output import reports
    from harness.session.readers import open_reader
    from harness.session.record import RecordStore, from_row

    cases = discover(cases_dir)[0]
    store = open_reader(None, False, cases, record_root)
    assert isinstance(store, RecordStore)  # no --db: the record alone
    matrix = load_matrix(matrix_path, store.chronology) if matrix_path.is_file() else None
    report = reports.report_for(store.latest(), cases_dir, [c.name for c in matrix.cells] if matrix else [], matrix)
    grid = view.to_docs(compat.measured(store))
    if not grid.strip():  # say so, rather than leave a page's "printed this:" followed by nothing
        grid = (
            "*The record holds no compatibility probe yet (its compat.jsonl is empty or absent): "
            "`bugmatrix record fold` of a store that `bugmatrix compat` filled brings them here.*\n"
        )
    every = [from_row(row) for row in store.record.rows]  # superseded rows too: a draft is one
    rows = intakes(every, cases, store.digests, report.between, report.dater)  # the report's index reads, reused
    return {
        "cases-table": reports.to_cases_markdown(report),
        "compat-tables": grid,
        "intake-table": reports.intake_markdown(rows),
        "catalogue-figures": catalogue_figures(cases, store.record, store.latest()),
    }


def _count(n: int, word: str) -> str:
    """`n word` with thousands separated and an `s` unless n is 1: "1 case", "4,700 rows"."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def catalogue_figures(cases: list[Case], record: Record, latest: list[tuple[str, Result]]) -> str:
    """Every figure of the catalogue that prose would otherwise state and let go stale: the cases (by primary
    package, by device, their variants), the record's rows, files and bytes (as `record fold` writes them) and its
    current results. How much of the matrix it holds is `bugmatrix record coverage`'s to say: planning the jobs
    needs the launching layers, which a page never imports."""
    from collections import Counter

    from harness.model.cell import COMPAT_PREFIX
    from harness.model.common import primary_package
    from harness.session.record import render

    packages = Counter(primary_package(c.spec.packages) for c in cases)
    devices = Counter(tuple(sorted(set(c.spec.devices))) for c in cases)
    variants = [v for c in cases for v in c.spec.variants.values()]
    workarounds = sum(v.workaround for v in variants)
    out = [
        f"- **{_count(len(cases), 'case')}** in `cases/`, by the package each follows: "
        + ", ".join(f"{p} {n}" for p, n in sorted(packages.items(), key=lambda kv: (-kv[1], kv[0])))
        + f"; {devices[('cpu', 'cuda')]} run on CPU and CUDA, {devices[('cuda',)]} on CUDA only, "
        f"{devices[('cpu',)]} on CPU only; {_count(len(variants), 'variant')} "
        f"({len(variants) - workarounds} bug or control, {workarounds} workaround).",
    ]
    files = render(record)  # the files `record fold` writes, byte for byte
    results = [r for r in record.rows if not r["cell"].startswith(COMPAT_PREFIX)]  # the rest: compat.jsonl's
    by_device = Counter(r["device"] for r in results)
    size = sum(len(text.encode("utf-8")) for text in files.values())
    out.append(
        f"- **The record** (`record/`): {_count(len(record.rows), 'row')} in {_count(len(files), 'file')}, "
        f"{size / 1e6:.2f} MB ({size:,} bytes): {by_device['cpu']:,} CPU and {by_device['cuda']:,} CUDA result "
        f"rows (superseded and non-verdict history included) and "
        f"{_count(len(record.rows) - len(results), 'compatibility probe')}, from {_count(len(record.runs), 'run')}; "
        f"{_count(len(latest), 'current result')} "
        f"({sum(r.device == 'cpu' for _, r in latest):,} CPU, {sum(r.device == 'cuda' for _, r in latest):,} CUDA)."
    )
    return "\n".join(out) + "\n"


def code_tables(parser: argparse.ArgumentParser, package: Path) -> dict[str, str]:
    """The regions the code generates: the layout from `package`'s docstrings, the CLI reference and the README's
    command table from `parser` (the whole `bugmatrix` parser)."""
    return {
        "layout-table": layout_table(package),
        "cli-reference": cli_reference(parser),
        "commands-table": commands_table(parser),
    }


def regenerate(page: str, tables: dict[str, str]) -> str:
    """`page` with the body of each region named in `tables` replaced by its table; other regions are kept."""
    return REGION.sub(
        lambda m: m.group(1) + tables[m.group("name")] + m.group(4) if m.group("name") in tables else m.group(0), page
    )


def stale_pages(pages: Iterable[Path], tables: dict[str, str], write: bool = False) -> list[Path]:
    """The pages whose regions named in `tables` differ from them; with `write`, those pages are rewritten."""
    changed = []
    for page in pages:
        text = page.read_text(encoding="utf-8")
        new = regenerate(text, tables)
        if new != text:
            changed.append(page)
            if write:
                page.write_text(new, encoding="utf-8")
    return changed


def regenerate_page(page: Path, record_root: Path, cases_dir: Path, matrix_path: Path) -> bool:
    """Rewrite the record's regions of `page` from the record; True when the page changed (False also when the
    page holds none of them)."""
    if not set(regions_in(page.read_text(encoding="utf-8"))) & set(RECORD_REGIONS):
        return False
    return bool(stale_pages([page], generated_tables(record_root, cases_dir, matrix_path), write=True))


# --- the layout, from the docstrings -----------------------------------------------------------------------------


def _summary(path: Path) -> str:
    """The first paragraph of a module's docstring, on one line ('' when it has none)."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.split("\n\n")[0].split())


def _imports(package: Path, root: Path) -> set[str]:
    """The sibling packages of `root` that the modules of `package` import."""
    found = set()
    for module in package.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else ([a.name for a in node.names] if isinstance(node, ast.Import) else [])
            )
            for name in names:
                parts = name.split(".")
                if len(parts) > 1 and parts[0] == root.name and (root / parts[1]).is_dir() and parts[1] != package.name:
                    found.add(parts[1])
    return found


def _layer_order(root: Path) -> list[Path]:
    """The packages under `root`, each after every package it imports (the data path, lowest first); ties by name."""
    packages = {p.parent.name: p.parent for p in sorted(root.glob("*/__init__.py"))}
    needs = {name: _imports(path, root) & set(packages) for name, path in packages.items()}
    order: list[str] = []
    while len(order) < len(packages):
        ready = [n for n in sorted(packages) if n not in order and needs[n] <= set(order)]
        order.append(ready[0] if ready else min(n for n in packages if n not in order))  # a cycle: name order
    return [packages[n] for n in order]


def _cell(text: str) -> str:
    """`text` fit for a table cell on GitHub and in mkdocs alike: pipes escaped, and a code span holding a pipe
    shown as plain text (GitHub needs the escape inside code spans too, where Python-Markdown would print it)."""

    def plain(part: str) -> str:  # `<owner>` would be read as an HTML tag
        return part.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")

    parts = text.split("`")
    if len(parts) % 2 == 0:  # an unpaired backtick: no code spans to keep
        return plain(text)
    return "".join(plain(part) if i % 2 == 0 or "|" in part else f"`{part}`" for i, part in enumerate(parts))


def layout_table(root: Path) -> str:
    """One section per package of `root` (lowest layer first), its docstring and a table of its modules' summaries,
    then the modules at the top (the entry points)."""
    out = []
    base = root.parent
    for package in _layer_order(root):
        out += [
            f"### `{package.relative_to(base).as_posix()}/`",
            "",
            _summary(package / "__init__.py"),
            "",
            "| module | what it holds |",
            "|---|---|",
        ]
        for module in sorted(package.rglob("*.py")):
            if module.name != "__init__.py":
                out.append(f"| `{module.relative_to(package).as_posix()}` | {_cell(_summary(module))} |")
        out.append("")
    out += ["### The entry points", "", "| module | what it holds |", "|---|---|"]
    for module in sorted(root.glob("*.py")):
        if module.name != "__init__.py":
            out.append(f"| `{module.relative_to(base).as_posix()}` | {_cell(_summary(module))} |")
    return "\n".join(out) + "\n"


# --- the command line, from the parser ---------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, help, parser) of each subcommand of `parser`, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return []


def _flag(action: argparse.Action) -> str:
    """How an argument is written: `-j, --jobs JOBS`, `--device {cpu,cuda}`, `cases ...`."""
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        value = "{" + ",".join(str(c) for c in action.choices) + "}"
    elif isinstance(action.metavar, tuple):
        value = " ".join(action.metavar)
    else:
        value = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    if not action.option_strings:
        return value + (" ..." if action.nargs in ("*", "+") else "")
    takes = action.nargs != 0
    return ", ".join(action.option_strings) + (f" {value}" if takes else "")


def _section(words: list[str], help_: str, parser: argparse.ArgumentParser, depth: int) -> list[str]:
    name = " ".join(words)
    out = [f"{'#' * depth} {name}", ""]
    if help_:
        out += [_cell(" ".join(help_.split())), ""]
    own = [
        a
        for a in parser._actions
        if a.help != argparse.SUPPRESS
        and not isinstance(a, argparse._HelpAction)
        and not isinstance(a, argparse._SubParsersAction)
    ]
    subs = _subcommands(parser)
    synopsis = (
        [name]
        + ["[OPTIONS]"] * any(a.option_strings for a in own)
        + [_flag(a) if a.nargs not in ("?", "*") else f"[{_flag(a)}]" for a in own if not a.option_strings]
    )
    if subs:
        synopsis.append("{" + ",".join(s[0] for s in subs) + "} ...")
    out += ["```", " ".join(synopsis), "```", ""]
    if own:
        out += ["| argument | meaning |", "|---|---|"]
        for action in own:
            required = " (required)" if action.option_strings and action.required else ""
            out.append(f"| `{_flag(action)}`{required} | {_cell(' '.join((action.help or '').split()))} |")
        out.append("")
    for sub_name, sub_help, sub in subs:
        out += _section([*words, sub_name], sub_help, sub, min(depth + 1, 4))
    return out


def cli_reference(parser: argparse.ArgumentParser) -> str:
    """Every command, step and option of `parser`, as Markdown sections (no default that depends on the machine is
    shown: the help texts say the defaults)."""
    return "\n".join(_section([parser.prog], parser.description or "", parser, 2)).rstrip("\n") + "\n"


def _anchor(words: str) -> str:
    """The anchor GitHub and mkdocs give a heading made of these words."""
    return re.sub(r"[^a-z0-9 -]", "", words.lower()).replace(" ", "-")


def commands_table(parser: argparse.ArgumentParser) -> str:
    """One row per command of `parser`: its name (linked into the CLI reference) and its help."""
    rows = ["| command | what it does |", "|---|---|"]
    for name, help_, sub in _subcommands(parser):
        steps = ", ".join(f"`{s[0]}`" for s in _subcommands(sub))
        rows.append(
            f"| [`{parser.prog} {name}`](docs/{CLI_PAGE}#{_anchor(f'{parser.prog} {name}')}) | "
            f"{_cell(' '.join(help_.split()))}" + (f" (steps: {steps})" if steps else "") + " |"
        )
    return "\n".join(rows) + "\n"
