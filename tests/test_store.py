"""The results store: round trip, concurrent writers, idempotent merge, a clear error on a foreign file."""

from __future__ import annotations

import json
import multiprocessing
import sqlite3
from pathlib import Path

import pytest

from harness.model.outcome import Outcome, RankState, RankStatus
from harness.model.result import Result
from harness.session.contract import current
from harness.session.store import SCHEMA_VERSION, ResultStore, StoreError


def result(case: str = "c", variant: str = "bug", nproc: int = 1, outcome: Outcome = Outcome.FIXED) -> Result:
    return Result(
        case=case,
        variant=variant,
        nproc=nproc,
        device="cpu",
        outcome=outcome,
        expected=Outcome.FIXED,
        reason="every rank exited 0",
        versions={"torch": "2.14.1"},
        python="3.11.7",
        ranks=[RankStatus(rank=0, state=RankState.FIXED, exit_code=0, finished_at=1.0)],
        duration_s=1.5,
        log_excerpt="log",
        stacks="",
        started_at=100.0,
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


def slow_latest(store: ResultStore) -> list[tuple[str, Result]]:
    """`latest()` by its one definition (`contract.current`) over every result the store holds: what the `latest`
    table must give."""
    return [(cell, r) for _, cell, r in current(store.results())]


def timed(case: str, at: float, outcome: Outcome = Outcome.FIXED, nproc: int = 1) -> Result:
    return result(case=case, nproc=nproc, outcome=outcome).model_copy(update={"started_at": at})


# The tables as bugmatrix wrote them at schema version 2 (version 1: without `tallies` and `fingerprint`).
V2_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (run_id TEXT PRIMARY KEY, started_at REAL NOT NULL, finished_at REAL, status TEXT NOT NULL,
                   machine TEXT NOT NULL, command TEXT NOT NULL);
CREATE TABLE results (
    run_id TEXT NOT NULL REFERENCES runs(run_id), case_id TEXT NOT NULL, variant TEXT NOT NULL, nproc INTEGER NOT NULL,
    device TEXT NOT NULL, cell TEXT NOT NULL, outcome TEXT NOT NULL, expected TEXT, reason TEXT NOT NULL,
    versions TEXT NOT NULL, python TEXT NOT NULL, ranks TEXT NOT NULL, duration_s REAL NOT NULL,
    log_excerpt TEXT NOT NULL, stacks TEXT NOT NULL, started_at REAL NOT NULL, launched INTEGER NOT NULL,
    tallies TEXT NOT NULL DEFAULT '{}', fingerprint TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, case_id, variant, nproc, device, cell)
);
CREATE INDEX results_case ON results (case_id, variant, cell);
CREATE INDEX results_fingerprint ON results (fingerprint, cell);
"""


def _old_store(path: Path, version: int) -> int:
    """A store as bugmatrix `version` left it: several runs, keys repeated across them, a tie in started_at."""
    schema = (
        V2_SCHEMA
        if version == 2
        else (
            V2_SCHEMA.replace("tallies TEXT NOT NULL DEFAULT '{}', fingerprint TEXT NOT NULL DEFAULT '',", "").replace(
                "CREATE INDEX results_fingerprint ON results (fingerprint, cell);", ""
            )
        )
    )
    db = sqlite3.connect(path)
    db.executescript(schema)
    db.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
    rows = 0
    for n, run in enumerate(["20250101T020000-a-000001", "20250102T020000-a-000002", "20250102T020000-b-000003"]):
        db.execute("INSERT INTO runs VALUES (?, ?, ?, 'complete', 'host', 'bugmatrix run')", (run, n, n + 1.0))
        for case in ("x", "y", "z"):
            for nproc in (1, 2):
                at = 100.0 if case == "z" else 100.0 + n * 10 - nproc * 25 * (case == "y")  # z: a three-way tie
                outcome = (Outcome.REPRODUCED, Outcome.FIXED, Outcome.ERROR)[(n + nproc) % 3].value
                values = [
                    run,
                    case,
                    "bug",
                    nproc,
                    "cpu",
                    "local" if nproc == 1 else "torch-2.5.1",
                    outcome,
                    "fixed",
                    f"reason {n}",
                    json.dumps({"torch": f"2.{n}"}),
                    "3.11.7",
                    "[]",
                    1.0,
                    f"log {n}",
                    "",
                    at,
                    1,
                ]
                if version == 2:
                    values += ["{}", f"fp-{case}"]
                db.execute(f"INSERT INTO results VALUES ({', '.join('?' * len(values))})", values)
                rows += 1
    db.commit()
    db.close()
    return rows


@pytest.mark.parametrize("version", [1, 2])
def test_older_store_upgraded_in_place_keeps_every_result_and_the_latest(tmp_path: Path, version: int) -> None:
    path = tmp_path / "old.db"
    rows = _old_store(path, version)
    before = sqlite3.connect(path).execute("SELECT COUNT(*) FROM results").fetchone()[0]
    store = ResultStore(path)  # upgraded in place
    assert before == rows == len(store.results())
    version_now = sqlite3.connect(path).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version_now == (str(SCHEMA_VERSION),)
    latest = store.latest()
    assert latest == slow_latest(store) and len(latest) == 6
    newest_z = [r for c, r in latest if r.case == "z"]
    assert {r.reason for r in newest_z} == {"reason 2"}  # the tie goes to the greatest run id, as it always did
    assert ResultStore(path).latest() == latest  # opening again: nothing rebuilt differently
    for run in {run for run, _, _ in store.results()}:  # one run: its own results, in key order
        assert store.latest(run) == sorted(
            ((c, r) for rid, c, r in store.results() if rid == run),
            key=lambda cr: (cr[1].case, cr[1].variant, cr[1].nproc, cr[1].device, cr[0]),
        )


def test_latest_after_merge_of_shards_equals_the_slow_definition(tmp_path: Path) -> None:
    shards = [ResultStore(tmp_path / f"shard{i}.db") for i in range(3)]
    for i, shard in enumerate(shards):
        for night in range(3):
            run = shard.begin_run(f"night {night}", f"host-{i}", run_id=f"2025010{night + 1}T020000-h{i}-0000")
            for case in ("x", "y", "z"):
                at = 1000.0 * night + (7 - i if case == "x" else i) + (case == "z") * (-500 * i)
                shard.save(run, timed(case, at, Outcome.REPRODUCED if (night + i) % 2 else Outcome.FIXED))
    merged = ResultStore(tmp_path / "merged.db")
    assert merged.merge([s.path for s in shards[:2]]) == 18
    assert merged.latest() == slow_latest(merged)
    assert merged.merge([s.path for s in shards]) == 9  # the first two again add nothing
    assert merged.merge([s.path for s in shards]) == 0
    assert merged.latest() == slow_latest(merged) and len(merged.latest()) == 3
    empty = ResultStore(tmp_path / "empty.db")  # a shard whose run recorded nothing
    empty.begin_run("nothing", "host-e")
    assert merged.merge([empty.path]) == 0 and len(merged.runs()) == 10
    late = ResultStore(tmp_path / "late.db")  # a shard whose results are older than what the store holds
    late.save(late.begin_run("late", "host-late", run_id="20241231T020000-late-0000"), timed("x", 1.0))
    merged.merge([late.path])
    assert merged.latest() == slow_latest(merged)


def test_saving_again_within_a_run_moves_latest_to_whichever_result_is_newest(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.db")
    old, new = store.begin_run("old", "host", run_id="run-1"), store.begin_run("new", "host", run_id="run-2")
    store.save(old, timed("x", 200.0, Outcome.REPRODUCED))
    store.save(new, timed("x", 300.0, Outcome.FIXED))
    assert [r.outcome for _, r in store.latest()] == [Outcome.FIXED]
    store.save(new, timed("x", 100.0, Outcome.ERROR))  # replaced by an older one: run-1's is now the newest
    assert [r.outcome for _, r in store.latest()] == [Outcome.REPRODUCED] and store.latest() == slow_latest(store)


def test_a_store_an_older_bugmatrix_wrote_to_since_is_made_right_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    store = ResultStore(path)
    store.save(store.begin_run("new", "host"), timed("x", 100.0))
    db = sqlite3.connect(path)  # what bugmatrix 2 does: its own rows, no `latest`, and its version number
    db.execute("INSERT INTO runs VALUES ('old-run', 0, 1, 'complete', 'host', 'bugmatrix run')")
    db.execute(
        "INSERT INTO results (run_id, case_id, variant, nproc, device, cell, outcome, expected, reason, versions, "
        "python, ranks, duration_s, log_excerpt, stacks, started_at, launched, tallies, fingerprint, digest) "
        "SELECT 'old-run', case_id, variant, nproc, device, cell, 'reproduced', expected, "
        "reason, versions, python, ranks, duration_s, log_excerpt, stacks, 500.0, launched, tallies, "
        "fingerprint, digest FROM results"
    )
    db.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    assert [r.outcome for _, r in ResultStore(path).latest()] == [Outcome.REPRODUCED]


def _racer(path: str, worker: int, count: int) -> None:
    store = ResultStore(path)
    run = store.begin_run("race", f"host-{worker}", run_id=f"run-{worker}")
    for i in range(count):  # every worker saves the same keys, its started_at interleaved with the others'
        store.save(run, timed(f"case-{i % 5}", 1000.0 + i * 4 + worker, nproc=1 + i % 2))


def test_concurrent_saves_keep_latest_consistent(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    ResultStore(path)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_racer, args=(str(path), w, 30)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    store = ResultStore(path)
    assert len(store.results()) == 4 * 10  # each worker's run holds 10 keys (replaced 3 times each)
    assert store.latest() == slow_latest(store) and len(store.latest()) == 10
    assert {run for run, _, _ in store.results()} == {f"run-{w}" for w in range(4)}
    assert all(
        r.started_at == 1000.0 + (20 + k) * 4 + 3
        for k, (_, r) in enumerate(sorted(store.latest(), key=lambda cr: cr[1].started_at))
    )


def test_a_schema_6_store_gains_the_pool_column_and_pools_from_then_on(tmp_path: Path) -> None:
    from harness.session import store as module

    path = tmp_path / "six.db"  # a store as schema 6 (93b7231) left it: every column but `pool`
    db = sqlite3.connect(path)
    db.executescript(module._SCHEMA.replace("    pool TEXT NOT NULL DEFAULT '',\n", ""))
    db.execute("INSERT INTO meta VALUES ('schema_version', '6')")
    db.execute("INSERT INTO runs VALUES ('old-run', 0, 1, 'complete', 'host', 'bugmatrix run')")
    old = result(outcome=Outcome.FLAKY).model_copy(update={"tallies": {"fixed": 3, "reproduced": 2}})
    columns = [c for c in module._RESULT_COLUMNS if c != "pool"]
    values = ["old-run", "c", "bug", 1, "cpu", "local", "flaky", "fixed", "why", "{}", "3.11.7", "[]", 1.0, "", ""]
    values += [old.started_at, 1, json.dumps(old.tallies), "fp-5", "d1", "{}"]
    db.execute(f"INSERT INTO results ({', '.join(columns)}) VALUES ({', '.join('?' * len(values))})", values)
    db.commit()
    db.close()
    store = ResultStore(path)  # upgraded in place
    assert "pool" in {row[1] for row in sqlite3.connect(path).execute("PRAGMA table_info(results)")}
    assert sqlite3.connect(path).execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("7",)
    assert [(r.pool, r.tallies) for _, _, r in store.results()] == [("", {"fixed": 3, "reproduced": 2})]
    run = store.begin_run("new", "host")
    store.save(run, old.model_copy(update={"pool": "p", "tallies": {"reproduced": 4, "fixed": 6}, "started_at": 9.0}))
    assert store.pooled("local", "c", "bug", "p") == {"fixed": 6, "reproduced": 4}  # the old row had no pool
    assert SCHEMA_VERSION == 7
