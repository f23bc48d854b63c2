"""Interrupting a matrix run (SIGINT or SIGTERM): a consistent store, no processes left, and a re-run that resumes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from harness.matrix.envcache import MARKER
from harness.model.outcome import Outcome
from harness.session.store import ResultStore
from tests.helpers import leftovers

from .fakeindex import FakeRelease, build_index, fake_torch

pytestmark = pytest.mark.usefixtures("launch_mode")  # every test cold and warm (tests/conftest.py)

VERSIONS = ["1.0", "1.1", "1.2", "1.3"]
SCRIPT = """
import os, sys, time
import fakelib
time.sleep(float(os.environ.get("FAKE_CASE_SLEEP_S", "2")))  # long enough to interrupt a launch in flight
if fakelib.BUGGY:
    print("RuntimeError: FAKE-SIG")
    sys.exit(1)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    releases = [fake_torch("2.5.0", "2024-01-01T00:00:00Z")]
    releases += [
        FakeRelease("fakelib", v, f"2024-02-0{i + 1}T00:00:00Z", module=f"BUGGY = {v < '1.2'}\n")
        for i, v in enumerate(VERSIONS)
    ]
    index = build_index(tmp_path / "index", releases)
    (tmp_path / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local"},
                "groups": [{"name": "fakelib-{fakelib}", "axes": {"fakelib": VERSIONS}, "pins": {"torch": "2.5.0"}}],
            }
        )
    )
    case = tmp_path / "cases" / "fakelib-1-slow"
    case.mkdir(parents=True)
    (case / "repro.py").write_text(SCRIPT)
    (case / "case.yaml").write_text(
        yaml.safe_dump(
            {
                "title": "slow fake bug",
                "upstream": ["https://example.invalid/1"],
                "packages": ["torch", "fakelib"],
                "nproc": [1, 2],
                "timeout": 60,
                "signature": "FAKE-SIG",
                "variants": {
                    "bug": {"expect": [{"when": {"fakelib": "<1.2"}, "outcome": "reproduced"}, {"outcome": "fixed"}]}
                },
            }
        )
    )
    return tmp_path


def bugmatrix(project: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "harness",
        "--cases-dir",
        str(project / "cases"),
        *args,
        "--matrix",
        str(project / "matrix.yaml"),
        "--envs",
        str(project / "envs"),
    ]


