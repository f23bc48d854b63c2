"""The results contract (harness/session/contract.py): one suite run against every implementation -- the SQLite
store, the record, the null store, the record layered under a store, a store opened read-only -- and the current
result defined once: every store's `latest` is `current` of its own `results`, the SQLite store's `latest` table
included, on any rows (Hypothesis)."""

from __future__ import annotations

import json
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.model.cell import CASE_CELLS, COMPAT_CELLS, CellKind, kind_of, kind_sql
from harness.model.job import Job, fingerprint
from harness.model.outcome import Outcome
from harness.model.result import OPTIONAL_FIELDS, Result
from harness.session.contract import Entry, ReadOnly, Store, current
from harness.session.readers import open_reader
from harness.session.record import LayeredStore, Record, RecordError, RecordStore, from_row, load, to_row, write
from harness.session.store import NullStore, ResultStore, StoreError

CELLS = ["local", "torch-2.5.1", "bisect-torch-2.6.0", "compat-torch-2.5.1-torchrec-1.0"]
RUNS = ["20260101T000000-a-000001", "20260101T000000-b-000002", "20260102T000000-a-000003"]


def result(case: str, nproc: int, outcome: Outcome, started: int, digest: str, fingerprint: str = "") -> Result:
    return Result(
        case=case,
        variant="bug",
        nproc=nproc,
        device="cpu",
        outcome=outcome,
        expected=None,
        reason="why",
        versions={"torch": "2.5.1"},
        python="3.11.7",
        duration_s=1.0,
        started_at=float(started),  # whole seconds: the record keeps dates to the second
        fingerprint=fingerprint,
        digest=digest,
    )


def _sqlite(folder: Path, name: str, entries: list[Entry]) -> ResultStore:
    store = ResultStore(folder / f"{name}.db")
    for run in sorted({run for run, _, _ in entries}):
        store.begin_run("bugmatrix run", "host", run_id=run)
    for run, cell, r in entries:
        store.save(run, r, cell)
    return store


def _record(folder: Path, entries: list[Entry]) -> RecordStore:
    record = Record(
        rows=[to_row(run, cell, r, "m-1") for run, cell, r in entries],
        runs={
            run: {"started": f"2020-01-01T00:00:0{n}Z", "machine": "m-1", "command": "run"}
            for n, run in enumerate(RUNS)
        },
        machines={"m-1": {"cpu": "Test CPU"}},
    )
    return RecordStore(record, lambda case, variant: None, folder / "record")


def _layered(folder: Path, entries: list[Entry]) -> LayeredStore:
    half = len(entries) // 2  # the older runs' half in the record, the rest in the local store
    return LayeredStore(_sqlite(folder, "local", entries[half:]), _record(folder, entries[:half]))


MAKERS: dict[str, Callable[[Path, list[Entry]], Store]] = {
    "sqlite": lambda folder, entries: _sqlite(folder, "store", entries),
    "record": _record,
    "null": lambda folder, entries: NullStore(),
    "layered": _layered,
    "read-only": lambda folder, entries: ReadOnly(_sqlite(folder, "store", entries)),
}
WRITABLE = {"sqlite", "layered"}


@pytest.fixture(params=sorted(MAKERS))
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[list[Entry]], Store]:
    """Every implementation of the contract, holding the entries it is given (the null store: none)."""
    return lambda entries: MAKERS[request.param](tmp_path, entries)


@pytest.fixture
def kind(make: Callable[[list[Entry]], Store], request: pytest.FixtureRequest) -> str:
    return request.node.callspec.params["make"]


