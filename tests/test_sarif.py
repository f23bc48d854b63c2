"""`bugmatrix audit --format sarif` (harness/output/sarif.py), validated against the OASIS SARIF 2.1.0 JSON schema
vendored in tests/schemas/ (its README names where it comes from and its sha256), on the clone's own record."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from harness.analysis.audit import Answer, Target
from harness.model.requirements import Pin
from harness.output.sarif import to_sarif

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "tests" / "schemas" / "sarif-schema-2.1.0.json"
SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"
REQUIREMENTS = "# the training image\nnumpy==2.0.0\ntorch==2.9.1\nlitgpt==0.5.12\n"  # torch: line 3, litgpt: 4


def validator() -> jsonschema.Draft4Validator:
    assert hashlib.sha256(SCHEMA.read_bytes()).hexdigest() == SCHEMA_SHA256  # the pinned schema, unedited
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft4Validator.check_schema(schema)
    return jsonschema.Draft4Validator(schema, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER)


def errors(doc: dict) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator().iter_errors(doc)]


def audit(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m harness audit ARGS` from `cwd` on the clone's cases and record, no store."""
    env = {k: v for k, v in os.environ.items() if k != "BUGMATRIX_DB"}
    env.update(BUGMATRIX_RECORD=str(ROOT / "record"), BUGMATRIX_DB=str(cwd / "no-store.db"))
    return subprocess.run(
        [sys.executable, "-m", "harness", "--cases-dir", str(ROOT / "cases"), "audit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A scratch repository holding `deps/requirements.txt`."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "deps").mkdir()
    (tmp_path / "deps" / "requirements.txt").write_text(REQUIREMENTS)
    return tmp_path


def test_sarif_validates_and_says_what_json_says(repo: Path) -> None:
    """One run: a rule per case x variant answered, one result per affected answer (the same as --json's
    `affected`), each located at the line that pins the case's package, relative to the repository root."""
    proc = audit(repo / "deps", "-r", "requirements.txt", "--format", "sarif")  # from a subfolder
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert errors(doc) == []
    answers = json.loads(audit(repo / "deps", "-r", "requirements.txt", "--json").stdout)
    [run] = doc["runs"]
    driver = run["tool"]["driver"]
    assert driver["name"] == "bugmatrix" and driver["version"]
    # where bugmatrix lives, said once: pyproject.toml's [project.urls], read from the installed metadata (7317000:
    # no project URL, so no informationUri)
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert driver["informationUri"] == urls["Homepage"]
    every = answers["affected"] + answers["not_affected"] + answers["cannot_say"]
    assert [r["id"] for r in driver["rules"]] == sorted({f"{a['case']}/{a['variant']}" for a in every})
    assert len(answers["affected"]) == 25  # torch 2.9.1 + litgpt 0.5.12: the record's answer (93 cases)
    by_id = {f"{a['case']}/{a['variant']}": a for a in answers["affected"]}
    assert sorted(r["ruleId"] for r in doc["runs"][0]["results"]) == sorted(by_id)
    for result in run["results"]:
        answer = by_id[result["ruleId"]]
        rule = driver["rules"][result["ruleIndex"]]
        assert rule["id"] == result["ruleId"] and rule["shortDescription"]["text"] == answer["title"]
        assert rule["helpUri"] == answer["upstream"]
        assert result["level"] == "error"  # every one reproduces at these pins (mixed would be a warning)
        text = result["message"]["text"]
        assert answer["case"] in text and answer["precision"] in text
        assert (f"fixed in {answer['fixed_in']}" if answer["fixed_in"] else "no release measured fixed") in text
        [location] = result["locations"]
        artifact = location["physicalLocation"]["artifactLocation"]
        assert artifact == {"uri": "deps/requirements.txt", "uriBaseId": "%SRCROOT%"}
        line = 4 if answer["case"].startswith("litgpt-") else 3
        assert location["physicalLocation"]["region"] == {"startLine": line}, result["ruleId"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == repo.resolve().as_uri() + "/"


def test_the_schema_does_refuse_a_bad_log(repo: Path) -> None:
    """The validation is not vacuous: a level SARIF does not know and a result without a message are refused."""
    doc = json.loads(audit(repo, "-r", "deps/requirements.txt", "--format", "sarif").stdout)
    bad = copy.deepcopy(doc)
    bad["runs"][0]["results"][0]["level"] = "fatal"
    del bad["runs"][0]["results"][1]["message"]
    said = errors(bad)
    assert any("'fatal' is not one of" in e for e in said) and any("'message' is a required" in e for e in said)


def test_sarif_of_pins_given_as_arguments_has_no_location(repo: Path) -> None:
    proc = audit(repo, "torch==2.9.1", "--format", "sarif")
    assert proc.returncode == 1, proc.stderr
    doc = json.loads(proc.stdout)
    assert errors(doc) == [] and doc["runs"][0]["results"]
    assert all("locations" not in r for r in doc["runs"][0]["results"])


def test_sarif_answers_one_environment_not_an_upgrade(repo: Path) -> None:
    proc = audit(repo, "--from", "torch==2.9.1", "--to", "torch==2.10.0", "--format", "sarif")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip().endswith("--format sarif answers one environment, not an upgrade view (--from/--to)")


def _answer(case: str, status: str) -> Answer:
    return Answer(
        case=case,
        variant="bug",
        workaround=False,
        title="t",
        upstream="https://example.org/1",
        status=status,
        measured=True,
        basis="exact",
        precision="measured at these exact pins",
    )


def test_a_mixed_answer_is_a_warning_and_a_file_outside_the_repository_an_absolute_uri(tmp_path: Path) -> None:
    """Mixed (it reproduces in some of the cells at these pins) is a warning; a file outside %SRCROOT% is located
    by its absolute file URI (percent-encoded), a path inside it relative to it."""
    root, outside = tmp_path / "repo", tmp_path / "my reqs.txt"
    root.mkdir()
    target = Target({"torch": Pin("torch", "2.9.1", where=f"{outside}:2")})
    kinds = {
        "affected": [_answer("torch-1-a", "reproduced"), _answer("torch-2-b", "mixed")],
        "not_affected": [],
        "cannot_say": [],
    }
    doc = json.loads(to_sarif(kinds, target, "cpu", {"torch-1-a": "torch", "torch-2-b": "torch"}, root))
    assert errors(doc) == []
    assert [r["level"] for r in doc["runs"][0]["results"]] == ["error", "warning"]
    artifact = doc["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert artifact == {"uri": outside.as_uri()} and "%20" in artifact["uri"]
