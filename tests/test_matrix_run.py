"""A whole matrix run on fake packages: cells -> environments -> launches -> store -> report -> compare."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from harness.analysis.compare import compare
from harness.analysis.precision import between_on_index
from harness.cli import main
from harness.launch.interpreter import cuda_available
from harness.launch.torchrun import LaunchAborted
from harness.matrix.cellenvs import CellEnvironments
from harness.matrix.envcache import EnvCache
from harness.matrix.expand import Matrix, load_matrix
from harness.matrix.resolve import resolve_cell
from harness.model.case import load_case
from harness.model.job import Job
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.output.reports import build_report, to_cases_markdown, to_html, to_markdown
from harness.session.pipeline import MatrixEnvironments, Session
from harness.session.plan import plan_cells
from harness.session.store import ResultStore

from .conftest import MakeCase
from .fakeindex import FakeRelease, build_index, fake_torch

pytest_plugins = ["pytester"]

# fakelib's bug: present in 1.0-1.2, fixed in 1.3 and 1.4, back in 1.5.
BUGGY = {"1.0": True, "1.1": True, "1.2": True, "1.3": False, "1.4": False, "1.5": True}


def run_cells(jobs: list[Job], matrix: Matrix, cache: EnvCache, cores: int = 1) -> list[tuple[str, Result]]:
    """The jobs through the session pipeline in their cells' environments; (cell, result) in job order."""
    results = Session(MatrixEnvironments(CellEnvironments(matrix, cache))).run(jobs, cores=cores)
    return [(job.cell_name, result) for job, result in zip(jobs, results, strict=True)]


