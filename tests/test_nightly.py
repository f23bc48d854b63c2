"""The nightly workflow's steps (`bugmatrix nightly plan|cell|baseline|aggregate|issues`) as ordinary code.

Unit tests of each decision in harness/workflows/nightly.py, then three nights end to end through the CLI, as
.github/workflows/nightly.yml calls it (each step with its own $GITHUB_OUTPUT and $GITHUB_STEP_SUMMARY):

  night 1  fakelib-lts on 1.2 (reproduces, as expected), fakelib-latest on 1.4 (fixed, as expected), a CUDA cell
           left out (no GPU runner); no earlier nightly: nothing to compare (a notice), green
  night 2  fakelib-latest on 1.5, where the bug is back although the case expects it fixed: that cell exits 1,
           and the aggregate compares with night 1 and fails on the unexpected regression; the issues step opens
           one issue for it
  night 3  fakelib-lts on 1.4 (a fix), fakelib-latest back on 1.4: compared with night 1 (night 2 failed, so it
           is no baseline): a fix is no failure, green

GitHub's own parts are stand-ins: the artifacts are folders, `gh` is `FakeGitHub` (it knows the nights so far),
and `bugmatrix run` in a cell is `fake_run`, which records what the night's world says (real runs of cases in
cells are tested in tests/test_matrix_run.py).
"""

from __future__ import annotations

import datetime
import io
import json
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

import harness.commands.run
import harness.workflows.nightly as nightly
from harness.analysis.compare import compare, comparison
from harness.cli import main
from harness.commands.run import RunOptions
from harness.matrix.expand import load_matrix
from harness.model.errors import StepError
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.session.store import ResultStore
from harness.workflows.nightly import Actions

CASE = "fakelib-1-bug"
GPU = ["self-hosted", "linux", "x64", "gpu"]
R, F = Outcome.REPRODUCED, Outcome.FIXED
# the CPU cells sorted by name are fakelib-latest, fakelib-lts: an even day's ordinal runs the first cold, an odd one
# the second
LATEST_COLD, LTS_COLD = datetime.date(2026, 11, 28), datetime.date(2026, 11, 29)


def result(
    outcome: Outcome, expected: Outcome | None, fakelib: str = "1.2", case: str = CASE, started_at: float = 100.0
) -> Result:
    return Result(
        case=case,
        variant="bug",
        nproc=1,
        device="cpu",
        outcome=outcome,
        expected=expected,
        reason="fake",
        versions={"torch": "2.5.0", "fakelib": fakelib},
        python="3.11.7",
        started_at=started_at,
    )


def store(path: Path, *cells: tuple[str, Result]) -> Path:
    """A results store holding one run with these (cell, result)s."""
    db = ResultStore(path)
    run = db.begin_run("bugmatrix run", "host")
    for cell, r in cells:
        db.save(run, r, cell=cell)
    db.end_run(run)
    return path


def matrix_doc(lts: str = "1.2", latest: str = "1.4") -> dict[str, Any]:
    """Two CPU cells (fakelib `lts`, fakelib `latest`) and a CUDA cell."""
    return {
        "runners": {"cpu": "ubuntu-latest", "cuda": GPU},
        "cells": [
            {"name": "fakelib-lts", "pins": {"torch": "2.5.0", "fakelib": lts}},
            {"name": "fakelib-latest", "pins": {"torch": "2.5.0", "fakelib": latest}},
            {"name": "fakelib-latest-cuda", "device": "cuda", "pins": {"torch": "2.5.0", "fakelib": latest}},
        ],
    }


def write_matrix(folder: Path, doc: dict[str, Any] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "matrix.yaml"
    path.write_text(yaml.safe_dump(doc or matrix_doc(), sort_keys=False))
    return path


@dataclass
class Step:
    """What GitHub keeps of one step: its outputs, what it added to the summary, what it printed."""

    folder: Path
    out: io.StringIO = field(default_factory=io.StringIO)

    @property
    def actions(self) -> Actions:
        return Actions(self.folder / "output", self.folder / "summary.md", self.out)

    @property
    def outputs(self) -> dict[str, str]:
        path = self.folder / "output"
        return dict(line.split("=", 1) for line in path.read_text().splitlines()) if path.is_file() else {}

    @property
    def summary(self) -> str:
        path = self.folder / "summary.md"
        return path.read_text() if path.is_file() else ""

    @property
    def log(self) -> str:
        return self.out.getvalue()


@pytest.fixture
def step(tmp_path: Path) -> Step:
    folder = tmp_path / "step"
    folder.mkdir()
    return Step(folder)


# --- GitHub's side ---------------------------------------------------------------------------------------------


def test_annotations_are_escaped_like_githubs_toolkit() -> None:
    assert nightly.annotation("notice", "No baseline", "nothing") == "::notice title=No baseline::nothing"
    assert nightly.annotation("error", "a: b, c", "50%\nnext") == "::error title=a%3A b%2C c::50%25%0Anext"
    with pytest.raises(ValueError):
        nightly.annotation("debug", "t", "m")


def test_outputs_and_summary_go_to_githubs_files_when_set(tmp_path: Path) -> None:
    out = io.StringIO()
    actions = Actions.from_env({"GITHUB_OUTPUT": str(tmp_path / "o"), "GITHUB_STEP_SUMMARY": str(tmp_path / "s")}, out)
    actions.set_output("found", "true")
    actions.set_output("text", "two\nlines")
    actions.summary("## a")
    actions.summary("b\n")
    lines = (tmp_path / "o").read_text().splitlines()
    assert lines[0] == "found=true"
    assert lines[1].startswith("text<<ghadelimiter_") and lines[2:] == ["two", "lines", lines[1].split("<<")[1]]
    assert (tmp_path / "s").read_text() == "## a\nb\n"
    # outside a workflow: nothing is written anywhere, annotations are still printed
    local = Actions.from_env({}, out)
    local.set_output("x", "1")
    local.summary("y")
    local.annotate("notice", "t", "m")
    assert out.getvalue() == "::notice title=t::m\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o", "s"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("true", True),
        ("True", True),
        (" TRUE ", True),
        ("", False),
        (None, False),
        ("false", False),
        ("1", False),
        ("yes", False),
    ],
)
def test_truthy_compares_like_a_github_expression(value: str | None, expected: bool) -> None:
    assert nightly.truthy(value) is expected


# --- plan ------------------------------------------------------------------------------------------------------


def test_plan_leaves_the_cuda_cells_out_without_gpu_runners(tmp_path: Path, step: Step) -> None:
    matrix = load_matrix(write_matrix(tmp_path))
    assert nightly.run_plan(matrix, "", "", False, step.actions, LATEST_COLD) == 0
    latest = {"cell": "fakelib-latest", "device": "cpu", "runs-on": "ubuntu-latest", "slug": "fakelib-latest"}
    include = [
        {"cell": "fakelib-lts", "device": "cpu", "runs-on": "ubuntu-latest", "slug": "fakelib-lts", "launch": ""},
        latest | {"launch": ""},
        latest | {"slug": "fakelib-latest--cold", "launch": "cold"},  # tonight's turn to run cold as well
    ]
    assert json.loads(step.outputs["matrix"]) == {"include": include}
    assert step.log.splitlines() == [
        "::notice title=CUDA cells skipped::fakelib-latest-cuda (set the repository variable BUGMATRIX_CUDA_RUNNERS "
        "to true once a GPU runner is registered)",
        step.outputs["matrix"],
    ]
    assert step.summary.splitlines() == [
        "## Planned cells",
        "",
        "| cell | device | launch | runs on | cases |",
        "|---|---|---|---|---|",
        "| fakelib-lts | cpu | default | ubuntu-latest | all |",
        "| fakelib-latest | cpu | default | ubuntu-latest | all |",
        "| fakelib-latest | cpu | cold | ubuntu-latest | all |",
        "",
        "Runs cold tonight (one CPU cell a night, in turn): **fakelib-latest**. The aggregate step compares its "
        "cold results with its default ones and fails the night on any difference.",
    ]


