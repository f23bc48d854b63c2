"""The pages: README.md is a map (short, its quick start and exit codes true), docs/ is a site whose links hold, and
every generated part (CLI reference, layout, command table, the record's tables) is what its one home gives."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from harness.cli import build_parser, main
from harness.commands import list as list_command
from harness.model.outcome import Outcome
from harness.output import pages
from harness.session.store import ResultStore

from .conftest import cap_sqlite

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"
QUICK_START = ("pip install uv && uv run bugmatrix run", "uv run pytest -n auto")


def code_tables() -> dict[str, str]:
    return pages.code_tables(build_parser(), ROOT / "harness")


# --- README as a map ---------------------------------------------------------------------------------------------


def test_the_readme_is_a_map_of_at_most_250_lines() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    headings = re.findall(r"^## (.+)$", text, re.M)
    assert headings == [
        "Quick start",
        'Install (to ask "am I affected?" from your own repository)',
        "Outcomes",
        "Commands",
        "Exit codes",
        "Where to read on",
    ]


def test_the_quick_start_is_the_two_commands_ci_runs() -> None:
    """One command runs the main job on the default environment, one runs the tests; `.ci/run` runs the second
    verbatim and installs uv as the first does."""
    block = re.search(r"## Quick start\n.*?```bash\n(.*?)```", README.read_text(), re.S)
    assert block, "README has no quick-start block"
    commands = [line.split("#")[0].strip() for line in block.group(1).splitlines() if line.strip()]
    assert commands == list(QUICK_START)
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert QUICK_START[1] in ci and any(line.strip().startswith("pip install --quiet uv") for line in ci)


def _relative_links(text: str) -> list[str]:
    return [link for link in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", link)]


def test_every_link_of_the_readme_reaches_a_page_and_every_page_is_reached() -> None:
    links = _relative_links(README.read_text())
    targets = {link.split("#")[0] for link in links}
    for target in targets:
        assert (ROOT / target).is_file(), f"README links to {target}, which does not exist"
    docs = {p.relative_to(ROOT).as_posix() for p in DOCS.rglob("*.md")}
    assert docs <= targets, f"pages the README does not lead to: {sorted(docs - targets)}"


def test_every_link_of_a_page_reaches_a_file_of_the_repository() -> None:
    """The pages read on GitHub as in the site: each relative link names a file beside it (README.md included,
    which the site shows as its home page)."""
    for page in DOCS.rglob("*.md"):
        for link in _relative_links(page.read_text()):
            target = link.split("#")[0]
            assert target and (page.parent / target).is_file(), f"{page.relative_to(ROOT)} links to {link}"


def test_the_site_navigation_lists_every_page_once() -> None:
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)  # no python tags in it

    def leaves(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, dict):
            return [leaf for value in node.values() for leaf in leaves(value)]
        return [leaf for item in node for leaf in leaves(item)] if isinstance(node, list) else []

    nav = leaves(config["nav"])
    assert len(nav) == len(set(nav))
    assert set(nav) == {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")} | {"index.md"}


def test_no_list_starts_right_under_a_paragraph() -> None:
    """GitHub starts a list on the line after a paragraph, Python-Markdown (the site) does not: it runs the items
    into the paragraph. A blank line before every list renders the same in both."""
    item = re.compile(r"^(- |\* |\d+\. )")
    for page in [README, *DOCS.rglob("*.md"), ROOT / "cases" / "README.md"]:
        fenced = False
        previous = ""
        for number, line in enumerate(page.read_text().splitlines(), 1):
            fenced = fenced != line.startswith("```")
            if (
                not fenced
                and item.match(line)
                and previous.strip()
                and not item.match(previous)
                and not previous.startswith(("  ", "|", "#", "<!--"))
            ):
                pytest.fail(f"{page.relative_to(ROOT)}:{number}: a list right under a paragraph (add a blank line)")
            previous = line


# --- exit codes: the README's table, each row run ----------------------------------------------------------------


def _demo_ok(tmp: Path) -> int:
    return main(["--cases-dir", str(ROOT / "cases"), "list", "--json"])


def _demo_not_as_expected(tmp: Path) -> int:
    broken = tmp / "cases" / "torch-1-broken"
    broken.mkdir(parents=True)
    (broken / "case.yaml").write_text("title: [not, a, string\n")
    return main(["--cases-dir", str(tmp / "cases"), "list"])


def _demo_usage(tmp: Path) -> int:
    code = main(["--cases-dir", str(ROOT / "cases"), "report", "--db", str(tmp / "typo.db")])
    assert not (tmp / "typo.db").exists()
    return code


def _demo_disk_full(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    source = ResultStore(tmp / "shard.db").path
    cap_sqlite(monkeypatch)  # SQLITE_FULL, as on a full disk: the new store cannot even be created
    return main(["--cases-dir", str(ROOT / "cases"), "merge", "--db", str(tmp / "results.db"), str(source)])


def _demo_nothing_ran(tmp: Path) -> int:
    return main(["--cases-dir", str(ROOT / "cases"), "run", "no-such-case-anywhere", "--no-store"])


def _demo_interrupted(tmp: Path, monkeypatch: pytest.MonkeyPatch) -> int:
    def interrupted(args: object) -> int:
        raise KeyboardInterrupt  # what Ctrl-C (or SIGTERM, SIGHUP: main turns both into it) raises mid-command

    monkeypatch.setattr(list_command, "run", interrupted)
    return main(["--cases-dir", str(ROOT / "cases"), "list"])


DEMOS: dict[int, Callable[..., int]] = {
    0: _demo_ok,
    1: _demo_not_as_expected,
    2: _demo_usage,
    3: _demo_disk_full,
    5: _demo_nothing_ran,
    130: _demo_interrupted,
}
PATCHING = (3, 130)  # the demos that take the monkeypatch


def readme_exit_codes() -> list[int]:
    section = README.read_text().split("## Exit codes", 1)[1].split("\n## ", 1)[0]
    return [int(code) for code in re.findall(r"^\| (\d+) \|", section, re.M)]


def test_the_readme_lists_exactly_the_exit_codes_demonstrated_here() -> None:
    assert readme_exit_codes() == sorted(DEMOS)


@pytest.mark.parametrize("code", sorted(DEMOS))
def test_each_exit_code_of_the_readme_is_what_the_command_returns(
    code: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    demo = DEMOS[code]
    got = demo(tmp_path, monkeypatch) if code in PATCHING else demo(tmp_path)
    assert got == code, capsys.readouterr()


@pytest.mark.parametrize("command", ["report", "expect"])
def test_no_results_for_the_selection_is_nothing_ran_for_every_reading_command(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's 5 ("nothing ran"), as `expect` and `narrow` answer it: `report` exited 1 (a miss) when its
    selection had no result."""
    argv = [command, "no-such-case-anywhere", "--db", str(tmp_path / "none.db"), "--record", str(tmp_path)]
    ResultStore(tmp_path / "none.db")  # an empty store, over an empty record
    code = main(["--cases-dir", str(ROOT / "cases"), *argv])
    assert code == 5, capsys.readouterr()
    assert "no results in" in capsys.readouterr().err