SCRIPT = """
import sys
import fakelib
if fakelib.BUGGY:
    print("RuntimeError: FAKE-SIG from fakelib", fakelib.__version__)
    sys.exit(1)
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    releases = [fake_torch("2.5.0", "2024-01-01T00:00:00Z")]
    for i, (version, buggy) in enumerate(BUGGY.items()):
        releases.append(
            FakeRelease(
                "fakelib",
                version,
                f"2024-02-{i + 1:02d}T00:00:00Z",
                module=f"BUGGY = {buggy}\n__version__ = {version!r}\n",
            )
        )
    releases.append(FakeRelease("fakelib", "1.6", "2024-03-01T00:00:00Z", module="import no_such_native_ext\n"))
    index = build_index(root / "index", releases)
    (root / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local"},
                "groups": [
                    {"name": "fakelib-{fakelib}", "axes": {"fakelib": [*BUGGY, "1.6"]}, "pins": {"torch": "2.5.0"}}
                ],
            }
        )
    )
    case = root / "cases" / "fakelib-1-bug"
    case.mkdir(parents=True)
    (case / "repro.py").write_text(SCRIPT)
    (case / "case.yaml").write_text(
        yaml.safe_dump(
            {
                "title": "fakelib bug",
                "upstream": ["https://example.invalid/1"],
                "packages": ["torch", "fakelib"],
                "nproc": [1, 2],
                "timeout": 60,
                "signature": "FAKE-SIG",
                "variants": {
                    "bug": {"expect": [{"when": {"fakelib": "<1.3"}, "outcome": "reproduced"}, {"outcome": "fixed"}]}
                },
            }
        )
    )
    return root


def test_matrix_run_report_and_compare(project: Path) -> None:
    matrix = load_matrix(project / "matrix.yaml")
    case = load_case(project / "cases" / "fakelib-1-bug" / "case.yaml")
    planned = plan_cells([case], matrix)
    assert list(dict.fromkeys(job.cell_name for job in planned)) == [f"fakelib-{v}" for v in [*BUGGY, "1.6"]]
    results = run_cells(planned, matrix, EnvCache(project / "envs"), cores=2)
    by_cell = {(cell, r.nproc): r for cell, r in results}
    assert by_cell[("fakelib-1.2", 2)].outcome is Outcome.REPRODUCED
    assert by_cell[("fakelib-1.3", 2)].outcome is Outcome.FIXED
    assert by_cell[("fakelib-1.5", 1)].outcome is Outcome.REPRODUCED
    broken = by_cell[("fakelib-1.6", 1)]
    assert broken.outcome is Outcome.INFRA and "no_such_native_ext" in broken.reason  # never "fixed"
    assert by_cell[("fakelib-1.0", 1)].versions == {"torch": "2.5.0", "fakelib": "1.0"}

    report = build_report(results, {case.id: ["torch", "fakelib"]}, between=between_on_index(matrix, {case.id: case}))
    [axis] = [a for a in report.axes if a.package == "fakelib"]
    assert axis.reproduced_in == ["1.0", "1.1", "1.2", "1.5"]
    assert axis.changes() == [("fixed", "1.2", "1.3"), ("regressed", "1.4", "1.5")]
    assert axis.unknown_in == ["1.6"]
    assert axis.summary(report.between) == (
        "reproduces in 1.0 … 1.5 (4 versions); fixed in 1.3 (1.2 reproduced); "
        "regressed in 1.5 (1.4 fixed); could not say: 1.6"
    )
    assert axis.summary() == (
        "reproduces in 1.0 … 1.5 (4 versions); fixed between 1.2 and 1.3 (what lies between "
        "is unknown: no package index was consulted); regressed between 1.4 and 1.5 (what lies "
        "between is unknown: no package index was consulted); could not say: 1.6"
    )
    cases_view = to_cases_markdown(build_report(results, {case.id: ["torch", "fakelib"]}))  # no index: intervals
    assert "| between 1.2 and 1.3 (what lies between is unknown: no package index was consulted) |" in cases_view
    markdown = to_markdown(report)
    assert "| fakelib-1-bug · bug (cpu) | R | R | R | F | F | R | I |" in markdown
    page = to_html(report)
    # One grid, fakelib's, with one row (the case's one variant on cpu) and a column per cell it ran in, 1.6 too;
    # self-contained: its one script inline, nothing fetched from elsewhere.
    assert page.count('<section class="pkg"') == 1 and '<section class="pkg" data-package="fakelib">' in page
    assert page.count('<th class="row">') == 1 and '<tr data-case="fakelib-1-bug"' in page
    assert page.count('<th class="cell">') == 7 and "<div>fakelib-1.6</div>" in page
    assert page.count("<script") == 1 and "<script>" in page and "src=" not in page and "<link" not in page

    # The 1.5 regression is one the expectations (fixed from 1.3 on) do not allow: compare says so.
    old = [(c, r) for c, r in results if c == "fakelib-1.4"]
    new = [(c.replace("1.5", "1.4"), r) for c, r in results if c == "fakelib-1.5"]  # same cell, newer run
    changes = compare(old, new)
    assert [(c.kind, c.unexpected) for c in changes] == [("regressed", True), ("regressed", True)]


def test_cli_all_cells_store_report_compare(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, envs = project / "r.db", project / "envs"
    common = ["--cases-dir", str(project / "cases")]
    argv = [
        *common,
        "run",
        "--all-cells",
        "--matrix",
        str(project / "matrix.yaml"),
        "--envs",
        str(envs),
        "--db",
        str(db),
        "--nproc",
        "1",
        "-j",
        "2",
    ]
    assert main(argv) == 1  # the 1.5 regression mismatches, and 1.6 could not be built
    assert main([*argv, "--redo"]) == 1
    store = ResultStore(db)
    assert len(store.runs()) == 2 and len(store.results()) == 14
    capsys.readouterr()
    assert main([*argv, "--json"]) == 1  # resumes: only the cell that could not be built is tried again
    assert len(json.loads(capsys.readouterr().out)["reused"]) == 6 and len(store.results()) == 15
    capsys.readouterr()
    assert (
        main([*common, "report", "--db", str(db), "--format", "markdown", "--matrix", str(project / "matrix.yaml")])
        == 0
    )
    assert "fixed in 1.3 (1.2 reproduced)" in capsys.readouterr().out
    assert (
        main([*common, "report", "--db", str(db), "--format", "cases", "--matrix", str(project / "matrix.yaml")]) == 0
    )
    row = [line for line in capsys.readouterr().out.splitlines() if "fakelib-1-bug" in line]
    assert main([*common, "report", "--db", str(db), "no-such-case"]) == 5  # a filter that matches nothing
    assert row == [
        '| `fakelib-1-bug` — fakelib bug<a id="fakelib-1-bug"></a> '
        "| [https://example.invalid/1](https://example.invalid/1) "
        "| fakelib: 1.0 … 1.6 (7 versions) | 1.0 … 1.5 (4 versions) | **1.3** (1.2 reproduced) "
        "| **1.5** (1.4 fixed) | — |"
    ]
    assert main([*common, "compare", "--db", str(db), *[r.run_id for r in store.runs()[:2]]]) == 0
    # the two runs agree: nothing changed
    assert "0 change(s)" in capsys.readouterr().out


def test_pytest_items_per_cell_with_xdist(project: Path, pytester: pytest.Pytester) -> None:
    result = pytester.runpytest_subprocess(
        str(project / "cases"),
        "-p",
        "harness.pytest_plugin",
        "-p",
        "xdist",
        "-n",
        "2",
        "--matrix",
        str(project / "matrix.yaml"),
        "--bugmatrix-envs",
        str(project / "envs"),
        "--cell",
        "fakelib-1.2",
        "--cell",
        "fakelib-1.3",
        "--cell",
        "fakelib-1.6",
        "-v",
    )
    result.stdout.fnmatch_lines(["*PASSED*bug?fakelib-1.2-2?*"])  # xdist: status, then the item
    result.stdout.fnmatch_lines(["*PASSED*bug?fakelib-1.3-1?*"])
    result.stdout.fnmatch_lines(["*FAILED*bug?fakelib-1.6-1?*"])
    result.stdout.fnmatch_lines(["*observed infra*"])
    result.assert_outcomes(passed=4, failed=2)


def test_cuda_cells_skip_without_building_on_a_cpu_machine(project: Path, tmp_path: Path) -> None:
    if cuda_available():
        pytest.skip("this machine has a CUDA device")
    case = load_case(project / "cases" / "fakelib-1-bug" / "case.yaml")
    case = replace(case, spec=case.spec.model_copy(update={"devices": ["cpu", "cuda"]}))
    matrix = load_matrix(project / "matrix.yaml")
    gpu = replace(matrix.cell("fakelib-1.3"), name="fakelib-1.3-cuda", device="cuda")
    cache = EnvCache(tmp_path / "envs")
    results = run_cells([Job(case, "bug", 1, "cuda", gpu)], matrix, cache)
    [(cell, result)] = results
    assert (cell, result.outcome, result.launched) == ("fakelib-1.3-cuda", Outcome.SKIP, False)
    assert cache.list() == []  # nothing was built for it


def test_pytest_all_cells_on_a_cpu_machine_builds_no_cuda_cell(
    project: Path, tmp_path: Path, pytester: pytest.Pytester
) -> None:
    """`pytest --all-cells` goes through the same pipeline as `bugmatrix run --all-cells`: the CUDA cell's items
    skip with the reason, and its environment is never built (it used to be built before the device check)."""
    if cuda_available():
        pytest.skip("this machine has a CUDA device")
    doc = yaml.safe_load((project / "matrix.yaml").read_text())
    doc["groups"] = []
    doc["cells"] = [
        {"name": "fakelib-1.3-cpu", "pins": {"torch": "2.5.0", "fakelib": "1.3"}},
        {"name": "fakelib-1.4-cuda", "device": "cuda", "pins": {"torch": "2.5.0", "fakelib": "1.4"}},
    ]
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(doc))
    case = tmp_path / "cases" / "fakelib-1-bug"
    case.mkdir(parents=True)
    (case / "repro.py").write_text(SCRIPT)
    spec = yaml.safe_load((project / "cases" / "fakelib-1-bug" / "case.yaml").read_text())
    (case / "case.yaml").write_text(yaml.safe_dump({**spec, "devices": ["cpu", "cuda"], "nproc": [1]}))
    envs = tmp_path / "envs"
    result = pytester.runpytest_subprocess(
        str(tmp_path / "cases"),
        "-p",
        "harness.pytest_plugin",
        "--matrix",
        str(tmp_path / "matrix.yaml"),
        "--bugmatrix-envs",
        str(envs),
        "--all-cells",
        "-v",
        "-rs",
    )
    result.stdout.fnmatch_lines(["*needs a CUDA device*"])
    result.assert_outcomes(passed=1, skipped=1)
    matrix = load_matrix(tmp_path / "matrix.yaml")
    assert {env["cell"] for env in EnvCache(envs).list()} == {"fakelib-1.3-cpu"}
    assert not EnvCache(envs).exists(resolve_cell(matrix, matrix.cell("fakelib-1.4-cuda")).key)


def test_an_environment_shared_by_a_running_cell_is_not_evictable(project: Path, tmp_path: Path) -> None:
    matrix = load_matrix(project / "matrix.yaml")
    envs = CellEnvironments(matrix, EnvCache(tmp_path / "envs"))
    first = matrix.cell("fakelib-1.3")
    twin = replace(first, name="fakelib-1.3-twin")  # the same pins: one shared environment
    assert envs.get(first)[1] is not None and envs.get(twin)[1] is not None
    envs.cell_finished(first)
    assert envs.evictable() == set()
    envs.cell_finished(twin)
    assert envs.evictable() == {resolve_cell(matrix, first).key}


def test_cases_run_in_cells_that_pin_their_packages(make_case: MakeCase, tmp_path: Path) -> None:
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "cells": [
                    {"name": "default", "pins": {"torch": "2.5.0", "fakelib": "1.0"}},
                    {"name": "default-cuda", "device": "cuda", "pins": {"torch": "2.5.0", "fakelib": "1.0"}},
                ],
                "groups": [
                    {"name": "torch-{torch}", "axes": {"torch": ["2.4.0", "2.5.0"]}},
                    {"name": "fakelib-{fakelib}", "axes": {"fakelib": ["1.0", "1.1"]}},
                ],
            }
        )
    )
    matrix = load_matrix(tmp_path / "matrix.yaml")
    torch_only = make_case("", case_id="torch-1-a", devices=["cpu"])
    fakelib = make_case("", case_id="fakelib-2-b", packages=["torch", "fakelib"], devices=["cpu", "cuda"])
    cells: dict[str, set[str]] = {}
    for job in plan_cells([torch_only, fakelib], matrix):
        cells.setdefault(job.cell_name, set()).add(job.case.id)
    assert cells == {
        "torch-2.4.0": {"torch-1-a"},
        "torch-2.5.0": {"torch-1-a"},  # torch-only cases: the torch axis only
        "default": {"fakelib-2-b"},
        "default-cuda": {"fakelib-2-b"},  # ... not every cell that has some torch
        "fakelib-1.0": {"fakelib-2-b"},
        "fakelib-1.1": {"fakelib-2-b"},
    }


def test_infra_faults_are_recorded_with_their_reason_never_fixed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No network, a version that does not exist, a pairing that imports but aborts: the run goes on."""
    aborts = "def __getattr__(name):\n    import os\n    os.abort()\n"  # imports fine; aborts when used
    index = build_index(
        tmp_path / "index",
        [
            fake_torch("2.5.0", "2024-01-01T00:00:00Z"),
            FakeRelease("fakelib", "1.3", "2024-02-01T00:00:00Z", module="BUGGY = False\n"),
            FakeRelease("fakelib", "1.7", "2024-02-02T00:00:00Z", module=aborts),
        ],
    )
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index, "unreachable": "http://127.0.0.1:9/simple"},
                "defaults": {"index": "local"},
                "cells": [
                    {"name": "good", "pins": {"torch": "2.5.0", "fakelib": "1.3"}},
                    {"name": "offline", "pins": {"torch": "2.5.0", "fakelib": "1.3"}, "index": "unreachable"},
                    {"name": "no-such-version", "pins": {"torch": "2.5.0", "fakelib": "9.9"}},
                    {"name": "aborts", "pins": {"torch": "2.5.0", "fakelib": "1.7"}},
                ],
            }
        )
    )
    case = tmp_path / "cases" / "fakelib-1-bug"
    case.mkdir(parents=True)
    (case / "repro.py").write_text(SCRIPT)
    (case / "case.yaml").write_text(
        yaml.safe_dump(
            {
                "title": "fakelib bug",
                "upstream": ["https://example.invalid/1"],
                "packages": ["torch", "fakelib"],
                "timeout": 60,
                "signature": "FAKE-SIG",
                "variants": {"bug": {"expect": [{"outcome": "fixed"}]}},
            }
        )
    )
    monkeypatch.setenv("UV_OFFLINE", "1")  # and uv may not fetch anything either
    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "empty-uv-cache"))
    matrix = load_matrix(tmp_path / "matrix.yaml")
    results = dict(
        run_cells(plan_cells([load_case(case / "case.yaml")], matrix), matrix, EnvCache(tmp_path / "envs"), cores=2)
    )
    assert results["good"].outcome is Outcome.FIXED, results["good"].reason  # the fault-free cell still ran
    offline, missing, aborted = results["offline"], results["no-such-version"], results["aborts"]
    assert offline.outcome is Outcome.INFRA and "127.0.0.1:9" in offline.reason, offline.reason
    assert missing.outcome is Outcome.INFRA and "no release of fakelib matches ==9.9" in missing.reason
    assert aborted.outcome is Outcome.ERROR and "died without a verdict" in aborted.reason, aborted.reason
    assert not any(r.ok for r in (offline, missing, aborted))


