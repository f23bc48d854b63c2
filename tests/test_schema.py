"""Invalid case metadata gives one line naming the file and the field, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from harness.model.case import discover, load_case
from harness.model.case_schema import CASE_CLASSES, CaseError

VALID = {
    "title": "t",
    "upstream": ["https://github.com/o/r/issues/1"],
    "packages": ["torch"],
    "signature": "boom",
    "variants": {"bug": {"expect": [{"when": {"torch": ">=2.0"}, "outcome": "reproduced"}, {"outcome": "fixed"}]}},
}


def write(tmp_path: Path, doc: object, script: str | None = "print('hi')\n", raw: str | None = None) -> Path:
    folder = tmp_path / "cases" / "torch-1-x"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "case.yaml").write_text(raw if raw is not None else yaml.safe_dump(doc))
    if script is not None:
        (folder / "repro.py").write_text(script)
    return folder / "case.yaml"


def test_valid_case_loads(tmp_path: Path) -> None:
    case = load_case(write(tmp_path, VALID))
    assert case.id == "torch-1-x"
    assert case.spec.variants["bug"].expect[0].when == {"torch": ">=2.0"}


def with_(path: str, value: object) -> dict:
    doc = yaml.safe_load(yaml.safe_dump(VALID))
    *parents, last = path.split(".")
    node = doc
    for p in parents:
        node = node[p]
    if value is KeyError:
        del node[last]
    else:
        node[last] = value
    return doc


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        (with_("title", KeyError), "title"),
        (with_("upstream", ["not a link"]), "upstream.0"),
        (with_("nproc", [0]), "nproc.0"),
        (with_("devices", ["tpu"]), "devices.0"),
        (with_("timeout", -1), "timeout"),
        (with_("signature", "(unclosed"), "signature"),
        (with_("bogus", 1), "bogus"),
        (with_("variants.bug.expect", []), "variants.bug.expect"),
        (with_("variants.bug.expect", [{"outcome": "maybe"}]), "variants.bug.expect.0.outcome"),
        (with_("variants.bug.expect", [{"outcome": "timeout"}]), "variants.bug.expect.0.outcome"),
        (with_("variants.bug.expect", [{"when": {"torch": "2.0"}, "outcome": "fixed"}]), "variants.bug"),
        (
            with_("variants.bug.expect", [{"when": {"torch": "banana"}, "outcome": "fixed"}, {"outcome": "fixed"}]),
            "variants.bug.expect.0.when",
        ),
        (
            with_(
                "variants.bug.expect",
                [{"when": {"litgpt": {"git": ["xyz"]}}, "outcome": "fixed"}, {"outcome": "fixed"}],
            ),
            "variants.bug.expect.0.when",
        ),
        (with_("variants.Bad Name", {"expect": [{"outcome": "fixed"}]}), "variants.Bad Name"),
        # a package whose name starts like a pydantic union tag ("str", "int") is still named
        (
            with_("variants.bug.expect", [{"when": {"structlog": 5}, "outcome": "fixed"}, {"outcome": "fixed"}]),
            "variants.bug.expect.0.when.structlog:",
        ),
        (
            with_("variants.bug.expect", [{"when": {"intervaltree": [1.5]}, "outcome": "fixed"}, {"outcome": "fixed"}]),
            "variants.bug.expect.0.when.intervaltree",
        ),
        (
            with_("variants.bug.expect", [{"when": {"str": 5}, "outcome": "fixed"}, {"outcome": "fixed"}]),
            "variants.bug.expect.0.when.str:",
        ),
    ],
)
def test_invalid_field_is_named_in_one_line(tmp_path: Path, doc: dict, field: str) -> None:
    path = write(tmp_path, doc)
    with pytest.raises(CaseError) as info:
        load_case(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: ")
    assert field in message, message
    assert "Traceback" not in message


@pytest.mark.parametrize(
    ("raw", "where"),
    [("title: [unclosed\n", "line"), ("- a list\n- not a mapping\n", "(top level)"), ("", "(top level)")],
)
def test_unparseable_yaml(tmp_path: Path, raw: str, where: str) -> None:
    path = write(tmp_path, None, raw=raw)
    with pytest.raises(CaseError, match=rf"^{path}: .*{where.strip('()')}"):
        load_case(path)


def test_missing_script_and_syntax_error(tmp_path: Path) -> None:
    path = write(tmp_path, VALID, script=None)
    with pytest.raises(CaseError, match=r"script: repro.py does not exist"):
        load_case(path)
    (path.parent / "repro.py").write_text("def broken(:\n")
    with pytest.raises(CaseError, match=r"script: repro.py line 1"):
        load_case(path)


def test_discover_keeps_going_past_an_invalid_case(tmp_path: Path) -> None:
    write(tmp_path, with_("title", KeyError))
    good = tmp_path / "cases" / "torch-2-good"
    good.mkdir()
    (good / "case.yaml").write_text(yaml.safe_dump(VALID))
    (good / "repro.py").write_text("pass\n")
    cases, errors = discover(tmp_path / "cases")
    assert [c.id for c in cases] == ["torch-2-good"]
    assert len(errors) == 1 and "torch-1-x/case.yaml: title" in str(errors[0])


def test_recorded_packages_add_what_the_rules_name(tmp_path: Path) -> None:
    """A coupling case's second package, named only in a rule (litgpt-2156: transformers), is recorded with each
    result, so that `report`/`expect` read the rules back against what the run saw; nproc/device are not packages."""
    doc = with_(
        "variants.bug.expect",
        [
            {"when": {"torch": ">=2.0", "transformers": ">=4.52", "nproc": [1]}, "outcome": "reproduced"},
            {"when": {"device": "cpu", "torch": "<2.0"}, "outcome": "skip"},
            {"outcome": "fixed"},
        ],
    )
    case = load_case(write(tmp_path, doc))
    assert case.spec.recorded_packages == ["torch", "transformers"]
    assert load_case(write(tmp_path, VALID)).spec.recorded_packages == ["torch"]


def test_a_case_says_what_kind_of_bug_it_is_outside_the_run_digest(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    from harness.cli import main
    from harness.model.job import run_digest
    from harness.output.reports import report_for, to_json

    path = write(tmp_path, {**VALID, "class": "silent-wrong-value"})
    case = load_case(path)
    assert case.spec.bug_class == "silent-wrong-value"
    path.write_text(yaml.safe_dump(VALID))  # the same case without one: the same digest, nothing superseded
    assert load_case(path).spec.bug_class is None and run_digest(load_case(path), "bug") == run_digest(case, "bug")
    path.write_text(yaml.safe_dump({**VALID, "class": "wrong"}))
    with pytest.raises(CaseError, match=rf"^{path}: class: .*silent-wrong-value") as info:
        load_case(path)
    assert "\n" not in str(info.value)

    path.write_text(yaml.safe_dump({**VALID, "class": "hang"}))
    assert main(["--cases-dir", str(tmp_path / "cases"), "list", "--json"]) == 0
    assert [c["class"] for c in json.loads(capsys.readouterr().out)["cases"]] == ["hang"]
    shown = json.loads(to_json(report_for([], tmp_path / "cases", [], None)))
    assert (shown["classes"], shown["class_counts"]) == ({"torch-1-x": "hang"}, {"hang": 1})


def test_every_committed_case_has_a_class_from_the_closed_set() -> None:
    cases, errors = discover(Path(__file__).resolve().parents[1] / "cases")
    assert not errors and len(cases) >= 56
    assert {c.id: c.spec.bug_class for c in cases if c.spec.bug_class not in CASE_CLASSES} == {}
