"""The nightly workflow, replayed here: its own `run:` scripts, in bash, on results the harness itself produces.

Three nights of `.github/workflows/nightly.yml` on a hermetic matrix of fake packages (tests/fakeindex.py), each
job in its own workspace (a copy of a small project: matrix.yaml + one case), with the env the workflow sets:

  night 1  fakelib-lts on 1.2 (reproduces, as expected), fakelib-latest on 1.4 (fixed, as expected); no earlier
           nightly: nothing to compare, green
  night 2  fakelib-latest on 1.5, where the bug is back although the case expects it fixed: that cell shows red,
           and the aggregate job compares with night 1 and fails on the unexpected regression
  night 3  fakelib-lts moved to 1.4 (a fix), fakelib-latest back on 1.4: compared with night 1 (night 2 failed,
           so it is no baseline): a fix is no failure, green

Every `run:` step is the workflow's text, executed by `bash -e` like on a runner, and every bugmatrix command in
it is the real one (`uv run bugmatrix ...` is the real uv, told to use this interpreter's environment without
syncing). The only stand-ins are GitHub's own parts: the `uses:` actions (checkout = the workspace copy,
upload/download-artifact = folders kept per night, setup-uv = the uv already here) and the `gh` CLI (a script
that answers `gh run list` / `gh run download` from the nights replayed so far and refuses anything else).
`if:` conditions and `${{ }}` values are evaluated for the few forms the workflow uses; any other form fails the
test, so a change to the workflow cannot go unreplayed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from harness.session.store import ResultStore

from .fakeindex import FakeRelease, build_index, fake_torch

ROOT = Path(__file__).resolve().parent.parent
NIGHTLY = ROOT / ".github" / "workflows" / "nightly.yml"
REPO = "example/bugmatrix"
CASE = "fakelib-1-bug"

SCRIPT = """
import sys
import fakelib
if fakelib.BUGGY:
    print("RuntimeError: FAKE-SIG from fakelib", fakelib.__version__)
    sys.exit(1)