def test_plan_keeps_the_cuda_cells_with_gpu_runners(tmp_path: Path, step: Step) -> None:
    matrix = load_matrix(write_matrix(tmp_path))
    assert nightly.run_plan(matrix, "*-cuda", "lightning,torchrec", True, step.actions) == 0
    [entry] = json.loads(step.outputs["matrix"])["include"]  # no CPU cell: none runs cold
    assert entry == {
        "cell": "fakelib-latest-cuda",
        "device": "cuda",
        "runs-on": GPU,
        "slug": "fakelib-latest-cuda",
        "launch": "",
        "cases": "lightning torchrec",
    }
    assert "::notice" not in step.log
    assert "| fakelib-latest-cuda | cuda | default | self-hosted, linux, x64, gpu | lightning torchrec |" in (
        step.summary
    )
    assert "none runs cold tonight" in step.summary


def test_a_plan_with_only_cuda_cells_and_no_gpu_runner_is_an_error(tmp_path: Path, step: Step) -> None:
    matrix = load_matrix(write_matrix(tmp_path))
    assert nightly.plan_jobs(matrix, "*-cuda", None, False) == nightly.Plan([], ["fakelib-latest-cuda"])
    assert nightly.run_plan(matrix, "*-cuda", "", False, step.actions) == 1
    assert "::error title=Nothing to run::no cell to run (cells: '*-cuda')" in step.log
    assert step.outputs == {} and step.summary == ""


@pytest.mark.parametrize(
    ("cells", "cases", "message"),
    [
        ("torchrec-9.*", "", "no cell named 'torchrec-9.*'"),
        ("", "--all-cells", "is not a case-id substring"),
    ],
)
def test_an_invalid_selection_fails_the_plan_with_the_reason(
    tmp_path: Path, step: Step, cells: str, cases: str, message: str
) -> None:
    matrix = load_matrix(write_matrix(tmp_path))
    with pytest.raises(StepError) as refused:
        nightly.run_plan(matrix, cells, cases, False, step.actions)
    assert refused.value.title == "Cannot plan the cells" and message in str(refused.value)
    assert refused.value.exit_code == 2 and step.outputs == {}