def _sample() -> list[Entry]:
    fixed, reproduced, infra = Outcome.FIXED, Outcome.REPRODUCED, Outcome.INFRA
    return [
        (RUNS[0], "local", result("a", 1, reproduced, 100, "d1", "fp-a")),
        (RUNS[0], "torch-2.5.1", result("a", 1, fixed, 100, "d1")),
        (RUNS[0], CELLS[3], result("a", 1, fixed, 100, "d1")),
        (RUNS[1], "local", result("a", 1, fixed, 200, "d1", "fp-a")),
        (RUNS[1], "bisect-torch-2.6.0", result("b", 2, fixed, 200, "d2")),
        (RUNS[2], "local", result("a", 1, infra, 300, "d1")),  # shadowed: RUNS[1]'s measured the same digest
        (RUNS[2], "torch-2.5.1", result("a", 1, infra, 300, "d9")),  # not shadowed: another digest
    ]


def _keys(pairs: list[tuple[str, Result]]) -> list[tuple]:
    return [(cell, r.case, r.nproc, r.outcome, r.started_at) for cell, r in pairs]


def test_every_store_keeps_the_contract_and_none_inherits_another() -> None:
    for implementation in (ResultStore, RecordStore, NullStore, LayeredStore, ReadOnly):
        assert issubclass(implementation, Store)
        others = {ResultStore, RecordStore, NullStore, LayeredStore, ReadOnly} - {implementation}
        assert not any(issubclass(implementation, other) for other in others), implementation


def test_latest_is_the_current_result_of_the_stores_own_results(make, kind: str) -> None:  # noqa: ANN001
    store = make(_sample())
    for kinds in (CASE_CELLS, COMPAT_CELLS):
        assert _keys(store.latest(kinds=kinds)) == _keys([(c, r) for _, c, r in current(store.results(kinds=kinds))])
    if kind == "null":
        assert store.latest() == [] and store.results() == [] and store.runs() == []
        return
    assert _keys(store.latest()) == [
        ("local", "a", 1, Outcome.FIXED, 200.0),  # the newer infra result measured the same digest: it stands
        ("torch-2.5.1", "a", 1, Outcome.INFRA, 300.0),
        ("bisect-torch-2.6.0", "b", 2, Outcome.FIXED, 200.0),
    ]
    for run in RUNS:  # one run: its own results, in key order
        assert _keys(store.latest(run)) == _keys(
            [(c, r) for _, c, r in current(e for e in store.results() if e[0] == run)]
        )


def test_each_reader_reads_only_the_kinds_of_cell_asked_for(make, kind: str) -> None:  # noqa: ANN001
    store = make(_sample())
    assert all(kind_of(cell) in CASE_CELLS for _, cell, _ in store.results())
    assert all(kind_of(cell) is CellKind.COMPAT for cell, _ in store.latest(kinds=COMPAT_CELLS))
    if kind == "null":
        return
    assert [cell for _, cell, _ in store.results(kinds=COMPAT_CELLS)] == [CELLS[3]]
    assert len(store.results()) == 6
    assert [r.run_id for r in store.runs(with_results=True, kinds=COMPAT_CELLS)] == [RUNS[0]]
    assert [r.run_id for r in store.runs(with_results=True)] == RUNS
    order = [(run, r.case, r.variant, cell, r.device, r.nproc) for run, cell, r in store.results()]
    assert order == sorted(order)


def test_standing_is_the_newest_result_of_the_fingerprint_among_the_outcomes(make, kind: str) -> None:  # noqa: ANN001
    store = make(_sample())
    settled = (Outcome.FIXED, Outcome.REPRODUCED)
    found = store.standing("local", "a", "bug", "fp-a", settled)
    assert store.standing("local", "a", "bug", "", settled) is None  # no fingerprint: nothing stands
    assert store.standing("local", "b", "bug", "fp-a", settled) is None  # never another case's result
    if kind == "null":
        assert found is None
        return
    assert found is not None and (found.outcome, found.started_at) == (Outcome.FIXED, 200.0)
    only = store.standing("local", "a", "bug", "fp-a", (Outcome.REPRODUCED,))
    assert only is not None and only.started_at == 100.0