"""


def _gh_source() -> str:
    """A stand-in for the GitHub CLI: only the two calls the aggregate job makes, answered from $GH_STANDIN_RUNS
    (the nights replayed so far: id, event, conclusion, artifacts); `--jq` is applied by the real jq."""
    return f"#!{sys.executable}\n" + textwrap.dedent('''
        import json, os, shutil, subprocess, sys
        from pathlib import Path

        assert os.environ.get("GH_TOKEN") and os.environ.get("GH_REPO"), "the job gives gh a token and a repo"
        runs = json.loads(Path(os.environ["GH_STANDIN_RUNS"]).read_text())
        args = sys.argv[1:]


        def option(name):
            i = args.index(name)
            value = args[i + 1]
            del args[i:i + 2]
            return value


        if args[:2] == ["run", "list"]:
            del args[:2]
            workflow, event, status = option("--workflow"), option("--event"), option("--status")
            limit, fields, jq = int(option("--limit")), option("--json"), option("--jq")
            assert not args and workflow == "nightly.yml" and fields == "databaseId", sys.argv
            found = [{"databaseId": r["id"]} for r in reversed(runs)
                     if r["event"] == event and r["conclusion"] == status][:limit]
            sys.exit(subprocess.run(["jq", "-r", jq], input=json.dumps(found), text=True).returncode)
        if args[:2] == ["run", "download"]:
            run_id = args[2]
            del args[:3]
            name, folder = option("--name"), option("--dir")
            assert not args, sys.argv
            run = next((r for r in runs if str(r["id"]) == run_id), None)
            if run is None or name not in run["artifacts"]:
                sys.exit(f"no artifact {name} in run {run_id}")
            shutil.copytree(run["artifacts"][name], folder, dirs_exist_ok=True)
            sys.exit(0)
        sys.exit(f"gh stand-in: not supported: {sys.argv[1:]}")
    ''')


@dataclass
class Step:
    name: str
    outcome: str  # success / failure / skipped
    outputs: dict[str, str] = field(default_factory=dict)
    log: str = ""


@dataclass
class Job:
    name: str
    result: str  # success / failure / skipped
    steps: dict[str, Step] = field(default_factory=dict)  # by id (or name)
    outputs: dict[str, str] = field(default_factory=dict)
    summary: str = ""
    workspace: Path = Path("/nonexistent")  # the job's checkout (a skipped job has none)

    @property
    def log(self) -> str:
        return "\n".join(f"--- {s.name}: {s.outcome}\n{s.log}" for s in self.steps.values())


@dataclass
class Night:
    jobs: dict[str, list[Job]]
    conclusion: str
    artifacts: dict[str, Path]

    def job(self, name: str) -> Job:
        [job] = self.jobs[name]
        return job


_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_PATH = re.compile(r"^[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*$")
_TERM = re.compile(r"^([\w.-]+)\s*(==|!=)\s*'([^']*)'$")


def lookup(path: str, ctx: dict[str, Any]) -> Any:
    if not _PATH.match(path):
        raise AssertionError(f"the replay does not evaluate the expression {path!r}")
    value: Any = ctx
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return "" if value is None else value


def substitute(text: Any, ctx: dict[str, Any]) -> str:
    """`${{ a.b.c }}` inside a string -> its value (a context path is the only form the replay evaluates)."""
    if not isinstance(text, str):
        return json.dumps(text) if isinstance(text, bool) else str(text)
    whole = _EXPR.fullmatch(text.strip())
    if whole:
        value = lookup(whole.group(1), ctx)
        return value if isinstance(value, str) else json.dumps(value)
    return _EXPR.sub(lambda m: str(lookup(m.group(1), ctx)), text)


def condition(expr: str | None, ctx: dict[str, Any], failed: bool) -> bool:
    """An `if:`: `&&` of always(), !cancelled(), success(), failure(), and `path ==|!= 'literal'`; like GitHub,
    an expression without a status function means `success() && ...`."""
    if expr is None:
        return not failed
    text = str(expr).strip()
    if text.startswith("${{"):
        text = text.removeprefix("${{").removesuffix("}}").strip()
    terms = [t.strip() for t in text.split("&&")]
    status = {"always()": True, "!cancelled()": True, "success()": not failed, "failure()": failed}
    ok = True if any(t in status for t in terms) else not failed
    for term in terms:
        if term in status:
            ok = ok and status[term]
            continue
        m = _TERM.match(term)
        assert m and "||" not in term, f"the replay does not evaluate the condition {term!r}"
        left = str(lookup(m.group(1), ctx))
        ok = ok and ((left == m.group(3)) if m.group(2) == "==" else (left != m.group(3)))
    return ok


class Replay:
    """Runs nightly.yml's jobs plan -> cell (each matrix entry) -> aggregate, on a copy of a project."""

    def __init__(self, root: Path, project: Path, env: dict[str, str]) -> None:
        self.root, self.project, self.env = root, project, env
        self.workflow = yaml.safe_load(NIGHTLY.read_text())
        self.workflow["on"] = self.workflow.pop(True, self.workflow.get("on"))
        self.runs: list[dict[str, Any]] = []  # what the gh stand-in knows: the nights replayed so far
        self.runs_file = root / "gh-runs.json"
        self.runs_file.write_text("[]")

    def night(self, matrix: dict[str, Any]) -> Night:
        number = len(self.runs) + 1
        base = self.root / f"night-{number}"
        (self.project / "matrix.yaml").write_text(yaml.safe_dump(matrix, sort_keys=False))
        artifacts: dict[str, Path] = {}
        github = {"token": "stand-in-token", "repository": REPO, "event_name": "schedule", "ref": "refs/heads/main",
                  "server_url": "https://github.com", "run_id": str(1000 + number)}
        ctx: dict[str, Any] = {"github": github, "inputs": {}, "vars": {}, "needs": {}}
        jobs: dict[str, list[Job]] = {}

        plan = self.job("plan", base / "plan", ctx, artifacts)
        jobs["plan"] = [plan]
        ctx["needs"]["plan"] = {"result": plan.result, "outputs": plan.outputs}
        cells = []
        if plan.result == "success":
            for entry in json.loads(plan.outputs["matrix"])["include"]:
                cells.append(self.job("cell", base / f"cell-{entry['slug']}", {**ctx, "matrix": entry}, artifacts))
        jobs["cell"] = cells
        # continue-on-error: a red cell neither fails `needs` nor the run
        ctx["needs"]["cell"] = {"result": "success" if all(c.result == "success" for c in cells) else "failure"}
        assert self.workflow["jobs"]["cell"]["continue-on-error"] is True
        aggregate_spec = self.workflow["jobs"]["aggregate"]
        if condition(aggregate_spec.get("if"), ctx, failed=False):
            jobs["aggregate"] = [self.job("aggregate", base / "aggregate", ctx, artifacts)]
        else:
            jobs["aggregate"] = [Job("aggregate", "skipped")]
        decisive = [plan, *jobs["aggregate"]]
        conclusion = "failure" if any(j.result == "failure" for j in decisive) else "success"
        self.runs.append({"id": 1000 + number, "event": "schedule", "conclusion": conclusion,
                          "artifacts": {k: str(v) for k, v in artifacts.items()}})
        self.runs_file.write_text(json.dumps(self.runs))
        return Night(jobs, conclusion, artifacts)

    def job(self, name: str, workspace: Path, ctx: dict[str, Any], artifacts: dict[str, Path]) -> Job:
        spec = self.workflow["jobs"][name]
        shutil.copytree(self.project, workspace)  # the checkout
        ctx = {**ctx, "steps": {}}
        env = dict(self.env)
        for scope in (self.workflow.get("env", {}), spec.get("env", {})):
            env.update({k: substitute(v, ctx) for k, v in scope.items()})
        summary = workspace.parent / f"{workspace.name}.summary.md"
        summary.touch()
        job = Job(name, "success", workspace=workspace)
        failed = False
        for i, step in enumerate(spec["steps"]):
            key = step.get("id") or step.get("name") or f"step-{i}"
            label = step.get("name") or step.get("uses") or key
            if not condition(step.get("if"), ctx, failed):
                job.steps[key] = Step(label, "skipped")
                continue
            if "uses" in step:
                ok, log = self.action(step, ctx, workspace, artifacts), ""
                outputs: dict[str, str] = {}
            else:
                ok, outputs, log = self.script(step, ctx, env, workspace, summary)
            job.steps[key] = Step(label, "success" if ok else "failure", outputs, log)
            ctx["steps"][key] = {"outputs": outputs, "outcome": job.steps[key].outcome}
            if not ok and not step.get("continue-on-error"):
                failed = True
        job.result = "failure" if failed else "success"
        job.outputs = {k: substitute(v, ctx) for k, v in spec.get("outputs", {}).items()}
        job.summary = summary.read_text()
        return job

    def script(self, step: dict[str, Any], ctx: dict[str, Any], env: dict[str, str], workspace: Path,
               summary: Path) -> tuple[bool, dict[str, str], str]:
        assert "shell" not in step, "the replay runs bash steps only"
        assert "${{" not in step["run"], "the replay does not expand ${{ }} in a script (nor should the workflow)"
        output = workspace.parent / f"{workspace.name}.output"
        output.write_text("")
        step_env = {**env, **{k: substitute(v, ctx) for k, v in step.get("env", {}).items()},
                    "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary)}
        script = workspace.parent / f"{workspace.name}.sh"
        script.write_text(step["run"])
        # GitHub's default shell on Linux: `bash -e {0}`
        proc = subprocess.run(["bash", "--noprofile", "--norc", "-e", str(script)], cwd=workspace, env=step_env,
                              capture_output=True, text=True, timeout=300, check=False)
        outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
        return proc.returncode == 0, outputs, proc.stdout + proc.stderr

    def action(self, step: dict[str, Any], ctx: dict[str, Any], workspace: Path,
               artifacts: dict[str, Path]) -> bool:
        """GitHub's actions, as far as the nightly's jobs use them."""
        action = step["uses"].split("@")[0]
        args = {k: substitute(v, ctx) for k, v in step.get("with", {}).items()}
        if action == "actions/checkout":
            assert args.get("persist-credentials") == "false"
            return True  # the workspace is already a copy of the project
        if action == "astral-sh/setup-uv":
            return True  # uv is on PATH already
        if action == "actions/upload-artifact":
            source = workspace / args["path"]
            if not source.exists():
                return args.get("if-no-files-found") != "error"
            folder = workspace.parent / "artifacts" / args["name"]  # night-N/artifacts/NAME
            assert not folder.exists(), f"two artifacts named {args['name']}"
            if source.is_dir():
                shutil.copytree(source, folder)
            else:
                folder.mkdir(parents=True)
                shutil.copy2(source, folder)
            artifacts[args["name"]] = folder
            return True
        if action == "actions/download-artifact":
            target = workspace / args["path"]
            if "pattern" in args:
                assert args.get("merge-multiple") == "true"
                names = [n for n in artifacts if re.fullmatch(args["pattern"].replace("*", ".*"), n)]
            else:
                names = [args["name"]]
            if not all(n in artifacts for n in names) or not names:
                return False
            for n in names:
                shutil.copytree(artifacts[n], target, dirs_exist_ok=True)
            return True
        raise AssertionError(f"the replay does not know the action {step['uses']}")


def matrix_doc(index: str, lts: str, latest: str) -> dict[str, Any]:
    """Two CPU cells (fakelib `lts`, fakelib `latest`) and a CUDA cell, for which no GPU runner is enabled."""
    return {
        "indexes": {"local": index},
        "defaults": {"index": "local"},
        "runners": {"cpu": "ubuntu-latest", "cuda": ["self-hosted", "linux", "x64", "gpu"]},
        "cells": [
            {"name": "fakelib-lts", "pins": {"torch": "2.5.0", "fakelib": lts}},
            {"name": "fakelib-latest", "pins": {"torch": "2.5.0", "fakelib": latest}},
            {"name": "fakelib-latest-cuda", "device": "cuda", "pins": {"torch": "2.5.0", "fakelib": latest}},
        ],
    }


@pytest.fixture(scope="module")
def nights(tmp_path_factory: pytest.TempPathFactory) -> tuple[Night, Night, Night]:
    for tool in ("bash", "jq"):
        if not shutil.which(tool):
            pytest.skip(f"{tool} is not installed: the nightly's scripts need it (GitHub's runners have it)")
    root = tmp_path_factory.mktemp("nightly")
    releases = [fake_torch("2.5.0", "2024-01-01T00:00:00Z")]
    for i, (version, buggy) in enumerate({"1.2": True, "1.4": False, "1.5": True}.items()):
        releases.append(FakeRelease("fakelib", version, f"2024-02-{i + 1:02d}T00:00:00Z",
                                    module=f"BUGGY = {buggy}\n__version__ = {version!r}\n"))
    index = build_index(root / "index", releases)

    project = root / "project"
    case = project / "cases" / CASE
    case.mkdir(parents=True)
    (case / "repro.py").write_text(SCRIPT)
    (case / "case.yaml").write_text(yaml.safe_dump({
        "title": "fakelib bug", "upstream": ["https://example.invalid/1"], "packages": ["torch", "fakelib"],
        "nproc": [1], "timeout": 60, "signature": "FAKE-SIG",
        "variants": {"bug": {"expect": [{"when": {"fakelib": "<1.3"}, "outcome": "reproduced"},
                                        {"outcome": "fixed"}]}},
    }))

    bin_dir = root / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(_gh_source())
    gh.chmod(0o755)
    from uv import find_uv_bin  # the uv that comes with bugmatrix

    uv = Path(find_uv_bin())
    # from this machine only what finds programs and uv's caches and Pythons; nothing of GitHub's or bugmatrix's
    env = {k: v for k, v in os.environ.items() if k in ("HOME", "TMPDIR") or k.startswith(("UV_", "XDG_"))}
    env |= {
        "PATH": os.pathsep.join([str(bin_dir), str(uv.parent), os.environ.get("PATH", "/usr/bin:/bin")]),
        "LANG": "C.UTF-8",
        # `uv run bugmatrix` is the real uv running the real bugmatrix of this interpreter's environment, offline
        # and without syncing it (on a runner, setup-uv + `uv run` would build that environment from uv.lock)
        "UV_PROJECT": str(ROOT),
        "UV_PROJECT_ENVIRONMENT": sys.prefix,
        "UV_NO_SYNC": "1",
        "UV_OFFLINE": "1",
        "BUGMATRIX_UV": str(uv),
        "BUGMATRIX_ENVS": str(root / "envs"),  # the cells' environments (a runner's is fresh; here they are reused)
        "GH_STANDIN_RUNS": str(root / "gh-runs.json"),
        "GITHUB_ACTIONS": "true",
        "GITHUB_SERVER_URL": "https://github.com",
        "GITHUB_REPOSITORY": REPO,
    }
    replay = Replay(root, project, env)
    first = replay.night(matrix_doc(index, "1.2", "1.4"))
    second = replay.night(matrix_doc(index, "1.2", "1.5"))
    third = replay.night(matrix_doc(index, "1.4", "1.4"))
    return first, second, third


def results_of(job: Job, db: str) -> list[tuple[str, str, str]]:
    return sorted((cell, r.case, r.outcome.value) for cell, r in ResultStore(job.workspace / db).latest())


def check_plan_runs_the_cpu_cells_and_names_the_cuda_ones_it_skips(night: Night) -> None:
    plan = night.job("plan")
    assert plan.result == "success", plan.log
    include = json.loads(plan.outputs["matrix"])["include"]
    assert include == [
        {"cell": "fakelib-lts", "device": "cpu", "runs-on": "ubuntu-latest", "slug": "fakelib-lts"},
        {"cell": "fakelib-latest", "device": "cpu", "runs-on": "ubuntu-latest", "slug": "fakelib-latest"},
    ]
    assert "::notice title=CUDA cells skipped::fakelib-latest-cuda" in plan.log
    assert "| fakelib-latest | cpu | ubuntu-latest | all |" in plan.summary


def check_first_night_merges_reports_and_has_nothing_to_compare(night: Night) -> None:
    assert [(c.outputs, c.result) for c in night.jobs["cell"]] == [({}, "success")] * 2
    for cell in night.jobs["cell"]:
        assert cell.steps["run"].outputs == {"exit-code": "0"}, cell.log
    aggregate = night.job("aggregate")
    assert aggregate.result == "success", aggregate.log
    assert results_of(aggregate, "results/nightly.db") == [
        ("fakelib-latest", CASE, "fixed"), ("fakelib-lts", CASE, "reproduced")]
    store = ResultStore(aggregate.workspace / "results" / "nightly.db")
    assert len(store.runs()) == 2 and len(store.results()) == 2  # one run per shard, one result per cell
    assert "| fakelib-lts | 0 |" in aggregate.summary and "| fakelib-latest | 0 |" in aggregate.summary
    assert "## bugmatrix report" in aggregate.summary
    assert f"| {CASE} · bug (cpu) | R | F |" in aggregate.summary
    html = (aggregate.workspace / "results" / "report.html").read_text()
    assert html.lstrip().lower().startswith("<!doctype html") and "fakelib-latest" in html
    assert aggregate.steps["previous"].outputs == {"found": "false"}
    assert "::notice title=No baseline::" in aggregate.steps["previous"].log
    assert aggregate.steps["compare"].outcome == "skipped"
    assert aggregate.outputs == {"report": "true", "regressions": ""}
    assert {"bugmatrix-report", "bugmatrix-results", "results-fakelib-lts", "results-fakelib-latest"} <= set(
        night.artifacts)
    assert night.conclusion == "success"


def check_a_fixed_case_reproducing_again_turns_the_night_red(night: Night) -> None:
    old, new = night.jobs["cell"]
    assert old.result == "success" and old.steps["run"].outputs == {"exit-code": "0"}
    # the cell whose outcome is not the expected one shows red (continue-on-error: the run goes on)
    assert new.steps["run"].outputs == {"exit-code": "1"} and new.result == "failure", new.log
    assert "::error title=fakelib-latest::bugmatrix run exited 1" in new.log

    aggregate = night.job("aggregate")
    assert aggregate.result == "failure"
    assert results_of(aggregate, "results/nightly.db") == [
        ("fakelib-latest", CASE, "reproduced"), ("fakelib-lts", CASE, "reproduced")]
    assert "| fakelib-latest | 1 |" in aggregate.summary
    assert aggregate.steps["previous"].outputs == {"found": "true"}
    assert "Compared with nightly run [1001](https://github.com/example/bugmatrix/actions/runs/1001)." in (
        aggregate.summary)
    assert aggregate.steps["compare"].outputs == {"regressions": "1", "exit-code": "1"}
    assert f"| **unexpected regression** | fakelib-latest | {CASE}::bug[cpu-1] | fixed | reproduced | fixed |" in (
        aggregate.summary)
    compared = json.loads((aggregate.workspace / "results" / "compare.json").read_text())
    assert compared["unexpected_regressions"] == 1
    [change] = compared["changes"]
    assert (change["cell"], change["case"], change["unexpected"]) == ("fakelib-latest", CASE, True)
    assert change["versions"]["fakelib"] == "1.5"
    # tonight's store is kept (the next night compares with the last *successful* one), then the job fails
    assert aggregate.steps["Keep tonight's results for the next night"].outcome == "success"
    failing = aggregate.steps["Fail on an unexpected regression"]
    assert failing.outcome == "failure" and "1 unexpected regression(s)" in failing.log
    assert aggregate.outputs == {"report": "true", "regressions": "1"}
    assert night.conclusion == "failure"


def check_a_night_without_regressions_is_green(night: Night) -> None:
    aggregate = night.job("aggregate")
    assert aggregate.result == "success", aggregate.log
    assert [c.steps["run"].outputs for c in night.jobs["cell"]] == [{"exit-code": "0"}] * 2
    # night 2 failed, so the baseline is night 1's results: the one change is a fix, which is no failure
    assert "Compared with nightly run [1001]" in aggregate.summary
    assert aggregate.steps["compare"].outputs == {"regressions": "0", "exit-code": "0"}
    assert f"| fixed | fakelib-lts | {CASE}::bug[cpu-1] | reproduced | fixed | fixed |" in aggregate.summary
    assert "unexpected regression" not in aggregate.summary
    assert aggregate.steps["Fail on an unexpected regression"].outcome == "skipped"
    assert night.conclusion == "success"


def test_three_nights_of_the_nightly_workflow(nights: tuple[Night, Night, Night]) -> None:
    """One test, so that pytest-xdist replays the nights once (a module fixture is set up once per worker)."""
    first, second, third = nights
    check_plan_runs_the_cpu_cells_and_names_the_cuda_ones_it_skips(first)
    check_first_night_merges_reports_and_has_nothing_to_compare(first)
    check_a_fixed_case_reproducing_again_turns_the_night_red(second)
    check_a_night_without_regressions_is_green(third)