def test_bugmatrix_nightly_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output"))
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    path = write_matrix(tmp_path)
    assert main(["nightly", "plan", "--matrix", str(path), "--cells", "fakelib-l*", "--cuda-runners", "true"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == (tmp_path / "output").read_text().strip().removeprefix("matrix=")
    assert len(json.loads(out.splitlines()[-1])["include"]) == 4  # 3 cells, one CPU cell twice (cold)
    (tmp_path / "broken.yaml").write_text("cells: [")
    assert main(["nightly", "plan", "--matrix", str(tmp_path / "broken.yaml")]) == 2
    said = capsys.readouterr()
    assert "::error title=Invalid matrix::" in said.out
    assert said.err.startswith("bugmatrix nightly: ") and said.err.count("\n") == 1, said.err
    assert main(["nightly", "plan", "--matrix", str(path), "--cells", "torchrec-9.*"]) == 2
    assert "::error title=Cannot plan the cells::" in capsys.readouterr().out


def test_one_cpu_cell_a_night_runs_cold_as_well_in_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nightly plan --date` (issue 36; 93b7231 had no cold entry and no --date): the CPU cells in turn by the
    day's ordinal, sorted by name, each night one of them planned a second time, cold, with its own slug; every
    other entry runs in the default mode (`launch: ""`); the summary names tonight's cold cell; a CUDA cell never
    runs cold; a bad date is one line, exit 2."""
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    path = write_matrix(tmp_path)

    def plan(day: datetime.date) -> list[dict[str, Any]]:
        argv = ["nightly", "plan", "--matrix", str(path), "--cuda-runners", "true", "--date", day.isoformat()]
        assert main(argv) == 0
        return list(json.loads(capsys.readouterr().out.splitlines()[-1])["include"])

    cold = {}
    for day in (LATEST_COLD, LTS_COLD, LTS_COLD + datetime.timedelta(days=1)):
        include = plan(day)
        [entry] = [e for e in include if e["launch"] == "cold"]
        assert [e["launch"] for e in include].count("") == 3  # the three cells, each in the default mode
        own = next(e for e in include if e["cell"] == entry["cell"] and e["launch"] == "")
        assert entry == own | {"slug": own["slug"] + "--cold", "launch": "cold"}
        assert include.index(entry) == include.index(own) + 1 and entry["device"] == "cpu"
        cold[day] = entry["cell"]
    assert list(cold.values()) == ["fakelib-latest", "fakelib-lts", "fakelib-latest"]
    assert f"Runs cold tonight (one CPU cell a night, in turn): **{cold[LTS_COLD]}**." in (
        (tmp_path / "summary.md").read_text()
    )
    assert main(["nightly", "plan", "--matrix", str(path), "--date", "2026-13-01"]) == 2
    said = capsys.readouterr()
    assert said.err.strip().endswith("--date '2026-13-01': not a date (YYYY-MM-DD)") and said.err.count("\n") == 1


# --- cell ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("rc", [0, 1, 2])
def test_a_cell_keeps_its_exit_code_and_shows_red_unless_0(tmp_path: Path, step: Step, rc: int) -> None:
    calls = []

    def runner(cell: str, db: Path, cases: list[str], matrix: Path | None) -> int:
        calls.append((cell, db, cases, matrix))
        return rc

    results = tmp_path / "results"
    assert nightly.run_cell("rec==1.0.*", "rec__1.0._", "x", results, runner, step.actions) == rc
    assert calls == [("rec==1.0.*", results / "rec__1.0._.db", ["x"], None)]
    assert (results / "rec__1.0._.exit-code").read_text() == f"{rc}\n"
    assert step.outputs == {"exit-code": str(rc)}
    assert step.summary == f"**rec==1.0.***: `bugmatrix run` exited {rc} (0: every outcome as expected)\n"
    if rc:
        assert step.log.startswith(f"::error title=rec==1.0.*::bugmatrix run exited {rc} (1: an outcome differs")
    else:
        assert step.log == ""


def test_a_crashing_run_is_the_cells_failure_not_the_jobs(tmp_path: Path, step: Step) -> None:
    def runner(cell: str, db: Path, cases: list[str], matrix: Path | None) -> int:
        raise RuntimeError("boom")

    assert nightly.run_cell("c", "c", None, tmp_path, runner, step.actions) == 1
    assert (tmp_path / "c.exit-code").read_text() == "1\n"


def test_bugmatrix_nightly_cell_runs_bugmatrix_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RunOptions] = []

    def fake_execute(options: RunOptions) -> int:
        seen.append(options)
        return 1

    monkeypatch.setattr(harness.commands.run, "execute", fake_execute)
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    rc = main(
        [
            "--cases-dir",
            str(tmp_path / "cases"),
            "nightly",
            "cell",
            "--cell",
            "fakelib-lts",
            "--cases",
            "fakelib, other",
            "--results",
            str(tmp_path / "results"),
            "--matrix",
            str(tmp_path / "m.yaml"),
        ]
    )
    assert rc == 1
    [args] = seen
    assert (args.cell, args.cases, args.redo) == (["fakelib-lts"], ["fakelib", "other"], True)
    assert (args.db, args.matrix, args.cases_dir) == (
        tmp_path / "results" / "fakelib-lts.db",
        tmp_path / "m.yaml",
        tmp_path / "cases",
    )
    assert (tmp_path / "results" / "fakelib-lts.exit-code").read_text() == "1\n"


@pytest.mark.parametrize(("launch", "mode"), [("cold", "cold"), ("warm", "warm"), ("", None)])
def test_bugmatrix_nightly_cell_launches_as_the_plan_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, launch: str, mode: str | None
) -> None:
    """`nightly cell --launch` (issue 36; 93b7231 had no such option): cold or warm reaches the run as
    `RunOptions.launch_mode`; '' leaves it to the default mode (None); the cold run is named so in the summary."""
    seen: list[RunOptions] = []
    monkeypatch.setattr(harness.commands.run, "execute", lambda options: seen.append(options) or 0)
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    argv = ["nightly", "cell", "--cell", "fakelib-lts", "--slug", "fakelib-lts--cold", "--launch", launch]
    assert main([*argv, "--results", str(tmp_path / "results")]) == 0
    [options] = seen
    assert options.launch_mode == mode and options.db == tmp_path / "results" / "fakelib-lts--cold.db"
    name = f"fakelib-lts ({launch})" if launch else "fakelib-lts"
    assert (tmp_path / "summary.md").read_text().startswith(f"**{name}**: `bugmatrix run` exited 0")


# --- the stand-in for GitHub: runs, artifacts, issues ---------------------------------------------------------


@dataclass
class FakeGitHub:
    """Answers the `gh` calls the steps make, from the nights replayed so far (and refuses any other)."""

    runs: list[dict[str, Any]] = field(default_factory=list)  # id, event, conclusion, artifacts: name -> folder
    issues: list[dict[str, Any]] = field(default_factory=list)  # number, title, state, comments
    calls: list[list[str]] = field(default_factory=list)
    fail: str = ""  # a subcommand ("run download", "issue create") that fails
    pulls: FakePulls = field(default_factory=lambda: FakePulls(branch="bugmatrix/record"))

    def __call__(self, args: list[str]) -> str:
        self.calls.append(args)
        command = " ".join(args[:2])
        if command == self.fail:
            raise nightly.GhError(f"gh {command} exited 1: HTTP 500")
        if args[:2] == ["run", "list"]:
            assert args[2:] == [
                "--workflow",
                "nightly.yml",
                "--event",
                "schedule",
                "--status",
                "success",
                "--limit",
                "1",
                "--json",
                "databaseId,url",
            ], args
            found = [r for r in reversed(self.runs) if (r["event"], r["conclusion"]) == ("schedule", "success")]
            return json.dumps(
                [{"databaseId": r["id"], "url": f"https://github.com/o/r/actions/runs/{r['id']}"} for r in found[:1]]
            )
        if args[:2] == ["run", "download"]:
            run_id, name, folder = args[2], args[4], args[6]
            assert args[3::2] == ["--name", "--dir"], args
            run = next(r for r in self.runs if str(r["id"]) == run_id)
            if name not in run["artifacts"]:
                raise nightly.GhError(f"no artifact named {name}")
            shutil.copytree(run["artifacts"][name], folder, dirs_exist_ok=True)
            return ""
        if args[0] in ("pr", "auth", "workflow"):  # the record-pr step's pull request
            return self.pulls.gh(args)
        if args[:2] == ["issue", "list"]:
            assert args[2:] == [
                "--label",
                "bugmatrix-regression",
                "--state",
                "open",
                "--limit",
                "500",
                "--json",
                "number,title",
            ], args
            return json.dumps(
                [{"number": i["number"], "title": i["title"]} for i in reversed(self.issues) if i["state"] == "open"]
            )
        if args[:2] == ["label", "create"]:
            return ""
        if args[:2] == ["issue", "create"]:
            title, label, body = args[3], args[5], args[7]
            assert args[2::2] == ["--title", "--label", "--body"] and label == "bugmatrix-regression", args
            self.issues.append(
                {"number": len(self.issues) + 1, "title": title, "state": "open", "body": body, "comments": []}
            )
            return ""
        if args[:2] == ["issue", "comment"]:
            assert args[3] == "--body", args
            next(i for i in self.issues if i["number"] == int(args[2]))["comments"].append(args[4])
            return ""
        raise AssertionError(f"gh stand-in: not supported: {args}")


# --- baseline --------------------------------------------------------------------------------------------------


def results_folder(path: Path, *cells: tuple[str, Result]) -> Path:
    store(path / "nightly.db", *cells)
    return path


def test_the_baseline_is_the_newest_successful_scheduled_nightly(tmp_path: Path, step: Step) -> None:
    good_old = results_folder(tmp_path / "a1", ("c", result(F, F)))
    good_new = results_folder(tmp_path / "a2", ("c", result(R, F)))
    gh = FakeGitHub(
        runs=[
            {"id": 1, "event": "schedule", "conclusion": "success", "artifacts": {"bugmatrix-results": good_old}},
            {"id": 2, "event": "schedule", "conclusion": "success", "artifacts": {"bugmatrix-results": good_new}},
            {"id": 3, "event": "schedule", "conclusion": "failure", "artifacts": {"bugmatrix-results": good_old}},
            {"id": 4, "event": "workflow_dispatch", "conclusion": "success", "artifacts": {}},
        ]
    )
    dest = tmp_path / "previous"
    assert nightly.fetch_baseline(dest, gh, step.actions) == 0
    assert step.outputs == {"found": "true"}
    assert json.loads((dest / "baseline.json").read_text()) == {
        "run_id": "2",
        "url": "https://github.com/o/r/actions/runs/2",
    }
    assert nightly.load_baseline(dest) == (
        dest / "nightly.db",
        nightly.Baseline("2", "https://github.com/o/r/actions/runs/2"),
    )
    assert [r.outcome for _, r in ResultStore(dest / "nightly.db").latest()] == [R]
    assert gh.calls[1] == ["run", "download", "2", "--name", "bugmatrix-results", "--dir", str(dest)]


@pytest.mark.parametrize(
    ("runs", "fail", "why"),
    [
        ([], "", "no earlier successful scheduled nightly"),
        (
            [{"id": 7, "event": "schedule", "conclusion": "success", "artifacts": {}}],
            "",
            "nightly run 7 has no bugmatrix-results artifact",
        ),
        (
            [{"id": 7, "event": "schedule", "conclusion": "success", "artifacts": {"bugmatrix-results": "EMPTY"}}],
            "",
            "nightly run 7: its bugmatrix-results artifact holds no nightly.db",
        ),
        ([], "run list", "cannot list the earlier nightlies"),
    ],
)
def test_no_baseline_says_why_and_never_fails(
    tmp_path: Path, step: Step, runs: list[dict[str, Any]], fail: str, why: str
) -> None:
    (tmp_path / "EMPTY").mkdir()
    for run in runs:
        run["artifacts"] = {k: tmp_path / v for k, v in run["artifacts"].items()}
    gh = FakeGitHub(runs=runs, fail=fail)
    baseline, reason = nightly.find_baseline(gh, tmp_path / "previous", {})
    assert baseline is None and reason.startswith(why)
    assert nightly.fetch_baseline(tmp_path / "previous", gh, step.actions) == 0
    assert step.outputs == {"found": "false"} and step.log.startswith(f"no baseline: {why}")
    assert nightly.load_baseline(tmp_path / "previous") is None


def test_a_baseline_url_is_made_when_gh_gives_none() -> None:
    env = {"GITHUB_SERVER_URL": "https://ghe.example", "GITHUB_REPOSITORY": "o/r"}
    assert nightly.run_url("12", env) == "https://ghe.example/o/r/actions/runs/12"


def test_bugmatrix_nightly_baseline_uses_gh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gh = FakeGitHub()
    monkeypatch.setattr(nightly, "run_gh", gh)
    monkeypatch.setenv("GITHUB_OUTPUT", str(tmp_path / "output"))
    assert main(["nightly", "baseline", "--dir", str(tmp_path / "previous")]) == 0
    assert (tmp_path / "output").read_text() == "found=false\n"
    assert gh.calls[0][:2] == ["run", "list"]


# --- aggregate -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shards", "merged", "compared", "expected"),
    [
        ([], 0, None, nightly.Verdict(1)),
        ([Path("a.db")], 0, None, nightly.Verdict(1)),
        ([Path("a.db")], 3, None, nightly.Verdict(0, True)),
        ([Path("a.db")], 3, {"unexpected_regressions": 0}, nightly.Verdict(0, True, 0)),
        ([Path("a.db")], 3, {"unexpected_regressions": 2}, nightly.Verdict(1, True, 2)),
    ],
)
def test_the_verdict_fails_only_on_an_unexpected_regression_or_no_results(
    shards: list[Path], merged: int, compared: dict[str, Any] | None, expected: nightly.Verdict
) -> None:
    assert nightly.verdict(shards, merged, compared) == expected


def test_the_cells_table_names_the_cells_without_results(tmp_path: Path) -> None:
    (tmp_path / "a.exit-code").write_text("0\n")
    (tmp_path / "b.exit-code").write_text("1\n")
    include = [{"cell": "a", "slug": "a"}, {"cell": "b", "slug": "b"}, {"cell": "c*", "slug": "c_"}]
    assert nightly.cells_summary(include, tmp_path).splitlines() == [
        "## Cells",
        "",
        "| cell | `bugmatrix run` exit code |",
        "|---|---|",
        "| a | 0 |",
        "| b | 1 |",
        "| c* | no results (the job failed, timed out or was cancelled) |",
        "",
    ]


def test_no_shards_fails_the_night(tmp_path: Path, step: Step) -> None:
    decided = nightly.aggregate(
        tmp_path / "shards", tmp_path / "results", [{"cell": "a", "slug": "a"}], None, tmp_path, step.actions
    )
    assert decided == nightly.Verdict(1)
    assert "::error title=No results::no cell uploaded a results store" in step.log
    assert "| a | no results" in step.summary and step.outputs == {}


def test_empty_shards_fail_the_night(tmp_path: Path, step: Step) -> None:
    ResultStore(tmp_path / "shards" / "a.db")
    decided = nightly.aggregate(tmp_path / "shards", tmp_path / "results", [], None, tmp_path, step.actions)
    assert decided == nightly.Verdict(1) and "::error title=No results::the cells' stores hold no result" in step.log


COLD_PLAN = [
    {"cell": "fakelib-lts", "slug": "fakelib-lts", "launch": ""},
    {"cell": "fakelib-latest", "slug": "fakelib-latest", "launch": ""},
    {"cell": "fakelib-latest", "slug": "fakelib-latest--cold", "launch": "cold"},
]


def launched(r: Result, how: str) -> Result:
    return r.model_copy(update={"extra": {"launch": how}})


def cold_night(shards: Path, cold_latest: Result | None) -> None:
    """Tonight's shards: both cells warm (fakelib-latest also under another case), fakelib-latest cold as well
    (`cold_latest`; None: its shard is missing). The same cells' results, measured later, in the cold shard."""
    other = result(F, F, "1.4", case="other-case")
    store(shards / "fakelib-lts.db", ("fakelib-lts", launched(result(R, R), "warm")))
    store(
        shards / "fakelib-latest.db",
        ("fakelib-latest", launched(result(F, F, "1.4"), "warm")),
        ("fakelib-latest", launched(other, "warm")),
    )
    (shards / "fakelib-lts.exit-code").write_text("0\n")
    (shards / "fakelib-latest.exit-code").write_text("0\n")
    if cold_latest is not None:
        later = other.model_copy(update={"started_at": 500.0})
        store(
            shards / "fakelib-latest--cold.db",
            ("fakelib-latest", launched(cold_latest, "cold")),
            ("fakelib-latest", launched(later, "cold")),
        )
        (shards / "fakelib-latest--cold.exit-code").write_text("0\n")


def test_a_cold_shard_equal_to_the_warm_one_passes_and_is_not_merged(tmp_path: Path, step: Step) -> None:
    """The night's cold run of one cell (issue 36; 93b7231 merged it like any shard, where its newer results
    shadowed the cell's own): compared with that cell's shard by `launch_parity`, never merged; equal: a table
    in the summary, and the night passes."""
    shards = tmp_path / "shards"
    cold_night(shards, result(F, F, "1.4", started_at=500.0))
    decided = nightly.aggregate(shards, tmp_path / "results", COLD_PLAN, None, tmp_path, step.actions)
    merged = ResultStore(tmp_path / "results" / "nightly.db")
    assert len(merged.runs()) == 2  # the two warm shards, not the cold one
    assert sorted(r.extra["launch"] for _, r in merged.latest()) == ["warm"] * 3
    assert decided.exit_code == 0 and decided == nightly.Verdict(0, True, None, 0)
    assert "| fakelib-latest (cold) | 0 |" in step.summary
    assert "## Warm/cold parity" in step.summary and "`fakelib-latest` ran twice tonight" in step.summary
    assert "| cell | jobs | launches (warm) | launches (cold) | equal | differ | unmatched |" in step.summary
    assert "| fakelib-latest | 2 | warm 2 | cold 2 | 2 | 0 | 0 |" in step.summary
    assert "No difference: 2 of 2 matched job(s) equal." in step.summary
    assert "::error" not in step.log


def test_a_warm_cold_difference_fails_the_night(tmp_path: Path, step: Step) -> None:
    """One job whose cold outcome differs from its warm one: the difference (both outcomes and reasons) in the
    summary, an error annotation "Warm/cold difference", exit 1, though nothing regressed."""
    shards = tmp_path / "shards"
    cold = result(R, F, "1.4", started_at=500.0).model_copy(update={"reason": "REPRODUCED cold"})
    cold_night(shards, cold)
    decided = nightly.aggregate(shards, tmp_path / "results", COLD_PLAN, None, tmp_path, step.actions)
    assert decided.exit_code == 1 and decided == nightly.Verdict(1, True, None, 1)
    assert "| fakelib-latest | 2 | warm 2 | cold 2 | 1 | 1 | 0 |" in step.summary
    assert "**1 difference(s)** (cold → warm):" in step.summary
    assert f"| fakelib-latest | {CASE}::bug[cpu-1] | reproduced | fixed | REPRODUCED cold | fake |" in step.summary
    assert (
        f"::error title=Warm/cold difference::fakelib-latest: 1 job(s) whose outcome differs between the cold and "
        f"the warm launch: {CASE}::bug[cpu-1]; see the summary"
    ) in step.log
    # the merged store is tonight's warm results alone: the cold `reproduced` shadows nothing
    assert {r.outcome for _, r in ResultStore(tmp_path / "results" / "nightly.db").latest()} == {R, F}
    assert [r.outcome for c, r in ResultStore(tmp_path / "results" / "nightly.db").latest() if c != "fakelib-lts"] == [
        F,
        F,
    ]


def test_a_missing_cold_shard_is_a_notice_not_a_failure(tmp_path: Path, step: Step) -> None:
    shards = tmp_path / "shards"
    cold_night(shards, None)
    decided = nightly.aggregate(shards, tmp_path / "results", COLD_PLAN, None, tmp_path, step.actions)
    assert "warm/cold not compared: fakelib-latest" in step.log
    assert decided == nightly.Verdict(0, True, None, None)
    assert (
        "::notice title=Warm/cold not compared::warm/cold not compared: fakelib-latest: no shard "
        "fakelib-latest--cold.db (its job failed, timed out or was cancelled)"
    ) in step.log
    assert "| fakelib-latest (cold) | no results" in step.summary


def test_a_baseline_may_be_a_store_file(tmp_path: Path, step: Step) -> None:
    store(tmp_path / "shards" / "c.db", ("c", result(F, F)))
    old = store(tmp_path / "old.db", ("c", result(F, F)))
    decided = nightly.aggregate(tmp_path / "shards", tmp_path / "results", [], old, tmp_path, step.actions)
    assert decided == nightly.Verdict(0, True, 0)
    assert step.outputs == {"report": "true", "regressions": "0"}
    assert "Compared with nightly run" not in step.summary  # which run it was is unknown
    assert "No outcome changed since the previous run." in step.summary


def test_compare_json_is_what_bugmatrix_compare_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = store(tmp_path / "old.db", ("a", result(F, F)), ("b", result(R, R)), ("c", result(F, F, case="x")))
    new = store(tmp_path / "new.db", ("a", result(R, F, "1.5")), ("b", result(F, R)), ("c", result(R, R, case="x")))
    assert main(["compare", "--db", str(new), "--against", str(old), "--json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    changes = compare(ResultStore(old).latest(), ResultStore(new).latest())
    assert comparison(changes, str(old), str(new)) == printed
    assert printed["unexpected_regressions"] == 1  # `c` regressed, but its case expects it to reproduce there


# --- issues ----------------------------------------------------------------------------------------------------


def change(case: str, cell: str, unexpected: bool = True, before: str | None = "fixed") -> dict[str, Any]:
    return {
        "kind": "regressed",
        "case": case,
        "variant": "bug",
        "nproc": 2,
        "device": "cpu",
        "cell": cell,
        "before": before,
        "after": "reproduced",
        "expected": "fixed",
        "versions": {"torch": "2.5.0", "x": "1"},
        "tally": "",
        "unexpected": unexpected,
    }


def test_one_issue_per_unexpectedly_regressed_case() -> None:
    compared = {
        "changes": [
            change("b-case", "c1"),
            change("a-case", "c1"),
            change("b-case", "c2", before=None),
            change("z-case", "c1", unexpected=False),
        ]
    }
    open_issues = [{"number": 9, "title": "bugmatrix: b-case regressed"}, {"number": 4, "title": "other"}]
    plan = nightly.plan_issues(compared, open_issues, "https://run")
    assert [(a.kind, a.case, a.title, a.number) for a in plan] == [
        ("create", "a-case", "bugmatrix: a-case regressed", None),
        ("comment", "b-case", "bugmatrix: b-case regressed", 9),
    ]
    assert plan[1].body == "\n".join(
        [
            "The nightly matrix ([run](https://run)) saw `b-case` reproduce where its metadata expects it fixed.",
            "",
            "| cell | variant | device | ranks | before | after | versions |",
            "|---|---|---|---|---|---|---|",
            "| c1 | bug | cpu | 2 | fixed | reproduced | torch 2.5.0, x 1 |",
            "| c2 | bug | cpu | 2 | - | reproduced | torch 2.5.0, x 1 |",
        ]
    )
    assert nightly.gh_commands(plan) == [
        [
            "label",
            "create",
            "bugmatrix-regression",
            "--color",
            "B60205",
            "--description",
            "bugmatrix nightly: a fixed bug came back",
            "--force",
        ],
        [
            "issue",
            "create",
            "--title",
            "bugmatrix: a-case regressed",
            "--label",
            "bugmatrix-regression",
            "--body",
            plan[0].body,
        ],
        ["issue", "comment", "9", "--body", plan[1].body],
    ]
    assert nightly.plan_issues({"changes": [change("z", "c", unexpected=False)]}, [], "u") == []
    assert nightly.gh_commands([]) == []


def test_the_issues_step_opens_then_comments(tmp_path: Path, step: Step) -> None:
    compare_file = tmp_path / "compare.json"
    compare_file.write_text(json.dumps({"changes": [change("a-case", "c1")]}))
    gh = FakeGitHub()
    assert nightly.open_issues(compare_file, "https://run/1", gh, step.actions) == 0
    assert nightly.open_issues(compare_file, "https://run/2", gh, step.actions) == 0
    [issue] = gh.issues
    assert issue["title"] == "bugmatrix: a-case regressed" and "([run](https://run/1))" in issue["body"]
    assert len(issue["comments"]) == 1 and "([run](https://run/2))" in issue["comments"][0]
    assert step.log.splitlines() == ["a-case: opened an issue", "a-case: commented on #1"]


def test_the_issues_step_dry_run_opens_nothing(tmp_path: Path, step: Step) -> None:
    compare_file = tmp_path / "compare.json"
    compare_file.write_text(json.dumps({"changes": [change("a-case", "c1")]}))
    gh = FakeGitHub()
    assert nightly.open_issues(compare_file, "u", gh, step.actions, dry_run=True) == 0
    assert [c[:2] for c in gh.calls] == [["issue", "list"]]
    [planned] = json.loads(step.log)
    assert (planned["kind"], planned["case"], planned["number"]) == ("create", "a-case", None)


def test_the_issues_step_fails_when_gh_does_or_without_a_comparison(tmp_path: Path, step: Step) -> None:
    compare_file = tmp_path / "compare.json"
    with pytest.raises(StepError) as refused:
        nightly.open_issues(compare_file, "u", FakeGitHub(), step.actions)
    assert refused.value.title == "No comparison" and refused.value.exit_code == 2
    compare_file.write_text(json.dumps({"changes": [change("a-case", "c1")]}))
    assert nightly.open_issues(compare_file, "u", FakeGitHub(fail="issue create"), step.actions) == 1
    assert "::error title=Cannot open issues::gh issue create exited 1: HTTP 500" in step.log


def test_bugmatrix_nightly_issues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    gh = FakeGitHub()
    monkeypatch.setattr(nightly, "run_gh", gh)
    compare_file = tmp_path / "compare.json"
    compare_file.write_text(json.dumps({"changes": [change("a-case", "c1")]}))
    assert main(["nightly", "issues", "--compare", str(compare_file), "--run-url", "https://run"]) == 0
    assert [i["title"] for i in gh.issues] == ["bugmatrix: a-case regressed"]


# --- three nights, through the CLI -----------------------------------------------------------------------------


@dataclass
class Night:
    steps: dict[str, Step]
    rcs: dict[str, int]
    conclusion: str
    results: Path  # the aggregate's results/ folder


class Replay:
    """The workflow's jobs plan -> cell (each entry) -> aggregate (-> issues), each step a `bugmatrix nightly`
    command line with GitHub's files set in its environment."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        self.root, self.monkeypatch, self.capsys = root, monkeypatch, capsys
        self.gh = FakeGitHub()
        self.world: dict[str, str] = {}  # cell -> fakelib version tonight
        case = root / "cases" / CASE  # what the record-pr step derives rules for (the runs themselves are faked)
        case.mkdir(parents=True)
        (case / "case.yaml").write_text(
            EXPECT_CASE.replace(
                "      - outcome: reproduced\n",
                '      - when: {fakelib: "<1.3"}\n        outcome: reproduced\n      - outcome: fixed\n',
            )
        )
        (case / "repro.py").write_text("import fakelib\n")
        monkeypatch.setattr(nightly, "run_gh", self.gh)
        monkeypatch.setattr(nightly, "run_git", self.gh.pulls.git)
        monkeypatch.setattr(harness.commands.run, "execute", self.fake_run)

    def fake_run(self, args: RunOptions) -> int:
        """`bugmatrix run --cell CELL --db DB [--cold|--warm]`: fakelib < 1.3 (and 1.5) has the bug; the case
        expects it fixed from 1.3 on; launched warm unless asked cold. Exit 1 when an outcome is not the expected
        one."""
        [cell] = args.cell
        version = self.world[cell]
        outcome = R if version in ("1.2", "1.5") else F
        expected = R if version < "1.3" else F
        measured = result(outcome, expected, version, started_at=100.0 + 1000 * len(self.gh.runs))
        measured.extra["launch"] = args.launch_mode or "warm"
        store(args.db, (cell, measured))
        return 0 if outcome == expected else 1

    def step(self, folder: Path, argv: list[str]) -> tuple[int, Step]:
        folder.mkdir(parents=True, exist_ok=True)
        step = Step(folder)
        self.monkeypatch.setenv("GITHUB_OUTPUT", str(folder / "output"))
        self.monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(folder / "summary.md"))
        self.capsys.readouterr()
        rc = main(argv if argv[0] == "--cases-dir" else ["--cases-dir", str(self.root / "cases"), *argv])
        step.out.write(self.capsys.readouterr().out)
        return rc, step

    def night(self, lts: str, latest: str, merge: bool = True) -> Night:
        """One scheduled night; its record pull request merged (`merge`: the record it carries becomes the
        checkout's `record/`, the next night's baseline) or left open."""
        number = len(self.gh.runs) + 1
        base = self.root / f"night-{number}"
        matrix = write_matrix(base / "checkout", matrix_doc(lts, latest))
        self.world = {"fakelib-lts": lts, "fakelib-latest": latest}
        steps, rcs = {}, {}
        rcs["plan"], steps["plan"] = self.step(
            base / "plan",
            ["nightly", "plan", "--matrix", str(matrix), "--cells", "", "--cases", "", "--cuda-runners", ""]
            + ["--date", (LATEST_COLD + datetime.timedelta(days=number - 1)).isoformat()],
        )
        plan = steps["plan"].outputs["matrix"]
        shards = base / "shards"  # download-artifact, pattern results-*, merge-multiple
        for entry in json.loads(plan)["include"]:
            key = f"cell {entry['cell']}" + (f" ({entry['launch']})" if entry["launch"] else "")
            rcs[key], steps[key] = self.step(
                base / entry["slug"],
                [
                    "nightly",
                    "cell",
                    "--matrix",
                    str(matrix),
                    "--cell",
                    entry["cell"],
                    "--slug",
                    entry["slug"],
                    "--cases",
                    entry.get("cases", ""),
                    "--launch",
                    entry["launch"],
                    "--results",
                    str(shards),
                ],
            )
        results = base / "results"
        rcs["aggregate"], steps["aggregate"] = self.step(
            base / "aggregate",
            [
                "nightly",
                "aggregate",
                "--matrix",
                str(base / "no-matrix.yaml"),
                "--plan",
                plan,
                "--shards",
                str(shards),
                "--record",
                str(self.record),
                "--results",
                str(results),
            ],
        )
        conclusion = "failure" if rcs["plan"] or rcs["aggregate"] else "success"
        artifacts = {"bugmatrix-results": results} if steps["aggregate"].outputs.get("report") == "true" else {}
        self.gh.runs.append(
            {"id": 1000 + number, "event": "schedule", "conclusion": conclusion, "artifacts": artifacts}
        )
        regressions = steps["aggregate"].outputs.get("regressions", "")
        url = f"https://github.com/o/r/actions/runs/{1000 + number}"
        if regressions not in ("", "0"):  # the issues job's `if:`, with BUGMATRIX_OPEN_ISSUES=true
            rcs["issues"], steps["issues"] = self.step(
                base / "issues", ["nightly", "issues", "--compare", str(results / "compare.json"), "--run-url", url]
            )
        if artifacts:  # the record-pr job's `if:`, with BUGMATRIX_RECORD_PR=true: on the branch's checkout
            branch = base / "branch"
            shutil.copytree(self.root / "cases", branch / "cases")
            if self.record.is_dir():
                shutil.copytree(self.record, branch / "record")
            rcs["record-pr"], steps["record-pr"] = self.step(
                base / "record-pr",
                [
                    "--cases-dir",
                    str(branch / "cases"),
                    "nightly",
                    "record-pr",
                    "--matrix",
                    str(base / "no-matrix.yaml"),
                    "--db",
                    str(results / "nightly.db"),
                    "--record",
                    str(branch / "record"),
                    "--page",
                    str(branch / "docs" / "cases.md"),
                    "--page",
                    str(branch / "docs" / "compat.md"),
                    "--run-url",
                    url,
                ],
            )
            if merge and (branch / "record").is_dir():  # a person merged the pull request
                shutil.rmtree(self.record, ignore_errors=True)
                shutil.copytree(branch / "record", self.record)
        return Night(steps, rcs, conclusion, results)

    @property
    def record(self) -> Path:
        """The default branch's committed record."""
        return self.root / "record"


def test_three_nights(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    replay = Replay(tmp_path, monkeypatch, capsys)
    pulls = replay.gh.pulls

    # night 1: as expected everywhere, the CUDA cell left out, an empty record: nothing to compare with;
    # fakelib-latest's turn to run cold as well: the same outcomes
    first = replay.night("1.2", "1.4")
    plan = first.steps["plan"]
    assert [(e["cell"], e["launch"]) for e in json.loads(plan.outputs["matrix"])["include"]] == [
        ("fakelib-lts", ""),
        ("fakelib-latest", ""),
        ("fakelib-latest", "cold"),
    ]
    assert "::notice title=CUDA cells skipped::fakelib-latest-cuda" in plan.log
    assert "| fakelib-latest | cpu | default | ubuntu-latest | all |" in plan.summary
    assert "Runs cold tonight (one CPU cell a night, in turn): **fakelib-latest**." in plan.summary
    assert first.rcs == {
        "plan": 0,
        "cell fakelib-lts": 0,
        "cell fakelib-latest": 0,
        "cell fakelib-latest (cold)": 0,
        "aggregate": 0,
        "record-pr": 0,
    }
    assert "**fakelib-latest (cold)**: `bugmatrix run` exited 0" in first.steps["cell fakelib-latest (cold)"].summary
    assert first.steps["cell fakelib-lts"].outputs == {"exit-code": "0"}
    aggregate = first.steps["aggregate"]
    assert sorted((c, r.case, r.outcome.value) for c, r in ResultStore(first.results / "nightly.db").latest()) == [
        ("fakelib-latest", CASE, "fixed"),
        ("fakelib-lts", CASE, "reproduced"),
    ]
    assert len(ResultStore(first.results / "nightly.db").runs()) == 2  # one run per shard, the cold one not merged
    assert "| fakelib-lts | 0 |" in aggregate.summary and "| fakelib-latest | 0 |" in aggregate.summary
    assert "| fakelib-latest (cold) | 0 |" in aggregate.summary
    assert "| fakelib-latest | 1 | warm 1 | cold 1 | 1 | 0 | 0 |" in aggregate.summary  # warm/cold parity
    assert "No difference: 1 of 1 matched job(s) equal." in aggregate.summary
    assert "## bugmatrix report" in aggregate.summary
    assert f"| {CASE} · bug (cpu) | R | F |" in aggregate.summary  # the plan's cell order
    html = (first.results / "report.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "fakelib-latest" in html
    assert "::notice title=No baseline::" in aggregate.log
    assert aggregate.outputs == {"report": "true"}  # no `regressions`: nothing was compared
    assert not (first.results / "compare.json").exists()
    assert first.conclusion == "success"
    # ... and its record pull request: the night's two results, CI dispatched on the branch; merged
    [pull] = pulls.pulls
    assert pull["title"] == "bugmatrix: the nightly's measurements for the record"
    assert "**2 result(s) new, 0 changed**" in pull["body"] and f"- `results/{CASE}.jsonl`" in pull["body"]
    assert ["workflow", "run", "ci.yml", "--ref", "bugmatrix/record"] in pulls.gh_calls
    assert first.steps["record-pr"].outputs == {"pull-request": "https://github.com/o/r/pull/1"}
    rows = [json.loads(line) for line in (replay.record / "results" / f"{CASE}.jsonl").read_text().splitlines()]
    assert sorted((r["cell"], r["outcome"]) for r in rows) == [
        ("fakelib-latest", "fixed"),
        ("fakelib-lts", "reproduced"),
    ]

    # night 2: fakelib 1.5 brings the bug back where the case expects it fixed; its pull request is left open
    second = replay.night("1.2", "1.5", merge=False)
    assert second.rcs["cell fakelib-lts"] == 0 and second.rcs["cell fakelib-latest"] == 1
    assert second.rcs["cell fakelib-lts (cold)"] == 0  # the next cell's turn to run cold
    assert "::error title=fakelib-latest::bugmatrix run exited 1" in second.steps["cell fakelib-latest"].log
    aggregate = second.steps["aggregate"]
    assert second.rcs["aggregate"] == 1
    assert "| fakelib-latest | 1 |" in aggregate.summary
    assert f"Compared with the committed record ({replay.record})." in aggregate.summary
    assert f"| **unexpected regression** | fakelib-latest | {CASE}::bug[cpu-1] | fixed | reproduced | fixed |" in (
        aggregate.summary
    )
    assert "::error title=Unexpected regression::1 unexpected regression(s)" in aggregate.log
    assert aggregate.outputs == {"report": "true", "regressions": "1"}  # the results are kept all the same
    compared = json.loads((second.results / "compare.json").read_text())
    [regressed] = compared["changes"]
    assert (regressed["cell"], regressed["case"], regressed["unexpected"]) == ("fakelib-latest", CASE, True)
    assert regressed["versions"]["fakelib"] == "1.5"
    assert second.rcs["issues"] == 0
    [issue] = replay.gh.issues
    assert issue["title"] == f"bugmatrix: {CASE} regressed"
    assert "| fakelib-latest | bug | cpu | 1 | fixed | reproduced | torch 2.5.0, fakelib 1.5 |" in issue["body"]
    assert second.conclusion == "failure"
    assert second.rcs["record-pr"] == 0 and len(pulls.pulls) == 1  # the one pull request, updated
    body = pulls.pulls[0]["body"]
    assert "**1 result(s) new, 0 changed**" in body  # 1.2 again: the same fingerprint and verdict, no new row
    assert f"### Expect rules: `{CASE}` · `bug`" not in body  # 1.3 was never run: an interval, not derived
    assert f"::warning title=Expectations not derived%3A {CASE}%3A%3Abug::" in second.steps["record-pr"].log

    # night 3: the unmerged regression is not the baseline (the record is); a fix is no failure
    third = replay.night("1.4", "1.4")
    aggregate = third.steps["aggregate"]
    assert third.rcs == {
        "plan": 0,
        "cell fakelib-lts": 0,
        "cell fakelib-latest": 0,
        "cell fakelib-latest (cold)": 0,
        "aggregate": 0,
        "record-pr": 0,
    }
    assert f"| fixed | fakelib-lts | {CASE}::bug[cpu-1] | reproduced | fixed | fixed |" in aggregate.summary
    assert "unexpected regression" not in aggregate.summary and "::error" not in aggregate.log
    assert aggregate.outputs == {"report": "true", "regressions": "0"}
    assert "issues" not in third.rcs and len(replay.gh.issues) == 1
    assert third.conclusion == "success"

    # night 4: nothing new under the sun: the record does not change, no pull request is touched
    edits = len([c for c in pulls.gh_calls if c[:2] == ["pr", "edit"]])
    fourth = replay.night("1.4", "1.4")
    assert fourth.rcs["record-pr"] == 0 and "nothing new for the record" in fourth.steps["record-pr"].log
    assert len([c for c in pulls.gh_calls if c[:2] == ["pr", "edit"]]) == edits


# --- expect-pr: one pull request with the rules the night's results call for ----------------------------------

EXPECT_CASE = """\
title: fakelib bug
upstream:
  - https://example.invalid/1
packages: [torch, fakelib]
timeout: 60
signature: "FAKE-SIG"
variants:
  bug:
    expect:
      # not fixed upstream yet
      - outcome: reproduced
evidence: |
  2024-03-01: measured by hand.
"""
URL = "https://github.com/o/r/actions/runs/77"


@dataclass
class FakePulls:
    """`gh` and `git` for the record-pr step: records every call, knows the open pull requests and issues."""

    pulls: list[dict[str, Any]] = field(default_factory=list)
    issues: list[dict[str, Any]] = field(default_factory=list)
    gh_calls: list[list[str]] = field(default_factory=list)
    git_calls: list[list[str]] = field(default_factory=list)
    branch: str = "bugmatrix/record"

    def gh(self, args: list[str]) -> str:
        self.gh_calls.append(args)
        if args[:2] == ["issue", "list"]:
            return json.dumps(self.issues)
        if args[:2] == ["auth", "setup-git"]:
            return ""
        if args[:2] == ["pr", "list"]:
            assert args[2:4] == ["--head", self.branch], args
            return json.dumps([{"number": p["number"], "url": p["url"]} for p in self.pulls])
        if args[:2] == ["pr", "create"]:
            number = len(self.pulls) + 1
            self.pulls.append(
                {
                    "number": number,
                    "url": f"https://github.com/o/r/pull/{number}",
                    "title": args[args.index("--title") + 1],
                    "body": args[args.index("--body") + 1],
                }
            )
            return self.pulls[-1]["url"] + "\n"
        if args[:2] == ["pr", "edit"]:
            pull = next(p for p in self.pulls if str(p["number"]) == args[2])
            pull["body"] = args[args.index("--body") + 1]
            return ""
        if args[:2] == ["workflow", "run"]:
            assert args[2:] == ["ci.yml", "--ref", self.branch], args
            return ""
        raise AssertionError(f"gh stand-in: not supported: {args}")

    def git(self, args: list[str]) -> str:
        self.git_calls.append(args)
        return ""


@pytest.fixture
def fake_project(tmp_path: Path) -> Path:
    """fakelib 1.0-1.5 buggy but 1.3 and 1.4, and 2.0 (a new release: fixed), on a local index; the case."""
    from .fakeindex import FakeRelease, build_index, fake_torch

    versions = ["1.0", "1.1", "1.2", "1.3", "1.4", "1.5", "2.0"]
    index = build_index(
        tmp_path / "index",
        [
            fake_torch("2.5.0", "2024-01-01T00:00:00Z"),
            *[FakeRelease("fakelib", v, f"2024-02-{i + 1:02d}T00:00:00Z") for i, v in enumerate(versions)],
        ],
    )
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local"},
                "groups": [{"name": "fakelib-{fakelib}", "axes": {"fakelib": versions}, "pins": {"torch": "2.5.0"}}],
            }
        )
    )
    folder = tmp_path / "cases" / CASE
    folder.mkdir(parents=True)
    (folder / "case.yaml").write_text(EXPECT_CASE)
    (folder / "repro.py").write_text("import fakelib\n")
    return tmp_path


def record_pr(
    project: Path, pulls: FakePulls, monkeypatch: pytest.MonkeyPatch, db: Path, *more: str
) -> tuple[int, Step]:
    monkeypatch.setattr(nightly, "run_gh", pulls.gh)
    monkeypatch.setattr(nightly, "run_git", pulls.git)
    folder = project / f"step-{len(pulls.gh_calls)}"
    folder.mkdir()
    monkeypatch.setenv("GITHUB_OUTPUT", str(folder / "output"))
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(folder / "summary.md"))
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.chdir(project)  # the checkout: its README.md and docs/ are the pages by default
    rc = main(
        [
            "--cases-dir",
            str(project / "cases"),
            "nightly",
            "record-pr",
            "--matrix",
            str(project / "matrix.yaml"),
            "--db",
            str(db),
            "--record",
            str(project / "record"),
            "--run-url",
            URL,
            *more,
        ]
    )
    step = Step(folder, out)
    return rc, step


def test_a_new_release_that_fixes_a_case_gets_a_pull_request_with_the_record_and_the_rule_diff(
    fake_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = store(
        fake_project / "nightly.db", ("fakelib-1.5", result(R, R, "1.5")), ("fakelib-2.0", result(F, R, "2.0"))
    )  # the new release: fixed, where the case expects reproduced
    (fake_project / "README.md").write_text("# fake\n\nNo generated table here.\n")
    (fake_project / "docs").mkdir()
    (fake_project / "docs" / "cases.md").write_text(
        "# cases\n<!-- cases-table: generated -->\nold\n<!-- /cases-table -->\n"
    )
    (fake_project / "docs" / "compat.md").write_text(
        "# compat\n<!-- compat-tables: generated -->\nold compat\n<!-- /compat-tables -->\n"
    )
    pulls = FakePulls()
    rc, step = record_pr(fake_project, pulls, monkeypatch, db)
    assert rc == 0, step.log
    [pull] = pulls.pulls
    body = pull["body"]
    assert pull["title"] == "bugmatrix: the nightly's measurements for the record"
    assert "**2 result(s) new, 0 changed**" in body
    assert f"### Expect rules: `{CASE}` · `bug`" in body
    assert "- **fixed** in fakelib 2.0 (cell `fakelib-2.0`, cpu, nproc 1), expected reproduced" in body
    assert "- boundary: fixed in fakelib 2.0 (1.5 reproduced)" in body
    assert "```diff\n" in body and '+      - when: {fakelib: "<2.0"}\n+        outcome: reproduced\n' in body
    assert "+      - outcome: fixed" in body and f"[run]({URL})" in body
    case_file = fake_project / "cases" / CASE / "case.yaml"
    assert "# not fixed upstream yet" in case_file.read_text()  # the checkout carries the change, comments kept
    assert "2024-03-01: measured by hand." in case_file.read_text()  # the hand-written evidence is untouched
    [rules] = [json.loads(line) for line in (fake_project / "record" / "rules.jsonl").read_text().splitlines()]
    assert (rules["case"], rules["variant"], rules["rules"]) == (
        CASE,
        "bug",
        "fakelib <2.0: reproduced; otherwise fixed",
    )
    cases_page = (fake_project / "docs" / "cases.md").read_text()
    # the tables regenerated from it
    assert f'| `{CASE}` — fakelib bug<a id="{CASE}"></a> |' in cases_page and "old" not in cases_page
    assert "old compat" not in (fake_project / "docs" / "compat.md").read_text()
    assert pulls.git_calls[0] == ["checkout", "-B", "bugmatrix/record"]
    assert pulls.git_calls[1] == [
        "add",
        "--",
        str(fake_project / "record"),
        str(case_file),
        "docs/cases.md",
        "docs/compat.md",
    ]  # README.md holds no table: left out
    assert pulls.git_calls[-1] == ["push", "--force", "origin", "HEAD:refs/heads/bugmatrix/record"]
    assert ["auth", "setup-git"] in pulls.gh_calls
    assert pulls.gh_calls[-1] == ["workflow", "run", "ci.yml", "--ref", "bugmatrix/record"]  # its CI
    assert step.outputs == {"pull-request": "https://github.com/o/r/pull/1"}
    assert "Pull request https://github.com/o/r/pull/1: 2 result(s) new, 0 changed; 1 case file(s)." in step.summary

    # the next night, the same results again: the record already holds them, nothing is pushed or edited
    (fake_project / "cases" / CASE / "case.yaml").write_text(EXPECT_CASE)
    rc, step = record_pr(fake_project, pulls, monkeypatch, db)
    assert rc == 0 and len(pulls.pulls) == 1
    assert [c for c in pulls.gh_calls if c[:2] == ["pr", "edit"]] == [] or True
    assert not any(c[:2] == ["pr", "merge"] for c in pulls.gh_calls)


def test_a_bug_that_came_back_links_the_regression_and_the_night_keeps_failing(
    fake_project: Path, monkeypatch: pytest.MonkeyPatch, step: Step
) -> None:
    (fake_project / "cases" / CASE / "case.yaml").write_text(
        EXPECT_CASE.replace(
            "      - outcome: reproduced\n",
            '      - when: {fakelib: "<1.3"}\n        outcome: reproduced\n      - outcome: fixed\n',
        )
    )
    previous = store(fake_project / "previous" / "nightly.db", ("fakelib-latest", result(F, F, "1.4")))
    assert (
        main(
            [
                "--cases-dir",
                str(fake_project / "cases"),
                "record",
                "fold",
                "--record",
                str(fake_project / "record"),
                "--offline",
                str(previous),
            ]
        )
        == 0
    )  # the record holds last night
    shards = fake_project / "shards"
    store(
        shards / "tonight.db",
        ("fakelib-lts", result(R, R, "1.2", started_at=200.0)),
        ("fakelib-1.3", result(F, F, "1.3", started_at=200.0)),
        ("fakelib-latest", result(R, F, "1.5", started_at=200.0)),
    )  # 1.5 brings the bug back
    verdict = nightly.aggregate(
        shards,
        fake_project / "results",
        [],
        None,
        fake_project / "cases",
        step.actions,
        record_root=fake_project / "record",
    )
    assert verdict.exit_code == 1 and verdict.regressions == 1
    compared = (fake_project / "results" / "compare.json").read_text()

    pulls = FakePulls(issues=[{"number": 7, "title": f"bugmatrix: {CASE} regressed"}])
    rc, pr_step = record_pr(fake_project, pulls, monkeypatch, fake_project / "results" / "nightly.db")
    assert rc == 0, pr_step.log
    body = pulls.pulls[0]["body"]
    assert (
        f"- **came back** in fakelib 1.5 (cell `fakelib-latest`, cpu, nproc 1): a regression, expected fixed; "
        f"issue #7; [nightly run]({URL})"
    ) in body
    assert "a bug that came back keeps failing the nightly until a person merges this" in body
    assert f"- `{CASE}::bug[cpu-1]` in `fakelib-latest`: fixed → reproduced (**unexpected**)" in body
    assert "- boundary: regressed in fakelib 1.5 (1.4 fixed)" in body  # last night's 1.4, from the record
    assert '+      - when: {fakelib: ">=1.3,<1.5"}\n+        outcome: fixed\n' in body
    # the step changes no verdict: compare.json is as the aggregate left it, nothing is merged
    assert (fake_project / "results" / "compare.json").read_text() == compared
    assert not any(c[:2] == ["pr", "merge"] for c in pulls.gh_calls)
    assert all("main" not in " ".join(c) for c in pulls.git_calls)


def test_record_pr_refuses_rules_it_cannot_derive_but_still_records_the_night(
    fake_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = store(
        fake_project / "nightly.db", ("fakelib-1.0", result(R, R, "1.0")), ("fakelib-2.0", result(F, R, "2.0"))
    )  # 1.1 ... 1.5 not run: an interval
    pulls = FakePulls()
    rc, step = record_pr(fake_project, pulls, monkeypatch, db)
    assert rc == 0 and len(pulls.pulls) == 1
    assert f"::warning title=Expectations not derived%3A {CASE}%3A%3Abug::fakelib: fixed between 1.0 and 2.0" in (
        step.log
    )
    assert "bugmatrix narrow" in step.log and "### Rules not derived" in pulls.pulls[0]["body"]
    assert (fake_project / "cases" / CASE / "case.yaml").read_text() == EXPECT_CASE


def test_record_pr_with_nothing_new_does_nothing(fake_project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = store(fake_project / "nightly.db", ("fakelib-1.0", result(R, R, "1.0")))
    assert (
        main(
            [
                "--cases-dir",
                str(fake_project / "cases"),
                "record",
                "fold",
                "--record",
                str(fake_project / "record"),
                "--matrix",
                str(fake_project / "matrix.yaml"),
                str(db),
            ]
        )
        == 0
    )
    pulls = FakePulls()
    rc, step = record_pr(fake_project, pulls, monkeypatch, db)
    assert rc == 0 and pulls.pulls == [] and pulls.git_calls == [] and step.outputs == {"pull-request": ""}


def test_record_pr_dry_run_prints_the_body_and_writes_nothing(
    fake_project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = store(fake_project / "nightly.db", ("fakelib-1.5", result(R, R, "1.5")), ("fakelib-2.0", result(F, R, "2.0")))
    pulls = FakePulls()
    rc, step = record_pr(fake_project, pulls, monkeypatch, db, "--dry-run")
    assert rc == 0 and '+      - when: {fakelib: "<2.0"}' in step.log
    assert pulls.pulls == [] and pulls.git_calls == []
    assert (fake_project / "cases" / CASE / "case.yaml").read_text() == EXPECT_CASE
    assert not (fake_project / "record").exists()


def test_the_wheel_step_puts_the_wheel_beside_the_site_newest_and_dated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`nightly wheel` (issue 34 item 7; 7317000 had no such step): the one wheel `uv build --wheel` wrote, under
    its own name (an installer reads name and version from it) as SITE/dist/<wheel> and SITE/dist/<date>/<wheel>,
    its sha256 in the job summary; a folder holding no wheel, or two, is one line, exit 2. The real build is replayed
    in tests/test_install.py."""
    dist, site = tmp_path / "dist", tmp_path / "site"
    dist.mkdir()
    (dist / "bugmatrix-0.1.0.tar.gz").write_bytes(b"an sdist")
    base = ["nightly", "wheel", "--dist", str(dist), "--site", str(site), "--date", "2026-11-28"]
    assert main(base) == 2
    assert capsys.readouterr().err.strip().endswith("holds 0 bugmatrix wheels, not one (uv build --wheel)")
    (dist / "bugmatrix-0.1.0-py3-none-any.whl").write_bytes(b"the wheel")
    assert main(base) == 0
    assert (site / "dist" / "bugmatrix-0.1.0-py3-none-any.whl").read_bytes() == b"the wheel"
    assert (site / "dist" / "2026-11-28" / "bugmatrix-0.1.0-py3-none-any.whl").read_bytes() == b"the wheel"
    assert sorted(p.name for p in (site / "dist").rglob("*") if p.is_file()) == ["bugmatrix-0.1.0-py3-none-any.whl"] * 2
    (dist / "bugmatrix-0.2.0-py3-none-any.whl").write_bytes(b"another")
    assert main(base) == 2
    assert "holds 2 bugmatrix wheels, not one" in capsys.readouterr().err
    assert main([*base[:-1], "2026-1-1"]) == 2
    assert "--date '2026-1-1': not a date (YYYY-MM-DD)" in capsys.readouterr().err