# --- generated parts ---------------------------------------------------------------------------------------------


def test_every_generated_region_is_held_by_exactly_one_page() -> None:
    held = [name for page in pages.page_files(ROOT) for name in pages.regions_in(page.read_text())]
    assert sorted(held) == sorted(pages.RECORD_REGIONS + pages.CODE_REGIONS)


def test_the_pages_are_what_the_parser_and_the_docstrings_generate() -> None:
    """A hand edit of the CLI reference, the layout or the README's command table fails here."""
    assert pages.stale_pages(pages.page_files(ROOT), code_tables()) == []


def test_an_option_added_to_the_parser_makes_the_reference_stale() -> None:
    parser = build_parser()
    run = dict((name, sub) for name, _, sub in pages._subcommands(parser))["run"]
    run.add_argument("--planted-option", help="planted by the test")
    tables = pages.code_tables(parser, ROOT / "harness")
    assert "| `--planted-option PLANTED_OPTION` | planted by the test |" in tables["cli-reference"]
    assert pages.stale_pages(pages.page_files(ROOT), tables) == [DOCS / "reference" / "cli.md"]


def test_a_new_module_and_a_new_command_reach_the_layout_and_the_command_table(tmp_path: Path) -> None:
    package = tmp_path / "harness"
    shutil.copytree(ROOT / "harness", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / "output" / "planted.py").write_text('"""A planted module: its docstring is its row."""\n')
    layout = pages.layout_table(package)
    assert "| `planted.py` | A planted module: its docstring is its row. |" in layout
    section = layout.split("### `harness/output/`", 1)[1].split("###", 1)[0]
    assert "`planted.py`" in section
    parser = build_parser()
    [sub_action] = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    sub_action.add_parser("planted", help="a planted command")
    assert (
        "| [`bugmatrix planted`](docs/reference/cli.md#bugmatrix-planted) | a planted command |"
        in pages.commands_table(parser)
    )


