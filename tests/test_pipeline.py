"""The one session pipeline that `run`, `run --cell`, pytest and bisect all drive: its steps and its observers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from rich.console import Console
from rich.progress import Progress

from harness.cli import main
from harness.launch.interpreter import Environment, cuda_available
from harness.model.case import Case, load_case
from harness.model.job import Job
from harness.model.outcome import Outcome
from harness.model.result import Result, misses
from harness.output.progress import ProgressDisplay
from harness.session.pipeline import Collector, LocalEnvironment, Observer, Recorder, Resume, Session
from harness.session.plan import Selection, plan_local
from harness.session.store import NullStore, ResultStore, recording

from .conftest import MakeCase

FIXED_SCRIPT = "print('fine')\n"


class Seen(Observer):
    """Every (job id, outcome, reused) the run handed to observers, in order."""

    def __init__(self) -> None:
        self.planned: list[str] = []
        self.seen: list[tuple[str, str, bool]] = []

    def run_started(self, jobs: list[Job]) -> None:
        self.planned = [job.id for job in jobs]

    def result_ready(self, job: Job, result: Result, reused: bool) -> None:
        self.seen.append((job.id, result.outcome.value, reused))


def test_reused_results_advance_the_progress_and_reach_every_observer(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    """A resumed local run launches nothing, yet its progress completes and every observer sees every job."""
    case = make_case(FIXED_SCRIPT, nproc=[1, 2], variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    jobs = plan_local([case], Selection(devices=("cpu",)))
    store = ResultStore(tmp_path / "r.db")
    with recording(store, "first", "test") as run_id:
        Session(LocalEnvironment(env), resume=Resume(store), observers=[Recorder(store, run_id)]).run(jobs, cores=2)
    assert len(store.results()) == 2

    progress, seen, collector = Progress(console=Console(file=open("/dev/null", "w"))), Seen(), Collector()
    with recording(store, "again", "test") as run_id:
        session = Session(
            LocalEnvironment(env),
            resume=Resume(store),
            observers=[Recorder(store, run_id), ProgressDisplay(progress), seen, collector],
        )
        results = session.run(jobs, cores=2)
    [task] = progress.tasks
    assert (task.completed, task.total) == (2, 2)  # before the pipeline, the local path left it at 0 of 2
    assert seen.planned == [j.id for j in jobs]
    assert sorted(seen.seen) == sorted((j.id, "fixed", True) for j in jobs)
    assert sorted(r.item_id for r in collector.reused) == sorted(r.item_id for r in results)
    assert len(store.results()) == 2  # reused results are not saved again


def test_redo_and_no_store_launch_everything(make_case: MakeCase, env: Environment, tmp_path: Path) -> None:
    case = make_case(FIXED_SCRIPT, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    jobs = plan_local([case], Selection(devices=("cpu",)))
    store = ResultStore(tmp_path / "r.db")
    with recording(store, "first", "test") as run_id:
        Session(LocalEnvironment(env), resume=Resume(store), observers=[Recorder(store, run_id)]).run(jobs)
    for resume in (Resume(store, redo=True), Resume(NullStore())):
        seen = Seen()
        Session(LocalEnvironment(env), resume=resume, observers=[seen]).run(jobs)
        assert seen.seen == [(jobs[0].id, "fixed", False)]


def test_rewriting_rules_and_evidence_keeps_the_measurements_and_rejudges_them(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    """What `expect --write` changes (rules, evidence) keeps the recorded results, judged by the new rules; what
    decides the outcome (the script, a variant's arguments, the timeout) launches again."""
    case = make_case(FIXED_SCRIPT, variants={"bug": {"expect": [{"outcome": "reproduced"}]}})
    store = ResultStore(tmp_path / "r.db")

    def run(case: Case) -> list[tuple[str, str, bool]]:
        seen = Seen()
        with recording(store, "run", "test") as run_id:
            session = Session(LocalEnvironment(env), resume=Resume(store), observers=[Recorder(store, run_id), seen])
            results = session.run(plan_local([case], Selection(devices=("cpu",))))
        return [(*s[1:], results[0].expected.value) for s in seen.seen]  # type: ignore[union-attr]

    def edit(**fields: object) -> Case:
        case_file = case.folder / "case.yaml"
        spec = yaml.safe_load(case_file.read_text())
        spec.update(fields)
        case_file.write_text(yaml.safe_dump(spec))
        return load_case(case_file)

    assert run(case) == [("fixed", False, "reproduced")]  # a miss: the bug's rule says reproduced
    rejudged = edit(
        title="retitled",
        evidence="fixed: measured here",
        variants={"bug": {"description": "now fixed", "expect": [{"outcome": "fixed"}]}},
    )
    assert run(rejudged) == [("fixed", True, "fixed")]  # reused, and now as expected
    assert run(edit(timeout=61)) == [("fixed", False, "fixed")]
    with_args = edit(variants={"bug": {"args": ["--x"], "expect": [{"outcome": "fixed"}]}})
    assert run(with_args) == [("fixed", False, "fixed")]
    (case.folder / "repro.py").write_text(FIXED_SCRIPT + "# edited\n")
    assert run(load_case(case.folder / "case.yaml")) == [("fixed", False, "fixed")]


def test_a_null_store_records_nothing_and_has_nothing(tmp_path: Path) -> None:
    store = NullStore()
    with recording(store, "cmd", "machine") as run_id:
        assert run_id == ""
    assert store.runs() == [] and store.latest() == []
    assert store.standing("local", "c", "bug", "f", (Outcome.FIXED,)) is None


def result(outcome: Outcome, expected: Outcome | None, launched: bool = True) -> Result:
    return Result(
        case="c", variant="v", nproc=1, device="cpu", outcome=outcome, expected=expected, reason="", launched=launched
    )


def test_one_function_counts_what_misses_its_expectation() -> None:
    as_expected = result(Outcome.FIXED, Outcome.FIXED)
    wrong = result(Outcome.REPRODUCED, Outcome.FIXED)
    infra = result(Outcome.INFRA, None, launched=False)  # no environment: counts, never as expected
    device_skip = result(Outcome.SKIP, None, launched=False)  # never launched: no verdict either way
    assert misses([as_expected, wrong, infra, device_skip]) == [wrong, infra]


def test_both_cli_paths_count_misses_alike(
    make_case: MakeCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The local path (this interpreter) and the matrix path (`--cell`: a built cell's environment) print the same
    summary and exit code, from the same function; so does each one's JSON."""
    from .fakeindex import build_index, fake_torch

    make_case(
        FIXED_SCRIPT,
        variants={"bug": {"expect": [{"outcome": "fixed"}]}, "wrong": {"expect": [{"outcome": "reproduced"}]}},
    )
    index = build_index(tmp_path / "index", [fake_torch("2.5.0", "2024-01-01T00:00:00Z")])
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local", "python": "3.11", "device": "cpu"},
                "cells": [{"name": "c", "pins": {"torch": "2.5.0"}}],
            }
        )
    )
    paths = {
        "local": ["--device", "cpu"],
        "c": ["--cell", "c", "--matrix", str(tmp_path / "matrix.yaml"), "--envs", str(tmp_path / "envs")],
    }
    for cell, path in paths.items():
        run = ["--cases-dir", str(tmp_path / "cases"), "run", *path, "--no-store"]
        assert main(run) == 1, cell
        assert "1 as expected, 1 not" in capsys.readouterr().out, cell
        assert main([*run, "--json"]) == 1, cell
        out = json.loads(capsys.readouterr().out)
        assert out["ok"] is False and {r["cell"] for r in out["results"]} == {cell}, out
        assert sorted((r["variant"], r["outcome"]) for r in out["results"]) == [("bug", "fixed"), ("wrong", "fixed")]