def saved(db: Path) -> int:
    try:
        return len(ResultStore(db).results())
    except Exception:  # the store is being created by the run
        return 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_matrix_run_keeps_what_finished_and_resumes(project: Path, signum: signal.Signals) -> None:
    db = project / "results.db"
    subprocess.run(bugmatrix(project, "env", "build"), check=True, capture_output=True)
    run = subprocess.Popen(
        [*bugmatrix(project, "run", "--all-cells", "--db", str(db), "-j", "2")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while saved(db) < 2 and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.2)
    assert run.poll() is None, "the run ended before it could be interrupted"
    run.send_signal(signum)  # mid-run: launches are in flight
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err.decode()
    assert leftovers(str(project)) == []  # the launches in flight were killed, whole trees

    store = ResultStore(db)
    [first] = store.runs()
    assert first.status == "interrupted"
    kept = store.results(first.run_id)
    said = err.decode()  # what finished, what was killed, the run and the command that resumes it
    assert f"stopped: {len(kept)} of 8 job(s) finished" in said and "killed in flight: fakelib-1-slow::" in said, said
    assert f"run {first.run_id} is marked interrupted" in said
    assert re.search(r"resume with: bugmatrix --cases-dir \S+ run --all-cells --db \S+ -j 2 ", said), said
    assert 2 <= len(kept) < 8  # what finished is kept ...
    for _, cell, result in kept:  # ... and only whole verdicts: no row from a killed launch
        assert result.outcome in (Outcome.REPRODUCED, Outcome.FIXED) and result.ok, (cell, result.reason)
        assert result.fingerprint and len(result.ranks) == result.nproc

    again = subprocess.run(
        [*bugmatrix(project, "run", "--all-cells", "--db", str(db), "--json")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stderr
    payload = json.loads(again.stdout)
    assert len(payload["results"]) == 8 and all(r["outcome"] == r["expected"] for r in payload["results"])
    assert len(payload["reused"]) == len(kept)  # resumed: what was recorded was not launched again
    second = store.runs()[-1]
    assert second.status == "complete" and len(store.results(second.run_id)) == 8 - len(kept)

    redo = subprocess.run(
        [*bugmatrix(project, "run", "--all-cells", "--db", str(db), "--json", "--redo", "--nproc", "1")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert json.loads(redo.stdout)["reused"] == [] and len(store.results(store.runs()[-1].run_id)) == 4


def test_interrupting_a_run_while_it_builds_an_environment_stops_at_once(project: Path, tmp_path: Path) -> None:
    """Ctrl-C during an environment build kills the install and ends the run in seconds (it used to wait minutes for
    the install to finish); the unfinished build is neither kept nor recorded as a failed (`infra`) cell."""
    slow_uv = tmp_path / "slow-uv"  # every uv command hangs, as a long install does
    slow_uv.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(300)\n")
    slow_uv.chmod(0o755)
    marker = str(slow_uv)  # in the hanging process's command line
    db = project / "results.db"
    run = subprocess.Popen(
        [*bugmatrix(project, "run", "--all-cells", "--db", str(db))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "BUGMATRIX_UV": str(slow_uv)},
    )
    deadline = time.monotonic() + 60
    while not leftovers(marker) and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.2)
    assert leftovers(marker), "the build never started"
    started = time.monotonic()
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=60)
    assert run.returncode == 130, err.decode()
    assert time.monotonic() - started < 15
    # The build-ahead thread's aborted build ends that thread quietly (it printed an uncaught LaunchAborted).
    assert "Traceback" not in err.decode() and "LaunchAborted" not in err.decode(), err.decode()
    assert leftovers(marker) == []
    if db.exists():
        assert all(result.outcome is not Outcome.INFRA for _, _, result in ResultStore(db).results())
    assert not [p.name for p in (project / "envs").iterdir() if ".building-" in p.name]


def test_sigterm_with_a_launch_in_flight_exits_at_once_and_begins_no_waiting_job(project: Path, tmp_path: Path) -> None:
    """SIGTERM while a 2-rank launch holds both cores and the next job waits for them: the run exits within
    seconds. The waiting job used to begin once the killed launch gave its cores back, and its steps before the
    launch are not aborted: here its cell's interpreter takes 10 s to start (as a torch stack's can on a loaded
    machine), and the interrupted run waited for them (issue 33: 16-20 s under load 15)."""
    subprocess.run(bugmatrix(project, "env", "build"), check=True, capture_output=True)
    [second] = [
        m.parent for m in (project / "envs").glob(f"*/{MARKER}") if json.loads(m.read_text())["cell"] == "fakelib-1.1"
    ]
    [site] = second.glob("lib/python*/site-packages")
    (site / "slow_start.pth").write_text("import time; time.sleep(10)\n")
    uv_cache = tmp_path / "uv-cache"  # the budget below measures this cache, never the user's (nor cleans it)
    uv_cache.mkdir()
    db = project / "results.db"
    # --disk-budget 1: over budget from the start, so no cell is prepared ahead: the waiting job would make its own
    run = subprocess.Popen(
        [*bugmatrix(project, "run", "--all-cells", "--nproc", "2", "-j", "2", "--disk-budget", "1", "--db", str(db))],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        env={**os.environ, "FAKE_CASE_SLEEP_S": "60", "UV_CACHE_DIR": str(uv_cache)},
    )
    # The case's folder: torchrun's and its ranks' command lines name the script in it; warm ranks run in it.
    script = str(project / "cases" / "fakelib-1-slow")
    deadline = time.monotonic() + 120
    while len(leftovers(script)) < 2 and time.monotonic() < deadline and run.poll() is None:
        time.sleep(0.1)
    assert run.poll() is None and len(leftovers(script)) >= 2, "the first launch never started its ranks"
    started = time.monotonic()
    run.send_signal(signal.SIGTERM)
    _, err = run.communicate(timeout=120)
    took = time.monotonic() - started
    assert run.returncode == 130, err.decode()
    assert took < 8, f"exit took {took:.1f} s after SIGTERM"  # 0.3-0.8 s measured at load 17; 20-60 s before
    assert leftovers(str(project)) == []  # the launch in flight was killed, whole tree, and nothing else began
    [interrupted] = ResultStore(db).runs()
    assert interrupted.status == "interrupted" and ResultStore(db).results() == []
