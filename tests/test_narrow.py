"""`bugmatrix narrow` and the precision of every boundary, on fake packages served from a local index."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.session.store import ResultStore

from .fakeindex import FAKE_TORCHRUN, FakeRelease, build_index, fake_torch, make_git_repo

VERSIONS = [f"1.{i}" for i in range(10)] + ["2.0"]  # eleven releases; the bug is fixed in 1.3
SCRIPT = """
import sys
import fakelib
if fakelib.BUGGY:
    print("RuntimeError: FAKE-SIG from fakelib", fakelib.__version__)
    sys.exit(1)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    releases = [fake_torch("2.5.0", "2024-01-01T00:00:00Z")]
    for i, version in enumerate(VERSIONS):
        releases.append(
            FakeRelease(
                "fakelib",
                version,
                f"2024-02-{i + 1:02d}T00:00:00Z",
                module=f"BUGGY = {version in ('1.0', '1.1', '1.2')}\n__version__ = {version!r}\n",
            )
        )
    index = build_index(tmp_path / "index", releases)
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local"},
                "groups": [
                    {"name": "fakelib-{fakelib}", "axes": {"fakelib": ["1.0", "2.0"]}, "pins": {"torch": "2.5.0"}}
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
                "variants": {
                    "bug": {"expect": [{"when": {"fakelib": "<1.3"}, "outcome": "reproduced"}, {"outcome": "fixed"}]}
                },
            }
        )
    )
    return tmp_path


def cli(project: Path, *argv: str) -> int:
    return main(
        [
            "--cases-dir",
            str(project / "cases"),
            *argv,
            "--matrix",
            str(project / "matrix.yaml"),
            "--db",
            str(project / "r.db"),
            *(("--envs", str(project / "envs")) if argv[0] != "report" else ()),
        ]
    )


def launched_in(store: ResultStore, run_id: str) -> int:
    return sum(1 for _, _, r in store.results(run_id) if r.launched)


