"""`bugmatrix compat` on fake packages: each verdict from a real walk through the pipeline, `--check`, kept apart."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from harness.analysis.compat import (
    Grid,
    Kind,
    Probe,
    cell_name,
    cell_pins,
    check,
    generated_rows,
    load_probes,
    measured,
    upgrade,
    verdict,
)
from harness.cli import main
from harness.matrix.cellenvs import CellEnvironments
from harness.matrix.envcache import EnvCache
from harness.matrix.expand import load_matrix
from harness.model.cell import COMPAT_CELLS
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.session.store import ResultStore, recording
from harness.workflows.bisect import probe_cell as bisect_cell
from harness.workflows.compat import walk
from harness.workflows.probing import Probing

from .fakeindex import FakeRelease, build_index, fake_torch

# fbgemm_gpu 1.0: works; 1.1: imports, then aborts in its "kernel" (SIGABRT, as a C++ abort would);
# 1.2: fails to import (an undefined symbol); 1.3: requires torch<2.5 (the resolver refuses it with torch 2.5).
KERNELS = {
    "1.0": "def kernel():\n    return 6\n",
    "1.1": "import os\n\ndef kernel():\n    os.abort()\n",
    "1.2": "raise OSError('fbgemm_gpu_py.so: undefined symbol: _ZN5torch3jit17parseSchemaE')\n",
    "1.3": "def kernel():\n    return 6\n",
}
PROBE = """
import sys
try:
    import fbgemm_gpu
except Exception as exc:
    print(f"COMPAT-PROBE-FAILED import: {type(exc).__name__}: {exc}", flush=True)
    sys.exit(1)
print("COMPAT-PROBE stage: use", flush=True)
try:
    assert fbgemm_gpu.kernel() == 6
except Exception as exc:
    print(f"COMPAT-PROBE-FAILED use: {type(exc).__name__}: {exc}", flush=True)
    sys.exit(1)
