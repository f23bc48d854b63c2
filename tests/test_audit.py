"""`bugmatrix audit` and `bugmatrix osv` over small synthetic records: requirement parsing, each precision word, the
coupling, superseded history, exit codes, zero launches, the upgrade view, OSV documents checked against the
schema's rules, the OSV API server, and real OSV clients (pip-audit, uv audit) pointed at it."""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.analysis import audit as audit_module
from harness.analysis.osv import OSVIndex
from harness.cli import main
from harness.model.outcome import Outcome
from harness.model.requirements import Loose, Pin, RequirementsError, parse_pins, read_requirements
from harness.output.osv import MAX_BODY, make_server
from harness.session.readers import open_reader
from harness.session.record import Record, write
from tests.helpers import DAY, RUN, audit_row, osv_docs

R, F = Outcome.REPRODUCED, Outcome.FIXED


def _answers(world: dict, pins: list[str], device: str = "cpu") -> dict[tuple[str, str], audit_module.Answer]:
    store = open_reader(world["tmp"] / "absent.db", False, world["cases"], world["root"])
    results = store.latest()
    target = audit_module.target_of(*parse_pins(pins), audit_module.known_packages(results, world["cases"]))
    return {(a.case, a.variant): a for a in audit_module.audit(results, world["cases"], target, device)}


def _cli(world: dict, *args: str) -> list[str]:
    return ["--cases-dir", str(world["cases_dir"]), "audit", "--record", str(world["root"]), *args]


# ------------------------------------------------------------------------------------------------ requirements


def test_a_pip_freeze_file_is_read_with_hashes_markers_extras_locals_git_and_loose_lines(tmp_path: Path) -> None:
    sha = "0123456789abcdef0123456789abcdef01234567"
    (tmp_path / "more.txt").write_text("litgpt==0.5.11\n")
    req = tmp_path / "req.txt"
    req.write_text(
        "# frozen\n"
        "torch==2.6.0+cu124 \\\n    --hash=sha256:aaaa \\\n    --hash=sha256:bbbb\n"
        "lightning[extra]==2.3.3  # a comment\n"
        'numpy==1.26.4 ; python_version < "3"\n'
        f"torchrec @ git+https://github.com/meta-pytorch/torchrec@{sha}\n"
        "fbgemm-gpu-cpu==1.2.0\n"
        "requests>=2\n"
        "--index-url https://download.pytorch.org/whl/cu124\n"
        "-e ./local\n"
        "-r more.txt\n"
    )
    pins, loose = read_requirements(req)
    got = {p.distribution: p.text for p in pins}
    assert got == {
        "torch": "2.6.0+cu124",
        "lightning": "2.3.3",
        "torchrec": f"git {sha}",
        "fbgemm-gpu-cpu": "1.2.0",
        "litgpt": "0.5.11",
    }  # numpy's marker is false here: skipped
    assert {item.name for item in loose} == {"requests", "./local"}
    assert pins[0].where == f"{req}:2"
    req.write_text("torch==2.6.0\nthis is not a requirement\n")
    with pytest.raises(RequirementsError, match=r"req.txt:2: 'this is not a requirement'"):
        read_requirements(req)


def test_a_constraint_pins_what_the_requirements_name_and_installs_nothing_itself(tmp_path: Path) -> None:
    """pip's `-c`: 7317000 skipped the line, so `torch>=2.4` under `-c` pinning torch==2.6.0 stayed loose (exit 5 in
    a CI gate) and the constraint's pins were lost. A package named only in a constraints file is not installed,
    so not audited; an `-r` inside a constraints file reads requirements again (pip's own reader does so)."""
    (tmp_path / "my c.txt").write_text(
        "torch==2.6.0 \\\n    --hash=sha256:aaaa\n"
        "lightning<3\n"
        "numpy==1.26.4\n"
        'fbgemm-gpu-cpu==1.2.0 ; python_version < "3"\n'
        "--index-url https://download.pytorch.org/whl/cpu\n"
        "-r more.txt\n"
    )
    (tmp_path / "more.txt").write_text("torchrec==1.0.0\n")
    (tmp_path / "local.txt").write_text("lightning==2.3.3+local\n")
    req = tmp_path / "req.txt"
    req.write_text('-c "my c.txt"\ntorch>=2.4\nlightning==2.3.3\nlitgpt\n--constraint=local.txt\n')
    pins, loose = read_requirements(req)
    assert {p.distribution: (p.text, Path(p.where).name) for p in pins} == {
        "torch": ("2.6.0", "my c.txt:1"),  # the constraint's exact pin, its line named
        "lightning": ("2.3.3+local", "local.txt:1"),  # ==2.3.3 admits the local build a constraint names
        "torchrec": ("1.0.0", "more.txt:1"),
    }  # numpy and fbgemm-gpu-cpu only constrained: not installed
    assert [item.name for item in loose] == ["litgpt"]  # a constraint never makes a requirement of its own


def test_a_constraint_that_excludes_the_requirement_or_that_pip_refuses_is_one_line(tmp_path: Path) -> None:
    """7317000 skipped `-c` lines, so a constraint excluding the pinned release (pip: ResolutionImpossible) or one
    pip refuses (editable, unnamed, extras) answered as if it were not there."""
    req = tmp_path / "req.txt"
    constraints = tmp_path / "c.txt"
    for required, constraint, message in [
        ("torch==2.6.0", "torch==2.5.1", r"c.txt:1: constraint torch==2.5.1 excludes torch==2.6.0 \(.*req.txt:2\)$"),
        ("torch>=2.7", "torch==2.6.0", r"c.txt:1: constraint torch==2.6.0 excludes torch>=2.7$"),
        ("torch==2.6.0", "torch<2.6", r"c.txt:1: constraint torch<2.6 excludes torch==2.6.0"),
        ("torch", "torch==2.6.0\ntorch==2.5.1", r"c.txt:2: constraint torch==2.5.1 excludes torch"),
        ("torch==2.6.0", "-e ./here", r"c.txt:1: -e ./here: an editable install is not allowed as a constraint"),
        ("torch==2.6.0", "./here", r"c.txt:1: ./here: a constraint must name a package"),
        ("torch==2.6.0", "torch[opt]==2.6.0", r"c.txt:1: torch\[opt\]==2.6.0: a constraint cannot have extras"),
    ]:
        constraints.write_text(constraint + "\n")
        req.write_text(f"-c c.txt\n{required}\n")
        with pytest.raises(RequirementsError, match=message) as caught:
            read_requirements(req)
        assert len(str(caught.value).splitlines()) == 1


def test_distribution_names_map_to_the_record_and_what_it_does_not_know_is_not_covered(world: dict) -> None:
    known = {"torch": {"2.6.0"}, "lightning": {"2.3.3"}, "fbgemm-gpu": {"1.2.0"}, "torchrec": {"1.0.0 @ abcdef0123"}}
    pins = [
        Pin("pytorch-lightning", "2.3.3"),
        Pin("fbgemm-gpu-cpu", "1.2.0"),
        Pin("numpy", "1.26.4"),
        Pin("torchrec", "", "abcdef0"),
        Pin("torch", "", "9999999"),
    ]
    target = audit_module.target_of(pins, [Loose("requests", "requests>=2", "not pinned to one version")], known)
    assert target.pins["lightning"].distribution == "pytorch-lightning" and target.renamed == {
        "lightning": "pytorch-lightning"
    }
    assert target.pins["fbgemm-gpu"].version == "1.2.0"
    assert target.pins["torchrec"].text == "1.0.0 @ abcdef0123"  # the record's commit, matched by prefix
    assert {(u.package, u.why) for u in target.not_covered} == {
        ("numpy", "the record has no results for it"),
        ("torch", "a commit the record does not hold"),
        ("requests", "not pinned to one version"),
    }


