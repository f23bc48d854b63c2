"""A full disk under the results store: one line naming the store and its free space, exit 3 (`ExitCode.DISK_FULL`),
the run marked interrupted (or saying it could not be), what was saved before intact, and a re-run that launches
again what could not be saved. Driven two ways: SQLite's page limit (`cap_sqlite`, SQLITE_FULL, always available)
and a real full filesystem (a small tmpfs; skipped, saying why, only where this process may not mount one)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cli import main
from harness.launch.torchrun import allow_launches, run_abortable
from harness.model.exitcode import ExitCode
from harness.model.outcome import Outcome
from harness.session.scheduler import run_scheduled
from harness.session.store import DiskFull, ResultStore, _full

from .conftest import MakeCase, cap_sqlite, holds_results

SCRIPT = """
import os, sys
print("fine")
if "--fill" in sys.argv and not os.path.exists(sys.argv[-1] + ".done"):  # fill the disk under the store, once
    open(sys.argv[-1] + ".done", "w").close()
    fd = os.open(sys.argv[-2], os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, bytes(65536))
    except OSError:
        pass
    os.close(fd)
"""
FIXED = [{"outcome": "fixed"}]
ONE_LINE = re.compile(
    r"bugmatrix run: (?P<path>\S+): no space left for the results store \((?P<error>[^;]+); "
    r"(?P<free>\d+(\.\d)? (B|KiB|MiB|GiB)) free on its disk\); (?P<rest>.*)"
)


def stderr_line(capsys: pytest.CaptureFixture[str]) -> re.Match[str]:
    """The command's one line about the store, parsed: its last on stderr (after the launches' lines), the only one
    naming the command, and no traceback."""
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and err.count("bugmatrix run:") == 1, err
    found = ONE_LINE.fullmatch(err.splitlines()[-1])
    assert found, err
    return found


def run(cases: Path, db: Path, *more: str) -> int:
    return main(["--cases-dir", str(cases), "run", "--device", "cpu", "--db", str(db), "-j", "1", *more])


def test_sqlite_full_mid_run_marks_the_run_interrupted_and_the_lost_launch_runs_again(
    make_case: MakeCase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second result cannot be saved (SQLITE_FULL): exit 3 and one line, not a worker thread's traceback; the
    first result intact, the run `interrupted`; the re-run reuses the first and launches the second again."""
    make_case(SCRIPT, variants={"a": {"expect": FIXED}, "b": {"expect": FIXED}})
    cases, db = tmp_path / "cases", tmp_path / "results.db"
    cap_sqlite(monkeypatch, when=holds_results)  # once one result is in, the store cannot grow
    assert run(cases, db) == ExitCode.DISK_FULL
    line = stderr_line(capsys)
    assert (line["path"], line["error"]) == (str(db), "database or disk is full")
    assert line["free"] != "0 B"  # the free space as it is: this disk is not full, SQLite's page limit was hit
    monkeypatch.undo()

    store = ResultStore(db)
    [first] = store.runs()
    assert first.status == "interrupted" and first.finished_at is not None
    assert line["rest"].startswith(f"run {first.run_id} marked interrupted;")
    [(_, _, saved)] = store.results()
    assert (saved.variant, saved.outcome, "fine" in saved.log_excerpt) == ("a", Outcome.FIXED, True)

    assert run(cases, db, "--json") == ExitCode.OK
    out = json.loads(capsys.readouterr().out)
    assert out["reused"] == [saved.item_id]  # the one saved; b, whose save failed, launched again
    assert sorted((r["variant"], r["outcome"]) for r in out["results"]) == [("a", "fixed"), ("b", "fixed")]
    assert [(r.status, len(store.results(r.run_id))) for r in store.runs()] == [("interrupted", 1), ("complete", 1)]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted for the test (the real thing: ENOSPC from the kernel)."""
    mount = tmp_path / "small"
    mount.mkdir()
    tried = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1M", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if tried.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): {tried.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=True)


def fill(disk: Path) -> None:
    """Fill `disk` to the last byte."""
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, bytes(65536))
    except OSError:  # ENOSPC
        pass
    finally:
        os.close(fd)


def test_a_real_full_disk_mid_run_leaves_the_run_running_says_so_and_resumes(
    make_case: MakeCase, small_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The second launch fills the disk: its result cannot be saved, nor the run marked (SQLite cannot even make its
    shared-memory file: "disk I/O error" with 0 B free); the line says the run stays `running`. With room again,
    the re-run resumes from a store whose run was left `running`: the first result reused, the second launched."""
    make_case(
        SCRIPT,
        variants={
            "a": {"expect": FIXED},
            "b": {"expect": FIXED, "args": ["--fill", str(small_disk / "filler"), str(tmp_path / "filled")]},
        },
    )
    cases, db = tmp_path / "cases", small_disk / "results.db"
    assert run(cases, db) == ExitCode.DISK_FULL
    line = stderr_line(capsys)
    assert (line["path"], line["free"]) == (str(db), "0 B")
    assert re.fullmatch(
        r"run (\S+) could not even be marked interrupted \(it stays `running`\); the results saved "
        r"before it are intact, and the same command resumes from them",
        line["rest"],
    ), line["rest"]

    (small_disk / "filler").unlink()
    store = ResultStore(db)
    [left] = store.runs()
    assert left.status == "running" and line["rest"].startswith(f"run {left.run_id} ")
    assert [(r.variant, r.outcome) for _, _, r in store.results()] == [("a", Outcome.FIXED)]
    assert run(cases, db, "--json") == ExitCode.OK
    out = json.loads(capsys.readouterr().out)
    assert out["reused"] == [store.results()[0][2].item_id]
    assert sorted((r["variant"], r["outcome"]) for r in out["results"]) == [("a", "fixed"), ("b", "fixed")]


def test_a_store_on_a_full_disk_is_full_not_corrupt_when_opened(
    make_case: MakeCase, small_disk: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Opening a store (an existing one, or a new one) on a disk with no room left: exit 3, the line naming the
    store and 0 B free, nothing recorded; before, "not a bugmatrix results store (disk I/O error)" blamed the store.
    An I/O error with room on the disk is still the store's own fault."""
    make_case(SCRIPT, variants={"a": {"expect": FIXED}})
    existing = small_disk / "results.db"
    ResultStore(existing)
    fill(small_disk)
    for db in (existing, small_disk / "new.db"):
        assert run(tmp_path / "cases", db) == ExitCode.DISK_FULL, db
        line = stderr_line(capsys)
        assert (line["path"], line["free"], line["rest"]) == (str(db), "0 B", "nothing recorded"), db
    (small_disk / "filler").unlink()
    assert ResultStore(existing).runs() == []
    assert _full(sqlite3.OperationalError("disk I/O error"), tmp_path / "r.db") is None  # room here: the store's fault


def test_an_items_error_stops_the_launches_in_flight_at_once_and_is_what_is_raised() -> None:
    """A full disk raised by one job's save kills the other jobs' launches now (not once their results come in
    order), and is what the run reports, not the `LaunchAborted` of a launch it killed."""

    def work(item: int) -> str:
        if item == 0:
            return run_abortable(["sleep", "30"], timeout=60).stdout
        time.sleep(0.5)
        raise DiskFull(Path("results.db"), "database or disk is full", 0)

    started = time.monotonic()
    try:
        with pytest.raises(DiskFull):
            run_scheduled([0, 1], work, cost=lambda item: 1, cores=2)
        assert time.monotonic() - started < 10
    finally:
        allow_launches()  # as the next run does