def test_narrow_turns_an_interval_into_adjacent_releases_and_a_second_run_launches_nothing(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(project, "run", "--all-cells", "-j", "1") == 0
    capsys.readouterr()
    assert cli(project, "report", "--format", "json") == 0
    [axis] = [a for a in json.loads(capsys.readouterr().out)["axes"] if a["package"] == "fakelib"]
    [boundary] = axis["boundaries"]
    assert boundary["adjacent"] is False and boundary["not_run"] == VERSIONS[1:-1]
    assert boundary["text"] == "fixed between 1.0 and 2.0 (9 releases not run)"
    # the case lives outside the default cases/: every printed command says where (`--cases-dir`, its real path)
    assert (
        boundary["narrow"] == f"bugmatrix --cases-dir {project / 'cases'} narrow fakelib-1-bug --package fakelib "
        "--device cpu"
    )
    assert f"narrow with `{boundary['narrow']}`" in axis["summary"]
    assert f"{project}/cases/fakelib-1-bug/repro.py --device cpu" in boundary["reproduce"]["before"]
    assert "--with fakelib==1.0" in boundary["reproduce"]["before"] and "fakelib==2.0" in boundary["reproduce"]["after"]

    assert cli(project, "narrow", "-j", "1") == 0
    out = capsys.readouterr().out
    assert "fixed in 1.3 (1.2 reproduced)" in out, out
    # a comment ready to paste upstream, with the one command that reproduces each side anywhere
    assert "Paste upstream:" in out and "--exclude-newer 2024-02-03T00:00:01Z" in out, out
    assert "--with fakelib==1.2 --with torch==2.5.0 python -m torch.distributed.run --standalone" in out, out
    assert "--with fakelib==1.3" in out and f"{project}/cases/fakelib-1-bug/repro.py --device cpu" in out
    store = ResultStore(project / "r.db")
    narrow_run = store.runs()[-1].run_id
    assert launched_in(store, narrow_run) <= math.ceil(math.log2(len(VERSIONS))) + 1

    assert cli(project, "report", "--format", "markdown") == 0
    markdown = capsys.readouterr().out
    assert "fixed in 1.3 (1.2 reproduced)" in markdown and "bisect-" not in markdown  # probes: axes, not grid
    runs_before = len(store.runs())
    assert cli(project, "narrow", "-j", "1") == 0  # idempotent: nothing left to narrow, nothing launched
    assert len(store.runs()) == runs_before
    assert "every boundary in the record and the store is adjacent" in capsys.readouterr().err


def test_narrow_repeat_auto_states_the_boundary_with_its_confidence(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(project, "run", "--all-cells", "-j", "1") == 0
    capsys.readouterr()
    assert cli(project, "narrow", "-j", "1", "--repeat", "auto", "--max-launches", "20") == 0
    captured = capsys.readouterr()
    out = captured.out + captured.err
    # adaptive repeats: each version launched in batches, its tally and the confidence of the boundary stated
    assert "fixed in 1.3 (1.2: 10/10 reproduced; 1.3: 0/10; confidence 0.9" in out, out
    assert "launches, 0 reused from earlier runs" in out, out
    store = ResultStore(project / "r.db")
    probes = [r for _, cell, r in store.results(store.runs()[-1].run_id) if cell.startswith("bisect-")]
    assert probes and all(r.pool and r.repeats >= 10 for r in probes)  # each version a batch of 10 or more, pooled


def test_narrow_of_a_case_not_in_the_cases_dir_is_refused_not_called_adjacent(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The store holds an open interval for the case; run from a folder whose cases/ lacks it (the command `report`
    used to print, without --cases-dir), narrow must not say "every boundary ... is adjacent" and exit 0."""
    assert cli(project, "run", "--all-cells", "-j", "1") == 0
    other = project / "other-cases"
    other.mkdir()
    capsys.readouterr()
    argv = ["--matrix", str(project / "matrix.yaml"), "--db", str(project / "r.db"), "--envs", str(project / "envs")]
    assert main(["--cases-dir", str(other), "narrow", "fakelib-1-bug", "--dry-run", *argv]) == 2
    err = capsys.readouterr().err
    assert f"no case matching fakelib-1-bug in {other}" in err and "adjacent" not in err
    assert main(["--cases-dir", str(other), "narrow", "--dry-run", *argv]) == 0  # all cases: says what it skipped
    err = capsys.readouterr().err
    assert "not looked at: the results of 1 case(s) not in" in err and "fakelib-1-bug" in err
    assert "every boundary in the record and the store is adjacent" not in err
    assert cli(project, "narrow", "fakelib-1-bug", "--dry-run") == 1  # with the right folder: the interval is there
    assert "fixed between 1.0 and 2.0" in capsys.readouterr().out


def test_a_boundary_that_cannot_be_narrowed_says_why(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index_root = project / "index"
    # every release between 1.0 and 2.0 is unbuildable on this platform (a native extension that is missing)
    releases = [fake_torch("2.5.0", "2024-01-01T00:00:00Z")]
    for i, version in enumerate(VERSIONS):
        body = (
            f"BUGGY = {version == '1.0'}\n__version__ = {version!r}\n"
            if version in ("1.0", "2.0")
            else "import no_such_native_ext\n"
        )
        releases.append(FakeRelease("fakelib", version, f"2024-02-{i + 1:02d}T00:00:00Z", module=body))
    build_index(index_root, releases)
    assert cli(project, "run", "--all-cells", "-j", "1") == 0
    capsys.readouterr()
    assert cli(project, "narrow", "-j", "1") == 1
    out = capsys.readouterr()
    assert "not narrowed" in out.out + out.err or "untestable in between" in out.out, out
    assert "infra" in out.out + out.err and "no_such_native_ext" in out.out + out.err


def test_narrow_by_default_follows_each_cases_own_package(tmp_path: Path) -> None:
    """A lightning-like case whose torch only follows the library's date: by default the interval to narrow is the
    library's; the incidental torch 'interval' is listed only when asked for with --package torch."""
    from harness.matrix.expand import load_matrix
    from harness.model.outcome import Outcome
    from harness.model.result import Result
    from harness.workflows.narrow import intervals

    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump({"groups": [{"name": "lib-{lib}", "axes": {"lib": ["1.0", "2.0"]}}]})
    )
    folder = tmp_path / "cases" / "lib-1-bug"
    folder.mkdir(parents=True)
    (folder / "repro.py").write_text("print('x')\n")
    (folder / "case.yaml").write_text(
        yaml.safe_dump(
            {
                "title": "t",
                "upstream": ["https://example.invalid/1"],
                "packages": ["torch", "lib"],
                "signature": "S",
                "variants": {"bug": {"expect": [{"outcome": "fixed"}]}},
            }
        )
    )
    from harness.model.case import load_case

    case = load_case(folder / "case.yaml")
    results = [
        (
            f"lib-{lib}",
            Result(
                case=case.id,
                variant="bug",
                nproc=1,
                device="cpu",
                outcome=o,
                expected=None,
                reason="",
                versions={"lib": lib, "torch": torch},
            ),
        )
        for lib, torch, o in (("1.0", "2.1.0", Outcome.REPRODUCED), ("2.0", "2.5.0", Outcome.FIXED))
    ]
    between = lambda case, package, device, a, b: ("x",)  # noqa: E731  one release lies between on every axis
    matrix = load_matrix(tmp_path / "matrix.yaml")
    assert [t.axis.package for t in intervals(results, {case.id: case}, between, matrix)] == ["lib"]
    assert [t.axis.package for t in intervals(results, {case.id: case}, between, matrix, packages={"torch"})] == [
        "torch"
    ]


def _git_cells(tmp_path: Path, buggy: list[bool], cells: tuple[int, ...], case_id: str) -> tuple[list[str], Path]:
    """A git repository of fakelib (one commit per entry of `buggy`), a matrix with a cell pinned to each commit in
    `cells` (in that order) and a case whose rule says fixed; (the SHAs, the case's folder)."""
    shas = make_git_repo(tmp_path / "repo", buggy, tags={})
    index = build_index(tmp_path / "index", [fake_torch("2.5.0", "2024-01-01T00:00:00Z")])
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local"},
                "sources": {"fakelib": {"git": str(tmp_path / "repo")}},
                "groups": [
                    {
                        "name": "fakelib-{fakelib}",
                        "pins": {"torch": "2.5.0"},
                        "axes": {"fakelib": [{"git": shas[i]} for i in cells]},
                    }
                ],
            }
        )
    )
    case = tmp_path / "cases" / case_id
    case.mkdir(parents=True)
    (case / "repro.py").write_text(SCRIPT.replace(", fakelib.__version__", ""))
    (case / "case.yaml").write_text(
        yaml.safe_dump(
            {
                "title": "fakelib regression",
                "upstream": [f"https://example.invalid/{case_id.split('-')[1]}"],
                "packages": ["torch", "fakelib"],
                "nproc": [1],
                "timeout": 60,
                "signature": "FAKE-SIG",
                "variants": {"bug": {"expect": [{"outcome": "fixed"}]}},
            }
        )
    )
    return shas, case