def test_the_layers_come_in_import_order() -> None:
    order = re.findall(r"^### `harness/(\w+)/`", pages.layout_table(ROOT / "harness"), re.M)
    assert order == ["model", "launch", "matrix", "session", "analysis", "output", "workflows", "commands"]


def test_bugmatrix_docs_check_fails_on_drift_and_docs_repairs_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = tmp_path / "repo"
    (copy / "docs").mkdir(parents=True)
    shutil.copy(README, copy / "README.md")
    shutil.copytree(DOCS, copy / "docs", dirs_exist_ok=True)
    command = [
        "--cases-dir",
        str(ROOT / "cases"),
        "docs",
        "--root",
        str(copy),
        "--record",
        str(ROOT / "record"),
        "--matrix",
        str(ROOT / "matrix.yaml"),
    ]
    assert main([*command, "--check"]) == 0, capsys.readouterr().err
    cli_page = copy / "docs" / "reference" / "cli.md"
    cli_page.write_text(cli_page.read_text().replace("show the cases", "show the cases (HAND-EDITED)"))
    capsys.readouterr()
    assert main([*command, "--check"]) == 1
    assert "cli.md" in capsys.readouterr().err
    assert "HAND-EDITED" in cli_page.read_text()  # --check writes nothing
    assert main(command) == 0 and "HAND-EDITED" not in cli_page.read_text()
    assert main([*command, "--check"]) == 0
    (copy / "docs" / "extra.md").write_text("<!-- nosuch-table: generated -->\n<!-- /nosuch-table -->\n")
    capsys.readouterr()
    assert main(command) == 2
    err = capsys.readouterr().err
    assert "nosuch-table" in err and err.count("\n") == 1, err


def test_the_catalogue_figures_are_generated_from_the_cases_and_the_record(make_case, tmp_path: Path) -> None:  # noqa: ANN001
    """The case count and the record's size are a generated region of docs/cases.md, never prose:
    7317000 stated '4,700 rows' in docs/record.md by hand and had no generated figure (a case added made them stale)."""
    from harness.model.case import discover
    from harness.session.record import Record, load, render, to_row, write
    from tests.helpers import record_result

    text = (DOCS / "cases.md").read_text()
    assert "catalogue-figures" in pages.regions_in(text)
    count = len(discover(ROOT / "cases")[0])
    assert f"**{count} cases** in `cases/`" in text
    assert not re.search(r"\b\d[\d,]* rows\b", (DOCS / "record.md").read_text())
    # on a small catalogue of our own: two cases (one CUDA-only), three result rows (one CUDA) and a probe
    cpu = make_case("print('x')\n", case_id="torch-1-cpu", devices=["cpu", "cuda"])
    gpu = make_case("print('y')\n", case_id="torch-2-gpu", devices=["cuda"])
    rows = [
        to_row("20261201T000000-t-aaaaaa", f"torch-{v}", record_result(cpu, v, o, 1.0 + i), "m-t")
        for i, (v, o) in enumerate([("2.0.1", Outcome.REPRODUCED), ("2.1.2", Outcome.FIXED)])
    ]
    rows.append(
        to_row(
            "20261201T000000-t-aaaaaa",
            "local",
            record_result(gpu, "2.5.0", Outcome.FIXED, 5.0).model_copy(update={"device": "cuda"}),
            "m-t",
        )
    )
    probe = record_result(cpu, "2.5.0", Outcome.FIXED, 6.0).model_copy(update={"case": "compat-fbgemm"})
    rows.append(to_row("20261201T000000-t-aaaaaa", "compat-torch-2.5.0-fbgemm-gpu-1.0.0", probe, "m-t"))
    write(
        tmp_path / "rec",
        Record(rows=rows, runs={"20261201T000000-t-aaaaaa": {"started": "x", "machine": "m-t", "command": "t"}}),
    )
    record = load(tmp_path / "rec")
    latest = [("torch-2.0.1", r) for r in [record_result(cpu, "2.0.1", Outcome.REPRODUCED, 1.0)]]
    figures = pages.catalogue_figures([cpu, gpu], record, latest)
    size = sum(len(t.encode()) for t in render(record).values())
    assert (
        "**2 cases** in `cases/`, by the package each follows: torch 2; 1 run on CPU and CUDA, 1 on CUDA only"
        in figures
    )
    assert f"4 rows in {len(render(record))} files" in figures and f"({size:,} bytes)" in figures
    assert "2 CPU and 1 CUDA result rows" in figures and "1 compatibility probe," in figures
    assert "from 1 run;" in figures and "1 current result (1 CPU, 0 CUDA)" in figures