def test_the_next_cells_environments_are_built_while_the_current_cell_runs(tmp_path: Path) -> None:
    """Build-ahead: with one core, cell 2's environment is ready before cell 1's (slow) launch has finished."""
    releases = [fake_torch("2.5.0", "2024-01-01T00:00:00Z")]
    releases += [
        FakeRelease("fakelib", v, f"2024-02-0{i + 1}T00:00:00Z", module="BUGGY = False\n")
        for i, v in enumerate(["1.0", "1.1", "1.2"])
    ]
    index = build_index(tmp_path / "index", releases)
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local"},
                "groups": [
                    {
                        "name": "fakelib-{fakelib}",
                        "axes": {"fakelib": ["1.0", "1.1", "1.2"]},
                        "pins": {"torch": "2.5.0"},
                    }
                ],
            }
        )
    )
    folder = tmp_path / "cases" / "fakelib-2-slow"
    folder.mkdir(parents=True)
    (folder / "repro.py").write_text("import time\ntime.sleep(4)\n")
    (folder / "case.yaml").write_text(
        yaml.safe_dump(
            {
                "title": "slow",
                "upstream": ["https://example.invalid/2"],
                "packages": ["torch", "fakelib"],
                "timeout": 60,
                "signature": "FAKE-SIG",
                "variants": {"bug": {"expect": [{"outcome": "fixed"}]}},
            }
        )
    )
    matrix = load_matrix(tmp_path / "matrix.yaml")
    jobs = plan_cells([load_case(folder / "case.yaml")], matrix)
    cache = EnvCache(tmp_path / "envs")
    results = Session(MatrixEnvironments(CellEnvironments(matrix, cache))).run(jobs, cores=1)
    assert [r.outcome for r in results] == [Outcome.FIXED] * 3
    built = {
        env["cell"]: json.loads((cache.path(str(env["key"])) / "bugmatrix-env.json").read_text())["built_at"]
        for env in cache.list()
    }
    first_done = results[0].started_at + results[0].duration_s
    assert built["fakelib-1.1"] < first_done and built["fakelib-1.2"] < first_done, (built, first_done)


def test_an_interrupted_build_ahead_ends_its_thread_quietly() -> None:
    """Ctrl-C during a build-ahead install raises LaunchAborted in the builder thread; the loop ends without a
    thread traceback (seen when a `run --all-cells` was interrupted while the next cell installed)."""

    class Interrupted:
        def build_ahead(self, cell: object) -> None:
            raise LaunchAborted("the run was interrupted")

    envs = MatrixEnvironments(Interrupted())  # type: ignore[arg-type]
    envs._ahead.put(object())  # type: ignore[arg-type]
    envs._build_loop()  # returns; before the fix LaunchAborted escaped
