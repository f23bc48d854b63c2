"""The command as CI logs and pipes meet it, and selections that match nothing: never silently green."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from harness.cli import main
from harness.model.names import MAX_LENGTH
from harness.session.store import ResultStore

from .conftest import MakeCase

FIXED = "print('fine')\n"
# the longest a case id may be (harness/model/names.py MAX_LENGTH: 80), wider than any terminal column gives it
LONG_ID = ("torchrec-123456-" + "a-very-long-slug-that-names-the-bug-in-full-" * 2)[:MAX_LENGTH].rstrip("-")


def bugmatrix(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m harness ARGS` with stdout and stderr pipes (not a terminal) and COLUMNS unset, as in a CI log."""
    environ = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR")}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "harness", *args], capture_output=True, text=True, env=environ, timeout=300, check=False
    )


def test_through_a_pipe_every_id_stays_whole_and_each_launch_gets_a_line(make_case: MakeCase, tmp_path: Path) -> None:
    make_case(
        FIXED,
        case_id=LONG_ID,
        nproc=[1, 2],
        variants={"bug-with-a-long-variant-name": {"expect": [{"outcome": "fixed"}]}},
    )
    cases = str(tmp_path / "cases")
    listed = bugmatrix("--cases-dir", cases, "list")
    assert listed.returncode == 0 and LONG_ID in listed.stdout, listed.stdout
    ran = bugmatrix("--cases-dir", cases, "run", "--device", "cpu", "--db", str(tmp_path / "r.db"))
    assert ran.returncode == 0, ran.stdout + ran.stderr
    rows = [line for line in ran.stdout.splitlines() if LONG_ID in line]
    assert len(rows) == 2 and all("bug-with-a-long-variant-name" in row for row in rows), ran.stdout
    assert "\x1b[" not in ran.stdout  # no colour codes in a pipe
    # one line per finished launch, on stderr, as it finishes; stdout keeps the table and the summary
    launches = [line for line in ran.stderr.splitlines() if f"{LONG_ID}::bug-with-a-long-variant-name[cpu-" in line]
    assert len(launches) == 2 and all("cell=local fixed (expected fixed)" in line for line in launches), ran.stderr
    assert "2 as expected, 0 not" in ran.stdout
    as_json = bugmatrix("--cases-dir", cases, "run", "--device", "cpu", "--no-store", "--json")
    assert json.loads(as_json.stdout)["ok"] is True  # stdout stays one JSON document
    report = bugmatrix("--cases-dir", cases, "report", "--db", str(tmp_path / "r.db"), "--matrix", "none.yaml")
    assert report.returncode == 0 and LONG_ID in report.stdout, report.stdout
    forced = bugmatrix("--cases-dir", cases, "list", env={"FORCE_COLOR": "1"})
    assert "\x1b[" in forced.stdout and LONG_ID in forced.stdout


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "nosuchcase"], "no case id contains 'nosuchcase'"),
        (["run", "fake-1", "--variant", "nosuch"], "no selected case has variant 'nosuch' (they have: bug)"),
        (["run", "--nproc", "7"], "no selected case has world size 7 (they have: 1)"),
    ],
)
def test_a_selection_that_matches_nothing_is_an_error_and_records_nothing(
    make_case: MakeCase, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], named: str
) -> None:
    make_case(FIXED, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    db = tmp_path / "r.db"
    code = main(["--cases-dir", str(tmp_path / "cases"), *argv, "--device", "cpu", "--db", str(db)])
    assert code == 5  # as pytest exits when no test ran
    err = capsys.readouterr().err
    assert "nothing to run" in err and named in err, err
    assert not db.exists() or ResultStore(db).runs() == []  # nothing recorded


def test_a_missing_cases_folder_is_one_line_and_an_empty_one_is_not_green(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--cases-dir", str(tmp_path / "nonexistent"), "list"]) == 2
    assert "no such folder" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["--cases-dir", str(tmp_path / "empty"), "list"]) == 5
    assert main(["--cases-dir", str(tmp_path / "empty"), "run", "--no-store"]) == 5


def test_skips_are_counted_apart_and_a_run_where_nothing_ran_is_not_green(
    make_case: MakeCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_case(
        FIXED,
        packages=["torch", "no-such-package-here"],
        nproc=[1, 2],
        variants={"bug": {"expect": [{"outcome": "fixed"}]}, "other": {"expect": [{"outcome": "fixed"}]}},
    )
    code = main(["--cases-dir", str(tmp_path / "cases"), "run", "--device", "cpu", "--no-store"])
    out = capsys.readouterr().out
    assert code == 5, out
    assert "0 as expected, 0 not, 4 skipped: not installed in" in out and "no-such-package-here" in out, out


def test_a_run_that_launches_nothing_records_nothing(
    make_case: MakeCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An interpreter without the case's packages: every job is a skip that never launched, so no run is begun in
    the store (not even the file is created), and the exit code says nothing ran."""
    make_case(FIXED, packages=["torch", "no-such-package-here"], variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    db = tmp_path / "results.db"
    code = main(["--cases-dir", str(tmp_path / "cases"), "run", "--device", "cpu", "--db", str(db)])
    out = capsys.readouterr().out
    assert code == 5, out
    assert "1 skipped: not installed in" in out and "recorded as run" not in out, out
    assert not db.exists(), "a run that launched nothing was recorded"


def test_a_corrupt_or_foreign_store_is_one_line_and_left_untouched(
    make_case: MakeCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_case(FIXED, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not sqlite at all" * 100)
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE photos (id INTEGER PRIMARY KEY, path TEXT)")
    before = {p: p.read_bytes() for p in (corrupt, foreign)}
    for store in (corrupt, foreign):
        for argv in (
            ["report", "--db", str(store)],
            ["run", "--device", "cpu", "--db", str(store)],
            ["compare", "--db", str(store)],
        ):
            capsys.readouterr()
            assert main(["--cases-dir", str(tmp_path / "cases"), *argv]) == 2
            err = capsys.readouterr().err
            assert "not a bugmatrix results store" in err and "Traceback" not in err, err
            assert len(err.strip().splitlines()) == 1, err
    assert {p: p.read_bytes() for p in (corrupt, foreign)} == before


def test_compare_never_picks_an_empty_run(
    make_case: MakeCase, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_case(FIXED, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    db = tmp_path / "r.db"
    base = ["--cases-dir", str(tmp_path / "cases")]
    assert main([*base, "run", "--device", "cpu", "--db", str(db)]) == 0
    store = ResultStore(db)
    store.end_run(store.begin_run("interrupted before any result", "test"), "interrupted")
    capsys.readouterr()
    assert main([*base, "compare", "--db", str(db)]) == 2  # one run with results: nothing to compare it with
    assert "need two runs with results" in capsys.readouterr().err
    assert main([*base, "run", "--device", "cpu", "--db", str(db), "--redo"]) == 0
    capsys.readouterr()
    assert main([*base, "compare", "--db", str(db)]) == 0
    assert "0 change(s)" in capsys.readouterr().out


def test_a_local_run_imports_none_of_the_matrix_planner(make_case: MakeCase, tmp_path: Path) -> None:
    """The fixed cost of `bugmatrix run CASE` is start-up: a local run must not load the planner (matrix schema, rule
    axes, the index client and its urllib/ssl, resolution, the environment cache), ~35 ms it never uses."""
    make_case(FIXED, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    probe = (
        "import sys\nfrom harness.cli import main\ncode = main(sys.argv[1:])\n"
        "print('LOADED', *sorted(m for m in sys.modules if m.startswith(('harness.matrix', 'urllib.request'))))\n"
        "sys.exit(code)\n"
    )
    ran = subprocess.run(
        [
            sys.executable,
            "-c",
            probe,
            "--cases-dir",
            str(tmp_path / "cases"),
            "run",
            "--device",
            "cpu",
            "--db",
            str(tmp_path / "r.db"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    loaded = next(line for line in ran.stdout.splitlines() if line.startswith("LOADED")).split()[1:]
    # matrix.chronology: the empty snapshot every store carries (packaging and matrix.basics; the index and git
    # modules only when it has to ask them)
    assert set(loaded) <= {"harness.matrix", "harness.matrix.basics", "harness.matrix.chronology"}, loaded


def test_a_relative_python_path_runs_the_cases_from_any_folder(
    make_case: MakeCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--python .venv/bin/python` as typed from the project root: ranks start in their case's folder, so the path
    must not be taken relative to that (it was: `infra`, "No such file or directory"). A venv's python is a link
    out of the venv, so it is made absolute without following the link (the venv's packages must stay visible)."""
    make_case(FIXED, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    venv = Path(sys.prefix)
    monkeypatch.chdir(venv.parent)
    relative = os.path.relpath(sys.executable, venv.parent)
    assert not os.path.isabs(relative) and os.path.islink(sys.executable) == os.path.islink(relative)
    code = main(["--cases-dir", str(tmp_path / "cases"), "run", "--python", relative, "--no-store", "--json"])
    payload = json.loads(capsys.readouterr().out)
    assert code == 0, payload
    [result] = payload["results"]
    assert (result["outcome"], result["launched"]) == ("fixed", True)
    assert payload["python"] == os.path.join(venv.parent, relative)  # the venv's own path, not the link's target
