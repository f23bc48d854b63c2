"""A record nothing can corrupt (issue 33): a fold killed at any step leaves the record as before or as after (the
next fold finishes or undoes it, a reader in between reads that state and writes nothing, no temporary file is
left); a file the record lists as holding
rows that is missing or emptied, or a row citing a run `runs.jsonl` lacks, is an error every reader names; and the
committed record imported into a fresh store folds back with nothing added or replaced. (A line that is not exactly
one JSON object: tests/test_record.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.cli import main
from harness.model.case import Case
from harness.model.outcome import Outcome
from harness.session.folding import fold_store
from harness.session.record import Record, RecordError, load, render, write
from harness.session.store import ResultStore
from tests.helpers import ROOT, record_result, record_store, two_cells

CRASH_POINTS = ("replace", "fsync", "unlink", "rmdir")  # every step a write takes on disk goes through one of these


class Killed(BaseException):  # noqa: N818 - stands for SIGKILL: nothing the writer does catches it
    """The process died here."""


@pytest.fixture
def case(make_case) -> Case:  # noqa: ANN001
    return make_case(
        "print('x')\n",
        case_id="fake-1-case",
        variants={"bug": {"expect": [{"when": {"torch": "<2.1"}, "outcome": "reproduced"}, {"outcome": "fixed"}]}},
    )


def _files(root: Path) -> dict[str, bytes]:
    """Every file under `root`, hidden ones included, by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _fold(root: Path, case: Case, source: Path) -> list[str]:
    return ["--cases-dir", str(case.folder.parent), "record", "fold", "--record", str(root), "--offline", str(source)]


def _crash_after(monkeypatch: pytest.MonkeyPatch, steps: int | None) -> list[str]:
    """Count every disk step (rename, sync, removal); with `steps`, die when the next one is taken."""
    taken: list[str] = []
    for name in CRASH_POINTS:
        real = getattr(os, name)

        def step(*args: object, _real=real, _name=name, **kwargs: object) -> object:  # noqa: ANN001
            if steps is not None and len(taken) == steps:
                raise Killed(_name)
            taken.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, name, step)
    return taken


def test_a_fold_killed_at_any_step_leaves_the_record_as_before_or_after_and_no_temporary_file(
    tmp_path: Path,
    case: Case,
    make_case,
    monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
    capsys: pytest.CaptureFixture[str],
) -> None:
    other = make_case("print('y')\n", case_id="fake-2-other")
    record = Record()
    fold_store(record, record_store(tmp_path / "first.db", case, two_cells(case)), [case])
    write(tmp_path / "before", record)
    # tonight: a new cell of the case (its results file and runs.jsonl change) and a first result of another case (a
    # new file, and the manifest that lists it)
    night = ResultStore(tmp_path / "night.db")
    run = night.begin_run(
        "bugmatrix run --all-cells", '{"cpu": "Test CPU", "cores": 2}', run_id="20261126T000000-h-bbbbbb"
    )
    night.save(run, record_result(case, "2.2.2", Outcome.FIXED, 2000.0), "torch-2.2.2")
    night.save(run, record_result(other, "2.2.2", Outcome.REPRODUCED, 2001.0), "torch-2.2.2")
    night.end_run(run)
    ResultStore(tmp_path / "empty.db")  # the next command: a fold that brings nothing
    shutil.copytree(tmp_path / "before", tmp_path / "after")
    with monkeypatch.context() as m:
        taken = _crash_after(m, None)
        assert main(_fold(tmp_path / "after", case, night.path)) == 0
    before, after = _files(tmp_path / "before"), _files(tmp_path / "after")
    assert before != after and {"runs.jsonl", f"results/{case.id}.jsonl", f"results/{other.id}.jsonl"} <= {
        name for name in after if before.get(name) != after[name]
    }
    logical = {"before": render(load(tmp_path / "before")), "after": render(load(tmp_path / "after"))}
    assert len(taken) >= 4  # written, committed, each renamed into place
    seen = set()
    for steps in range(len(taken) + 1):
        root = tmp_path / f"killed-{steps}"
        shutil.copytree(tmp_path / "before", root)
        with monkeypatch.context() as m:
            _crash_after(m, steps)
            try:
                assert main(_fold(root, case, night.path)) == 0
            except Killed:
                pass
        left = _files(root)
        # a reader in between: reads the record as the next fold will leave it, and writes nothing
        read = render(load(root))
        assert read in logical.values(), f"killed after {steps} step(s): the reader sees a half-written record"
        out = tmp_path / f"report-{steps}.json"
        assert (
            main(
                [
                    "--cases-dir",
                    str(case.folder.parent),
                    "report",
                    "--record",
                    str(root),
                    "--format",
                    "json",
                    "-o",
                    str(out),
                    "--matrix",
                    str(tmp_path / "absent.yaml"),
                ]
            )
            == 0
        )
        assert _files(root) == left, f"killed after {steps} step(s): a reader wrote to the record"
        # the next command that writes finishes the fold or undoes it, and says so
        journal = (root / ".record-journal").exists()
        capsys.readouterr()
        assert main(_fold(root, case, tmp_path / "empty.db")) == 0
        assert ("an interrupted write was" in capsys.readouterr().err) == journal
        now = _files(root)
        assert now in (before, after), f"killed after {steps} step(s): neither before nor after: {sorted(now)}"
        assert read == logical["before" if now == before else "after"]
        seen.add("before" if now == before else "after")
    assert seen == {"before", "after"}