def test_writers_write_or_refuse_in_one_line(make, kind: str, tmp_path: Path) -> None:  # noqa: ANN001
    store = make([])
    new = result("c", 1, Outcome.FIXED, 500, "d3")
    if kind in WRITABLE:
        run = store.begin_run("bugmatrix run", "host", run_id=RUNS[2])
        store.save(run, new)
        store.save(run, new)  # the same key within a run replaces
        store.end_run(run)
        assert [(r, c, x.case) for r, c, x in store.results()] == [(RUNS[2], "local", "c")]
        assert [r.status for r in store.runs()] == ["complete"]
        assert store.merge([_sqlite(tmp_path, "shard", _sample()).path]) == 7
        assert store.merge([tmp_path / "shard.db"], COMPAT_CELLS) == 0  # idempotent
    elif kind == "null":
        run = store.begin_run("bugmatrix run", "host")
        store.save(run, new)
        store.end_run(run)
        assert run == "" and store.results() == []
        with pytest.raises(StoreError):
            store.merge([tmp_path / "shard.db"])
    else:
        for write in (
            lambda: store.begin_run("bugmatrix run", "host"),
            lambda: store.end_run(RUNS[0]),
            lambda: store.save(RUNS[0], new),
            lambda: store.merge([tmp_path / "shard.db"]),
        ):
            with pytest.raises(StoreError, match="record fold|opened to read"):
                write()
        assert store.results() == []


# ---------------------------------------------------------------------------- the current result, on any rows

_entries = st.lists(
    st.tuples(
        st.sampled_from(RUNS),
        st.sampled_from(CELLS),
        st.sampled_from(["a", "b"]),
        st.sampled_from([1, 2]),
        st.sampled_from(list(Outcome)),
        st.integers(0, 2),  # few moments: ties across runs are common
        st.sampled_from(["", "d1", "d2"]),
    ),
    min_size=2,
    max_size=30,
)
_TIE = [(RUNS[1], "local", "a", 1, Outcome.FIXED, 1, "d1"), (RUNS[0], "local", "a", 1, Outcome.REPRODUCED, 1, "d1")]
_SHADOW = [(RUNS[0], "local", "a", 1, Outcome.FIXED, 1, "d1"), (RUNS[1], "local", "a", 1, Outcome.INFRA, 2, "d1")]


def _unique(drawn: list[tuple]) -> list[Entry]:
    """The drawn entries as a store holds them: one result per (run, key), the last saved."""
    held: dict[tuple, Entry] = {}
    for run, cell, case, nproc, outcome, at, digest in drawn:
        held[(run, cell, case, nproc)] = (run, cell, result(case, nproc, outcome, at, digest))
    return list(held.values())


@pytest.mark.parametrize("name", sorted(MAKERS))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(drawn=_entries)
@example(drawn=_TIE)
@example(drawn=_SHADOW)
def test_every_stores_latest_is_the_one_definition_on_any_rows(name: str, drawn: list[tuple]) -> None:
    entries = _unique(drawn)
    with tempfile.TemporaryDirectory() as folder:
        store = MAKERS[name](Path(folder), entries)
        for kinds in (CASE_CELLS, COMPAT_CELLS):
            expected = current(e for e in entries if kind_of(e[1]) in kinds) if name != "null" else []
            assert _keys(store.latest(kinds=kinds)) == _keys([(c, r) for _, c, r in expected])
            if name == "sqlite":  # the `latest` table gives back exactly what was saved
                assert store.latest(kinds=kinds) == [(c, r) for _, c, r in expected]


@settings(max_examples=200, deadline=None)
@given(cell=st.one_of(st.sampled_from([*CELLS, "local2", "compat", "bisect", "compat-", "xlocal"]), st.text()))
def test_the_sql_kind_of_a_cell_is_kind_of(cell: str) -> None:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE cells (cell TEXT NOT NULL)")
    db.execute("INSERT INTO cells VALUES (?)", (cell,))
    assert db.execute(f"SELECT {kind_sql('cell')} FROM cells").fetchone()[0] == kind_of(cell).value


