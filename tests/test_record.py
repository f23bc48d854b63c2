"""The committed record (harness/session/record.py): deterministic export, a byte-identical round trip through a
store, idempotent folding that keeps what is recorded, superseded history, a corrupt file named by file and line,
and every reader answering from the record alone, offline, without writing anything."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.model.case import Case
from harness.model.job import run_digest
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.session.folding import fold_store, import_record
from harness.session.readers import open_reader
from harness.session.record import Record, RecordError, load, render, write
from harness.session.store import ResultStore, StoreError
from tests.helpers import MACHINE, ROOT, record_result, record_store, two_cells


@pytest.fixture
def case(make_case) -> Case:  # noqa: ANN001
    return make_case(
        "print('x')\n",
        case_id="fake-1-case",
        variants={"bug": {"expect": [{"when": {"torch": "<2.1"}, "outcome": "reproduced"}, {"outcome": "fixed"}]}},
    )


def test_the_same_store_exports_byte_identically_and_keeps_only_the_deciding_lines(tmp_path: Path, case: Case) -> None:
    store = record_store(tmp_path / "r.db", case, two_cells(case))
    first, second = Record(), Record()
    fold_store(first, store, [case])
    fold_store(second, store, [case])
    assert render(first) == render(second)
    rows = [json.loads(line) for line in render(first)[f"results/{case.id}.jsonl"].splitlines()]
    assert [r["cell"] for r in rows] == ["torch-2.0.1", "torch-2.1.2"]
    assert rows[0]["excerpt"] == "[rank 0] REPRODUCED: FAKE-BUG-SIGNATURE seen"  # not the noise, not the stacks
    assert "stack" not in render(first)[f"results/{case.id}.jsonl"]
    assert rows[0]["machine"].startswith("m-") and rows[0]["digest"] == run_digest(case, "bug")
    machines = render(first)["machines.jsonl"]
    assert "Test CPU" in machines and '"host"' not in machines  # the machine, not the host name


def test_export_import_export_is_byte_identical(tmp_path: Path, case: Case) -> None:
    record = Record()
    fold_store(record, record_store(tmp_path / "r.db", case, two_cells(case)), [case])
    write(tmp_path / "a", record)
    back = ResultStore(tmp_path / "back.db")
    assert import_record(load(tmp_path / "a"), back) == 2
    again = Record()
    fold_store(again, back, [case])
    write(tmp_path / "b", again)
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "b") for p in (tmp_path / "b").rglob("*") if p.is_file())
    for name in files:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name


def test_folding_is_idempotent_and_a_confirmation_leaves_the_row_unchanged(tmp_path: Path, case: Case) -> None:
    record = Record()
    fold_store(record, record_store(tmp_path / "r.db", case, two_cells(case)), [case])
    write(tmp_path / "rec", record)
    before = {p: p.read_bytes() for p in (tmp_path / "rec").rglob("*.jsonl")}
    # the next night measures the same fingerprints with the same verdicts: nothing changes
    night = record_store(
        tmp_path / "night.db",
        case,
        [
            ("torch-2.0.1", record_result(case, "2.0.1", Outcome.REPRODUCED, 9000.0)),
            ("torch-2.1.2", record_result(case, "2.1.2", Outcome.FIXED, 9010.0)),
        ],
    )
    record = load(tmp_path / "rec")
    assert fold_store(record, night, [case]) == (0, 0)
    assert write(tmp_path / "rec", record) == []
    assert before == {p: p.read_bytes() for p in (tmp_path / "rec").rglob("*.jsonl")}
    # a newer result of the same fingerprint that says something else replaces the row
    flip = record_store(
        tmp_path / "flip.db", case, [("torch-2.1.2", record_result(case, "2.1.2", Outcome.REPRODUCED, 9020.0))]
    )
    assert fold_store(record, flip, [case]) == (0, 1)
    assert [r["outcome"] for r in record.rows if r["cell"] == "torch-2.1.2"] == ["reproduced"]


def test_a_superseded_result_is_kept_as_history_and_never_read_as_a_verdict(tmp_path: Path, case: Case) -> None:
    old = record_result(case, "2.1.2", Outcome.REPRODUCED, 1000.0, digest="an-earlier-script")
    record = Record()
    fold_store(record, record_store(tmp_path / "r.db", case, [("torch-2.1.2", old)]), [case])
    write(tmp_path / "rec", record)
    assert load(tmp_path / "rec").rows[0]["digest"] == "an-earlier-script"  # kept, with the digest it measured
    reader = open_reader(tmp_path / "none.db", False, [case], tmp_path / "rec")
    assert reader.latest() == [] and reader.results() == []
    assert reader.standing("torch-2.1.2", case.id, "bug", old.fingerprint, (Outcome.REPRODUCED,)) is None


def test_a_record_file_that_does_not_parse_names_file_and_line_and_nothing_is_written(
    tmp_path: Path, case: Case
) -> None:
    record = Record()
    fold_store(record, record_store(tmp_path / "r.db", case, two_cells(case)), [case])
    write(tmp_path / "rec", record)
    path = tmp_path / "rec" / "results" / f"{case.id}.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[1][:-5] + "\n")
    with pytest.raises(RecordError, match=rf"{path.name}:2: not a JSON object"):
        load(tmp_path / "rec")
    path.write_text(lines[0].replace('"outcome":"reproduced"', '"outcome":"maybe"') + "\n")
    with pytest.raises(RecordError, match=rf"{path.name}:1: 'maybe' is not a valid Outcome"):
        load(tmp_path / "rec")
    path.write_text(lines[0].replace('"nproc":1', '"nproc":"one"') + "\n")
    with pytest.raises(RecordError, match=rf"{path.name}:1: nproc: 'one' is not a int"):
        load(tmp_path / "rec")
    snapshot = sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    code = main(
        [
            "--cases-dir",
            str(case.folder.parent),
            "record",
            "fold",
            "--record",
            str(tmp_path / "rec"),
            "--offline",
            str(tmp_path / "r.db"),
        ]
    )
    assert code == 2
    assert snapshot == sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))


def test_a_file_read_in_one_parse_still_names_the_line_that_is_not_one_object(tmp_path: Path, case: Case) -> None:
    """The whole-file parse (the fast path) must not accept what the line-by-line reading refuses. Nor may a row
    spliced from two broken lines pass as a row with a changed reason: read in one parse of the joined lines,
    `{row},{half` and `rest}` were two objects, the second's reason holding the joining comma."""
    record = Record()
    fold_store(record, record_store(tmp_path / "r.db", case, two_cells(case)), [case])
    write(tmp_path / "rec", record)
    path = tmp_path / "rec" / "results" / f"{case.id}.jsonl"
    first, second = path.read_text().splitlines()
    path.write_text(f"{first},{second}\n")  # two objects on one line: a valid array when the lines are joined
    with pytest.raises(RecordError, match=rf"{path.name}:1: not a JSON object \(Extra data\)"):
        load(tmp_path / "rec")
    cut = second.index("every rank") + len("every")  # a spliced pair: `{row},{half` then `rest}`
    path.write_text(f"{first},{second[:cut]}\n{second[cut:]}\n")
    with pytest.raises(RecordError, match=rf"{path.name}:1: not a JSON object \(Extra data\)"):
        load(tmp_path / "rec")
    path.write_text(f"{first}{second}\n")
    with pytest.raises(RecordError, match=rf"{path.name}:1: not a JSON object \(Extra data\)"):
        load(tmp_path / "rec")
    path.write_text(f"{first}\n {second} \n")  # spaces around one object: still one object
    assert len(load(tmp_path / "rec").rows) == 2
    cut = second.index(",") + 1  # one object over two lines
    path.write_text(f"{first}\n{second[:cut]}\n{second[cut:]}\n")
    with pytest.raises(RecordError, match=rf"{path.name}:2: not a JSON object"):
        load(tmp_path / "rec")
    path.write_text(f"{first}\n[{second}]\n")
    with pytest.raises(RecordError, match=rf"{path.name}:2: not a JSON object$"):
        load(tmp_path / "rec")
    path.write_text(first.replace('"nproc":1', '"nproc":true') + "\n")  # bool is no int (the fast check says so)
    with pytest.raises(RecordError, match=rf"{path.name}:1: nproc: True is not a int"):
        load(tmp_path / "rec")
    path.write_text(first.replace('"duration_s":8.0', '"duration_s":8') + "\n\n" + second + "\n")
    assert [row["duration_s"] for row in load(tmp_path / "rec").rows] == [8, 8.0]


