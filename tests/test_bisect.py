"""`bugmatrix bisect` end to end on fake packages: releases from an index, and commits from a local git repo."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from harness.cli import main
from harness.matrix.cellenvs import CellEnvironments
from harness.matrix.envcache import EnvCache
from harness.matrix.expand import load_matrix
from harness.model.case import discover
from harness.session.store import ResultStore, recording
from harness.workflows.bisect import BisectRequest
from harness.workflows.bisect import bisect as bisect_case
from harness.workflows.probing import Probing

from .fakeindex import FakeRelease, build_index, fake_torch, make_git_repo

SCRIPT = """
import sys
import fakelib
if fakelib.BUGGY:
    print("RuntimeError: FAKE-SIG")
    sys.exit(1)
"""
N = 16
CRASHING_TORCHRUN = (
    "raise AttributeError(\"'NoneType' object has no attribute 'get'\")\n"  # torch 1.13.0's, Python 3.12
)


def project(
    root: Path,
    buggy: list[bool],
    broken: set[int] = frozenset(),
    git_url: str | None = None,
    api_from: int = 0,
    torch_uploads: tuple[tuple[str, str], ...] = (),
    crashing_torch: frozenset[str] = frozenset(),
) -> Path:
    releases = [fake_torch("2.5.0", "2024-01-01T00:00:00Z")] + [fake_torch(v, when) for v, when in torch_uploads]
    for torch in releases:
        if torch.version in crashing_torch:  # installs and imports, but its torchrun dies before starting a rank
            torch.files["torch/distributed/run.py"] = CRASHING_TORCHRUN
    for i, bug in enumerate(buggy):
        body = "import no_such_native_ext\n" if i in broken else f"BUGGY = {bug}\nHAS_API = {i >= api_from}\n"
        releases.append(
            FakeRelease("fakelib", f"1.{i}.0", f"2024-02-{i + 1:02d}T00:00:00Z", module=body, requires=["torch"])
        )  # as every real library under test does
    index = build_index(root / "index", releases)
    (root / "matrix.yaml").write_text(yaml.safe_dump({"indexes": {"local": index}, "defaults": {"index": "local"}}))
    case = root / "cases" / "fakelib-1-bug"
    case.mkdir(parents=True)
    (case / "repro.py").write_text(SCRIPT)
    spec = {
        "title": "t",
        "upstream": ["https://example.invalid/1"],
        "packages": ["torch", "fakelib"],
        "nproc": [1],
        "timeout": 60,
        "signature": "FAKE-SIG",
        "supports": {"fakelib": ">=1.0"},
        "variants": {"bug": {"expect": [{"outcome": "fixed"}]}},
    }
    if git_url:
        spec["sources"] = {"fakelib": git_url}
    (case / "case.yaml").write_text(yaml.safe_dump(spec))
    return root


def bisect(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict, str]:
    capsys.readouterr()
    ResultStore(root / "r.db")  # an explicit --db must exist (bisect never creates one it was named)
    code = main(
        [
            "--cases-dir",
            str(root / "cases"),
            "bisect",
            "fakelib-1-bug",
            "--package",
            "fakelib",
            "--device",
            "cpu",
            "--matrix",
            str(root / "matrix.yaml"),
            "--envs",
            str(root / "envs"),
            "--db",
            str(root / "r.db"),
            "-j",
            "1",
            "--json",
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else {}, captured.err


@pytest.mark.parametrize(("change_at", "fix"), [(11, True), (4, False)], ids=["finds-the-fix", "finds-the-break"])
def test_release_level_in_log2_plus_2_probes(tmp_path: Path, capsys, change_at: int, fix: bool) -> None:
    buggy = [(i < change_at) == fix for i in range(N)]
    root = project(tmp_path, buggy)
    code, out, err = bisect(root, capsys)
    assert code == 0, out
    [level] = out["levels"]
    assert (level["last_old"], level["first_new"]) == (f"1.{change_at - 1}.0", f"1.{change_at}.0")
    assert level["new"] == ("fixed" if fix else "reproduced")
    assert len(level["probes"]) <= math.ceil(math.log2(N)) + 2
    assert f"1.{change_at - 1}.0 ({level['old']}) → 1.{change_at}.0 ({level['new']})" in out["summary"]
    cells = {cell for _, cell, _ in ResultStore(root / "r.db").results(out["run_id"])}
    assert len(cells) == len(level["probes"])  # every probe is recorded


def test_broken_releases_are_stepped_over(tmp_path: Path, capsys) -> None:
    buggy = [i < 9 for i in range(N)]
    root = project(tmp_path, buggy, broken={7, 12})
    code, out, err = bisect(root, capsys)
    [level] = out["levels"]
    assert code == 0 and (level["last_old"], level["first_new"]) == ("1.8.0", "1.9.0")
    assert {p["outcome"] for p in level["probes"]} <= {"reproduced", "fixed", "infra"}


def test_a_default_range_starting_at_releases_that_cannot_be_installed_steps_inward(tmp_path: Path, capsys) -> None:
    """The oldest releases do not import here (as lightning 2.0.0 resolving torch 1.13 on Python 3.11): bisect starts
    at the oldest that installs, finds the boundary, and says how to start there (`supports:` or --old)."""
    root = project(tmp_path, [i < 9 for i in range(N)], broken={0, 1, 2})
    code, out, err = bisect(root, capsys)
    assert code == 0, err
    [level] = out["levels"]
    assert (level["last_old"], level["first_new"]) == ("1.8.0", "1.9.0")
    assert "fakelib 1.0.0 … 1.2.0 (3 releases) cannot be installed or imported here" in err
    assert "started at 1.3.0, the oldest that installs" in err
    assert 'supports: {fakelib: ">=1.3.0"}' in err and "--old 1.3.0" in err
    [line] = [line for line in err.splitlines() if "probe 1.0.0: infra" in line]
    assert "no_such_native_ext" in line, line  # the cause, on the probe's whole first line (issue 27 item 2)
    root = project(tmp_path / "all-fixed", [False] * N, broken={0, 1, 2})
    code, out, err = bisect(root, capsys)
    assert code == 1 and "1.3.0 is fixed, 1.15.0 is fixed (1.0.0 … 1.2.0 (3) cannot be installed" in err


def test_the_summary_says_when_torch_moved_with_the_bisected_package(tmp_path: Path, capsys) -> None:
    """torch 2.6.0 was uploaded between fakelib 1.2.0 and 1.3.0: each probe resolves torch as of its release, so the
    boundary is also a torch change, and the summary line says so (lightning 2.5.2 + torch 2.7.1 -> 2.5.3 + torch
    2.8.0)."""
    root = project(tmp_path, [i < 3 for i in range(6)], torch_uploads=(("2.6.0", "2024-02-03T12:00:00Z"),))
    code, out, err = bisect(root, capsys)
    assert code == 0, err
    assert "releases 1.2.0 + torch 2.5.0 (reproduced) → 1.3.0 + torch 2.6.0 (fixed)" in out["summary"]
    code, out, err = bisect(root, capsys)  # again: every probe reused from the store, the same line
    assert code == 0 and "1.2.0 + torch 2.5.0 (reproduced) → 1.3.0 + torch 2.6.0 (fixed)" in out["summary"]
    assert "probe 1.2.0: reproduced (reused from the store, not launched)" in err, err  # not looking launched
    assert ResultStore(root / "r.db").results(out["run_id"]) == []  # nothing launched again (issue 27 item 4)
    root = project(tmp_path / "same-torch", [i < 3 for i in range(6)])  # torch did not move: nothing added
    code, out, err = bisect(root, capsys)
    assert "releases 1.2.0 (reproduced) → 1.3.0 (fixed)" in out["summary"]


def test_endpoints_that_agree_are_refused(tmp_path: Path, capsys) -> None:
    root = project(tmp_path, [i < 9 for i in range(N)])
    code, out, err = bisect(root, capsys, "--old", "1.10.0", "--new", "1.15.0")
    assert code == 1 and out == {}
    assert "the endpoints do not differ: 1.10.0 is fixed, 1.15.0 is fixed" in err


def test_a_skip_endpoint_outside_supports_finds_the_first_testable_release(tmp_path: Path, capsys) -> None:
    """The API the script drives appears in 1.5.0; before it the script exits 125 (skip). `supports` says >=1.5 (the
    default range), yet an explicit --old before it is probed: the search finds where the case becomes testable,
    the bound `bugmatrix expect` needs for a `skip` rule."""
    root = project(tmp_path, [i < 9 for i in range(N)], api_from=5)
    case = root / "cases" / "fakelib-1-bug"
    (case / "repro.py").write_text(
        "import sys\nimport fakelib\nif not fakelib.HAS_API:\n    print('SKIP: no API')\n    sys.exit(125)\n" + SCRIPT
    )
    spec = yaml.safe_load((case / "case.yaml").read_text())
    spec["supports"] = {"fakelib": ">=1.5"}
    (case / "case.yaml").write_text(yaml.safe_dump(spec))
    code, out, err = bisect(root, capsys, "--old", "1.1.0", "--new", "1.8.0")
    assert code == 0, err
    [level] = out["levels"]
    assert (level["last_old"], level["old"], level["first_new"], level["new"]) == (
        "1.4.0",
        "skip",
        "1.5.0",
        "reproduced",
    )
    assert len(level["probes"]) <= math.ceil(math.log2(8)) + 2
    code, out, err = bisect(root, capsys, "--old", "1.0.5", "--new", "1.8.0")  # not on the index at all
    assert code == 1 and "--old 1.0.5: not a release of fakelib the matrix allows" in err


def test_commit_level_names_the_commit(tmp_path: Path, capsys) -> None:
    buggy = [True] * 6 + [False] * 4  # fixed by the 7th commit
    shas = make_git_repo(tmp_path / "repo", buggy, tags={0: "v1.0.0", 9: "v2.0.0"})
    root = project(tmp_path / "p", [True, False], git_url=str(tmp_path / "repo"))
    code, out, err = bisect(root, capsys, "--old-ref", "v1.0.0", "--new-ref", "v2.0.0")
    assert code == 0, out
    [level] = out["levels"]
    assert level["level"] == "commit"
    assert (level["last_old"], level["first_new"]) == (shas[5][:12], shas[6][:12])
    assert level["first_new_subject"] == "change 6 (fixes the bug)"
    assert shas[6] in out["summary"]


def test_the_policy_goes_from_releases_to_commits_without_the_cli(tmp_path: Path) -> None:
    """`harness.workflows.bisect.bisect` owns the release -> commit policy: after an unambiguous release boundary
    it bisects the first-parent commits between those two releases (no command line involved)."""
    buggy = [True] * 3 + [False] * 3  # the 4th commit fixes it; v1.0.0 on the first, v1.1.0 on the last
    shas = make_git_repo(tmp_path / "repo", buggy, tags={0: "v1.0.0", 5: "v1.1.0"})
    root = project(tmp_path / "p", [True, False], git_url=str(tmp_path / "repo"))
    matrix = load_matrix(root / "matrix.yaml")
    [case] = discover(root / "cases")[0]
    store = ResultStore(root / "r.db")
    said: list[str] = []
    with recording(store, "test", "test") as run_id:
        levels = bisect_case(
            Probing(matrix, CellEnvironments(matrix, EnvCache(root / "envs")), store, run_id, say=said.append),
            BisectRequest(case, "bug", 1, "cpu", "fakelib"),
        )
    assert [level for level, _ in levels] == ["release", "commit"]
    release, commit = levels[0][1], levels[1][1]
    assert (str(release.last_old), str(release.first_new)) == ("1.0.0", "1.1.0")
    assert (commit.last_old.sha, commit.first_new.sha) == (shas[2], shas[3])
    assert any("first-parent commits of fakelib 1.0.0 … 1.1.0" in line for line in said)
    assert len(store.results(run_id)) == len(release.probes) + len(commit.probes)  # every probe recorded
    no_commits = BisectRequest(case, "bug", 1, "cpu", "fakelib", commits=False)
    with recording(store, "test", "test") as run_id:
        levels = bisect_case(
            Probing(matrix, CellEnvironments(matrix, EnvCache(root / "envs")), store, run_id), no_commits
        )
    assert [level for level, _ in levels] == ["release"]


def test_bisect_ends_with_the_command_for_each_side(tmp_path: Path, capsys) -> None:
    root = project(tmp_path, [i < 3 for i in range(6)])
    ResultStore(root / "r.db")
    capsys.readouterr()
    code = main(
        [
            "--cases-dir",
            str(root / "cases"),
            "bisect",
            "fakelib-1-bug",
            "--package",
            "fakelib",
            "--device",
            "cpu",
            "--matrix",
            str(root / "matrix.yaml"),
            "--envs",
            str(root / "envs"),
            "--db",
            str(root / "r.db"),
            "-j",
            "1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "releases 1.2.0 (reproduced) → 1.3.0 (fixed)" in out
    assert "# 1.2.0: reproduced" in out and "# 1.3.0: fixed" in out
    assert "--with fakelib==1.3.0" in out  # the script where the case lives (not under the default cases/)
    assert f"--nproc_per_node=1 {(root / 'cases').resolve()}/fakelib-1-bug/repro.py --device cpu" in out


def test_a_case_that_matches_nothing_says_so_and_records_nothing(tmp_path: Path, capsys) -> None:
    root = project(tmp_path, [True, False])
    capsys.readouterr()
    code = main(
        [
            "--cases-dir",
            str(root / "cases"),
            "bisect",
            "nosuchcase",
            "--package",
            "fakelib",
            "--matrix",
            str(root / "matrix.yaml"),
            "--db",
            str(root / "r.db"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "()" not in err and f"no case in {root / 'cases'} matches 'nosuchcase'" in err, err
    assert not (root / "r.db").exists()


@pytest.mark.parametrize("package", ["torchrec", "nosuchpkg"])
def test_a_package_the_case_does_not_install_is_refused_before_any_probe(tmp_path: Path, capsys, package: str) -> None:
    """Moving a package the case does not install cannot change its outcome: refused in one line before a run is
    begun (none left `interrupted`) or a probe launched."""
    root = project(tmp_path, [True] * 4 + [False] * 4)
    capsys.readouterr()
    code = main(
        [
            "--cases-dir",
            str(root / "cases"),
            "bisect",
            "fakelib-1-bug",
            "--package",
            package,
            "--device",
            "cpu",
            "--matrix",
            str(root / "matrix.yaml"),
            "--envs",
            str(root / "envs"),
            "--db",
            str(root / "r.db"),
            "-j",
            "1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert f"--package {package}" in err and "torch, fakelib" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (root / "r.db").exists(), "a run was begun"
    assert not (root / "envs").exists(), "a probe environment was built"


def test_an_endpoint_whose_torchrun_fails_before_any_rank_starts_is_stepped_over_and_named(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch 1.13.0 installs, but its torchrun crashes before any rank starts: an `error` (never `infra`, which is
    retried elsewhere), and the default bisect of a torch case refused, naming no version. Now it steps over the
    endpoint to the next release that launches, names each one stepped over and why, and finds the boundary; run
    again, every settled probe says it was reused from the store rather than looking launched."""
    from harness.model.outcome import Outcome

    monkeypatch.setenv("BUGMATRIX_LAUNCH_MODE", "cold")  # torchrun's own crash: a warm launch never runs torchrun
    root = project(
        tmp_path,
        [i < 4 for i in range(8)],
        torch_uploads=(("2.6.0", "2024-02-02T12:00:00Z"),),  # fakelib 1.0.0 and 1.1.0 resolve torch 2.5.0
        crashing_torch=frozenset({"2.5.0"}),
    )
    code, out, err = bisect(root, capsys)
    assert code == 0, err
    [level] = out["levels"]
    assert (level["last_old"], level["first_new"]) == ("1.3.0", "1.4.0")
    assert "fakelib 1.0.0 … 1.1.0 (2 releases) cannot be installed, imported or launched here" in err, err
    assert (
        "1.0.0, 1.1.0: error: torchrun failed before any rank started: AttributeError: 'NoneType' object has no" in err
    ), err
    assert "started at 1.2.0, the oldest that installs and launches" in err and "--old 1.2.0" in err
    stored = {cell: r.outcome for _, cell, r in ResultStore(root / "r.db").results(out["run_id"])}
    assert stored["bisect-fakelib-1.0.0"] is Outcome.ERROR  # stepped over, not reclassified
    assert "reused" not in err
    code, again, err = bisect(root, capsys)
    assert code == 0 and again["levels"][0]["first_new"] == "1.4.0"
    probes = [line for line in err.splitlines() if line.strip().startswith("probe ")]
    assert len(probes) == len(level["probes"]), err
    for line in probes:  # a settled probe is reused and says so; an `error` is not settled: launched again
        assert ("(reused from the store, not launched)" in line) == (": error" not in line), line


