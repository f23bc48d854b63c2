"""Fixtures for the harness's own tests: small fake case folders with scripts that pass, fail, crash or hang."""

from __future__ import annotations

import atexit
import os
import shutil
import sqlite3
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

# The harness's own tests never read the repository's committed record (record/ under the current directory): each
# test that wants a record builds one. Set before the harness is imported (its default is read at import); the empty
# folder goes with the process (each xdist worker makes its own).
if "BUGMATRIX_RECORD" not in os.environ:
    os.environ["BUGMATRIX_RECORD"] = tempfile.mkdtemp(prefix="bugmatrix-no-record-")
    atexit.register(shutil.rmtree, os.environ["BUGMATRIX_RECORD"], ignore_errors=True)
# Nor the user's results store and environments (`.bugmatrix/` here, which `bugmatrix run` -- the README's first
# command -- fills): a test that wants a store or environments makes its own. The defaults are read when a command
# runs (harness/session/basics.py `default_db`, harness/matrix/basics.py `default_envs`), so setting them here is in
# time although the pytest plugin imported the harness before this file. Nothing is created at these paths unless a
# test writes there; the folder goes with the process.
_OWN = tempfile.mkdtemp(prefix="bugmatrix-tests-")
atexit.register(shutil.rmtree, _OWN, ignore_errors=True)
os.environ["BUGMATRIX_DB"] = os.path.join(_OWN, "results.db")
os.environ["BUGMATRIX_ENVS"] = os.path.join(_OWN, "envs")

from harness.launch.interpreter import Environment, inspect_interpreter  # noqa: E402 - after the defaults above
from harness.model.case import Case, load_case  # noqa: E402

MakeCase = Callable[..., Case]


def cap_sqlite(monkeypatch: pytest.MonkeyPatch, when: Callable[[sqlite3.Connection], bool] = lambda db: True) -> None:
    """For the rest of the test, a SQLite connection of which `when` holds cannot grow its database: SQLite's own
    `PRAGMA max_page_count` makes a write that needs another page fail with SQLITE_FULL ("database or disk is full"),
    as a full disk does, with no filesystem to fill. A new database gets 512-byte pages, so that every result saved
    needs more pages."""
    connect = sqlite3.connect

    def capped(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        db.execute("PRAGMA page_size = 512")  # takes effect only on an empty file
        if when(db):
            pages = db.execute("PRAGMA page_count").fetchall()[0][0]
            db.execute(f"PRAGMA max_page_count = {max(1, pages)}")
        return db

    monkeypatch.setattr(sqlite3, "connect", capped)


def holds_results(db: sqlite3.Connection) -> bool:
    """Whether the store behind `db` already holds a result (a `cap_sqlite` condition)."""
    try:
        return db.execute("SELECT count(*) FROM results").fetchall()[0][0] > 0
    except sqlite3.OperationalError:  # no results table yet
        return False


@pytest.fixture(autouse=True)
def _no_chronology_leaks() -> Any:
    """A reader that loaded a record answers the index's and clones' questions from it for the rest of its process
    (harness/session/readers.py `use_chronology`); one test's record must not answer the next test's."""
    from harness.matrix import git, index

    yield
    index.forget()
    git.forget()


@pytest.fixture
def make_case(tmp_path: Path) -> MakeCase:
    """`make_case(script_source, **case_yaml_fields)` writes tmp/cases/<id>/{case.yaml,repro.py} and loads it."""

    def make(script: str, *, case_id: str = "fake-1-case", **fields: Any) -> Case:
        folder = tmp_path / "cases" / case_id
        folder.mkdir(parents=True)
        (folder / "repro.py").write_text(textwrap.dedent(script))
        spec = {
            "title": "a fake case",
            "upstream": ["https://example.invalid/issues/1"],
            "packages": ["torch"],
            "nproc": [1],
            "timeout": 60,
            "signature": "FAKE-BUG-SIGNATURE",
            "variants": {"bug": {"expect": [{"outcome": "reproduced"}]}},
        }
        spec.update(fields)
        (folder / "case.yaml").write_text(yaml.safe_dump(spec))
        return load_case(folder / "case.yaml")

    return make


@pytest.fixture(scope="session")
def env() -> Environment:
    """The environment the tests run in (it has torch, so torchrun works)."""
    return inspect_interpreter(sys.executable)


FAKE_NVIDIA_SMI = """#!/bin/sh
# A stand-in for nvidia-smi on a one-GPU machine: logs each call, answers -L and --query-gpu as the real one does.
echo "$*" >> "$(dirname "$0")/calls"
sleep {sleep}
case "$*" in
  *-L*) echo "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-00000000-0000-0000-0000-000000000000)";;
  *query-gpu*) echo "NVIDIA H100 80GB HBM3, 580.95.05";;
  *) exit 6;;
esac
"""


def fake_gpu_machine(folder: Path, monkeypatch: pytest.MonkeyPatch, sleep: float = 0.0) -> Path:
    """Make this process see a one-GPU machine: a stand-in `nvidia-smi` (sleeping `sleep` s per call, as a real one
    does without persistence mode) first on PATH, the GPU probe's cache cleared before and after. Returns the
    folder; its `calls` file lists each call's arguments."""
    from harness.launch import interpreter

    folder.mkdir(parents=True, exist_ok=True)
    smi = folder / "nvidia-smi"
    smi.write_text(FAKE_NVIDIA_SMI.format(sleep=sleep))
    smi.chmod(0o755)
    (folder / "calls").write_text("")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setattr(interpreter, "PROC_GPUS", folder / "no-proc-driver-nvidia")  # ask the stand-in, not /proc
    interpreter.forget_gpus()
    return folder


@pytest.fixture
def one_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A one-GPU machine as the harness sees it (`fake_gpu_machine`), for the test's duration."""
    from harness.launch import interpreter

    yield fake_gpu_machine(tmp_path / "fake-gpu", monkeypatch)
    interpreter.forget_gpus()


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every `LaunchResult` the jobs of this test got (from any thread), in the order they ended: what a `Result`
    does not keep, such as how long torchrun took to start the ranks (`startup_s`), before the case's clock ran."""
    from harness.launch import execute, torchrun

    seen: list[torchrun.LaunchResult] = []

    def recording(*args: Any, **kwargs: Any) -> torchrun.LaunchResult:
        result = torchrun.launch(*args, **kwargs)
        seen.append(result)
        return result

    monkeypatch.setattr(execute, "launch", recording)
    return seen