def test_a_result_read_from_the_record_is_the_model_a_constructed_one_is(tmp_path: Path, case: Case) -> None:
    """`from_row` builds Results without pydantic's per-field handling: the same model, every field set, usable."""
    from harness.session.record import from_row, to_row

    original = record_result(case, "2.0.1", Outcome.REPRODUCED, 1000.0)
    _, cell, read = from_row(to_row("run-1", "torch-2.0.1", original, "m-1"))
    assert cell == "torch-2.0.1"
    expected = Result.model_construct(**{**read.__dict__})
    assert read == expected and read.model_fields_set == set(Result.model_fields) == expected.model_fields_set
    assert read.model_dump() == expected.model_dump()
    assert (read.case, read.outcome, read.versions, read.tallies, read.started_at) == (
        original.case,
        original.outcome,
        original.versions,
        original.tallies,
        original.started_at,
    )
    copy = read.model_copy(update={"expected": Outcome.FIXED})
    assert copy.ok is False and read.expected is None
    read.reason = "changed"  # an assignment works as on any model (the fields-set is the instance's own)
    assert read.reason == "changed" and expected.reason != "changed"


def test_layered_reader_prefers_the_newest_and_writes_to_the_local_store_only(tmp_path: Path, case: Case) -> None:
    record = Record()
    fold_store(record, record_store(tmp_path / "r.db", case, two_cells(case)), [case])
    write(tmp_path / "rec", record)
    local = record_store(
        tmp_path / "local.db", case, [("torch-2.1.2", record_result(case, "2.1.2", Outcome.REPRODUCED, 5000.0))]
    )
    reader = open_reader(local.path, True, [case], tmp_path / "rec")
    latest = {cell: r for cell, r in reader.latest()}
    assert latest["torch-2.0.1"].outcome is Outcome.REPRODUCED  # from the record
    assert latest["torch-2.1.2"].outcome is Outcome.REPRODUCED  # the local result is newer
    assert latest["torch-2.0.1"].expected is Outcome.REPRODUCED  # judged by today's rules
    assert latest["torch-2.1.2"].expected is Outcome.FIXED
    record_only = open_reader(tmp_path / "absent.db", False, [case], tmp_path / "rec")
    assert record_only.standing("torch-2.1.2", case.id, "bug", "fp-2.1.2-bug", (Outcome.FIXED,)) is not None
    with pytest.raises(StoreError):
        record_only.save("run", record_result(case, "2.2.2", Outcome.FIXED, 1.0), "x")
    assert not (tmp_path / "absent.db").exists()