def test_a_reading_command_cannot_write_to_the_store_it_reads(tmp_path: Path) -> None:
    db = _sqlite(tmp_path, "local", _sample()).path
    reader = open_reader(db, True, [], tmp_path / "record")
    with pytest.raises(StoreError, match="opened to read"):
        reader.save(RUNS[0], result("z", 1, Outcome.FIXED, 1, "d1"))
    assert "z" not in {r.case for _, _, r in ResultStore(db).results()}
    assert len(reader.latest()) == 3  # what it reads is the store's


# ------------------------------------------------------------------------------ new result fields: one place


def test_a_new_optional_result_field_goes_through_one_place(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    make_case,  # noqa: ANN001
) -> None:
    case = make_case("print('x')\n")
    job = Job(case, "bug", 1, "cpu")
    plain = result("fake-1-case", 1, Outcome.FIXED, 100, "d1", "fp-1")
    before = (json.dumps(to_row(RUNS[0], "local", plain, "m-1")), plain.model_dump(mode="json"), fingerprint(job, "p"))
    monkeypatch.setitem(OPTIONAL_FIELDS, "launch", str)  # what a warm-launch issue would declare

    # unset: the record row, the payload item and the fingerprint are what they were before the field existed
    assert (json.dumps(to_row(RUNS[0], "local", plain, "m-1")), plain.model_dump(mode="json")) == before[:2]
    assert fingerprint(job, "p", extra=plain.extra) == before[2]

    # set: given at a payload item's top level, it is in the row, the store, the record and the fingerprint
    warm = Result.model_validate({**plain.model_dump(mode="json"), "launch": "warm"})
    assert warm.extra == {"launch": "warm"} and warm.model_dump(mode="json")["launch"] == "warm"
    row = to_row(RUNS[0], "local", warm, "m-1")
    assert row["launch"] == "warm" and from_row(row)[2].extra == {"launch": "warm"}
    store = _sqlite(tmp_path, "s", [(RUNS[0], "local", warm), (RUNS[1], "local", plain)])
    assert [r.extra for _, _, r in store.results()] == [{"launch": "warm"}, {}]
    record = Record(rows=[row], runs={RUNS[0]: {"started": "2020-01-01T00:00:00Z", "machine": "m-1", "command": ""}})
    write(tmp_path / "rec", record)
    assert [r["launch"] for r in load(tmp_path / "rec").rows] == ["warm"]
    assert fingerprint(job, "p", extra=warm.extra) != before[2]

    # checked: a record row's value of another type names file, line and field; an undeclared one is refused
    path = tmp_path / "rec" / "results" / "fake-1-case.jsonl"
    path.write_text(path.read_text().replace('"launch":"warm"', '"launch":3'))
    with pytest.raises(RecordError, match=r"fake-1-case.jsonl:1: launch: 3 is not a str"):
        load(tmp_path / "rec")
    with pytest.raises(ValueError, match="mode: not a declared optional result field"):
        Result.model_validate({**plain.model_dump(), "extra": {"mode": "x"}})


# ---------------------------------------------------------------------------- repeats pooled across runs


def _repeated(
    run: str, cell: str, pool: str, tallies: dict[str, int], outcome: Outcome, launched: bool = True
) -> Entry:
    r = result("a", 1, outcome, 100 + RUNS.index(run), "d1", f"fp-{sum(tallies.values())}")
    return (run, cell, r.model_copy(update={"tallies": tallies, "pool": pool, "launched": launched}))