def test_a_refusal_after_stepping_names_what_ran_and_what_was_stepped_over(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No release but the newest two launches (and the script says `fixed` on both): refused, but the message names
    the releases that ran and those stepped over with why, not "an endpoint cannot be installed" and no version."""
    monkeypatch.setenv("BUGMATRIX_LAUNCH_MODE", "cold")  # torchrun's own crash: a warm launch never runs torchrun
    root = project(
        tmp_path,
        [False] * 6,
        torch_uploads=(("2.6.0", "2024-02-04T12:00:00Z"),),  # fakelib 1.0.0 … 1.3.0 resolve torch 2.5.0
        crashing_torch=frozenset({"2.5.0"}),
    )
    code, out, err = bisect(root, capsys)
    assert code == 1, err
    assert "the endpoints do not differ: 1.4.0 is fixed, 1.5.0 is fixed" in err, err
    assert "fakelib 1.0.0, 1.1.0, 1.3.0: error: torchrun failed before any rank started: AttributeError" in err, err


def test_bisect_says_its_plan_and_evicts_probes_under_a_disk_budget(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before its first probe, bisect says how many environments it may build, its first probes, and the download
    (unknown while nothing with the package is built here; then the size of those that are). With --disk-budget,
    a finished probe's environment is evicted before the next is built, as `run` and `compat` do."""
    from harness.matrix.envcache import MARKER

    monkeypatch.setenv("UV_CACHE_DIR", str(tmp_path / "uv-cache"))  # the budget measures this cache, never the user's
    root = project(tmp_path, [i < 3 for i in range(6)])
    code, out, err = bisect(root, capsys, "--disk-budget", "1K")
    assert code == 0, err
    assert "plan: at most 5 probe environments when no probe is skipped" in err, err
    assert "first 1.0.0 and 1.5.0, then 1.2.0" in err
    assert "download unknown: no environment with fakelib is built under" in err
    assert "evicted over --disk-budget 1.0 KiB" in err
    assert len(out["levels"][0]["probes"]) > 1
    assert len(list((root / "envs").glob(f"*/{MARKER}"))) == 1  # the last probe's; the others were evicted
    code, out, err = bisect(root, capsys, "--old", "1.1.0", "--new", "1.4.0")
    assert code == 0, err
    assert "an environment (the median of 1 with fakelib built under" in err, err
    assert "nothing is evicted (--disk-budget SIZE evicts" in err


ALTERNATING = """
import sys
from pathlib import Path
import fakelib
counter = Path(sys.argv[-1])
n = int(counter.read_text()) if counter.exists() else 0
counter.write_text(str(n + 1))
if fakelib.BUGGY and n % 2 == 0:  # a flaky release: every other launch reproduces (rate 1/2)
    print("RuntimeError: FAKE-SIG")
    sys.exit(1)
"""


def test_repeat_auto_locates_a_flaky_boundary_and_pools_earlier_runs(tmp_path: Path, capsys) -> None:
    root = project(tmp_path, [False, True, True])
    spec = yaml.safe_load((root / "cases" / "fakelib-1-bug" / "case.yaml").read_text())
    spec["variants"]["bug"]["args"] = [str(tmp_path / "count")]
    (root / "cases" / "fakelib-1-bug" / "case.yaml").write_text(yaml.safe_dump(spec))
    (root / "cases" / "fakelib-1-bug" / "repro.py").write_text(ALTERNATING)
    code, out, err = bisect(root, capsys, "--repeat", "auto", "--max-launches", "40")
    assert code == 0, (out, err)
    [level] = out["levels"]
    assert (level["last_old"], level["first_new"], level["verdict"]) == ("1.0.0", "1.1.0", "regressed")
    assert level["confidence"] >= 0.95 and level["reused"] == 0
    assert max(t["reproduced"] + t["fixed"] + t["other"] for t in level["tallies"].values()) <= 40  # the cap
    assert "regressed in 1.1.0 (1.0.0: 0/" in out["summary"] and "confidence 0.9" in out["summary"]
    assert "at most 40 a version; an answer needs confidence 0.95 (--max-launches)" in err, err  # the cap, said
    launched = int((tmp_path / "count").read_text())
    assert launched == level["launches"]
    store = ResultStore(root / "r.db")
    pools = {r.pool for _, _, r in store.results(out["run_id"])}
    assert len(pools) == 3 and "" not in pools  # one result a version, each with its repeat-free pool
    # A second run reads the store's pooled tallies: it launches nothing more and says what it reused.
    code, again, err = bisect(root, capsys, "--repeat", "auto", "--max-launches", "40")
    assert code == 0 and int((tmp_path / "count").read_text()) == launched, (again, err)
    [level2] = again["levels"]
    assert level2["reused"] == level["launches"] == level2["launches"]
    assert f"{launched} launches, {launched} reused from earlier runs" in again["summary"]


def test_max_launches_without_repeat_auto_is_refused(tmp_path: Path, capsys) -> None:
    root = project(tmp_path, [False, True])
    code, _, err = bisect(root, capsys, "--max-launches", "40")
    assert code == 2 and "--max-launches 40: only with --repeat auto" in err, err