def test_reading_commands_answer_from_the_record_with_no_store_and_never_create_one(
    tmp_path: Path, case: Case, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    record = Record()
    fold_store(record, record_store(tmp_path / "r.db", case, two_cells(case)), [case])
    write(tmp_path / "rec", record)
    monkeypatch.chdir(tmp_path)  # no .bugmatrix/ here (and the next test in this worker starts where it should)
    cases = str(case.folder.parent)
    out = tmp_path / "report.json"
    assert (
        main(
            [
                "--cases-dir",
                cases,
                "report",
                "--record",
                "rec",
                "--format",
                "json",
                "-o",
                str(out),
                "--matrix",
                "absent.yaml",
            ]
        )
        == 0
    )
    payload = json.loads(out.read_text())
    assert {r["cell"] for r in payload["results"]} == {"torch-2.0.1", "torch-2.1.2"}
    assert main(["--cases-dir", cases, "expect", "--record", "rec", "--matrix", "absent.yaml"]) in (0, 1)
    assert not (tmp_path / ".bugmatrix").exists()
    # an explicit --db that does not exist: one line naming it, exit 2, no file created; narrow and bisect too,
    # which record probes (narrow used to create a store, find no boundary in it and exit 0)
    (tmp_path / "matrix.yaml").write_text(
        "indexes: {local: https://example.invalid/simple}\ndefaults: {index: local}\n"
    )
    for command in (
        ["report"],
        ["compare"],
        ["expect"],
        ["narrow", "--dry-run"],
        ["narrow"],
        ["bisect", case.id, "--package", "torch"],
        ["audit", "torch==2.0.1"],
        ["compat", "--no-probe"],
        ["osv", "export", "osv-out"],
    ):
        capsys.readouterr()
        code = main(["--cases-dir", cases, *command, "--record", "rec", "--db", "typo.db"])
        err = capsys.readouterr().err
        assert code == 2, command
        assert "typo.db: no such results store (--db)" in err and len(err.strip().splitlines()) == 1, (command, err)
        assert not (tmp_path / "typo.db").exists(), command
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cases", "matrix.yaml", "r.db", "rec", "report.json"]


def test_an_empty_file_given_as_the_store_is_refused_and_left_empty(tmp_path: Path, case: Case) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    assert (
        main(["--cases-dir", str(case.folder.parent), "report", "--record", str(tmp_path / "rec"), "--db", str(empty)])
        == 2
    )
    assert empty.read_bytes() == b""


def test_the_committed_tables_are_what_the_committed_record_generates() -> None:
    """A hand edit of the cases table (docs/cases.md) or the compatibility tables (docs/compat.md) fails here (the
    record generates them offline)."""
    from harness.output.pages import generated_tables, page_files, regenerate, regions_in, stale_pages

    tables = generated_tables(ROOT / "record", ROOT / "cases", ROOT / "matrix.yaml")
    held = {name: page for page in page_files(ROOT) for name in regions_in(page.read_text())}
    assert held["cases-table"] == ROOT / "docs" / "cases.md" and held["compat-tables"] == ROOT / "docs" / "compat.md"
    assert stale_pages(page_files(ROOT), tables) == [], "the tables differ from `bugmatrix record tables`"
    page = held["cases-table"].read_text()
    edited = page.replace("| case | upstream |", "| case | upstream (edited) |", 1)
    assert edited != page and regenerate(edited, tables) == page


def test_record_tables_checks_and_rewrites_the_pages_that_hold_the_tables(tmp_path: Path) -> None:
    """`bugmatrix record tables [--check] --page ...`: 0 when the pages are what the record generates, 1 on a hand edit
    (nothing written), and the rewrite repairs it; a page list without the tables is a one-line error (2)."""
    import shutil

    cases_page, compat_page = tmp_path / "cases.md", tmp_path / "compat.md"
    shutil.copy(ROOT / "docs" / "cases.md", cases_page)
    shutil.copy(ROOT / "docs" / "compat.md", compat_page)
    command = [
        "--cases-dir",
        str(ROOT / "cases"),
        "record",
        "tables",
        "--record",
        str(ROOT / "record"),
        "--matrix",
        str(ROOT / "matrix.yaml"),
        "--page",
        str(cases_page),
        "--page",
        str(compat_page),
    ]
    assert main([*command, "--check"]) == 0
    edited = cases_page.read_text().replace("| case | upstream |", "| case | upstream (edited) |", 1)
    cases_page.write_text(edited)
    assert main([*command, "--check"]) == 1 and cases_page.read_text() == edited
    assert main(command) == 0 and cases_page.read_text() == (ROOT / "docs" / "cases.md").read_text()
    assert main(command[:-4] + ["--page", str(compat_page)]) == 2  # the cases table is on no page given


def test_the_record_reads_the_same_offline() -> None:
    """`report --format cases` over the committed record with no index and no network gives the same table."""
    env = {
        **os.environ,
        "BUGMATRIX_INDEX_URL": "file:///nonexistent/index",
        "BUGMATRIX_DB": "/nonexistent/r.db",
        "NO_PROXY": "*",
        "http_proxy": "http://127.0.0.1:9",
        "https_proxy": "http://127.0.0.1:9",
    }
    env.pop("BUGMATRIX_MIRROR_LITGPT", None)
    env.pop("BUGMATRIX_RECORD", None)  # the committed record/, as a user on a fresh clone reads it
    offline = subprocess.run(
        [sys.executable, "-m", "harness", "report", "--format", "cases"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert offline.returncode == 0, offline.stderr
    from harness.output.pages import generated_tables

    assert offline.stdout == generated_tables(ROOT / "record", ROOT / "cases", ROOT / "matrix.yaml")["cases-table"]


def test_an_infra_result_never_shadows_a_standing_verdict_of_the_same_digest_in_any_reader(
    tmp_path: Path, case: Case
) -> None:
    # run 1 measured the bug; run 2 could not build the environment (infra, same script); run 3 reused run 1's result
    # without saving it again (resume). Every reader must still answer run 1's verdict, and a store an older
    # bugmatrix rebuilt must too. A newer *error* (the script ran and failed) is a measurement: it still wins.
    store = ResultStore(tmp_path / "s.db")
    first = store.begin_run("bugmatrix run", MACHINE, run_id="20261125T000000-h-aaaaaa")
    store.save(first, record_result(case, "2.0.1", Outcome.REPRODUCED, 1000.0), "torch-2.0.1")
    store.save(first, record_result(case, "2.1.2", Outcome.FIXED, 1000.0), "torch-2.1.2")
    second = store.begin_run("bugmatrix run", MACHINE, run_id="20261126T000000-h-bbbbbb")
    infra = record_result(case, "2.0.1", Outcome.INFRA, 2000.0).model_copy(
        update={"reason": "environment: could not build", "launched": False, "fingerprint": ""}
    )
    store.save(second, infra, "torch-2.0.1")
    error = record_result(case, "2.1.2", Outcome.ERROR, 2000.0).model_copy(update={"reason": "rank 0 raised KeyError"})
    store.save(second, error, "torch-2.1.2")
    expected = {"torch-2.0.1": Outcome.REPRODUCED, "torch-2.1.2": Outcome.ERROR}
    assert {cell: r.outcome for cell, r in store.latest()} == expected
    db = sqlite3.connect(store.path)  # an older bugmatrix wrote last: `latest` is rebuilt when opened
    db.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    db.execute("DELETE FROM latest")
    db.commit()
    db.close()
    assert {cell: r.outcome for cell, r in ResultStore(store.path).latest()} == expected
    record = Record()
    fold_store(record, store, [case])
    write(tmp_path / "rec", record)
    # the error replaced the verdict of its fingerprint (a newer measurement); the infra row is kept beside it
    assert sorted(row["outcome"] for row in load(tmp_path / "rec").rows) == ["error", "infra", "reproduced"]
    same = infra.model_copy(update={"fingerprint": "fp-2.0.1-bug", "started_at": 2500.0})  # an infra at the same key
    store.save(store.begin_run("bugmatrix run", MACHINE, run_id="20261126T010000-h-eeeeee"), same, "torch-2.0.1")
    assert fold_store(record, store, [case]) == (0, 0)  # measured nothing: it never replaces the verdict's row
    write(tmp_path / "rec", record)
    record_only = open_reader(tmp_path / "absent.db", False, [case], tmp_path / "rec")
    assert {cell: r.outcome for cell, r in record_only.latest()} == expected
    local = ResultStore(tmp_path / "local.db")  # the infra row only in the local layer, the verdict in the record
    third = local.begin_run("bugmatrix run", MACHINE, run_id="20261127T000000-h-cccccc")
    local.save(third, infra.model_copy(update={"started_at": 3000.0}), "torch-2.0.1")
    layered = open_reader(local.path, True, [case], tmp_path / "rec")
    assert {cell: r.outcome for cell, r in layered.latest()} == expected
    other = infra.model_copy(update={"started_at": 4000.0, "digest": ""})  # no digest: nothing says it is the same
    local.save(local.begin_run("bugmatrix run", MACHINE, run_id="20261127T010000-h-dddddd"), other, "torch-2.0.1")
    assert {cell: r.outcome for cell, r in layered.latest()}["torch-2.0.1"] is Outcome.INFRA
    assert {cell: r.outcome for cell, r in local.latest()}["torch-2.0.1"] is Outcome.INFRA


def test_a_gpu_machines_store_folds_under_its_cell_with_the_torch_build_pinned(tmp_path: Path, case: Case) -> None:
    # an image's torch says 2.11.0 in its installed metadata and 2.11.0+cu130 in torch.__version__; what the kit's
    # store recorded (and the fbgemm_gpu distribution name) must reach the record as the cell's pins say
    ran = record_result(case, "2.11.0", Outcome.FIXED, 100.0).model_copy(
        update={"device": "cuda", "versions": {"torch": "2.11.0", "fbgemm_gpu": "1.6.0"}}
    )
    elsewhere = record_result(case, "2.1.2", Outcome.FIXED, 100.0)  # a matrix cell's result: left as it was
    store = record_store(tmp_path / "kit.db", case, [("local", ran), ("torch-2.1.2", elsewhere)])
    record = Record()
    assert fold_store(record, store, [case], "h100-torch-2.11.0+cu130", {"torch": "2.11.0+cu130"}) == (2, 0)
    by_cell = {row["cell"]: row["versions"] for row in record.rows}
    assert by_cell == {
        "h100-torch-2.11.0+cu130": {"torch": "2.11.0+cu130", "fbgemm-gpu": "1.6.0"},
        "torch-2.1.2": {"torch": "2.1.2"},
    }


def test_a_confirmation_after_a_result_of_another_fingerprint_makes_the_row_current_again(
    tmp_path: Path, case: Case
) -> None:
    # measured 3/3 (repeat 3), then once by a plain re-run (repeat 1: another fingerprint, newer), then 3/3 again
    # with --redo: the key's current result is the 3/3 one, in the store and in the record folded from it
    thrice = record_result(case, "2.1.2", Outcome.FIXED, 1000.0, tallies={"fixed": 3})
    once = record_result(case, "2.1.2", Outcome.FIXED, 2000.0).model_copy(update={"fingerprint": "fp-once"})
    again = thrice.model_copy(update={"started_at": 3000.0})
    store = ResultStore(tmp_path / "s.db")
    for run_id, r in (
        ("20261125T000000-h-aaaaaa", thrice),
        ("20261126T000000-h-bbbbbb", once),
        ("20261127T000000-h-cccccc", again),
    ):
        store.save(store.begin_run("bugmatrix run", MACHINE, run_id=run_id), r, "torch-2.1.2")
    assert [r.tallies for _, r in store.latest()] == [{"fixed": 3}]
    record = Record()
    fold_store(record, store, [case])
    write(tmp_path / "rec", record)
    reader = open_reader(tmp_path / "absent.db", False, [case], tmp_path / "rec")
    assert [r.tallies for _, r in reader.latest()] == [{"fixed": 3}]
    assert fold_store(record, store, [case]) == (0, 0)  # idempotent
    # a night that changed nothing: the row keeps its date, the diff is empty
    before = render(record)
    quiet = ResultStore(tmp_path / "q.db")
    quiet.save(
        quiet.begin_run("bugmatrix run", MACHINE, run_id="20261128T000000-h-dddddd"),
        again.model_copy(update={"started_at": 4000.0}),
        "torch-2.1.2",
    )
    assert fold_store(record, quiet, [case]) == (0, 0) and render(record) == before


def test_a_re_measurement_that_recorded_a_version_more_replaces_the_row(tmp_path: Path, case: Case) -> None:
    # the same script and pins measured again after bugmatrix began recording the version of a package a rule names
    # (transformers for litgpt-2156): the row must carry it, or the rule is read back against versions without it
    first = record_result(case, "2.1.2", Outcome.REPRODUCED, 1000.0)
    more = first.model_copy(update={"started_at": 2000.0, "versions": {"torch": "2.1.2", "transformers": "4.52.1"}})
    store = ResultStore(tmp_path / "s.db")
    for run_id, r in (("20261125T000000-h-aaaaaa", first), ("20261126T000000-h-bbbbbb", more)):
        store.save(store.begin_run("bugmatrix run", MACHINE, run_id=run_id), r, "torch-2.1.2")
    record = Record()
    assert fold_store(record, store, [case]) == (1, 1)
    [row] = record.rows
    assert row["versions"] == {"torch": "2.1.2", "transformers": "4.52.1"}
    assert fold_store(record, store, [case]) == (0, 0)


def test_record_coverage_counts_each_planned_job_against_rows_of_the_committed_script(
    tmp_path: Path, case: Case, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import yaml

    monkeypatch.chdir(tmp_path)
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump({"cells": [{"name": f"torch-{v}", "pins": {"torch": v}} for v in ("2.0.1", "2.1.2", "2.2.2")]})
    )
    results = [*two_cells(case), ("torch-2.2.2", record_result(case, "2.2.2", Outcome.FIXED, 1020.0, digest="older"))]
    record = Record()
    fold_store(record, record_store(tmp_path / "r.db", case, results), [case])
    write(tmp_path / "rec", record)
    argv = ["--cases-dir", str(case.folder.parent), "record", "coverage", "--record", "rec", "--matrix", "matrix.yaml"]
    assert main([*argv, "--json"]) == 1  # torch-2.2.2 holds only a row of an older script: missing
    payload = json.loads(capsys.readouterr().out)
    assert (payload["planned"], payload["verdicts"], payload["missing"]) == (3, 2, 1)
    [cell] = [c for c in payload["cells"] if c["missing"]]
    assert cell["cell"] == "torch-2.2.2" and cell["missing"] == ["fake-1-case::bug[cpu-1]"]
    # the job measured again, and the environment could not be made: a non-verdict with its reason holds the job
    infra = record_result(case, "2.2.2", Outcome.INFRA, 1030.0).model_copy(update={"fingerprint": "fp-infra"})
    fold_store(record, record_store(tmp_path / "r2.db", case, [("torch-2.2.2", infra)]), [case])
    write(tmp_path / "rec", record)
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "3 cpu job(s) planned in 1 cell(s)" not in out and "3 cpu job(s) planned in 3 cell(s)" in out
    assert "2 with a verdict, 1 with a non-verdict and its reason (1 infra), 0 missing" in out
    assert not (tmp_path / ".bugmatrix").exists()


def test_a_line_nested_too_deep_for_json_names_file_and_line(tmp_path: Path, case: Case) -> None:
    """A line nested 50,000 deep made `json` raise RecursionError (a traceback); it is refused as any line that is
    not one object is, by file and line, before `json` is asked (issue 33)."""
    record = Record()
    fold_store(record, record_store(tmp_path / "r.db", case, two_cells(case)), [case])
    write(tmp_path / "rec", record)
    path = tmp_path / "rec" / "results" / f"{case.id}.jsonl"
    first = path.read_text().splitlines()[0]
    deep = first.replace('"tallies":{', '"tallies":{"x":' + "[" * 50_000 + "]" * 50_000 + ",", 1)
    assert deep != first
    path.write_text(f"{first}\n{deep}\n")
    with pytest.raises(RecordError, match=rf"{path.name}:2: nested more than 100 levels deep$"):
        load(tmp_path / "rec")
    brackets = first.replace('"reason":"', '"reason":"\\"' + "[" * 5_000, 1)  # inside a string: no nesting
    assert brackets != first
    path.write_text(f"{brackets}\n{first[:-5]}\n")  # read line by line: the first is read, the second is cut
    with pytest.raises(RecordError, match=rf"{path.name}:2: not a JSON object"):
        load(tmp_path / "rec")


SHA = "a" * 40


def two_histories(tmp_path: Path) -> dict[str, Path]:
    """Two records that date the same release and commit differently (and list different releases)."""
    roots = {}
    histories = (("one", "2025-01-01", ("2.0.0",), 7), ("two", "2025-02-02", ("2.0.0", "2.1.0"), 9))
    for name, day, versions, position in histories:
        record = Record()
        record.releases["faketorch"] = {v: {"date": f"{day}T00:00:00Z"} for v in versions}
        record.commits["fakegit"] = {"2.0.0": {"position": 5}, SHA: {"date": f"{day}T00:00:00Z", "position": position}}
        write(tmp_path / name, record)
        roots[name] = tmp_path / name
    return roots


def test_opening_a_reader_leaves_nothing_behind_for_the_rest_of_the_process(tmp_path: Path, case: Case) -> None:
    """A reader answers the index's and the clones' questions from its record, and no one else: after it opens, the
    index and a remote source answer as they did before (a measuring command in the same process plans tonight's
    uploads)."""
    from harness.matrix import git, index

    from .fakeindex import FakeRelease, build_index

    url = build_index(tmp_path / "index", [FakeRelease("faketorch", "3.0.0", "2026-01-01T00:00:00Z")])
    before = index.releases("faketorch", url)
    open_reader(None, False, [case], two_histories(tmp_path)["one"])  # read-only: the record's history
    assert [str(r.version) for r in index.releases("faketorch", url)] == ["3.0.0"]
    assert index.releases("faketorch", url) == before
    assert git.commit_date("https://example.invalid/fakegit.git", SHA) is None  # unknown without cloning


def test_two_readers_of_two_records_each_answer_from_their_own(tmp_path: Path, case: Case) -> None:
    """Each reader's matrix lists and dates versions by its own record, whichever was opened last."""
    from harness.analysis.precision import _commits_between
    from harness.matrix.expand import load_matrix
    from harness.matrix.resolve import made_at

    roots = two_histories(tmp_path)
    (tmp_path / "matrix.yaml").write_text(
        "indexes: {local: 'file:///nonexistent/index'}\n"
        "defaults: {index: local, python: '3.11', device: cpu}\n"
        "sources: {fakegit: {git: 'https://example.invalid/fakegit.git'}}\n"
    )
    readers = {name: open_reader(None, False, [case], root) for name, root in roots.items()}
    for name, day in (("one", 1), ("two", 2)):
        matrix = load_matrix(tmp_path / "matrix.yaml", readers[name].chronology)
        assert made_at(matrix, "faketorch", "2.0.0", None).month == day  # type: ignore[union-attr]
        assert made_at(matrix, "fakegit", "", SHA).month == day  # type: ignore[union-attr]
        listed = [str(r.version) for r in matrix.chronology.releases_of("faketorch", matrix.index_url())]
        assert listed == (["2.0.0"] if name == "one" else ["2.0.0", "2.1.0"])
        between = _commits_between(matrix, "fakegit", "2.0.0", f"2.0.0 @ {SHA}")  # no clone: the record's positions
        assert between == (("commit #6",) if name == "one" else ("commit #6", "commit #7", "commit #8"))