# ------------------------------------------------------------------------------------------------------ answers


def test_each_precision_word_and_the_coupling(world: dict) -> None:
    a = _answers(world, ["torch==2.6.0+cu124", "lightning==2.3.3", "torchrec==1.0.0", "fbgemm-gpu-cpu==1.0.0"])
    bug = a[("lightning-1-coupling", "bug")]
    assert (bug.status, bug.basis, bug.precision) == ("reproduced", "exact", "measured at these exact pins")
    assert bug.fixed_in == "lightning==2.4.0" and bug.workarounds == ["workaround-env"]
    assert "--with torch==2.6.0+cu124" in bug.reproduce and "--with lightning==2.3.3" in bug.reproduce
    assert bug.versions == {"torch": "2.6.0+cu124", "lightning": "2.3.3"}
    # the coupling: the same lightning with a torch before 2.6 is not affected
    a = _answers(world, ["torch==2.5.1", "lightning==2.3.3"])
    assert a[("lightning-1-coupling", "bug")].status == "fixed"
    # interpolated: lightning 2.4.5 lies inside 2.4.0 and 2.5.1 (both fixed with torch 2.6.0)
    a = _answers(world, ["torch==2.6.0", "lightning==2.4.5"])
    assert a[("lightning-1-coupling", "bug")].basis == "interpolated"
    assert (
        "inside measured releases lightning 2.4.0 and 2.5.1 with no boundary between them"
        in a[("lightning-1-coupling", "bug")].precision
    )
    # a boundary not narrowed: from the rules, labelled not measured
    a = _answers(world, ["torch==2.6.0", "lightning==2.3.9"])
    answer = a[("lightning-1-coupling", "bug")]
    assert answer.basis == "rules" and not answer.measured and "not measured" in answer.precision
    # extrapolated beyond the newest; superseded history never counts (2.4.0 reproduced under an older script)
    a = _answers(world, ["torch==2.9.1"])
    simple = a[("torch-2-simple", "bug")]
    assert (simple.status, simple.basis) == ("fixed", "extrapolated")
    assert "beyond the newest measured release torch 2.5.1 (extrapolated)" in simple.precision
    a = _answers(world, ["torch==2.4.0"])
    assert (a[("torch-2-simple", "bug")].status, a[("torch-2-simple", "bug")].basis) == ("fixed", "interpolated")
    a = _answers(world, ["torch==1.13.1"])
    assert a[("torch-2-simple", "bug")].fixed_in == "torch==2.3.0"
    assert "before the oldest measured release torch 2.0.1" in a[("torch-2-simple", "bug")].precision
    # a package nothing depends on only qualifies the precision
    a = _answers(world, ["torch==2.9.1", "torchrec==1.2.0", "fbgemm-gpu==1.2.0"])
    never = a[("torchrec-3-never", "bug")]
    assert never.status == "reproduced" and never.fixed_in is None
    assert never.precision == "measured at these exact pins; measured with torch 2.7.0"
    assert "--nproc_per_node=2" in never.reproduce and "--with fbgemm-gpu==1.2.0" in never.reproduce
    # not measured on this device: the rules answer, labelled
    a = _answers(world, ["torch==2.0.1"], device="cuda")
    answer = a[("torch-2-simple", "bug")]
    assert (
        answer.status == "reproduced"
        and answer.precision == "not measured on this device (cuda): from the case's rules"
    )
    assert ("torchrec-3-never", "bug") not in a  # the case does not run on cuda


def test_a_pin_written_short_matches_the_release_measured(world: dict) -> None:
    """`torch==2.3` is the release measured as `2.3.0` (PEP 440: the same version): an exact measurement. The
    match compared public version strings (`2.3` is not `2.3.0`) while the axis placed them at one point, so the
    answer fell to the rules between 2.1.2 and 2.5.1 with the measurement at the pin itself left out."""
    answer = _answers(world, ["torch==2.3"])[("torch-2-simple", "bug")]
    assert (answer.status, answer.basis, answer.precision) == ("fixed", "exact", "measured at these exact pins")


def test_a_case_whose_primary_package_is_missing_is_not_applicable(world: dict) -> None:
    a = _answers(world, ["torchrec==1.0.0"])  # torch-2-simple's only package is not pinned: no answer for it
    assert not any(case == "torch-2-simple" for case, _ in a)


def test_an_unpinned_package_that_decides_nothing_qualifies_the_precision_one_that_decides_is_asked_for(
    world: dict, capsys: pytest.CaptureFixture
) -> None:
    # torchrec alone: the record measured the bug reproduced at every torch and fbgemm it ran with, and the rules
    # name neither, so the answer stands, saying what it was measured with
    a = _answers(world, ["torchrec==1.0.0"])
    never = a[("torchrec-3-never", "bug")]
    assert never.affected and never.basis == "exact" and "measured with" in never.precision
    assert "torch 2.5.0" in never.precision
    # lightning alone: the coupling's bug is decided by torch (its rules name it, the record has a boundary
    # along it): not answered, and torch is named as the pin that would answer it
    a = _answers(world, ["lightning==2.3.3"])
    assert ("lightning-1-coupling", "bug") not in a
    assert a[("lightning-1-coupling", "workaround-env")].status == "fixed"  # measured fixed whatever torch was
    # no bug variant answered: nothing checked (5), never a green '0 bugs' (the JSON still says what to pin)
    assert main(_cli(world, "lightning==2.3.3", "--json")) == 5
    payload = json.loads(capsys.readouterr().out)
    assert payload["affected"] == []
    [torch] = payload["not_covered"]
    assert torch["package"] == "torch" and "lightning-1-coupling" in torch["why"]
    assert main(_cli(world, "lightning==2.3.3", "torch==2.6.0", "--json")) == 1  # pinned: answered, affected
    payload = json.loads(capsys.readouterr().out)
    assert [x["case"] for x in payload["affected"]] == ["lightning-1-coupling"] and payload["not_covered"] == []