# --- the site ----------------------------------------------------------------------------------------------------


def test_the_site_build_fails_on_a_broken_link(tmp_path: Path) -> None:
    """`mkdocs build --strict` (in .ci/run) is what keeps links whole: a planted broken link must fail it."""
    copy = tmp_path / "repo"
    for part in ("docs", "tools", "cases"):
        (copy / part).mkdir(parents=True)
    shutil.copytree(DOCS, copy / "docs", dirs_exist_ok=True)
    shutil.copy(ROOT / "tools" / "mkdocs_hooks.py", copy / "tools")
    shutil.copy(ROOT / "cases" / "README.md", copy / "cases")
    shutil.copy(ROOT / "mkdocs.yml", copy)
    shutil.copy(ROOT / "pyproject.toml", copy)  # its [project.urls]: the site's site_url and repo_url
    shutil.copy(README, copy)
    page = copy / "docs" / "bisect.md"
    page.write_text(page.read_text() + "\nSee [the planted page](no-such-page.md).\n")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs, "mkdocs is in the dev dependency group"
    built = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=300,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )
    assert built.returncode != 0
    assert "no-such-page.md" in built.stdout + built.stderr


def _hooks() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mkdocs_hooks", ROOT / "tools" / "mkdocs_hooks.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_sites_urls_are_the_projects_unless_the_publishing_workflow_names_its_own() -> None:
    """7317000: no site_url (the 404 page rendered unstyled under GitHub Pages' sub-path) and no repo_url. Now they
    are pyproject.toml's [project.urls] (where bugmatrix lives, said once; the wheel's metadata and SARIF's
    informationUri read the same table), or the environment's, which the nightly sets from its repository."""
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    hooks = _hooks()
    assert hooks.site_urls(ROOT / "pyproject.toml", {}) == (urls["Documentation"], urls["Repository"])
    assert urls["Documentation"].endswith("/") and urls["Homepage"] == urls["Documentation"]
    named = {"BUGMATRIX_SITE_URL": "https://acme.github.io/fork", "BUGMATRIX_REPO_URL": "https://github.com/acme/fork/"}
    assert hooks.site_urls(ROOT / "pyproject.toml", named) == (
        "https://acme.github.io/fork/",
        "https://github.com/acme/fork",
    )
    step = next(
        s
        for s in yaml.safe_load((ROOT / ".github" / "workflows" / "nightly.yml").read_text())["jobs"]["pages"]["steps"]
        if "mkdocs build" in s.get("run", "")
    )
    assert step["env"] == {
        "BUGMATRIX_SITE_URL": "https://${{ github.repository_owner }}.github.io/${{ github.event.repository.name }}/",
        "BUGMATRIX_REPO_URL": "${{ github.server_url }}/${{ github.repository }}",
    }


def test_the_404_page_finds_its_styles_under_the_sites_sub_path(tmp_path: Path) -> None:
    """GitHub Pages serves a project's site under /<repository>/ and answers every missing page with 404.html, from
    whatever folder was asked: its links must be absolute on the site's path (7317000: `/assets/...`, unstyled)."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs, "mkdocs is in the dev dependency group"
    env = {"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"}
    env |= {"BUGMATRIX_SITE_URL": "https://acme.github.io/fork/", "BUGMATRIX_REPO_URL": "https://github.com/acme/fork"}
    built = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    page = (tmp_path / "site" / "404.html").read_text()
    styles = re.findall(r'href="([^"]*assets/stylesheets/[^"]*)"', page)
    assert styles and all(href.startswith("/fork/assets/") for href in styles), styles
    assert 'href="https://github.com/acme/fork"' in page  # the header's link to the repository
    home = (tmp_path / "site" / "index.html").read_text()
    assert '<link rel="canonical" href="https://acme.github.io/fork/">' in home
