"""The grammar of case ids, variants and cells (harness/model/names.py), enforced at every door a name comes in by:
a case folder, a `run --json` payload, a results store (fold, merge), a record line. A name from outside never
becomes a path outside its folder; a case's script never lies outside its case folder."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from harness.cli import main
from harness.model.case import Case, load_case
from harness.model.case_schema import CaseError
from harness.model.names import UnsafeName, check_name, inside
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.session.record import RecordError, load
from harness.session.store import ResultStore, StoreError

from .conftest import MakeCase

MACHINE = json.dumps({"host": "h", "os": "Linux", "arch": "x86_64", "cpu": "Test CPU", "cores": 2})
ESCAPE = "../../../../../escaped/X"


def _result(case: str, variant: str = "bug") -> Result:
    return Result(
        case=case,
        variant=variant,
        nproc=1,
        device="cpu",
        outcome=Outcome.FIXED,
        expected=Outcome.FIXED,
        reason="every rank exited 0",
        versions={"torch": "2.5.0"},
        started_at=1000.0,
        fingerprint="fp",
        digest="d",
    )


def _files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("name", ["../x", "a/b", "", "-lead", "Upper", "a b", "a.b", "x" * 81, "é"])
def test_a_case_id_outside_the_grammar_is_refused_in_one_line(name: str) -> None:
    with pytest.raises(UnsafeName) as caught:
        check_name("case id", name)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 250


def test_every_committed_case_and_probe_follows_the_grammar() -> None:
    root = Path(__file__).resolve().parent.parent
    folders = [p.parent.name for p in [*root.glob("cases/*/case.yaml"), *root.glob("probes/*/case.yaml")]]
    assert folders and all(check_name("case id", f) == f for f in folders)


def test_inside_follows_links_and_refuses_what_leaves_the_folder(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "link").symlink_to(tmp_path)
    assert inside(tmp_path / "in", "a.py") == (tmp_path / "in" / "a.py").resolve()
    for escape in ("../a.py", "/etc/passwd", "link/a.py"):
        with pytest.raises(UnsafeName):
            inside(tmp_path / "in", escape)


def test_a_case_folder_whose_name_breaks_the_grammar_is_refused(make_case: MakeCase, tmp_path: Path) -> None:
    case = make_case("print('x')\n", case_id="fine-case")
    bad = case.folder.parent / "Not_A_Case"
    case.folder.rename(bad)
    with pytest.raises(CaseError, match=r"Not_A_Case/case.yaml: case id 'Not_A_Case' is not a valid case id"):
        load_case(bad / "case.yaml")


@pytest.mark.parametrize("script", ["../other/repro.py", "ABSOLUTE", "link.py"])
def test_a_script_outside_its_case_folder_is_refused_by_every_command(
    make_case: MakeCase, tmp_path: Path, script: str, capsys: pytest.CaptureFixture
) -> None:
    """7ca3bef ran a case whose `script:` was `../`, absolute or a link out of its folder without a word."""
    outside = tmp_path / "other" / "repro.py"
    outside.parent.mkdir()
    outside.write_text("print('FIXED: somebody else')\n")
    case = make_case("print('x')\n", case_id="escape-case")
    if script == "link.py":
        (case.folder / "link.py").symlink_to(outside)
    text = (case.folder / "case.yaml").read_text()
    (case.folder / "case.yaml").write_text(text + f"script: {outside if script == 'ABSOLUTE' else script}\n")
    with pytest.raises(CaseError, match=r"case.yaml: script: .* lies outside the case folder"):
        load_case(case.folder / "case.yaml")
    # list and check-case report an invalid folder (1, the README's table); run launches nothing (5)
    for command, code in ((["list"], 1), (["check-case"], 1), (["run", "--device", "cpu", "--no-store"], 5)):
        assert main(["--cases-dir", str(case.folder.parent), *command]) == code, command
        said = capsys.readouterr()
        assert "lies outside the case folder" in said.out + said.err, (command, said)


def _store_with(path: Path, case: str, cell: str = "torch-2.5.0", variant: str = "bug") -> ResultStore:
    store = ResultStore(path)
    run = store.begin_run("bugmatrix run", MACHINE, run_id="20261125T000000-h-aaaaaa")
    store.save(run, _result(case, variant), cell)
    store.end_run(run)
    return store


@pytest.mark.parametrize(
    ("case", "cell", "variant"),
    [(ESCAPE, "torch-2.5.0", "bug"), ("fine", "../../c", "bug"), ("fine", "torch-2.5.0", "../v")],
)
def test_fold_of_a_store_naming_a_path_writes_nothing_anywhere(
    make_case: MakeCase, tmp_path: Path, case: str, cell: str, variant: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """7ca3bef: `3 file(s) written (..., results/../../../../../<somewhere>/X.jsonl, ...)`, exit 0."""
    real = make_case("print('x')\n", case_id="fine")
    record = tmp_path / "repo" / "record"
    assert (
        main(
            [
                "--cases-dir",
                str(real.folder.parent),
                "record",
                "fold",
                "--record",
                str(record),
                "--offline",
                str(_store_with(tmp_path / "good.db", "fine").path),
            ]
        )
        == 0
    )
    capsys.readouterr()
    shard = _store_with(tmp_path / "shard.db", case, cell, variant)
    before = _files(tmp_path)
    code = main(
        [
            "--cases-dir",
            str(real.folder.parent),
            "record",
            "fold",
            "--record",
            str(record),
            "--offline",
            str(shard.path),
        ]
    )
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "is not a valid" in err and "shard.db" in err and "\n" not in err
    assert _files(tmp_path) == before
    assert not any("escaped" in str(p) for p in tmp_path.parent.rglob("*"))


def test_fold_of_a_run_json_payload_naming_a_path_writes_nothing(
    make_case: MakeCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    real = make_case("print('x')\n", case_id="fine")
    payload = {
        "run_id": "20261125T000000-h-aaaaaa",
        "ok": True,
        "results": [{**_result(ESCAPE).model_dump(mode="json"), "cell": "local"}],
    }
    (tmp_path / "run.json").write_text(json.dumps(payload))
    record = tmp_path / "record"
    code = main(
        [
            "--cases-dir",
            str(real.folder.parent),
            "record",
            "fold",
            "--record",
            str(record),
            "--offline",
            "--cell",
            "torch-2.5.0",
            "--machine",
            "cpu=Test CPU",
            str(tmp_path / "run.json"),
        ]
    )
    assert code == 2 and "is not a valid case id" in capsys.readouterr().err
    assert not record.exists() or not any(record.rglob("*.jsonl"))
    assert not (tmp_path.parent / "escaped").exists()


def test_merge_refuses_a_shard_naming_a_path_and_merges_nothing(tmp_path: Path) -> None:
    merged = _store_with(tmp_path / "merged.db", "fine")
    shard = _store_with(tmp_path / "shard.db", ESCAPE)
    with pytest.raises(StoreError, match=r"shard.db: run .*: case id .* is not a valid case id"):
        merged.merge([shard.path])
    assert [r.case for _, _, r in merged.results()] == ["fine"]


def test_a_record_line_naming_a_path_is_refused_with_file_and_line(make_case: MakeCase, tmp_path: Path) -> None:
    case: Case = make_case("print('x')\n", case_id="fine")
    record = tmp_path / "record"
    assert (
        main(
            [
                "--cases-dir",
                str(case.folder.parent),
                "record",
                "fold",
                "--record",
                str(record),
                "--offline",
                str(_store_with(tmp_path / "good.db", "fine").path),
            ]
        )
        == 0
    )
    path = record / "results" / "fine.jsonl"
    path.write_text(path.read_text().replace('"case":"fine"', json.dumps({"case": ESCAPE})[1:-1].replace(" ", "")))
    with pytest.raises(RecordError, match=rf"{path.name}:1: case id .* is not a valid case id"):
        load(record)
    assert os.path.isfile(path)