def test_a_job_for_an_absent_device_is_skipped_before_anything_is_resolved(make_case: MakeCase) -> None:
    if cuda_available():
        pytest.skip("this machine has a CUDA device")

    class Untouchable:
        def expect(self, jobs: list[Job]) -> None:
            return None

        def pins(self, job: Job) -> str | None:
            raise AssertionError("resolved an environment for a device this machine lacks")

        def get(self, job: Job) -> tuple[Environment | None, str, dict[str, str]]:
            raise AssertionError("built an environment for a device this machine lacks")

        def done(self, job: Job) -> None:
            return None

        def close(self) -> None:
            return None

    case = make_case(FIXED_SCRIPT, devices=["cuda"], variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    [job] = plan_local([case], Selection(devices=("cuda",)))
    [skipped] = Session(Untouchable()).run([job])
    assert (skipped.outcome, skipped.launched) == (Outcome.SKIP, False)
    assert "needs a CUDA device" in skipped.reason


def test_two_nccl_ranks_on_one_gpu_are_a_skip_that_says_why(
    make_case: MakeCase, env: Environment, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a one-GPU machine a 2-rank cuda job is `skip` naming NCCL's one-rank-per-GPU rule (not launched, never an
    `error` blamed on the case); the 1-rank job runs."""
    import harness.launch.execute as execute

    monkeypatch.setattr(execute, "gpu_count", lambda: 1)
    case = make_case(
        FIXED_SCRIPT, nproc=[1, 2], devices=["cpu", "cuda"], variants={"bug": {"expect": [{"outcome": "fixed"}]}}
    )
    jobs = plan_local([case], Selection(devices=("cuda",)))
    by_nproc = {job.nproc: result for job, result in zip(jobs, Session(LocalEnvironment(env)).run(jobs), strict=True)}
    assert by_nproc[2].outcome is Outcome.SKIP and not by_nproc[2].launched
    assert "world size 2 needs 2 GPUs" in by_nproc[2].reason and "Duplicate GPU detected" in by_nproc[2].reason
    assert by_nproc[1].launched and by_nproc[1].outcome is Outcome.FIXED  # the script ignores --device cuda
    monkeypatch.setattr(execute, "gpu_count", lambda: 0)
    assert execute.device_missing("cuda", 1) == "needs a CUDA device; this machine has none"
    assert execute.device_missing("cpu", 8) is None


def test_two_ranks_on_a_one_gpu_machine_end_in_seconds_as_a_skip_whatever_the_old_override_says(
    make_case: MakeCase, env: Environment, one_gpu: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a stand-in `nvidia-smi` that lists one GPU, a 2-rank cuda job is a `skip` decided before any launch, in
    seconds, also with $BUGMATRIX_RANKS_PER_GPU=2 (dropped: on an H100 it made every 2-rank job an `error`, rank 0
    waiting ~30 s to be killed); the reason says that the variable is ignored."""
    monkeypatch.setenv("BUGMATRIX_RANKS_PER_GPU", "2")
    case = make_case(FIXED_SCRIPT, nproc=[2], devices=["cuda"], variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    [job] = plan_local([case], Selection(devices=("cuda",)))
    started = time.monotonic()
    [result] = Session(LocalEnvironment(env)).run([job])
    assert time.monotonic() - started < 5
    assert (result.outcome, result.launched) == (Outcome.SKIP, False), result.reason
    assert "world size 2 needs 2 GPUs" in result.reason and "this machine has 1" in result.reason
    assert "$BUGMATRIX_RANKS_PER_GPU is ignored" in result.reason
    assert (one_gpu / "calls").read_text().count("\n") <= 1  # the GPUs were counted once, if nvidia-smi was asked


def test_an_environment_that_vanished_under_the_run_is_infra_not_a_crash(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    """A cell's environment deleted mid-run (a prune, a full disk's clean-up) leaves its remaining jobs `infra`
    naming the interpreter; the run goes on (it crashed with FileNotFoundError from Popen)."""
    case = make_case(FIXED_SCRIPT, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    gone = env.model_copy(update={"python": str(tmp_path / "deleted-env" / "bin" / "python")})
    [job] = plan_local([case], Selection(devices=("cpu",)))
    [result] = Session(LocalEnvironment(gone)).run([job])
    assert result.outcome is Outcome.INFRA and not result.launched
    assert "could not start" in result.reason and "deleted-env" in result.reason


def test_launch_lines_count_across_the_batches_of_one_walk(make_case) -> None:  # noqa: ANN001
    # a compat walk runs one batch per torch through the same observer: "[n/total]" counts across them (it printed
    # "[136/19]" when each batch reset the total)
    import io

    from rich.console import Console

    from harness.model.job import Job
    from harness.model.outcome import Outcome
    from harness.model.result import Result
    from harness.output.progress import LaunchLines

    case = make_case("print('x')\n")
    out = io.StringIO()
    lines = LaunchLines(Console(file=out, width=200))
    job = Job(case=case, variant="bug", nproc=1, device="cpu")
    result = Result(
        case=case.id,
        variant="bug",
        nproc=1,
        device="cpu",
        outcome=Outcome.FIXED,
        expected=None,
        reason="",
        versions={},
        launched=True,
    )
    for batch in (2, 1):
        lines.run_started([job] * batch)
        for _ in range(batch):
            lines.result_ready(job, result, reused=False)
    assert [line.split("]")[0] for line in out.getvalue().splitlines()] == ["[1/2", "[2/2", "[3/3"]


def test_two_cases_with_the_same_script_and_settings_each_get_their_own_result(
    make_case: MakeCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fingerprint holds no case id: two case folders whose scripts and run settings are byte-identical (a case
    copied as a template for the next) share it. Each is launched, and each is in the table, the JSON and the
    store -- on the first run and on resume (7ca3bef: the second printed 'recorded earlier' and was never run)."""
    first = make_case(
        FIXED_SCRIPT,
        case_id="dup-a-first-issue",
        title="the first",
        variants={"bug": {"expect": [{"outcome": "fixed"}]}},
    )
    second = make_case(
        FIXED_SCRIPT,
        case_id="dup-b-second-issue",
        title="the second",
        upstream=["https://example.invalid/issues/2"],
        variants={"bug": {"expect": [{"outcome": "fixed"}]}},
    )
    assert first.script.read_bytes() == second.script.read_bytes()
    db = tmp_path / "r.db"
    run = ["--cases-dir", str(tmp_path / "cases"), "run", "--device", "cpu", "-j", "1", "--db", str(db)]
    assert main(run) == 0
    table = capsys.readouterr().out
    assert "dup-a-first-issue" in table and "dup-b-second-issue" in table and "recorded earlier" not in table
    store = ResultStore(db)
    assert sorted(r.case for _, _, r in store.results()) == ["dup-a-first-issue", "dup-b-second-issue"]
    assert all(r.launched for _, _, r in store.results())
    assert main([*run, "--json"]) == 0  # resumed: each case reuses its own result, neither is launched again
    out = json.loads(capsys.readouterr().out)
    assert sorted(r["case"] for r in out["results"]) == ["dup-a-first-issue", "dup-b-second-issue"]
    assert len(ResultStore(db).results()) == 2
    for case in (first, second):
        reused = store.standing("local", case.id, "bug", store.results()[0][2].fingerprint, (Outcome.FIXED,))
        assert reused is not None and reused.case == case.id


def test_repeats_of_one_job_pool_across_runs_whatever_repeat_asked(
    make_case: MakeCase, env: Environment, tmp_path: Path
) -> None:
    case = make_case(FIXED_SCRIPT, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    jobs = plan_local([case], Selection(devices=("cpu",)))
    store = ResultStore(tmp_path / "r.db")
    for repeat in (2, 3):  # two runs: their fingerprints differ (the repeats), their pool does not
        with recording(store, f"repeat {repeat}", "test") as run_id:
            Session(
                LocalEnvironment(env), resume=Resume(store), observers=[Recorder(store, run_id)], repeat=repeat
            ).run(jobs)
    first, second = (r for _, _, r in store.results())
    assert first.fingerprint != second.fingerprint and first.pool == second.pool != ""
    assert store.pooled("local", case.id, "bug", first.pool) == {"fixed": 5}