def test_a_package_only_a_rule_names_is_asked_for_before_an_answer(
    tmp_path: Path,
    make_case,  # noqa: ANN001
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # litgpt-2156's shape: `packages` says torch and litgpt, a rule names transformers (the coupling); at litgpt
    # 0.5.11 transformers decides (4.52.1 reproduced, 4.51.3 fixed). Without transformers pinned, no answer, and
    # transformers is what to pin; with it pinned, the answer of that measurement
    monkeypatch.chdir(tmp_path)
    case = make_case(
        "print('x')\n",
        case_id="litgpt-9-transformers",
        packages=["torch", "litgpt"],
        upstream=["https://example.invalid/litgpt/issues/9"],
        variants={
            "bug": {
                "expect": [
                    {"when": {"litgpt": ">=0.5.10,<0.5.12", "transformers": ">=4.52"}, "outcome": "reproduced"},
                    {"outcome": "fixed"},
                ]
            }
        },
    )
    rows = [
        audit_row(
            case,
            "bug",
            f"litgpt-0.5.11-transformers-{tf}",
            {"torch": "2.8.0", "litgpt": "0.5.11", "transformers": tf},
            outcome,
            DAY + i,
        )
        for i, (tf, outcome) in enumerate([("4.52.1", R), ("4.51.3", F)])
    ]
    root = tmp_path / "rec"
    write(
        root, Record(rows=rows, runs={RUN: {"started": "2026-12-01T00:00:00Z", "machine": "m-test", "command": "test"}})
    )
    world = {"root": root, "cases": [case], "cases_dir": case.folder.parent, "tmp": tmp_path}
    assert _answers(world, ["litgpt==0.5.11", "torch==2.8.0"]) == {}
    store = open_reader(tmp_path / "absent.db", False, [case], root)
    results = store.latest()
    target = audit_module.target_of(
        *parse_pins(["litgpt==0.5.11", "torch==2.8.0"]), audit_module.known_packages(results, [case])
    )
    [asked] = audit_module.unpinned(results, [case], target)
    assert asked.package == "transformers" and "litgpt-9-transformers" in asked.why
    answered = _answers(world, ["litgpt==0.5.11", "torch==2.8.0", "transformers==4.52.1"])
    assert answered[("litgpt-9-transformers", "bug")].affected
    assert not _answers(world, ["litgpt==0.5.11", "torch==2.8.0", "transformers==4.51.3"])[
        ("litgpt-9-transformers", "bug")
    ].affected


# ------------------------------------------------------------------------------------------------------ the CLI


def test_json_shape_exit_codes_and_no_process_is_spawned(
    world: dict, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("audit launched a process")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setattr(subprocess, "run", refuse)
    req = world["tmp"] / "req.txt"
    req.write_text("torch==2.6.0+cu124\nlightning==2.3.3\nnumpy==2.1.0\nrequests>=2\n")
    assert main(_cli(world, "-r", str(req), "--json")) == 1
    payload = json.loads(capsys.readouterr().out)
    assert list(payload) == ["affected", "not_affected", "cannot_say", "not_covered"]
    (entry,) = payload["affected"]
    assert {
        "case",
        "variant",
        "title",
        "upstream",
        "precision",
        "fixed_in",
        "workarounds",
        "reproduce",
        "versions",
    } <= set(entry)
    assert entry["case"] == "lightning-1-coupling" and entry["fixed_in"] == "lightning==2.4.0"
    assert {u["package"] for u in payload["not_covered"]} == {"numpy", "requests"}
    assert main(_cli(world, "torch==2.6.0", "lightning==2.4.0")) == 0
    assert "0 bug(s) apply" in capsys.readouterr().out
    assert main(_cli(world, "torch==2.6.0", "lightning==2.3.3", "--format", "markdown")) == 1
    assert "| [lightning-1-coupling](https://example.invalid/lightning/issues/1) | bug |" in capsys.readouterr().out
    assert main(_cli(world, "torch==2.6.0", "lightning==2.3.3", "--ignore", "lightning-1-coupling")) == 0
    capsys.readouterr()
    req.write_text("torch==2.6.0\nnot a requirement at all\n")
    assert main(_cli(world, "-r", str(req))) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and re.search(r"req\.txt:2: ", captured.err)
    assert len(captured.err.strip().splitlines()) == 1
    assert main(_cli(world, "-r", str(world["tmp"] / "missing.txt"))) == 2
    assert "missing.txt: cannot be read" in capsys.readouterr().err


def test_an_interpreter_that_does_not_exist_is_exit_2(world: dict, capsys: pytest.CaptureFixture) -> None:
    assert main(_cli(world, "--python", str(world["tmp"] / "no-such-python"))) == 2
    assert "no-such-python" in capsys.readouterr().err


FAKE_PYTHONS = {  # an interpreter that does anything but list its packages; each ignores `-c SCRIPT`
    "garbage": "echo 'garbage, not JSON'",
    "empty": "echo '{}'",
    "wrong shape": """echo '{"python": "3.11", "packages": {"torch": "2.6.0"}}'""",
    "not text": "printf '\\377\\376{'",
    "fails": "(echo 'Traceback (most recent call last):'; echo '  File x'; echo 'ImportError: no json') >&2; exit 3",
}


def _fake_python(folder: Path, name: str, body: str) -> Path:
    path = folder / name.replace(" ", "-")
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def _one_short_line(err: str, python: Path) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) <= 200 and str(python) in lines[0] and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize("name", FAKE_PYTHONS)
def test_an_interpreter_that_does_not_list_its_packages_is_one_line_and_exit_2(
    world: dict, capsys: pytest.CaptureFixture, name: str
) -> None:
    """Exit 1 is audit's 'a bug applies': an interpreter printing garbage or `{}` raised a traceback (exit 1)."""
    python = _fake_python(world["tmp"], name, FAKE_PYTHONS[name])
    assert main(_cli(world, "--python", str(python))) == 2
    captured = capsys.readouterr()
    line = _one_short_line(captured.err, python)
    assert captured.out == ""
    assert (
        "exit 3 listing its packages: ImportError: no json" if name == "fails" else "did not list its packages"
    ) in line


def test_an_interpreter_that_hangs_is_killed_with_what_it_started(world: dict, tmp_path: Path) -> None:
    """`bugmatrix audit --python HANG` under $BUGMATRIX_INSPECT_S=2: exit 2 within seconds, one line; the two
    children it started (one that left its process group with setsid) are gone. It waited 60 s, printed a
    2,454-character 'line' with the inspection script, and left the children running."""
    import os
    import subprocess
    import sys
    import time

    pids = tmp_path / "pids"
    python = _fake_python(
        tmp_path, "hangs", f"sleep 300 & echo $! >> {pids}\nsetsid sleep 300 & echo $! >> {pids}\nexec sleep 300"
    )
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "harness", *_cli(world, "--python", str(python))],
            capture_output=True,
            text=True,
            timeout=90,
            cwd=Path(__file__).resolve().parent.parent,
            env={**os.environ, "BUGMATRIX_INSPECT_S": "2", "COLUMNS": "400"},
        )
        took = time.monotonic() - started
        children = [int(pid) for pid in pids.read_text().split()]
        deadline = time.monotonic() + 10  # a killed orphan is reaped by whoever adopted it
        while _running(children) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert done.returncode == 2 and took < 30, (took, done.stderr[-2000:])
        assert "no package listing in 2 s, killed with what it started" in _one_short_line(done.stderr, python)
        assert len(children) == 2 and _running(children) == []
    finally:  # leave nothing behind, whatever the verdict
        for pid in _running([int(pid) for pid in pids.read_text().split()] if pids.exists() else []):
            os.kill(pid, 9)


def _running(pids: list[int]) -> list[int]:
    import psutil

    def alive(pid: int) -> bool:
        try:
            return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    return [pid for pid in pids if alive(pid)]


def test_the_inspection_bound_is_a_parameter_and_a_bad_setting_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from harness.launch.interpreter import InterpreterError, inspect_interpreter

    python = _fake_python(tmp_path, "slow", "sleep 5")
    with pytest.raises(InterpreterError, match=r"slow: no package listing in 0.5 s"):
        inspect_interpreter(python, timeout=0.5)
    monkeypatch.setenv("BUGMATRIX_INSPECT_S", "soon")
    with pytest.raises(InterpreterError, match=r"^\$BUGMATRIX_INSPECT_S: 'soon' is not a number of seconds"):
        inspect_interpreter(python)


def test_the_upgrade_view_says_what_it_fixes_brings_in_and_keeps(world: dict, capsys: pytest.CaptureFixture) -> None:
    old, new = world["tmp"] / "old.txt", world["tmp"] / "new.txt"
    old.write_text("torch==2.6.0\nlightning==2.4.0\n")
    new.write_text("torch==2.6.0\nlightning==2.6.6\n")
    assert main(_cli(world, "--from", str(old), "--to", str(new))) == 1  # brings the coupling bug back in
    out = capsys.readouterr().out
    assert "lightning-1-coupling (bug)" in out and "BROUGHT IN by the upgrade" in out
    assert "pairing torch × lightning" in out and "fixes 0, brings in 1, keeps 0" in out
    assert main(_cli(world, "--from", "torch==2.0.1", "--to", "torch==2.5.1", "--json")) == 0
    payload = json.loads(capsys.readouterr().out)
    assert [c["case"] for c in payload["fixes"]] == ["torch-2-simple"] and payload["brings"] == []


# --------------------------------------------------------------------------------------------------------- OSV


