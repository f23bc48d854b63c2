"""The `bugmatrix` command: list, run, exit codes, JSON, and Ctrl-C with nothing left behind."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.cli import main
from harness.session.store import ResultStore
from tests.helpers import leftovers

from .conftest import MakeCase

FIXED_SCRIPT = "print('fine')\n"


def test_list_json_shows_cases_and_invalid_ones(make_case: MakeCase, tmp_path: Path, capsys) -> None:
    make_case(FIXED_SCRIPT)
    broken = tmp_path / "cases" / "torch-9-broken"
    broken.mkdir()
    (broken / "case.yaml").write_text("title: only a title\n")
    assert main(["--cases-dir", str(tmp_path / "cases"), "list", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert [c["id"] for c in out["cases"]] == ["fake-1-case"]
    assert out["errors"] == [f"{broken / 'case.yaml'}: upstream: Field required (and 3 more)"]


def test_run_exit_code_follows_expectations(make_case: MakeCase, tmp_path: Path, capsys) -> None:
    make_case(
        FIXED_SCRIPT,
        variants={"bug": {"expect": [{"outcome": "fixed"}]}, "wrong": {"expect": [{"outcome": "reproduced"}]}},
    )
    cases = str(tmp_path / "cases")
    db = str(tmp_path / "r.db")
    assert main(["--cases-dir", cases, "run", "--json", "--device", "cpu", "--db", db]) == 1
    out = json.loads(capsys.readouterr().out)
    by_variant = {r["variant"]: r for r in out["results"]}
    assert by_variant["bug"]["outcome"] == "fixed" and by_variant["bug"]["expected"] == "fixed"
    assert by_variant["wrong"]["outcome"] == "fixed" and by_variant["wrong"]["expected"] == "reproduced"
    assert by_variant["bug"]["versions"]["torch"]  # the exact installed version is kept
    assert by_variant["bug"]["ranks"][0]["state"] == "fixed"
    assert out["ok"] is False
    # Selecting only the matching variant's case by id passes; an unknown device is a usage error.
    (tmp_path / "cases" / "fake-1-case" / "case.yaml").write_text(
        (tmp_path / "cases" / "fake-1-case" / "case.yaml").read_text().replace("outcome: reproduced", "outcome: fixed")
    )
    assert main(["--cases-dir", cases, "run", "fake-1", "--device", "cpu", "--db", db]) == 0
    assert [r.status for r in ResultStore(tmp_path / "r.db").runs()] == ["complete", "complete"]


def test_ctrl_c_kills_the_launch_in_flight(make_case: MakeCase, tmp_path: Path, launch_mode: str) -> None:
    make_case("import time\ntime.sleep(3600)\n", nproc=[2], timeout=600)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "harness",
            "--cases-dir",
            str(tmp_path / "cases"),
            "run",
            "--device",
            "cpu",
            "--db",
            str(tmp_path / "r.db"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    # bugmatrix itself, torchrun's agent and both ranks mention the case folder in their command lines (warm: the
    # ranks carry their parent's command line but run in the case's folder; the agent is in neither)
    expected = 4 if launch_mode == "cold" else 3
    while time.monotonic() < deadline and len(leftovers(str(tmp_path))) < expected:
        time.sleep(0.2)
    assert len(leftovers(str(tmp_path))) >= expected
    time.sleep(1.0)  # the ranks are inside the script's sleep
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=90)
    finally:
        proc.kill()
    assert proc.returncode == 130, err.decode()[-3000:]
    assert [r.status for r in ResultStore(tmp_path / "r.db").runs()] == ["interrupted"]
    time.sleep(0.5)
    assert leftovers(str(tmp_path)) == []


def test_a_cuda_only_case_on_a_machine_without_a_gpu_skips_saying_why(
    make_case: MakeCase, tmp_path: Path, capsys, monkeypatch
) -> None:
    """A plain `bugmatrix run` on a CPU machine plans a CUDA-only case on its own device: a skip with the reason,
    never "nothing to run"; nothing is launched and nothing counts as a verdict (exit 5: nothing could run)."""
    import os

    from harness.launch import interpreter

    monkeypatch.setenv("PATH", os.path.dirname(sys.executable))  # no nvidia-smi
    monkeypatch.setattr(interpreter, "PROC_GPUS", tmp_path / "no-proc-driver-nvidia")
    interpreter.forget_gpus()
    make_case("raise SystemExit(0)\n", case_id="fake-2-cuda-only", devices=["cuda"])
    try:
        code = main(["--cases-dir", str(tmp_path / "cases"), "run", "--no-store", "--json"])
    finally:
        interpreter.forget_gpus()
    payload = json.loads(capsys.readouterr().out)
    assert code == 5
    [result] = payload["results"]
    assert (result["outcome"], result["device"], result["launched"]) == ("skip", "cuda", False)
    assert "CUDA" in result["reason"] or "GPU" in result["reason"], result["reason"]


def test_the_results_table_prints_a_reason_with_brackets() -> None:
    """A reason quoting a log line such as gloo's `[/__w/.../pair.cc:561] Connection closed by peer` is text, not
    rich markup: the table prints it (it raised MarkupError after a 2-rank run, and the run's table was lost)."""
    import io

    from rich.console import Console

    from harness.model.outcome import Outcome
    from harness.model.result import Result
    from harness.output.tables import results_table

    reason = "RuntimeError: [/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561] Connection closed"
    result = Result(
        case="c", variant="bug", nproc=2, device="cpu", outcome=Outcome.ERROR, expected=Outcome.FIXED, reason=reason
    )
    out = io.StringIO()
    Console(file=out, width=400).print(results_table([result]))
    assert "[/__w/pytorch/pytorch/third_party/gloo/gloo/transport/tcp/pair.cc:561]" in out.getvalue()


def test_a_result_reused_from_an_imported_record_is_judged_by_todays_rules(
    make_case: MakeCase, tmp_path: Path, capsys
) -> None:
    """`record import` writes the record's rows into a store with no `expected` (the record keeps none); a run that
    reuses one judged it as expecting nothing: every reused verdict was a MISMATCH and the run failed."""
    from harness.model.case import discover
    from harness.session.folding import fold_store, import_record
    from harness.session.record import Record

    make_case(FIXED_SCRIPT, variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    cases = str(tmp_path / "cases")
    assert main(["--cases-dir", cases, "run", "--device", "cpu", "--db", str(tmp_path / "first.db")]) == 0
    record = Record()
    fold_store(record, ResultStore(tmp_path / "first.db"), discover(tmp_path / "cases")[0])
    imported = ResultStore(tmp_path / "imported.db")
    assert import_record(record, imported) == 1
    [(_, row)] = imported.latest()
    assert row.expected is None  # as the record holds it
    capsys.readouterr()
    assert main(["--cases-dir", cases, "run", "--json", "--device", "cpu", "--db", str(tmp_path / "imported.db")]) == 0
    out = json.loads(capsys.readouterr().out)
    [result] = out["results"]
    assert (result["outcome"], result["expected"]) == ("fixed", "fixed") and out["ok"] is True
    assert result["started_at"] == row.started_at  # reused, not launched again


def test_every_layers_error_is_one_class_carrying_its_exit_code() -> None:
    """harness/cli.py catches `BugmatrixError` once (it listed 8 unrelated classes by module and name); each layer's
    own error is a subclass and says its code: 2, or 3 for a full disk under the store."""
    from harness.launch.interpreter import InterpreterError
    from harness.matrix.basics import IndexLookupError, MatrixError
    from harness.matrix.git import GitError
    from harness.model.case_schema import CaseError
    from harness.model.errors import BugmatrixError, UsageError
    from harness.session.store import DiskFull, StoreError
    from harness.workflows.bisect import BisectError

    for error in (UsageError, StoreError, MatrixError, CaseError, IndexLookupError, BisectError, GitError):
        assert issubclass(error, BugmatrixError) and error.exit_code == 2, error
    assert issubclass(InterpreterError, BugmatrixError) and InterpreterError.exit_code == 2
    assert issubclass(DiskFull, BugmatrixError) and DiskFull.exit_code == 3
    assert "except BugmatrixError" in (Path(__file__).parent.parent / "harness" / "cli.py").read_text()


def test_an_invalid_matrix_is_one_line_on_stderr_for_every_command(tmp_path: Path, capsys) -> None:
    """`env build` printed its matrix error on stdout (where `env list`'s table goes); now every command's bad input
    takes the same road out: one line on stderr naming the command, exit 2."""
    (tmp_path / "matrix.yaml").write_text("cells: [")
    for argv in (["env", "build"], ["matrix"], ["run", "--all-cells"]):
        code = main(["--cases-dir", str(tmp_path), *argv, "--matrix", str(tmp_path / "matrix.yaml")])
        said = capsys.readouterr()
        assert code == 2 and said.out == "", (argv, said.out)
        assert said.err.startswith(f"bugmatrix {argv[0]}: {tmp_path / 'matrix.yaml'}") and said.err.count("\n") == 1


def test_the_nightly_cell_keeps_exit_2_for_bad_input(tmp_path: Path, monkeypatch, capsys) -> None:
    """A cell whose `run` refused its input (here a --cases-dir that does not exist) keeps 2, as the annotation
    explains it ("2: invalid input"), not 1 with a traceback as for a crash."""
    monkeypatch.delenv("GITHUB_OUTPUT", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    results = tmp_path / "results"
    argv = ["--cases-dir", str(tmp_path / "none"), "nightly", "cell", "--cell", "c", "--results", str(results)]
    assert main(argv) == 2
    assert (results / "c.exit-code").read_text() == "2\n"
    assert "Traceback" not in capsys.readouterr().err


def test_one_format_option_with_json_as_its_alias(make_case: MakeCase, tmp_path: Path, capsys) -> None:
    """Every command that answers in JSON has one `--format` (a renderer per choice) and `--json` as the same as
    `--format json`; `report` had only `--format`, `compare` `--json` beside `--markdown`, `list` only `--json`."""
    import argparse

    from harness.commands.context import build_parser

    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    parsers = dict(sub.choices)
    parsers["record coverage"] = next(
        a for a in parsers["record"]._actions if isinstance(a, argparse._SubParsersAction)
    ).choices["coverage"]
    with_json = {name for name, p in parsers.items() if "--json" in p._option_string_actions}
    assert {"list", "run", "matrix", "report", "compare", "bisect", "narrow", "expect", "compat", "audit"} <= with_json
    for name in with_json:
        options = parsers[name]._option_string_actions
        assert "json" in options["--format"].choices, name
        assert options["--json"].dest == options["--format"].dest == "format", name
    make_case(FIXED_SCRIPT)
    cases = ["--cases-dir", str(tmp_path / "cases")]
    assert main([*cases, "list", "--json"]) == 0
    said = capsys.readouterr().out
    assert main([*cases, "list", "--format", "json"]) == 0
    assert capsys.readouterr().out == said and json.loads(said)["cases"][0]["id"] == "fake-1-case"