def test_every_store_adds_up_the_launches_of_one_pool_over_every_run(make, kind: str) -> None:  # noqa: ANN001
    flaky, reproduced = Outcome.FLAKY, Outcome.REPRODUCED
    entries = [
        _repeated(RUNS[0], "local", "pool-a", {"reproduced": 2, "fixed": 3}, flaky),  # --repeat 5
        _repeated(RUNS[1], "local", "pool-a", {"fixed": 8, "error": 1, "reproduced": 1}, flaky),  # --repeat 10
        _repeated(RUNS[2], "local", "pool-a", {}, Outcome.FIXED),  # launched once: its outcome once
        _repeated(RUNS[2], "torch-2.5.1", "pool-a", {"reproduced": 9}, reproduced),  # another cell
        _repeated(RUNS[1], "bisect-torch-2.6.0", "pool-b", {"reproduced": 4}, reproduced),  # another pool
        _repeated(RUNS[0], "bisect-torch-2.6.0", "pool-b", {}, Outcome.INFRA, launched=False),  # nothing launched
    ]
    store = make(entries)
    pooled = store.pooled("local", "a", "bug", "pool-a")
    assert store.pooled("local", "a", "bug", "") == {}  # no pool: nothing pools
    assert store.pooled("local", "b", "bug", "pool-a") == {}  # never another case's launches
    if kind == "null":
        assert pooled == {}
        return
    assert pooled == {"error": 1, "fixed": 12, "reproduced": 3}  # 5 + 10 + 1 launches over three runs
    assert store.pooled("bisect-torch-2.6.0", "a", "bug", "pool-b") == {"reproduced": 4}
    assert [r.pool for _, _, r in store.results() if r.case == "a"].count("pool-a") == 4  # kept as saved


def test_the_pool_is_the_fingerprint_less_the_repeats_and_the_fingerprint_is_unchanged(make_case) -> None:  # noqa: ANN001
    import hashlib

    from harness.model.job import pool_of, run_digest

    job = Job(make_case("print('x')\n"), "bug", 2, "cpu")
    parts = [run_digest(job.case, job.variant), "bug", 2, "cpu", "pins"]
    for repeat in (1, 5, 10):  # the fingerprint as 93b7231 computed it
        old = hashlib.sha256(json.dumps([*parts, repeat]).encode()).hexdigest()[:32]
        assert fingerprint(job, "pins", repeat) == old
    assert pool_of(job, "pins") not in {fingerprint(job, "pins", k) for k in (1, 5, 10)}
    assert pool_of(job, "pins") != pool_of(job, "other pins")
    assert pool_of(job, "pins") != pool_of(Job(job.case, "bug", 1, "cpu"), "pins")


def test_a_result_without_a_pool_is_the_row_and_payload_it_was_and_one_with_a_pool_round_trips(tmp_path: Path) -> None:
    plain = result("fake-1-case", 1, Outcome.FIXED, 100, "d1", "fp-1")
    assert "pool" not in to_row(RUNS[0], "local", plain, "m-1") and "pool" not in plain.model_dump(mode="json")
    pooled = plain.model_copy(update={"pool": "p-1"})
    row = to_row(RUNS[0], "local", pooled, "m-1")
    assert (
        row["pool"] == "p-1"
        and from_row(row)[2].pool == "p-1"
        and from_row(to_row(RUNS[0], "l", plain, "m"))[2].pool == ""
    )
    assert Result.model_validate(pooled.model_dump(mode="json")).pool == "p-1"
    store = _sqlite(tmp_path, "s", [(RUNS[0], "local", pooled), (RUNS[1], "local", plain)])
    assert [r.pool for _, _, r in store.results()] == ["p-1", ""]
    record = Record(rows=[row], runs={RUNS[0]: {"started": "2020-01-01T00:00:00Z", "machine": "m-1", "command": ""}})
    write(tmp_path / "rec", record)
    assert [r["pool"] for r in load(tmp_path / "rec").rows] == ["p-1"]
    path = tmp_path / "rec" / "results" / "fake-1-case.jsonl"
    path.write_text(path.read_text().replace('"pool":"p-1"', '"pool":7'))
    with pytest.raises(RecordError, match=r"fake-1-case.jsonl:1: pool: 7 is not a str"):
        load(tmp_path / "rec")