class Package(BaseModel):
    """affected[].package."""

    model_config = ConfigDict(extra="forbid")
    ecosystem: Literal["PyPI"]
    name: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")  # PyPI's normalized name


class Range(BaseModel):
    """affected[].ranges[]: each event one of introduced/fixed/last_affected/limit, at least one introduced."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["ECOSYSTEM", "SEMVER", "GIT"]
    repo: str | None = None
    events: list[dict[str, str]] = Field(min_length=1)
    database_specific: dict | None = None

    @model_validator(mode="after")
    def _events(self) -> Range:
        for event in self.events:
            assert len(event) == 1 and set(event) <= {"introduced", "fixed", "last_affected", "limit"}, event
        assert any("introduced" in e for e in self.events), "a range needs an introduced event"
        kinds = {k for e in self.events for k in e}
        assert not {"fixed", "last_affected"} <= kinds, "fixed and last_affected in one range"
        assert self.type != "GIT" or self.repo, "a GIT range needs repo"
        return self


class Affected(BaseModel):
    """affected[]."""

    model_config = ConfigDict(extra="forbid")
    package: Package
    ranges: list[Range] = Field(default_factory=list)
    versions: list[str] = Field(default_factory=list)
    ecosystem_specific: dict | None = None
    database_specific: dict | None = None


class Reference(BaseModel):
    """references[]."""

    model_config = ConfigDict(extra="forbid")
    type: Literal[
        "ADVISORY",
        "ARTICLE",
        "DETECTION",
        "DISCUSSION",
        "REPORT",
        "FIX",
        "INTRODUCED",
        "GIT",
        "PACKAGE",
        "EVIDENCE",
        "WEB",
    ]
    url: str = Field(pattern=r"^https?://")


class Vulnerability(BaseModel):
    """An OSV record (schema 1.6): the required fields, RFC 3339 UTC timestamps, the id's `PREFIX-ID` form."""

    model_config = ConfigDict(extra="forbid")
    schema_version: str = Field(pattern=r"^1\.\d+\.\d+$")
    id: str = Field(pattern=r"^x_[A-Z][A-Z0-9]*-[A-Za-z0-9._:-]+$")  # x_: a local database (schema 1.7)
    modified: str
    published: str | None = None
    withdrawn: str | None = None
    aliases: list[str] = Field(default_factory=list)
    related: list[str] = Field(default_factory=list)
    summary: str | None = None
    details: str | None = None
    severity: list[dict] | None = None
    affected: list[Affected] = Field(default_factory=list)
    references: list[Reference] = Field(default_factory=list)
    credits: list[dict] = Field(default_factory=list)
    database_specific: dict | None = None

    @field_validator("modified", "published", "withdrawn")
    @classmethod
    def _timestamp(cls, value: str | None) -> str | None:
        if value is not None:
            assert re.fullmatch(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z", value), value
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        return value


def test_every_exported_record_is_valid_osv_and_malformed_ones_fail(world: dict) -> None:
    out = world["tmp"] / "osv"
    args = ["--cases-dir", str(world["cases_dir"]), "osv", "export", str(out), "--record", str(world["root"])]
    assert main(args) == 0
    files = sorted(out.glob("*.json"))
    assert [f.name for f in files] == [
        "x_BUGMATRIX-lightning-1-coupling.json",
        "x_BUGMATRIX-torch-2-simple.json",
        "x_BUGMATRIX-torchrec-3-never.json",
    ]
    first = {f: f.read_bytes() for f in files}
    assert main(args) == 0 and first == {f: f.read_bytes() for f in files}  # deterministic
    docs = {f.stem: json.loads(f.read_text()) for f in files}
    for doc in docs.values():
        Vulnerability.model_validate(doc)
    simple = docs["x_BUGMATRIX-torch-2-simple"]
    assert simple["affected"][0]["ranges"] == [
        {"type": "ECOSYSTEM", "events": [{"introduced": "0"}, {"fixed": "2.3.0"}]}
    ]
    assert simple["affected"][0]["versions"] == ["2.0.1", "2.1.2"]  # the superseded 2.4.0 never counts
    assert simple["modified"] == "2026-09-21T14:15:03Z"  # the newest counted row's date, not the superseded one
    assert {r["type"] for r in simple["references"]} == {"REPORT"}
    coupling = docs["x_BUGMATRIX-lightning-1-coupling"]
    # one package listed (OSV clients OR the affected entries); the coupling names both with their ranges
    assert {a["package"]["name"] for a in coupling["affected"]} == {"lightning", "pytorch-lightning"}
    assert list(coupling["database_specific"]["coupling"]) == ["lightning", "torch"]
    assert {r["type"] for r in coupling["references"]} == {"REPORT", "FIX"}
    never = docs["x_BUGMATRIX-torchrec-3-never"]
    assert {a["package"]["name"] for a in never["affected"]} == {"torchrec"}
    assert never["affected"][0]["ranges"][0]["events"] == [{"introduced": "0"}]
    for bad in (
        {**simple, "modified": "2026-09-21 12:26:43"},
        {**simple, "id": "not an id"},
        {
            **simple,
            "affected": [{**simple["affected"][0], "ranges": [{"type": "ECOSYSTEM", "events": [{"fixed": "1"}]}]}],
        },
        {k: v for k, v in simple.items() if k != "id"},
    ):
        with pytest.raises(ValueError):
            Vulnerability.model_validate(bad)


@contextlib.contextmanager
def _serving(world: dict, **limits: float) -> Iterator[str]:
    """The OSV API over the synthetic record, in a thread on a free loopback port (`limits`: make_server's)."""
    httpd = make_server(OSVIndex(osv_docs(world)), "127.0.0.1", 0, **limits)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def server(world: dict) -> Iterator[str]:
    """The OSV API over the synthetic record, in a thread on a free loopback port."""
    with _serving(world) as url:
        yield url


def _post(url: str, body: bytes, timeout: float = 30) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def test_the_osv_api_answers_query_querybatch_and_vulns(server: str) -> None:
    query = {"package": {"name": "torch", "ecosystem": "PyPI"}, "version": "2.1.2+cu121"}
    status, body = _post(f"{server}/v1/query", json.dumps(query).encode())
    assert status == 200 and [v["id"] for v in body["vulns"]] == ["x_BUGMATRIX-torch-2-simple"]
    status, body = _post(f"{server}/v1/query", json.dumps({**query, "version": "2.3.0"}).encode())
    assert (
        status == 200
        and [v["id"] for v in body["vulns"]] == ["x_BUGMATRIX-lightning-1-coupling"]
        or body["vulns"] == []
    )
    status, body = _post(
        f"{server}/v1/querybatch",
        json.dumps(
            {"queries": [query, {"package": {"name": "Pytorch_Lightning", "ecosystem": "PyPI"}, "version": "2.3.3"}]}
        ).encode(),
    )
    assert status == 200
    assert [[v["id"] for v in r["vulns"]] for r in body["results"]] == [
        ["x_BUGMATRIX-torch-2-simple"],
        ["x_BUGMATRIX-lightning-1-coupling"],
    ]
    assert set(body["results"][0]["vulns"][0]) == {"id", "modified"}
    with urllib.request.urlopen(f"{server}/v1/vulns/x_BUGMATRIX-torch-2-simple", timeout=30) as response:
        assert json.loads(response.read())["id"] == "x_BUGMATRIX-torch-2-simple"
    for path in ("/v1/vulns/x_BUGMATRIX-nope", "/v2/anything"):
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(f"{server}{path}", timeout=30)
        assert caught.value.code == 404 and "message" in json.loads(caught.value.read())
    assert _post(f"{server}/v1/query", b"{not json")[0] == 400
    status, body = _post(f"{server}/v1/query", json.dumps({"package": {"name": "torch"}}).encode())
    assert status == 400 and "version" in body["message"]
    assert _post(f"{server}/v1/querybatch", b"{}")[0] == 400
    assert _post(f"{server}/v1/nothing", b"{}")[0] == 404
    try:
        status = _post(f"{server}/v1/query", b" " * (MAX_BODY + 1))[0]
    except (ConnectionError, urllib.error.URLError):  # the server may close before the whole body is sent
        status = 413
    assert status == 413


# ------------------------------------------------------------------------------------- the server under abuse

QUERY = json.dumps({"package": {"name": "torch", "ecosystem": "PyPI"}, "version": "2.1.2"}).encode()


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1])