def test_a_killed_writes_temporary_names_are_ignored_by_git() -> None:
    """A safety net: what a killed write leaves (the journal, an older writer's .x.jsonl.tmp) is never committed."""
    names = [
        "record/.record-journal/COMMITTED",
        "record/.record-journal/files/results/x.jsonl",
        "record/results/.x.jsonl.tmp",
        "record/.runs.jsonl.tmp",
    ]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=ROOT, capture_output=True, text=True)
    assert sorted(ignored.stdout.split()) == sorted(names)


def _world(tmp_path: Path, case: Case) -> Path:
    record = Record()
    fold_store(record, record_store(tmp_path / "r.db", case, two_cells(case)), [case])
    write(tmp_path / "rec", record)
    return tmp_path / "rec"


@pytest.mark.parametrize("damage", ["emptied", "deleted"])
def test_a_results_file_emptied_or_deleted_is_named_by_every_reader(
    tmp_path: Path, case: Case, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _world(tmp_path, case)
    path = root / "results" / f"{case.id}.jsonl"
    path.write_text("") if damage == "emptied" else path.unlink()
    cases = ["--cases-dir", str(case.folder.parent)]
    (tmp_path / "freeze.txt").write_text("torch==2.0.1\n")
    for command in (
        ["report", "--format", "json", "--matrix", str(tmp_path / "absent.yaml")],
        ["audit", "-r", str(tmp_path / "freeze.txt")],
        ["osv", "export", str(tmp_path / "osv")],
        ["record", "import", "--db", str(tmp_path / "i.db")],
        ["record", "fold", "--offline", str(tmp_path / "r.db")],
    ):
        capsys.readouterr()
        assert main([*cases, *command, "--record", str(root)]) == 2, command
        said = capsys.readouterr().err.strip()
        assert len(said.splitlines()) == 1 and f"{path}: {'empty' if damage == 'emptied' else 'missing'}" in said, (
            command,
            said,
        )
    assert not (tmp_path / "osv").exists()  # nothing exported from a record that lost a file
    assert (path.read_text() == "") if damage == "emptied" else not path.exists()  # and no reader repaired it


def test_a_row_citing_a_run_runs_jsonl_lacks_is_refused_by_file_and_line(tmp_path: Path, case: Case) -> None:
    root = _world(tmp_path, case)
    (root / "runs.jsonl").write_text("")
    with pytest.raises(RecordError, match=rf"{case.id}.jsonl:1: run '20261125T000000-h-aaaaaa': not in runs.jsonl"):
        load(root)


def test_the_record_imported_into_a_fresh_store_folds_back_with_nothing_added_or_replaced(
    tmp_path: Path, case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _world(tmp_path, case)
    before = _files(root)
    cases = ["--cases-dir", str(case.folder.parent)]
    assert main([*cases, "record", "import", "--record", str(root), "--db", str(tmp_path / "fresh.db")]) == 0
    capsys.readouterr()
    assert main([*cases, "record", "fold", "--record", str(root), "--offline", str(tmp_path / "fresh.db")]) == 0
    said = capsys.readouterr().err
    assert "0 row(s) added, 0 replaced" in said and "0 file(s) written" in said
    assert _files(root) == before


def test_the_committed_record_lists_every_file_that_holds_rows() -> None:
    """Without its manifest the committed record could lose a results file unnoticed: it must list every file."""
    root = ROOT / "record"
    listed = [json.loads(line)["file"] for line in (root / "manifest.jsonl").read_text().splitlines()]
    held = sorted(str(p.relative_to(root)) for p in root.rglob("*.jsonl") if p.name != "manifest.jsonl")
    assert listed == held
    assert load(root).rows
