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
from harness.model.outcome import Outcome  # noqa: E402
from harness.session.record import Record, write  # noqa: E402
from tests.helpers import DAY, RUN, MakeCase, audit_row  # noqa: E402


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


@pytest.fixture(params=["cold", "warm"])
def launch_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that uses it runs twice: its launches cold (under torchrun) and warm (forked from a warm parent),
    through $BUGMATRIX_LAUNCH_MODE, which the harness reads in this process and in every `bugmatrix` it starts.
    The four launch test files take it for every test (their guarantees hold in both modes, issue 36)."""
    monkeypatch.setenv("BUGMATRIX_LAUNCH_MODE", request.param)
    return str(request.param)


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


# --- synthetic records that audit and OSV are asked of (tests/test_audit.py, tests/test_osv.py) --------------------


@pytest.fixture
def world(tmp_path: Path, make_case, monkeypatch: pytest.MonkeyPatch) -> dict:  # noqa: ANN001
    """Three cases and a record: a coupling (torch x lightning), a torch bug fixed in 2.3.0, a torchrec bug never
    fixed; plus a superseded row that must never count. The working folder has no local store."""
    monkeypatch.chdir(tmp_path)
    R, F = Outcome.REPRODUCED, Outcome.FIXED
    coupling = make_case(
        "print('x')\n",
        case_id="lightning-1-coupling",
        packages=["torch", "lightning"],
        devices=["cpu", "cuda"],
        upstream=["https://example.invalid/lightning/issues/1"],
        fixed_by=["https://example.invalid/lightning/pull/2"],
        variants={
            "bug": {
                "expect": [
                    {"when": {"torch": "<2.6"}, "outcome": "fixed"},
                    {"when": {"lightning": ">=2.4,<2.6"}, "outcome": "fixed"},
                    {"outcome": "reproduced"},
                ]
            },
            "workaround-env": {"workaround": True, "args": ["--env"], "expect": [{"outcome": "fixed"}]},
        },
    )
    simple = make_case(
        "print('y')\n",
        case_id="torch-2-simple",
        packages=["torch"],
        devices=["cpu", "cuda"],
        upstream=["https://example.invalid/torch/issues/2"],
        variants={"bug": {"expect": [{"when": {"torch": "<2.3"}, "outcome": "reproduced"}, {"outcome": "fixed"}]}},
    )
    never = make_case(
        "print('z')\n",
        case_id="torchrec-3-never",
        packages=["torch", "torchrec", "fbgemm-gpu"],
        upstream=["https://example.invalid/torchrec/issues/3"],
        variants={"bug": {"expect": [{"outcome": "reproduced"}]}},
    )
    rows = []
    for i, (light, torch, bug) in enumerate(
        [
            ("2.3.3", "2.5.1", F),
            ("2.3.3", "2.6.0", R),
            ("2.4.0", "2.6.0", F),
            ("2.5.1", "2.6.0", F),
            ("2.6.6", "2.6.0", R),
            ("2.6.6", "2.5.1", F),
        ]
    ):
        cell = f"lightning-{light}-torch-{torch}"
        versions = {"lightning": light, "torch": torch}
        rows.append(audit_row(coupling, "bug", cell, versions, bug, DAY + i))
        rows.append(audit_row(coupling, "workaround-env", cell, versions, F, DAY + i))
    for i, (torch, outcome) in enumerate([("2.0.1", R), ("2.1.2", R), ("2.3.0", F), ("2.5.1", F)]):
        rows.append(audit_row(simple, "bug", f"torch-{torch}", {"torch": torch}, outcome, DAY + 100 + i))
    # an edited script's result: superseded history, never a verdict (it would put a regression at 2.4.0)
    rows.append(audit_row(simple, "bug", "torch-2.4.0", {"torch": "2.4.0"}, R, DAY + 500, digest="an-older-script"))
    for i, rec in enumerate(["1.0.0", "1.2.0"]):
        versions = {"torch": f"2.{5 + 2 * i}.0", "torchrec": rec, "fbgemm-gpu-cpu": rec}
        rows.append(audit_row(never, "bug", f"torchrec-{rec}", versions, R, DAY + 200 + i, nproc=2))
    record = Record(rows=rows, runs={RUN: {"started": "2026-12-01T00:00:00Z", "machine": "m-test", "command": "test"}})
    root = tmp_path / "rec"
    write(root, record)
    cases = [coupling, simple, never]
    return {"root": root, "cases": cases, "cases_dir": coupling.folder.parent, "tmp": tmp_path}


@pytest.fixture
def gated(tmp_path: Path, make_case, monkeypatch: pytest.MonkeyPatch) -> dict:  # noqa: ANN001
    """Two torch cases where the case cannot always run. torch-4-absent: the bug's code appears in 2.4 (`because:
    absent` below it), reproduced at 2.7.1 and 2.9.0, fixed at 2.12.1; its workaround measured fixed at 2.9.0 only.
    torch-5-hole: runs on torch >= 2.1 (`supports:`); reproduced at 2.3.0 and 2.7.0, a cell measured skip between
    them at 2.5.0 (the rules: untestable there) and at 2.9.0, the newest (no rule says why)."""
    monkeypatch.chdir(tmp_path)
    R, F, S = Outcome.REPRODUCED, Outcome.FIXED, Outcome.SKIP
    absent = make_case(
        "print('a')\n",
        case_id="torch-4-absent",
        upstream=["https://example.invalid/torch/issues/4"],
        variants={
            "bug": {
                "expect": [
                    {"when": {"torch": "<2.4.0"}, "outcome": "skip", "because": "absent"},
                    {"when": {"torch": "<2.12.0"}, "outcome": "reproduced"},
                    {"outcome": "fixed"},
                ]
            },
            "workaround-w": {
                "workaround": True,
                "args": ["--w"],
                "expect": [{"when": {"torch": "<2.4.0"}, "outcome": "skip", "because": "absent"}, {"outcome": "fixed"}],
            },
        },
    )
    hole = make_case(
        "print('h')\n",
        case_id="torch-5-hole",
        upstream=["https://example.invalid/torch/issues/5"],
        supports={"torch": ">=2.1"},
        variants={
            "bug": {
                "expect": [
                    {"when": {"torch": ">=2.5.0,<2.6.0"}, "outcome": "skip", "because": "untestable"},
                    {"outcome": "reproduced"},
                ]
            }
        },
    )
    rows = [
        audit_row(absent, "bug", f"torch-{v}", {"torch": v}, o, DAY + i)
        for i, (v, o) in enumerate([("2.7.1", R), ("2.9.0", R), ("2.12.1", F)])
    ]
    rows.append(audit_row(absent, "workaround-w", "torch-2.9.0", {"torch": "2.9.0"}, F, DAY + 10))
    rows += [
        audit_row(hole, "bug", f"torch-{v}", {"torch": v}, o, DAY + 20 + i)
        for i, (v, o) in enumerate([("2.3.0", R), ("2.5.0", S), ("2.7.0", R), ("2.9.0", S)])
    ]
    root = tmp_path / "rec"
    write(
        root, Record(rows=rows, runs={RUN: {"started": "2026-12-01T00:00:00Z", "machine": "m-test", "command": "test"}})
    )
    return {"root": root, "cases": [absent, hole], "cases_dir": absent.folder.parent, "tmp": tmp_path}