def _raw(url: str, data: bytes) -> tuple[int, str, dict]:
    """Send `data` as it is on a fresh connection; the answer's status, Content-Type and JSON body."""
    with socket.create_connection(("127.0.0.1", _port(url)), timeout=30) as sock:
        sock.sendall(data)
        response = http.client.HTTPResponse(sock)
        response.begin()
        return response.status, response.getheader("Content-Type", ""), json.loads(response.read())


def _query(url: str, body: bytes = QUERY) -> bytes:
    return b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)


def test_a_content_length_that_is_not_ascii_digits_or_a_body_nested_too_deep_is_400_json(server: str) -> None:
    """Each of these was a traceback and no answer at all."""
    for length in (b"\xb2", b"\xd9\xa3", b" 1 2", b"-1"):  # '²' (isdigit, int() refuses it), Arabic-Indic three
        status, kind, body = _raw(server, b"POST /v1/query HTTP/1.1\r\nContent-Length: " + length + b"\r\n\r\n")
        assert (status, kind, body["code"]) == (400, "application/json", 400), length
        assert "Content-Length" in body["message"]
    status, kind, body = _raw(server, b"POST /v1/query HTTP/1.1\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n")
    assert (status, kind) == (413, "application/json")  # int() refuses over 4,300 digits
    for deep in (b"[" * 100_000, b'{"a":' * 100_000, b"[" * 100_000 + b"]" * 100_000):
        status, kind, body = _raw(server, _query(server, deep))
        assert (status, kind, body["message"]) == (400, "application/json", "the body is nested too deeply")
    status, _, body = _raw(server, _query(server))  # and the server answers on
    assert status == 200 and [v["id"] for v in body["vulns"]] == ["x_BUGMATRIX-torch-2-simple"]


def test_http_servers_own_refusals_are_json_too(server: str) -> None:
    """An unknown method (501), a request line over 64 KiB (414), over 100 headers or a header line over 64 KiB
    (431), an HTTP version that is not one (400) or not 1.x (505): http.server answered each with an HTML page."""
    refusals = {
        b"PUT /v1/query HTTP/1.1\r\nContent-Length: 0\r\n\r\n": 501,
        b"DELETE /v1/vulns/x HTTP/1.1\r\n\r\n": 501,
        b"HEAD /v1/vulns/x HTTP/1.1\r\n\r\n": 501,
        b"BREW /pot HTTP/1.1\r\n\r\n": 501,
        b"GET /" + b"a" * 65532: 414,  # exactly what the server reads: nothing is left unread
        b"GET /v1/vulns/x HTTP/1.1\r\n" + b"X-A: b\r\n" * 101: 431,
        b"GET /v1/vulns/x HTTP/1.1\r\nX-A: " + b"b" * 65535: 431,
        b"GET /v1/vulns/x HTTP/9\r\n\r\n": 400,
        b"GET /v1/vulns/x HTTP/2.0\r\n\r\n": 505,
    }
    for request, code in refusals.items():
        if request.startswith(b"HEAD"):  # no body, as HEAD asks; still JSON by its header
            with socket.create_connection(("127.0.0.1", _port(server)), timeout=30) as sock:
                sock.sendall(request)
                response = http.client.HTTPResponse(sock, method="HEAD")
                response.begin()
                assert (response.status, response.getheader("Content-Type")) == (code, "application/json")
            continue
        status, kind, body = _raw(server, request)
        assert (status, kind, body["code"]) == (code, "application/json", code), request[:30]
        assert body["message"]