print("COMPAT-PROBE works", flush=True)
"""


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("compat")
    releases = [fake_torch("2.4.0", "2024-01-01T00:00:00Z"), fake_torch("2.5.0", "2024-01-02T00:00:00Z")]
    for i, (version, module) in enumerate(KERNELS.items()):
        releases.append(
            FakeRelease(
                "fbgemm-gpu-cpu",
                version,
                f"2024-02-{i + 1:02d}T00:00:00Z",
                module=module,
                package="fbgemm_gpu",
                requires=["torch<2.5"] if version == "1.3" else [],
            )
        )
    index = build_index(root / "index", releases)
    (root / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local"},
                "imports": {"fbgemm-gpu": "fbgemm_gpu"},
                # 1.0 + torch 2.5 is right; 1.1 + torch 2.5 is wrong (1.1 aborts);
                # 2.4 + 1.0 and 2.4 + 1.3 work but no row says so
                "couplings": [
                    {
                        "name": "fbgemm-torch",
                        "lead": "fbgemm-gpu",
                        "rows": [
                            {"fbgemm-gpu": "==1.0.*", "torch": "==2.5.*"},
                            {"fbgemm-gpu": "==1.1.*", "torch": "==2.5.*"},
                        ],
                    }
                ],
                "cells": [{"name": "old", "pins": {"torch": "2.4.0"}}, {"name": "new", "pins": {"torch": "2.5.0"}}],
            }
        )
    )
    probe = root / "probes" / "compat-fbgemm"
    probe.mkdir(parents=True)
    (probe / "probe.py").write_text(textwrap.dedent(PROBE))
    (probe / "case.yaml").write_text(
        yaml.safe_dump(
            {
                "title": "fake probe",
                "upstream": ["https://example.invalid/1"],
                "packages": ["torch", "fbgemm-gpu"],
                "script": "probe.py",
                "timeout": 60,
                "signature": "COMPAT-PROBE-FAILED",
                "variants": {"probe": {"expect": [{"outcome": "fixed"}]}},
            }
        )
    )
    return root


@pytest.fixture(scope="module")
def walked(project: Path) -> ResultStore:
    matrix = load_matrix(project / "matrix.yaml")
    store = ResultStore(project / "r.db")
    grid = Grid(["2.4.0", "2.5.0"], {"fbgemm": list(KERNELS)})
    with recording(store, "test", "here") as run_id:
        walk(
            grid,
            load_probes(project / "probes"),
            Probing(matrix, CellEnvironments(matrix, EnvCache(project / "envs")), store, run_id, cores=2),
        )
    return store


def test_each_verdict_from_a_real_walk(walked: ResultStore) -> None:
    table = {(p.torch, p.partner): p for p in measured(walked)}
    assert len(table) == 8
    assert {v for (t, v), p in table.items() if p.kind is Kind.WORKS} == {"1.0", "1.3"}
    aborted = table[("2.5.0", "1.1")]  # imports, then aborts when called: never "works"
    assert aborted.kind is Kind.FAILS_USED and "died after importing" in aborted.reason
    assert table[("2.4.0", "1.1")].kind is Kind.FAILS_USED
    broken = table[("2.5.0", "1.2")]
    assert broken.kind is Kind.NO_IMPORT and "undefined symbol: _ZN5torch3jit17parseSchemaE" in broken.reason
    refused = table[("2.5.0", "1.3")]
    assert refused.kind is Kind.REFUSED and "torch" in refused.reason and "1.3" in refused.reason
    assert table[("2.4.0", "1.3")].kind is Kind.WORKS


def test_the_torchrec_lane_alone_pairs_with_what_the_fbgemm_lane_recorded(walked: ResultStore) -> None:
    # `compat --lane torchrec` walks no fbgemm probe: each torch's torchrec probes pair with the fbgemm releases the
    # store recorded working with that torch (before, none: the lane alone probed nothing)
    from harness.workflows.compat import recorded_works

    latest = walked.latest(kinds=COMPAT_CELLS)
    assert recorded_works(latest, "2.4.0") == {"1.0", "1.3"}
    assert recorded_works(latest, "2.5.0") == {"1.0"}
    assert recorded_works(latest, "2.6.0") == set()


def test_check_catches_a_wrong_row_and_a_missing_one(
    project: Path, walked: ResultStore, capsys: pytest.CaptureFixture[str]
) -> None:
    matrix = load_matrix(project / "matrix.yaml")
    findings = check(measured(walked), matrix)
    contradicted = [f.text for f in findings if f.kind == "contradicted"]
    assert len(contradicted) == 1 and "fbgemm-gpu: ==1.1.*" in contradicted[0] and "fails when used" in contradicted[0]
    missing = sorted(f.text for f in findings if f.kind == "missing")
    assert len(missing) == 2 and "torch 2.4.0 + fbgemm-gpu 1.0" in missing[0] and "fbgemm-gpu 1.3" in missing[1]
    assert (
        main(
            [
                "compat",
                "--check",
                "--matrix",
                str(project / "matrix.yaml"),
                "--db",
                str(walked.path),
                "--probes-dir",
                str(project / "probes"),
            ]
        )
        == 1
    )
    assert "contradicted" in capsys.readouterr().out

    # the rows the measurement supports: the wrong one dropped, the working ones added; they pass --check
    rows = generated_rows(measured(walked), matrix)["fbgemm-torch"]
    assert rows == [
        {"fbgemm-gpu": "==1.0.*", "torch": "==2.5.*"},
        {"fbgemm-gpu": "==1.0.*", "torch": "==2.4.*"},
        {"fbgemm-gpu": "==1.3.*", "torch": "==2.4.*"},
    ]
    spec = yaml.safe_load((project / "matrix.yaml").read_text())
    spec["couplings"][0]["rows"] = rows
    fixed = project / "fixed.yaml"
    fixed.write_text(yaml.safe_dump(spec))
    assert check(measured(walked), load_matrix(fixed)) == []
    assert (
        main(
            [
                "compat",
                "--check",
                "--matrix",
                str(fixed),
                "--db",
                str(walked.path),
                "--json",
                "--probes-dir",
                str(project / "probes"),
            ]
        )
        == 0
    )
    assert json.loads(capsys.readouterr().out)["findings"] == []


def test_compat_results_are_kept_apart(project: Path, walked: ResultStore, capsys: pytest.CaptureFixture[str]) -> None:
    assert walked.latest() == [] and walked.results() == [] and walked.runs(with_results=True) == []
    assert len(walked.latest(kinds=COMPAT_CELLS)) == 8 and len(walked.runs(with_results=True, kinds=COMPAT_CELLS)) == 1
    assert main(["report", "--db", str(walked.path)]) == 5  # no case results: report says so (nothing measured)
    assert main(["compare", "--db", str(walked.path)]) == 2  # no two runs with case results
    capsys.readouterr()
    for fmt in ("markdown", "html", "json"):
        assert (
            main(
                [
                    "compat",
                    "--no-probe",
                    "--db",
                    str(walked.path),
                    "--matrix",
                    str(project / "matrix.yaml"),
                    "--format",
                    fmt,
                    "--probes-dir",
                    str(project / "probes"),
                ]
            )
            == 0
        )
        out = capsys.readouterr().out
        assert "1.3" in out and ("undefined symbol" in out)


def test_cli_walk_resumes(project: Path, walked: ResultStore, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "compat",
        "--lane",
        "fbgemm",
        "--torch",
        ">=2.4",
        "--fbgemm",
        ">=1.0",
        "--matrix",
        str(project / "matrix.yaml"),
        "--db",
        str(walked.path),
        "--envs",
        str(project / "envs"),
        "--probes-dir",
        str(project / "probes"),
        "-j",
        "2",
        "--format",
        "json",
    ]
    before = len(walked.results(kinds=COMPAT_CELLS))
    assert main(argv) == 0
    # every verdict, the refusal and the import failure included, is reused: nothing new is recorded
    assert len(walked.results(kinds=COMPAT_CELLS)) == before
    assert len(json.loads(capsys.readouterr().out)["probes"]) == 8


def test_verdicts_never_call_an_unestablished_probe_works() -> None:
    def result(outcome: Outcome, reason: str = "", log: str = "") -> Result:
        return Result(
            case="compat-fbgemm",
            variant="probe",
            nproc=1,
            device="cpu",
            outcome=outcome,
            expected=None,
            reason=reason,
            log_excerpt=log,
        )

    assert verdict(result(Outcome.INFRA, "environment: uv failed: download timed out"))[0] is Kind.UNKNOWN
    assert verdict(result(Outcome.FLAKY, "fixed 1/2, error 1/2"))[0] is Kind.UNKNOWN
    assert verdict(result(Outcome.TIMEOUT, "ran past 60s"))[0] is Kind.CRASH
    assert verdict(result(Outcome.ERROR, "died without a verdict (exit -11)"))[0] is Kind.CRASH
    assert verdict(result(Outcome.ERROR, "died", "COMPAT-PROBE stage: use\n"))[0] is Kind.FAILS_USED


def test_cell_names_round_trip_and_upgrade_view() -> None:
    pins = {"torch": "2.10.0", "fbgemm-gpu": "1.5.0", "torchrec": "1.5.1"}
    assert cell_name(pins) == "compat-torch-2.10.0-fbgemm-gpu-1.5.0-torchrec-1.5.1"
    assert cell_pins(cell_name(pins)) == pins
    table = [
        Probe("fbgemm", {"torch": "2.5.1", "fbgemm-gpu": "1.0.0"}, Kind.WORKS, "", "a"),
        Probe("fbgemm", {"torch": "2.6.0", "fbgemm-gpu": "1.0.0"}, Kind.NO_IMPORT, "undefined symbol", "b"),
    ]

    def case_result(outcome: Outcome, torch: str) -> Result:
        return Result(
            case="torchrec-1-x",
            variant="bug",
            nproc=1,
            device="cpu",
            outcome=outcome,
            expected=None,
            reason="",
            versions={"torch": torch, "fbgemm-gpu": "1.0.0"},
        )

    up = upgrade(
        table,
        {"torch": "2.5", "fbgemm-gpu": "1.0"},
        {"torch": "2.6.0", "fbgemm-gpu": "1.0.0"},
        [("c1", case_result(Outcome.REPRODUCED, "2.5.1")), ("c2", case_result(Outcome.FIXED, "2.6.0"))],
    )
    [(lane, a, b, _, _)] = up.pairings
    assert lane == "fbgemm" and a is not None and a.kind is Kind.WORKS and b is not None
    assert b.kind is Kind.NO_IMPORT
    assert [(c.item, c.before, c.after) for c in up.changes] == [("torchrec-1-x::bug[cpu-1]", "reproduced", "fixed")]


def test_expansion_and_bisect_pick_the_same_row(tmp_path: Path) -> None:
    """Two rows allow torchrec 1.0 (measured with torch 2.5 and 2.4): the first is the preferred one, for a cell
    pinning torchrec and for a bisect probe moving fbgemm alike."""
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "couplings": [
                    {
                        "name": "p",
                        "lead": "torchrec",
                        "rows": [
                            {"torchrec": "==1.0.*", "fbgemm-gpu": "==1.0.*", "torch": "==2.5.*"},
                            {"torchrec": "==1.0.*", "fbgemm-gpu": "==1.0.*", "torch": "==2.4.*"},
                        ],
                    }
                ],
                "cells": [
                    {"name": "c", "pins": {"torchrec": "1.0.0"}},
                    {"name": "old-torch", "pins": {"torchrec": "1.0.0", "torch": "2.4.1"}},
                ],
            }
        )
    )
    matrix = load_matrix(tmp_path / "matrix.yaml")
    assert matrix.cell("c").pins["torch"] == "==2.5.*"
    assert matrix.cell("old-torch").pins["torch"] == "2.4.1"  # the second row allows it: no longer rejected

    class FakeCase:
        class spec:  # noqa: N801
            packages = ["torch", "torchrec", "fbgemm-gpu"]

    probe = bisect_cell(matrix, FakeCase, "fbgemm-gpu", "1.0.0", "cpu")  # type: ignore[arg-type]
    assert probe.pins["torch"] == "==2.5.*" and probe.pins["torchrec"] == "==1.0.*"

    class FbgemmCase:  # an operator case: torch and fbgemm, no torchrec (fbgemm-gpu-cpu does not require torch)
        class spec:  # noqa: N801
            packages = ["torch", "fbgemm-gpu"]

    probe = bisect_cell(matrix, FbgemmCase, "fbgemm-gpu", "1.0.0", "cpu")  # type: ignore[arg-type]
    assert probe.pins["torch"] == "==2.5.*" and "torchrec" not in probe.pins


def test_resume_from_copies_only_the_compat_results(
    tmp_path: Path, project: Path, walked: ResultStore, capsys: pytest.CaptureFixture[str]
) -> None:
    mixed = ResultStore(tmp_path / "mixed.db")
    mixed.merge([walked.path])
    with recording(mixed, "run", "here") as run_id:
        mixed.save(
            run_id,
            Result(
                case="torch-1-x", variant="bug", nproc=1, device="cpu", outcome=Outcome.FIXED, expected=None, reason=""
            ),
            cell="torch-2.5.0",
        )
    assert (
        main(
            [
                "compat",
                "--no-probe",
                "--resume-from",
                str(mixed.path),
                "--db",
                str(tmp_path / "new.db"),
                "--format",
                "json",
                "--probes-dir",
                str(project / "probes"),
            ]
        )
        == 0
    )
    fresh = ResultStore(tmp_path / "new.db")
    assert len(fresh.results(kinds=COMPAT_CELLS)) == 8 and fresh.results() == []
    assert len(json.loads(capsys.readouterr().out)["probes"]) == 8


def test_the_torchrec_lane_probes_every_torchrec_release_of_each_fbgemm_minor(tmp_path: Path) -> None:
    # torchrec patch releases can differ in what they ship (torchrec 1.6.0 has wheels for Python 3.13 only, 1.6.1
    # for every Python): the lane probes each, not only the newest of the minor
    from harness.analysis.compat import Grid

    releases = [fake_torch("2.5.0", "2024-01-01T00:00:00Z")]
    for i, (dist, version) in enumerate(
        [
            ("fbgemm-gpu-cpu", "1.0.0"),
            ("fbgemm-gpu-cpu", "1.1.0"),
            ("torchrec", "1.0.0"),
            ("torchrec", "1.0.1"),
            ("torchrec", "1.1.0"),
        ]
    ):
        releases.append(FakeRelease(dist, version, f"2024-02-{i + 1:02d}T00:00:00Z", module=""))
    index = build_index(tmp_path / "index", releases)
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local"},
                "cells": [{"name": "c", "pins": {"torch": "2.5.0"}}],
            }
        )
    )
    grid = Grid.from_index(load_matrix(tmp_path / "matrix.yaml"), {"torch": ">=2.5", "fbgemm": ">=1.0"}, ["torchrec"])
    assert grid.partners["fbgemm"] == ["1.0.0", "1.1.0"]
    assert grid.torchrec_of == {"1.0.0": ["1.0.0", "1.0.1"], "1.1.0": ["1.1.0"]}


def test_a_torch_whose_probes_were_all_reused_evicts_nothing(
    project: Path, walked: ResultStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a resumed walk over a full disk budget: nothing was built, so nothing is evicted and uv's cache is not
    # cleaned (before, every reused torch cleaned it, under another run about to link from it)
    import harness.matrix.cellenvs as cellenvs

    def refuse() -> str:
        raise AssertionError("cleaned uv's cache with nothing built")

    monkeypatch.setattr(cellenvs, "clean_cache", refuse)
    matrix = load_matrix(project / "matrix.yaml")
    said: list[str] = []
    grid = Grid(["2.4.0", "2.5.0"], {"fbgemm": list(KERNELS)})
    with recording(walked, "test", "here") as run_id:
        done = walk(
            grid,
            load_probes(project / "probes"),
            Probing(
                matrix, CellEnvironments(matrix, EnvCache(project / "envs")), walked, run_id, cores=2, say=said.append
            ),
            disk_budget=0,
        )
    assert len(done) == 8 and not any("evicted" in line for line in said), said


def test_a_release_without_wheels_for_this_python_contradicts_no_row(tmp_path: Path) -> None:
    # torchrec 1.6.0 shipped a py313 wheel only: on Python 3.11 the resolver refuses it whatever torch is; the row
    # pairing torchrec 1.6 with fbgemm 1.6 and torch 2.11 is right (1.6.1 works), so --check finds nothing
    from harness.analysis.compat import Probe

    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "couplings": [
                    {
                        "name": "torchrec-fbgemm-torch",
                        "lead": "torchrec",
                        "rows": [{"torchrec": "==1.6.*", "fbgemm-gpu": "==1.6.*", "torch": "==2.11.*"}],
                    }
                ],
                "cells": [{"name": "c", "pins": {"torch": "2.11.0"}}],
            }
        )
    )
    matrix = load_matrix(tmp_path / "matrix.yaml")
    pins = {"torch": "2.11.0", "fbgemm-gpu": "1.6.0"}
    refused = (
        "exit 1: error: No solution found when resolving dependencies | cause: Because torchrec==1.6.0 has no "
        "wheels with a matching Python implementation tag (e.g., `cp311`) ..."
    )
    table = [
        Probe("fbgemm", pins, Kind.WORKS, "ok", "f"),
        Probe("torchrec", {**pins, "torchrec": "1.6.0"}, Kind.REFUSED, refused, "a"),
        Probe("torchrec", {**pins, "torchrec": "1.6.1"}, Kind.WORKS, "ok", "b"),
    ]
    assert check(table, matrix) == []
    table[2] = Probe("torchrec", {**pins, "torchrec": "1.6.1"}, Kind.NO_IMPORT, "undefined symbol", "b")
    assert [f.kind for f in check(table, matrix)] == ["contradicted"]  # a real failure of the pairing still is
