"""The results store: round trip, concurrent writers, idempotent merge, a clear error on a foreign file."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from harness.model.outcome import Outcome, RankState, RankStatus
from harness.model.result import Result
from harness.session.store import ResultStore, StoreError


def result(case: str = "c", variant: str = "bug", nproc: int = 1, outcome: Outcome = Outcome.FIXED) -> Result:
    return Result(
        case=case, variant=variant, nproc=nproc, device="cpu", outcome=outcome, expected=Outcome.FIXED,
        reason="every rank exited 0", versions={"torch": "2.14.1"}, python="3.11.7",
        ranks=[RankStatus(rank=0, state=RankState.FIXED, exit_code=0, finished_at=1.0)], duration_s=1.5,
        log_excerpt="log", stacks="", started_at=100.0,
    )


def test_round_trip(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.db")
    run = store.begin_run("bugmatrix run", "host")
    original = result()
    store.save(run, original)
    store.save(run, original)  # the same key within a run replaces, never duplicates
    store.end_run(run)
    [(run_id, cell, back)] = store.results()
    assert (run_id, cell) == (run, "local")
    assert back == original
    assert [r.status for r in store.runs()] == ["complete"]


def _writer(path: str, worker: int, count: int) -> None:
    store = ResultStore(path)
    for i in range(count):
        store.save("shared-run", result(case=f"case-{worker}-{i}"))


def test_concurrent_writers_lose_and_duplicate_nothing(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    ResultStore(path).begin_run("pytest -n 4", "host", run_id="shared-run")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(path), w, 25)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    cases = [r.case for _, _, r in ResultStore(path).results()]
    assert len(cases) == 100 and len(set(cases)) == 100


def test_merge_is_idempotent(tmp_path: Path) -> None:
    a, b, merged = ResultStore(tmp_path / "a.db"), ResultStore(tmp_path / "b.db"), ResultStore(tmp_path / "m.db")
    run_a, run_b = a.begin_run("shard a", "host-a"), b.begin_run("shard b", "host-b")
    a.save(run_a, result("x"))
    b.save(run_b, result("y"))
    b.save(run_b, result("z"))
    assert merged.merge([a.path, b.path]) == 3
    assert merged.merge([a.path, b.path]) == 0
    assert sorted(r.case for _, _, r in merged.results()) == ["x", "y", "z"]
    assert len(merged.runs()) == 2


def test_foreign_file_is_a_clear_error(tmp_path: Path) -> None:
    bogus = tmp_path / "notes.db"
    bogus.write_text("this is not sqlite " * 100)
    with pytest.raises(StoreError, match="notes.db: not a bugmatrix results store"):
        ResultStore(bogus)
    with pytest.raises(StoreError, match="no such store file"):
        ResultStore(tmp_path / "m.db").merge([tmp_path / "missing.db"])