def test_a_half_sent_request_is_dropped_after_the_read_timeout_while_others_are_answered(world: dict) -> None:
    """A client that stops halfway through its body held a thread for as long as it liked (95 s measured)."""
    with _serving(world, timeout=1.0) as url, socket.create_connection(("127.0.0.1", _port(url)), timeout=30) as slow:
        started = time.monotonic()
        slow.sendall(_query(url)[:-10])  # all but the body's last 10 bytes
        assert _raw(url, _query(url))[0] == 200  # another client is answered meanwhile
        assert slow.recv(1024) == b""  # closed, answering nothing
        waited = time.monotonic() - started
        assert 0.9 < waited < 10, waited
        deadline = time.monotonic() + 10
        while any("process_request" in t.name for t in threading.enumerate()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [t.name for t in threading.enumerate() if "process_request" in t.name]  # no thread is left


def test_a_connection_over_the_limit_is_told_503_and_the_slot_comes_back(world: dict) -> None:
    with _serving(world, timeout=30.0, max_connections=2) as url:
        held = [socket.create_connection(("127.0.0.1", _port(url)), timeout=30) for _ in range(2)]
        for sock in held:
            sock.sendall(b"POST /v1/query HTTP/1.1\r\n")  # accepted, each in its thread, waiting for the rest
        time.sleep(0.2)
        with socket.create_connection(("127.0.0.1", _port(url)), timeout=30) as sock:
            response = http.client.HTTPResponse(sock)
            response.begin()
            assert (response.status, response.getheader("Content-Type")) == (503, "application/json")
            assert json.loads(response.read())["code"] == 503
        for sock in held:
            sock.close()
        deadline = time.monotonic() + 10
        while (status := _raw(url, _query(url))[0]) == 503 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status == 200


def test_two_hundred_concurrent_queries_are_all_answered(server: str) -> None:
    """socketserver's listen backlog of 5 dropped most of a burst of 200: 94 to 151 timed out, p50 31 s."""
    barrier = threading.Barrier(200)
    answers: list[int | str] = []

    def ask() -> None:
        barrier.wait()
        try:
            answers.append(_post(f"{server}/v1/query", QUERY, timeout=10)[0])
        except OSError as exc:
            answers.append(repr(exc))

    threads = [threading.Thread(target=ask) for _ in range(200)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert answers == [200] * 200, [a for a in answers if a != 200][:5]


def test_serve_refuses_a_port_out_of_range_in_one_line(world: dict, capsys: pytest.CaptureFixture) -> None:
    serve = ["--cases-dir", str(world["cases_dir"]), "osv", "serve", "--record", str(world["root"])]
    for bad, word in (
        (["--port", "99999"], "--port 99999"),
        (["--port", "-1"], "--port -1"),
        (["--timeout", "0"], "--timeout 0"),
    ):
        assert main([*serve, *bad]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and word in err, err


def test_serve_warns_in_one_line_when_it_listens_beyond_loopback(
    world: dict, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(self: socketserver.BaseServer, poll_interval: float = 0.5) -> None:
        raise KeyboardInterrupt  # bound, told, and stopped before it answers anyone

    monkeypatch.setattr(socketserver.BaseServer, "serve_forever", interrupted)
    serve = ["--cases-dir", str(world["cases_dir"]), "osv", "serve", "--record", str(world["root"]), "--port", "0"]
    assert main([*serve, "--host", "127.0.0.1"]) == 130
    assert "warning" not in capsys.readouterr().err
    assert main([*serve, "--host", "0.0.0.0"]) == 130  # noqa: S104 - the point of the test
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "--host 0.0.0.0 is not a loopback address" in warnings[0], warnings


# -------------------------------------------------------------------------------------------------- real clients


def _tool(name: str) -> str:
    found = Path(sys.executable).with_name(name)
    return str(found) if found.exists() else (shutil.which(name) or pytest.skip(f"{name} is not installed"))


def test_pip_audit_lists_the_case_through_the_served_api(server: str, tmp_path: Path) -> None:
    req = tmp_path / "req.txt"
    command = [
        _tool("pip-audit"),
        "-s",
        "osv",
        "--osv-url",
        f"{server}/v1/query",
        "--disable-pip",
        "--no-deps",
        "-r",
        str(req),
        "--progress-spinner",
        "off",
        "--format",
        "json",
    ]
    req.write_text("torch==2.1.2\n")
    hit = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert hit.returncode == 1, hit.stderr
    vulns = {v["id"] for d in json.loads(hit.stdout)["dependencies"] for v in d.get("vulns", [])}
    assert vulns == {"x_BUGMATRIX-torch-2-simple"}
    req.write_text("torch==2.5.1\n")
    clean = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert clean.returncode == 0, clean.stderr
    assert all(not d.get("vulns") for d in json.loads(clean.stdout)["dependencies"])


SKIP_UV_AUDIT = "BUGMATRIX_SKIP_UV_AUDIT"  # "1": a machine with no index to resolve from may skip the uv audit test


def _cannot_run_uv_audit(why: str) -> None:
    """Skip only where $BUGMATRIX_SKIP_UV_AUDIT says so; anywhere else (CI) a uv audit that cannot run fails."""
    if os.environ.get(SKIP_UV_AUDIT) == "1":
        pytest.skip(why)
    pytest.fail(f"{why} (set {SKIP_UV_AUDIT}=1 to skip this test where that is expected)")


def test_the_uv_audit_test_fails_rather_than_skips_unless_told(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SKIP_UV_AUDIT, raising=False)
    with pytest.raises(pytest.fail.Exception, match="BUGMATRIX_SKIP_UV_AUDIT=1"):
        _cannot_run_uv_audit("uv could not resolve the script here: no index")
    monkeypatch.setenv(SKIP_UV_AUDIT, "1")
    with pytest.raises(pytest.skip.Exception):
        _cannot_run_uv_audit("uv could not resolve the script here: no index")


def test_uv_audit_lists_the_case_through_the_served_api(server: str, tmp_path: Path) -> None:
    """A real `uv audit --service-url` against `osv serve`. It never skips silently: a uv without `uv audit`, or a
    script uv cannot resolve, fails unless $BUGMATRIX_SKIP_UV_AUDIT=1 (cd5612d skipped on both)."""
    uv = _tool("uv")
    if subprocess.run([uv, "audit", "--help"], capture_output=True, timeout=60).returncode != 0:
        _cannot_run_uv_audit("this uv has no `uv audit`")
    script = tmp_path / "req.py"

    def run(pin: str) -> subprocess.CompletedProcess:
        script.write_text(f'# /// script\n# requires-python = ">=3.10"\n# dependencies = ["{pin}"]\n# ///\n')
        return subprocess.run(
            [uv, "audit", "--script", str(script), "--service-url", server],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )

    hit = run("torch==2.1.2")
    if (
        "error" in hit.stderr.lower()
        and "BUGMATRIX" not in hit.stdout + hit.stderr
        and ("resolve" in hit.stderr or "network" in hit.stderr.lower() or "connect" in hit.stderr.lower())
    ):
        _cannot_run_uv_audit(f"uv could not resolve the script here: {hit.stderr.strip()[-300:]}")
    assert "x_BUGMATRIX-torch-2-simple" in hit.stdout + hit.stderr, hit.stdout + hit.stderr
    clean = run("torch==2.5.1")
    assert "BUGMATRIX" not in clean.stdout + clean.stderr, clean.stdout + clean.stderr


# ------------------------------------------------------------------------------------------ never green on nothing


def test_an_include_with_a_quoted_or_escaped_path_is_read_as_pip_reads_it(
    world: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    """7ca3bef: a file holding only `-r "my reqs.txt"` gave '0 bug(s) apply', exit 0 (the include regex missed
    the quoted path, and the line was then skipped as an option)."""
    (world["tmp"] / "my reqs.txt").write_text("torch==2.1.2\n")
    for line in ('-r "my reqs.txt"', "-r 'my reqs.txt'", "-r my\\ reqs.txt", '--requirement="my reqs.txt"'):
        (world["tmp"] / "top.txt").write_text(line + "\n")
        assert main(_cli(world, "-r", str(world["tmp"] / "top.txt"))) == 1, line
        out = capsys.readouterr().out
        assert out.startswith("checked torch==2.1.2 against the record in") and "torch-2-simple" in out, line


def test_a_loose_requirement_pinned_by_a_constraint_is_audited_and_a_constraint_alone_is_not(
    world: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    """7317000: `torch>=2` with `-c` pinning torch==2.1.2 -> exit 5, nothing checked (the constraint was skipped)."""
    (world["tmp"] / "pins.txt").write_text("torch==2.1.2\n")
    (world["tmp"] / "top.txt").write_text("-c pins.txt\ntorch>=2\n")
    assert main(_cli(world, "-r", str(world["tmp"] / "top.txt"))) == 1
    out = capsys.readouterr().out
    assert out.startswith("checked torch==2.1.2 against the record in") and "torch-2-simple" in out
    (world["tmp"] / "top.txt").write_text("-c pins.txt\nnumpy==2.0.0\n")  # torch only constrained: not installed
    assert main(_cli(world, "-r", str(world["tmp"] / "top.txt"))) == 5
    assert "nothing checked" in capsys.readouterr().err


def test_what_is_not_a_readable_requirements_file_is_one_line_exit_2(
    world: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/zero, a FIFO and a folder, given or included (`-r` or `-c`), never block or fill memory; nor does an
    include chain deeper than the bound. (7317000 skipped `-c /dev/zero` and answered from the rest: exit 1.)"""
    fifo = world["tmp"] / "fifo"
    os.mkfifo(fifo)
    chain = world["tmp"] / "chain"
    chain.mkdir()
    for i in range(40):
        (chain / f"r{i}.txt").write_text(f"-r r{i + 1}.txt\n")
    (chain / "r40.txt").write_text("torch==2.1.2\n")
    includes = {"zero.txt": "-r /dev/zero\n", "fifo.txt": "-r fifo\n", "dir.txt": f"-r {world['tmp']}\n"}
    includes |= {f"c-{name}": "torch==2.1.2\n" + text.replace("-r ", "-c ") for name, text in includes.items()}
    (chain / "c40.txt").write_text("-c r0.txt\ntorch==2.1.2\n")  # constraints nest within the same bound
    for name, text in includes.items():
        (world["tmp"] / name).write_text(text)
    for given in [
        "/dev/zero",
        str(fifo),
        str(world["tmp"]),
        *(str(world["tmp"] / n) for n in includes),
        str(chain / "r0.txt"),
        str(chain / "c40.txt"),
    ]:
        assert main(_cli(world, "-r", given)) == 2, given
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and len(err) < 300, err


def test_an_environment_that_pins_nothing_the_record_knows_exits_5_never_green(
    world: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    """7ca3bef: unpinned lines (`torch>=2.5`) -> '0 bug(s) apply', exit 0: a CI gate green on nothing."""
    (world["tmp"] / "loose.txt").write_text("torch>=2.5\nlightning\n")
    (world["tmp"] / "empty.txt").write_text("# nothing\n")
    for args in (
        ["-r", str(world["tmp"] / "loose.txt")],
        ["-r", str(world["tmp"] / "empty.txt")],
        ["numpy==2.0.0"],
        ["--from", "numpy==1.0", "--to", "numpy==2.0"],
    ):
        assert main(_cli(world, *args)) == 5, args
        captured = capsys.readouterr()
        assert "nothing checked" in captured.err and len(captured.err.strip().splitlines()) == 1, args
    assert main(_cli(world, "torch==2.5.1", "numpy==2.0.0")) == 0  # one known pin: an answer
    assert capsys.readouterr().out.startswith("checked torch==2.5.1 against the record in")


def test_the_same_answer_from_any_folder_of_the_clone() -> None:
    """7ca3bef: from the clone's docs/ folder, `audit torch==2.6.0` listed 8 bugs instead of 11 with no word (the
    record's default was relative to the current folder, and a missing record read as an empty one)."""
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("BUGMATRIX_RECORD", "BUGMATRIX_DB")}
    env["BUGMATRIX_DB"] = "/nonexistent/bugmatrix-test.db"  # no store: the record alone answers
    answers = []
    for folder in (root, root / "docs", root / "harness"):
        proc = subprocess.run(
            [sys.executable, "-m", "harness", "audit", "torch==2.6.0", "--json"],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 1, proc.stderr
        answers.append(sorted((a["case"], a["variant"]) for a in json.loads(proc.stdout)["affected"]))
    assert answers[0] and answers[0] == answers[1] == answers[2]


def test_a_case_folder_that_cannot_be_read_stops_audit_and_osv_never_a_silent_gap(
    world: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    """An invalid case folder (here nested too deep for the YAML loader) was silently left out of `audit` and `osv
    export` (discover's errors dropped): '0 bugs' could mean 'one case unread'. Both refuse in one line naming it;
    `report` says it and goes on."""
    broken = world["cases_dir"] / "torch-9-broken"
    broken.mkdir()
    (broken / "repro.py").write_text("print('x')\n")
    (broken / "case.yaml").write_text("title: " + "[" * 5000 + "]" * 5000 + "\n")
    assert main(_cli(world, "torch==2.1.2")) == 2
    err = capsys.readouterr().err.strip()
    assert "torch-9-broken/case.yaml" in err and len(err.splitlines()) == 1
    out = world["tmp"] / "osv"
    assert (
        main(["--cases-dir", str(world["cases_dir"]), "osv", "export", str(out), "--record", str(world["root"])]) == 2
    )
    assert "torch-9-broken/case.yaml" in capsys.readouterr().err and not out.exists()
    assert main(["--cases-dir", str(world["cases_dir"]), "report", "--record", str(world["root"])]) == 0
    assert "invalid case, left out of the report" in capsys.readouterr().err


# ------------------------------------------------------------------------------- precision that can gate (item 4)

S = Outcome.SKIP


def test_a_skip_rule_because_absent_is_not_affected_never_an_extrapolation(gated: dict) -> None:
    """7ca3bef: torch 2.2.1 was AFFECTED by torch-4-absent, extrapolated from 2.7.1, where the bug's code does not
    exist (the rule `torch <2.4.0: skip, because: absent`), as torch-177844 (FSDP2) was at torch 2.2.1."""
    answer = _answers(gated, ["torch==2.2.1"])[("torch-4-absent", "bug")]
    assert not answer.affected and (answer.kind, answer.why, answer.basis) == ("not_affected", "absent", "rules")
    assert answer.precision.startswith("absent in torch 2.2.1: the code this bug lives in does not exist there")
    assert "torch <2.4.0" in answer.precision
    # where the rules say it runs, the extrapolation stands, as before
    assert _answers(gated, ["torch==2.5.0"])[("torch-4-absent", "bug")].basis == "extrapolated"


def test_a_cell_measured_skip_is_a_barrier_never_interpolated_across_nor_extrapolated_from(gated: dict) -> None:
    """7ca3bef dropped skip cells as unknown: torch 2.6.0 was interpolated reproduced between 2.3.0 and 2.7.0 across
    the skip at 2.5.0, and 2.9.5 extrapolated reproduced from 2.7.0 past the skip at 2.9.0."""
    inside = _answers(gated, ["torch==2.6.0"])[("torch-5-hole", "bug")]
    assert inside.basis == "rules" and "between torch 2.5.0 (skip) and 2.7.0 (reproduced)" in inside.precision
    beyond = _answers(gated, ["torch==2.9.5"])[("torch-5-hole", "bug")]
    assert (beyond.kind, beyond.status, beyond.basis) == ("cannot_say", "skip", "extrapolated")
    assert "beyond the newest measured release torch 2.9.0, measured skip" in beyond.precision
    # measured skip at exactly these pins: by the kind of the rule that matches, or cannot say why
    at = _answers(gated, ["torch==2.5.0"])[("torch-5-hole", "bug")]
    assert (at.kind, at.basis) == ("cannot_say", "exact") and at.why.startswith("untestable at torch 2.5.0")
    unsaid = _answers(gated, ["torch==2.9.0"])[("torch-5-hole", "bug")]
    assert unsaid.kind == "cannot_say" and unsaid.why == "skip at torch 2.9.0 on cpu, the rules do not say why"


def test_pins_outside_supports_cannot_say(gated: dict) -> None:
    """7ca3bef: torch 2.0.1, below the case's `supports: torch >=2.1`, was extrapolated reproduced from 2.3.0."""
    answer = _answers(gated, ["torch==2.0.1"])[("torch-5-hole", "bug")]
    assert not answer.affected and answer.kind == "cannot_say"
    assert answer.why == "outside supports: torch 2.0.1 (supports torch >=2.1)"


def test_a_workaround_is_listed_only_where_it_was_measured(gated: dict) -> None:
    """7ca3bef listed workaround-w as "measured fixed here" at torch 2.7.1, extrapolated from its one
    measurement at 2.9.0."""
    assert _answers(gated, ["torch==2.9.0"])[("torch-4-absent", "bug")].workarounds == ["workaround-w"]
    bug = _answers(gated, ["torch==2.7.1"])[("torch-4-absent", "bug")]
    assert bug.affected and bug.basis == "exact" and bug.workarounds == []  # the workaround there: extrapolated


def test_json_separates_the_four_answers_and_only_affected_fails(
    gated: dict, capsys: pytest.CaptureFixture[str]
) -> None:
    """7ca3bef: `--json` had `affected` and `not_covered` only, and torch 2.0.1 exited 1 on two bugs the case
    cannot run (absent code, outside supports)."""
    assert main(_cli(gated, "torch==2.0.1", "--json")) == 0
    payload = json.loads(capsys.readouterr().out)
    assert list(payload) == ["affected", "not_affected", "cannot_say", "not_covered"]
    assert payload["affected"] == []
    assert [(x["case"], x["why"]) for x in payload["not_affected"]] == [("torch-4-absent", "absent")]
    assert [(x["case"], x["why"]) for x in payload["cannot_say"]] == [
        ("torch-5-hole", "outside supports: torch 2.0.1 (supports torch >=2.1)")
    ]
    assert main(_cli(gated, "torch==2.9.0", "--json")) == 1  # torch-4-absent reproduced there
    payload = json.loads(capsys.readouterr().out)
    [hit] = payload["affected"]
    assert "why" not in hit and hit["workarounds"] == ["workaround-w"]  # an affected entry keeps its shape
    assert [x["case"] for x in payload["cannot_say"]] == ["torch-5-hole"]
    assert main(_cli(gated, "torch==2.0.1")) == 0
    out = capsys.readouterr().out
    assert "not affected: 1 (0 fixed; 1 absent here" in out and "torch-4-absent (bug)" in out
    assert "cannot say (1, not counted as affected):\n  torch-5-hole (bug): outside supports" in out
    assert main(_cli(gated, "torch==2.0.1", "--format", "markdown")) == 0
    assert (
        "Cannot say (1, not counted as affected):\n\n- torch-5-hole (bug): outside supports" in capsys.readouterr().out
    )
    assert main(_cli(gated, "--from", "torch==2.2.1", "--to", "torch==2.7.1")) == 1  # the upgrade brings it in
    assert re.search(r"torch-4-absent \(bug\) +absent \(rules\) +reproduced \(exact\)", capsys.readouterr().out)


def test_every_json_answer_names_its_precision_and_basis(gated: dict, capsys: pytest.CaptureFixture[str]) -> None:
    """7317000: an affected entry of `--json` said its precision in words only, with no `basis` (the not-affected and
    cannot-say ones had it), so a gate or tools/audit_check.py could not tell a measured answer from an
    extrapolated one."""
    for pins in ("torch==2.0.1", "torch==2.9.0"):
        main(_cli(gated, pins, "--json"))
        payload = json.loads(capsys.readouterr().out)
        answers = [a for kind in ("affected", "not_affected", "cannot_say") for a in payload[kind]]
        assert answers
        for a in answers:
            assert a["precision"] and a["basis"] in ("exact", "interpolated", "extrapolated", "rules"), (pins, a)
    assert [a["basis"] for a in payload["affected"]] == ["exact"]  # torch-4-absent measured at torch 2.9.0


def _real_audit(*pins: str) -> dict:
    """`python -m harness audit PINS --json` on the clone's own cases and record, no store."""
    root = Path(__file__).resolve().parent.parent
    env = {k: v for k, v in os.environ.items() if k not in ("BUGMATRIX_RECORD", "BUGMATRIX_DB")}
    env["BUGMATRIX_DB"] = "/nonexistent/bugmatrix-test.db"
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "audit", *pins, "--json"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _by_case(payload: dict, case: str) -> dict[str, set[str]]:
    return {
        kind: {x["variant"] for x in payload[kind] if x["case"] == case}
        for kind in ("affected", "not_affected", "cannot_say")
    }


def test_the_real_record_never_says_affected_where_the_bugs_code_does_not_exist_or_the_case_cannot_run() -> None:
    """7ca3bef, measured in built environments (issue 34, item 4): torch-177844 (no FSDP2) and torch-192224 (no
    flatten_optimizer_state_dict) AFFECTED at torch 2.2.1, litgpt-2258 (no Qwen3) at litgpt 0.5.8, torch-162692 at
    torch 2.6.0 and 2.7.1, where the record holds `skip` at exactly those pins (gloo has no AVG there)."""
    old = _real_audit("torch==2.2.1")
    for case in ("torch-177844-fsdp2-nonfloat-param", "torch-192224-dsd-flattened-missing-optim-state-typeerror"):
        said = _by_case(old, case)
        assert not said["affected"] and "bug" in said["not_affected"], (case, said)
        assert {x["why"] for x in old["not_affected"] if x["case"] == case} == {"absent"}
    litgpt = _by_case(
        _real_audit("litgpt==0.5.8", "lightning==2.6.5", "torch==2.14.1"), "litgpt-2258-qwen3-prompt-none-system"
    )
    assert not litgpt["affected"] and "bug" in litgpt["not_affected"]
    for torch in ("2.6.0", "2.7.1"):
        said = _by_case(_real_audit(f"torch=={torch}"), "torch-162692-dtensor-mean-uneven")
        assert not said["affected"] and {"bug", "empty-shard"} <= said["cannot_say"], (torch, said)


def test_an_osv_range_never_starts_where_the_bugs_code_is_absent(gated: dict) -> None:
    """7ca3bef: torch-4-absent's advisory said `introduced: "0"`, so an OSV client flagged torch 2.2.1, where the
    rules say its code does not exist (`torch <2.4.0: skip, because: absent`). The ranges are audit's answers
    (harness/analysis/osv.py): where audit cannot say (torch-5-hole outside `supports: torch >=2.1`, at the cell
    measured skip at 2.5.0) nothing is reported and nothing is called fixed (a range ends at `last_affected`)."""
    docs = osv_docs(gated)
    [absent] = docs["x_BUGMATRIX-torch-4-absent"]["affected"]
    assert absent["ranges"][0]["events"] == [{"introduced": "2.4.0"}, {"fixed": "2.12.0"}]  # the rules' boundary
    assert [d["id"] for d in OSVIndex(docs).query("torch", "PyPI", "2.2.1")] == ["x_BUGMATRIX-torch-5-hole"]
    assert [d["id"] for d in OSVIndex(docs).query("torch", "PyPI", "2.5.0")] == ["x_BUGMATRIX-torch-4-absent"]
    hole = docs["x_BUGMATRIX-torch-5-hole"]["affected"][0]["ranges"]
    assert [r["events"][0] for r in hole] == [{"introduced": "2.1"}, {"introduced": "2.6.0"}]
    assert all("fixed" not in e for r in hole for e in r["events"])
    assert docs["x_BUGMATRIX-torch-4-absent"]["database_specific"]["condition"][0] == {
        "when": {"torch": "<2.4.0"},
        "outcome": "skip",
        "because": "absent",
    }


def test_pins_that_answer_no_case_exit_5(world: dict, capsys: pytest.CaptureFixture[str]) -> None:
    """`lightning==2.4.0` alone: the record knows lightning, but torch decides its only case and is not pinned, so
    no case is answered; '0 bug(s) apply', exit 0 would be green on nothing (as `litgpt==0.5.12` alone was when the
    record held only torch-decided litgpt cases)."""
    assert main(_cli(world, "lightning==2.4.0")) == 5
    err = capsys.readouterr().err
    assert "nothing checked" in err and "answer no recorded case" in err and "torch" in err
    assert main(_cli(world, "--from", "lightning==2.4.0", "--to", "lightning==2.6.6")) == 5
    assert main(_cli(world, "lightning==2.4.0", "torch==2.6.0")) == 0  # pinned: answered, fixed


# ------------------------------------------------------------------------------------------------------- flaky


@pytest.mark.parametrize("fixed_runs", [40, 1], ids=["fixed-with-the-clean-runs-it-needs", "one-clean-run"])
def test_a_flaky_version_is_affected_with_its_rate_never_cannot_say(make_case, fixed_runs: int) -> None:  # noqa: ANN001
    from tests.helpers import flaky_results

    case = make_case("print('x')\n", case_id="torch-4-flaky", variants={"bug": {"expect": [{"outcome": "fixed"}]}})
    results = flaky_results(case, fixed_runs)
    target = audit_module.target_of(*parse_pins(["torch==2.7.1"]), audit_module.known_packages(results, [case]))
    [answer] = audit_module.audit(results, [case], target, "cpu")
    assert answer.kind == "affected" and answer.status == "flaky" and answer.basis == "exact"
    shown = answer.to_json()
    assert shown["outcome"] == "flaky" and shown["rate"] == "8/24 reproduced", shown
    assert "flaky: 8/24 reproduced" in answer.precision
    if fixed_runs == 40:  # the first release measured fixed after it, with the confidence of that boundary
        assert shown["fixed_in"] == "torch==2.8.0" and shown["confidence"] >= 0.95, shown
        assert "fixed in 2.8.0 (2.7.1: 8/24 reproduced; 2.8.0: 0/40; confidence 0.9" in answer.precision
    else:  # one clean run is too few to call 2.8.0 fixed next to a rate of 1/3
        assert shown["fixed_in"] is None and shown["confidence"] is None, shown
        assert "not called fixed in torch 2.8.0: could not decide" in answer.precision, answer.precision
    fixed = audit_module.audit(results, [case], audit_module.Target({"torch": Pin("torch", "2.6.0")}), "cpu")
    assert [a.kind for a in fixed] == ["not_affected"] and "rate" not in fixed[0].to_json()