def test_narrow_bisects_the_commits_between_two_git_cells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Cells pinned to two commits of a package's main (no release between, as litgpt-1378's): the points are ordered
    by commit date, not by their shared version string, and the probes install commits, never a SHA as a version."""
    buggy = [False] * 2 + [True] * 8  # the third commit brings the bug in
    # the newer commit first: nothing may rely on the order the cells are written or their SHAs sort in
    shas, _ = _git_cells(tmp_path, buggy, (9, 0), "fakelib-2-regression")
    cli(tmp_path, "run", "--all-cells", "-j", "1")  # 1: the newer commit reproduces, against the written rule
    capsys.readouterr()
    assert cli(tmp_path, "narrow", "--dry-run") == 1  # an interval is left
    listed = capsys.readouterr().out
    assert f"regressed between 2.0.dev0 @ {shas[0][:12]} and 2.0.dev0 @ {shas[9][:12]} (8 commit(s) not run)" in listed

    assert cli(tmp_path, "narrow", "-j", "1") == 0
    out = capsys.readouterr().out
    assert f'regressed in {shas[2][:12]} "change 2" ({shas[1][:12]} fixed)' in out, out
    store = ResultStore(tmp_path / "r.db")
    assert launched_in(store, store.runs()[-1].run_id) <= math.ceil(math.log2(9)) + 1
    assert cli(tmp_path, "narrow", "--dry-run") == 0
    assert "every boundary in the record and the store is adjacent" in capsys.readouterr().err

    # Without the clone nothing dates the commits: narrow must not call that "every boundary adjacent" (exit 1, and
    # each axis says what was not placed and which variable places it), as the report says it.
    (tmp_path / "repo").rename(tmp_path / "gone")
    assert cli(tmp_path, "narrow", "--dry-run") == 1
    err = capsys.readouterr().err
    assert "every boundary in the record and the store is adjacent" not in err
    assert "fakelib-2-regression::bug (cpu) over fakelib: not placed in history" in err
    assert "BUGMATRIX_MIRROR_FAKELIB" in err and "1 axis(es) above hold commits" in err


def test_the_reproduce_command_carries_the_companions_of_its_versions(project: Path) -> None:
    """A release that needs an undeclared requirement (matrix.yaml `companions`) gets it in the pasted command too."""
    from harness.analysis.reproduce import repro_command
    from harness.matrix.expand import load_matrix
    from harness.model.case import load_case
    from harness.model.outcome import Outcome
    from harness.model.result import Result

    doc = yaml.safe_load((project / "matrix.yaml").read_text())
    doc["companions"] = [{"when": {"fakelib": "<1.3"}, "add": ["setuptools<70"]}]
    (project / "matrix.yaml").write_text(yaml.safe_dump(doc))
    matrix = load_matrix(project / "matrix.yaml")
    case = load_case(project / "cases" / "fakelib-1-bug" / "case.yaml")

    def command(version: str) -> str:
        return repro_command(
            case,
            Result(
                case=case.id,
                variant="bug",
                nproc=1,
                device="cpu",
                outcome=Outcome.FIXED,
                expected=None,
                reason="",
                python="3.11.7",
                versions={"fakelib": version, "torch": "2.5.0"},
            ),
            matrix,
        )

    assert "--with fakelib==1.2 --with torch==2.5.0 --with 'setuptools<70' python" in command("1.2")
    assert "setuptools" not in command("1.3")


def test_the_pasted_commands_of_both_sides_use_one_world_size(project: Path) -> None:
    """A side measured at world sizes 1 and 2 (a narrow probe) next to one measured at 1 only (a cell run): both
    commands use world size 1, so the pasted pair differs only in the versions (torch-133415's paste mixed 1 and 2)."""
    from harness.analysis.reproduce import sides, upstream_comment
    from harness.analysis.transitions import Axis, Boundary, Point
    from harness.model.case import load_case
    from harness.model.outcome import Outcome
    from harness.model.result import Result

    case = load_case(project / "cases" / "fakelib-1-bug" / "case.yaml")

    def result(version: str, nproc: int, outcome: Outcome) -> Result:
        return Result(
            case=case.id,
            variant="bug",
            nproc=nproc,
            device="cpu",
            outcome=outcome,
            expected=None,
            reason="",
            python="3.11.7",
            versions={"fakelib": version, "torch": "2.5.0"},
        )

    results = [
        ("fakelib-1.2", result("1.2", 1, Outcome.REPRODUCED)),
        ("probe-1.3", result("1.3", 1, Outcome.FIXED)),
        ("probe-1.3", result("1.3", 2, Outcome.FIXED)),
    ]
    axis = Axis(
        case=case.id,
        variant="bug",
        device="cpu",
        package="fakelib",
        points=[Point("1.2", "reproduced", ["fakelib-1.2"]), Point("1.3", "fixed", ["probe-1.3"])],
    )
    text = upstream_comment(case, axis, Boundary("fixed", "1.2", "1.3", ()), results)
    assert text.count("--nproc_per_node=1") == 2 and "--nproc_per_node=2" not in text, text
    # `report`'s commands for each side come from the same choice
    assert [r.nproc for r in sides(results, axis, Boundary("fixed", "1.2", "1.3", ())) if r] == [1, 1]
    # with no world size in common, each side still gets its own largest
    results[0] = ("fakelib-1.2", result("1.2", 4, Outcome.REPRODUCED))
    text = upstream_comment(case, axis, Boundary("fixed", "1.2", "1.3", ()), results)
    assert "--nproc_per_node=4" in text and "--nproc_per_node=2" in text, text


def _run_11_and_13(project: Path) -> None:
    """The matrix cut to fakelib 1.1 (reproduces) and 1.3 (fixed), both run: 1.2 is the one release between."""
    spec = yaml.safe_load((project / "matrix.yaml").read_text())
    spec["groups"][0]["axes"]["fakelib"] = ["1.1", "1.3"]
    (project / "matrix.yaml").write_text(yaml.safe_dump(spec))
    assert cli(project, "run", "--all-cells", "-j", "1") == 0


def _save_at_12(
    project: Path,
    outcomes: list[tuple[str, str, dict[str, str]]],
    reason: str = "NotImplementedError: Could not run 'fakelib::op' on CPU",
    command: str = "bugmatrix run",
) -> None:
    """Record results of fakelib 1.2 (cell, outcome, extra versions) as `command` would, at every world size (an
    `infra` one never launched)."""
    from harness.model.case import load_case
    from harness.model.job import run_digest
    from harness.model.outcome import Outcome
    from harness.model.result import Result

    case = load_case(project / "cases" / "fakelib-1-bug" / "case.yaml")
    store = ResultStore(project / "r.db")
    run = store.begin_run(command, "host")
    for cell, outcome, extra in outcomes:
        for nproc in case.spec.nproc:
            store.save(
                run,
                Result(
                    case=case.id,
                    variant="bug",
                    nproc=nproc,
                    device="cpu",
                    outcome=Outcome(outcome),
                    expected=None,
                    reason=reason,
                    versions={"fakelib": "1.2", "torch": "2.5.0", **extra},
                    launched=outcome != "infra",
                    digest=run_digest(case, "bug"),
                ),
                cell=cell,
            )
    store.end_run(run)


def test_a_version_between_whose_environment_could_not_be_made_is_probed_again(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1.1 reproduced and 1.3 fixed in the matrix; 1.2 ran once but its environment could not be made (infra: the
    # disk was full): nothing was measured there, so narrow probes it again rather than call the boundary stuck
    _run_11_and_13(project)
    _save_at_12(
        project,
        [("bisect-fakelib-1.2", "infra", {})],
        reason="environment: uv failed: Failed to extract archive",
        command="bugmatrix narrow",
    )
    capsys.readouterr()
    assert cli(project, "narrow", "--dry-run") == 1  # the interval is listed: 1.2 could not say
    assert "could not say: 1.2" in capsys.readouterr().out
    assert cli(project, "narrow", "-j", "1") == 0
    out = capsys.readouterr().out
    assert "fixed in 1.3 (1.2 reproduced)" in out and "not narrowed" not in out, out


def test_a_boundary_whose_versions_between_were_all_measured_as_expected_is_not_an_interval(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1.1 reproduced, 1.3 fixed, and 1.2 (the only release between) errs: its kernel is missing. With a rule that
    # says so, launching 1.2 again would measure the same: narrow lists nothing to run and exits 0; without the rule
    # the error is unexplained and the interval stays (exit 1)
    _run_11_and_13(project)
    _save_at_12(project, [("fakelib-1.2", "error", {})])
    case_file = project / "cases" / "fakelib-1-bug" / "case.yaml"
    capsys.readouterr()
    assert cli(project, "narrow", "--dry-run") == 1  # an error no rule names: listed as an interval
    assert "nothing left to run" not in capsys.readouterr().out
    spec = yaml.safe_load(case_file.read_text())
    spec["variants"]["bug"]["expect"].insert(0, {"when": {"fakelib": "==1.2"}, "outcome": "error"})
    case_file.write_text(yaml.safe_dump(spec))
    assert cli(project, "narrow", "--dry-run") == 0
    out = capsys.readouterr()
    assert "fixed between 1.1 and 1.3 (could not say: 1.2) — nothing left to run" in out.out, out
    assert "1.2: error as the case's rules expect (NotImplementedError: Could not run" in out.out
    assert "adjacent or measured between (1 above)" in out.err
    assert cli(project, "narrow", "-j", "1") == 0  # nothing launched, nothing "not narrowed"


def test_a_version_between_whose_cells_disagree_leaves_nothing_to_run(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # at 1.2 another package decides (reproduced with other 2, fixed with other 1): mixed, not an interval to bisect
    _run_11_and_13(project)
    _save_at_12(
        project,
        [("fakelib-1.2-other-2", "reproduced", {"other": "2"}), ("fakelib-1.2-other-1", "fixed", {"other": "1"})],
    )
    capsys.readouterr()
    assert cli(project, "narrow", "--dry-run") == 0
    out = capsys.readouterr().out
    assert "1.2: reproduces in some cells, not others (another package decides)" in out, out


def test_a_version_between_that_could_not_say_is_not_stepped_over_in_the_answer(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 1.0 reproduced and 1.3 fixed in the matrix; 1.2 was run and errs (no rule names it); 1.1 was never run. Narrow
    # probes 1.1 (reproduced), and the answer must keep 1.2 between the sides: "fixed in 1.3 (1.1 reproduced)" would
    # call 1.1 and 1.3 adjacent (lightning-21244 read "fixed in 2.2.0.post0 (2.1.4 reproduced)" over 2.2.0's error)
    spec = yaml.safe_load((project / "matrix.yaml").read_text())
    spec["groups"][0]["axes"]["fakelib"] = ["1.0", "1.3"]
    (project / "matrix.yaml").write_text(yaml.safe_dump(spec))
    assert cli(project, "run", "--all-cells", "-j", "1") == 0
    _save_at_12(project, [("fakelib-1.2", "error", {})])
    capsys.readouterr()
    assert cli(project, "narrow", "-j", "1") == 1  # not narrowed to adjacent versions: 1.2's error stands between
    out = capsys.readouterr().out
    assert "fixed between 1.1 and 1.3 (could not say: 1.2)" in out, out
    assert "fixed in 1.3" not in out and "0 boundary(ies) narrowed to adjacent versions, 1 not" in out, out


def test_a_pinned_commit_whose_environment_could_not_be_made_is_probed_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two git cells with one commit between, tried once by an earlier narrow whose build failed (recorded as
    `git:<sha>`, infra). It is not "not run" (it was) but it measured nothing: narrow probes it again, as it does a
    release whose environment could not be made."""
    from harness.model.case import load_case
    from harness.model.job import run_digest
    from harness.model.outcome import Outcome
    from harness.model.result import Result

    shas, case_dir = _git_cells(tmp_path, [False, False, True], (0, 2), "fakelib-3-regression")
    cli(tmp_path, "run", "--all-cells", "-j", "1")
    case = load_case(case_dir / "case.yaml")
    store = ResultStore(tmp_path / "r.db")
    run = store.begin_run("bugmatrix narrow", "host")
    store.save(
        run,
        Result(
            case=case.id,
            variant="bug",
            nproc=1,
            device="cpu",
            outcome=Outcome.INFRA,
            expected=None,
            reason="environment: uv failed: Failed to extract archive",
            launched=False,
            versions={"fakelib": "git:" + shas[1], "torch": "2.5.0"},
            digest=run_digest(case, "bug"),
        ),
        cell=f"bisect-fakelib-{shas[1][:12]}",
    )
    store.end_run(run)
    capsys.readouterr()
    assert cli(tmp_path, "narrow", "--dry-run") == 1
    assert f"could not say: git:{shas[1][:12]}" in capsys.readouterr().out
    assert cli(tmp_path, "narrow", "-j", "1") == 0
    out = capsys.readouterr().out
    assert f'regressed in {shas[2][:12]} "change 2" ({shas[1][:12]} fixed)' in out, out


def test_a_failed_commit_between_two_releases_is_left_to_commit_level_narrowing() -> None:
    """An axis mixing releases and git installs (litgpt's): between releases 0.4.13 and 0.5.4 lies a pinned commit
    whose build failed (`git:<sha>`). The release bisection neither retries it among the releases nor orders it as
    a version (it raised InvalidVersion), and the answer's "could not say" names releases only."""
    from harness.analysis.transitions import Axis, Boundary, Point
    from harness.model.outcome import Outcome
    from harness.model.result import Result
    from harness.workflows.narrow import Narrowed, Target, _nothing_measured
    from harness.workflows.search import SearchResult

    pin = "git:" + "d" * 40
    axis = Axis(
        case="c",
        variant="bug",
        device="cpu",
        package="litgpt",
        points=[
            Point("0.4.13", "reproduced", ["a"]),
            Point(pin, "unknown", ["p"]),
            Point("0.5.0", "unknown", ["e"]),
            Point("0.5.4", "fixed", ["b"]),
        ],
    )
    boundary = Boundary("fixed", "0.4.13", "0.5.4", ("0.5.1",), (pin, "0.5.0"))
    results = [
        (
            cell,
            Result(
                case="c",
                variant="bug",
                nproc=1,
                device="cpu",
                outcome=Outcome.INFRA,
                expected=None,
                reason="environment: uv failed",
                versions={"litgpt": version},
            ),
        )
        for cell, version in (("p", pin), ("e", "0.5.0"))
    ]
    assert _nothing_measured(axis, boundary, results) == ("0.5.0",)
    found = SearchResult(old=Outcome.REPRODUCED, new=Outcome.FIXED, last_old="0.4.13", first_new="0.5.1")
    done = Narrowed(Target(axis, boundary, {}), found=found)
    assert done.unsaid == ["0.5.0"] and not done.adjacent
    assert "fixed between 0.4.13 and 0.5.1 (could not say: 0.5.0)" in done.line()


SLICE_TORCH = ["2.5.0", "2.6.0", "2.7.0", "2.8.0", "2.9.0"]  # 2.6.0 ... 2.8.0 lie between the two run with 2.0
SLICE_SCRIPT = """
import sys
import fakelib
import torch
if fakelib.__version__ == "1.0" or int(torch.__version__.split(".")[1]) < 7:
    print("RuntimeError: FAKE-SIG with", fakelib.__version__, torch.__version__)
    sys.exit(1)
"""


@pytest.fixture
def slice_project(tmp_path: Path) -> Path:
    """lightning-20307 in small: fakelib (the case's package) 1.0 always reproduces; 2.0 reproduces with torch < 2.7
    only. The cells pin both (fakelib 1.0 and 2.0, each with torch 2.5.0 and 2.9.0), so fakelib 2.0 is `mixed`, torch
    decides there, and the whole torch axis has no boundary (2.9.0 is mixed too): only the slice "torch with fakelib
    2.0" holds the interval, between 2.5.0 and 2.9.0."""
    releases = [
        FakeRelease(
            "torch",
            version,
            f"2024-01-{i + 1:02d}T00:00:00Z",
            module=f"__version__ = {version!r}\n",
            files={"torch/distributed/__init__.py": "", "torch/distributed/run.py": FAKE_TORCHRUN},
        )
        for i, version in enumerate(SLICE_TORCH)
    ]
    releases += [
        FakeRelease("fakelib", v, f"2024-02-0{i + 1}T00:00:00Z", module=f"__version__ = {v!r}\n")
        for i, v in enumerate(("1.0", "2.0"))
    ]
    index = build_index(tmp_path / "index", releases)
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local"},
                "groups": [
                    {
                        "name": "fakelib-{fakelib}-torch-{torch}",
                        "axes": {"fakelib": ["1.0", "2.0"], "torch": ["2.5.0", "2.9.0"]},
                    }
                ],
            }
        )
    )
    case = tmp_path / "cases" / "fakelib-3-slice"
    case.mkdir(parents=True)
    (case / "repro.py").write_text(SLICE_SCRIPT)
    (case / "case.yaml").write_text(
        yaml.safe_dump(
            {
                "title": "fakelib bug that torch decides",
                "upstream": ["https://example.invalid/3"],
                "packages": ["torch", "fakelib"],
                "nproc": [1],
                "timeout": 60,
                "signature": "FAKE-SIG",
                "variants": {
                    "bug": {
                        "expect": [
                            {"when": {"fakelib": "<2.0"}, "outcome": "reproduced"},
                            {"when": {"torch": "<2.7"}, "outcome": "reproduced"},
                            {"outcome": "fixed"},
                        ]
                    }
                },
            }
        )
    )
    return tmp_path


SLICE_LINE = (
    "fakelib-3-slice::bug (cpu) over torch with fakelib 2.0: fixed between 2.5.0 and 2.9.0 (3 releases not run)"
    " — not run: 2.6.0, 2.7.0, 2.8.0"
)


def test_narrow_lists_and_closes_the_interval_of_a_coupled_slice_with_the_slices_pins(
    slice_project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report's "with fakelib 2.0, torch between 2.5.0 and 2.9.0" is an interval narrow sees: listed by
    `--dry-run` (with and without `--package torch`, the command the report prints), then bisected with every probe
    keeping fakelib 2.0 (never the fakelib 1.0 cell that also ran torch 2.5.0), to the adjacent boundary."""
    assert cli(slice_project, "run", "--all-cells", "-j", "1") == 0
    capsys.readouterr()
    assert cli(slice_project, "report", "--format", "json") == 0
    [axis] = [a for a in json.loads(capsys.readouterr().out)["axes"] if a["package"] == "fakelib"]
    [coupled] = axis["coupled"]
    [boundary] = coupled["boundaries"]
    assert boundary["text"] == "fixed between 2.5.0 and 2.9.0 (3 releases not run)"
    suggested = boundary["narrow"].split(" narrow ", 1)[1].split()  # fakelib-3-slice --package torch --device cpu
    for argv in (["narrow", "--dry-run"], ["narrow", "--dry-run", *suggested]):
        assert cli(slice_project, *argv) == 1, argv  # an interval is left
        assert SLICE_LINE in capsys.readouterr().out.splitlines(), argv

    assert cli(slice_project, "narrow", "-j", "1", "--format", "json") == 0
    answer = json.loads(capsys.readouterr().out)
    [done] = answer["narrowed"]
    assert (done["package"], done["held"], done["adjacent"]) == ("torch", {"fakelib": "2.0"}, True), done
    assert "::bug (cpu) over torch with fakelib 2.0: fixed in 2.7.0 (2.6.0 reproduced) [" in done["after"], done
    [comment] = answer["comments"]  # to paste upstream
    assert "along `torch` with `fakelib` 2.0: fixed in 2.7.0 (2.6.0 reproduced)" in comment, comment
    store = ResultStore(slice_project / "r.db")
    probes = [(cell, r) for _, cell, r in store.results(store.runs()[-1].run_id)]
    assert probes and all(cell.endswith("-fakelib-2.0") for cell, _ in probes), probes
    assert {r.versions["fakelib"] for _, r in probes} == {"2.0"}
    assert cli(slice_project, "narrow", "--dry-run") == 0  # closed: nothing left to list
    capsys.readouterr()
    assert cli(slice_project, "report", "--format", "cases") == 0
    assert "with fakelib 2.0, torch **2.7.0** (2.6.0 reproduced)" in capsys.readouterr().out


def test_a_slices_probe_keeps_the_slices_pins_never_another_cells(slice_project: Path) -> None:
    """The probe between the slice's sides is a fakelib 2.0 cell with torch moved, though the cell sorted first at
    torch 2.5.0 is fakelib 1.0's; and when only a probe measured the older side, fakelib 2.0 is still pinned."""
    from harness.matrix.expand import load_matrix
    from harness.model.case import load_case
    from harness.model.outcome import Outcome
    from harness.model.result import Result
    from harness.workflows.bisect import probe_cell
    from harness.workflows.narrow import intervals, probe_suffix

    case = load_case(slice_project / "cases" / "fakelib-3-slice" / "case.yaml")
    matrix = load_matrix(slice_project / "matrix.yaml")

    def result(fakelib: str, torch: str, outcome: Outcome) -> Result:
        return Result(
            case=case.id,
            variant="bug",
            nproc=1,
            device="cpu",
            outcome=outcome,
            expected=None,
            reason="",
            versions={"fakelib": fakelib, "torch": torch},
        )

    R, F = Outcome.REPRODUCED, Outcome.FIXED  # noqa: N806
    results = [
        (f"fakelib-{lib}-torch-{torch}", result(lib, torch, o))
        for lib, torch, o in (("1.0", "2.5.0", R), ("1.0", "2.9.0", R), ("2.0", "2.5.0", R), ("2.0", "2.9.0", F))
    ]
    between = lambda case, package, device, a, b: tuple(v for v in SLICE_TORCH if a < v < b)  # noqa: E731
    for packages in (None, {"torch"}):
        [target] = intervals(results, {case.id: case}, between, matrix, packages=packages)
        assert (target.axis.package, target.axis.within) == ("torch", ("fakelib", "2.0"))
        assert target.base == {"fakelib": "2.0", "torch": "2.5.0"}
        cell = probe_cell(matrix, case, "torch", "2.7.0", "cpu", base=target.base, suffix=probe_suffix(target.axis))
        assert (cell.name, cell.pins) == ("bisect-torch-2.7.0-fakelib-2.0", {"torch": "2.7.0", "fakelib": "2.0"})

    # a probe at 2.6.0 (fakelib 2.0) reproduced: the older side now is a probe cell, no matrix cell
    results.append(("bisect-torch-2.6.0-fakelib-2.0", result("2.0", "2.6.0", R)))
    [target] = intervals(results, {case.id: case}, between, matrix, packages={"torch"})
    assert (target.boundary.before, target.boundary.after) == ("2.6.0", "2.9.0")
    assert target.base["fakelib"] == "2.0"
