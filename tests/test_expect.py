"""`bugmatrix expect`: expect rules derived from the store's measurements (harness/analysis/expect.py).

Unit tests build a results store by hand and a `Between` over a list of releases; the end-to-end test runs a fake
package on a local index (tests/fakeindex.py) through `bugmatrix run`, `narrow`, `expect --write` and `run` again.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from harness.analysis.expect import derive, environment_of, measurements, rewrite, rules_text, write_case
from harness.cli import main
from harness.model.case import Case, load_case
from harness.model.case_schema import Rule, Variant
from harness.model.expectations import expected_outcome
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.session.store import ResultStore

from .fakeindex import FakeRelease, build_index, fake_torch

CASE = "fakelib-1-bug"
RELEASES = [f"1.{i}" for i in range(10)] + ["2.0"]  # the bug is fixed in 1.3
R, F, S, E = Outcome.REPRODUCED, Outcome.FIXED, Outcome.SKIP, Outcome.ERROR
SHA = "a" * 40

CASE_YAML = """\
title: fakelib bug
upstream:
  - https://example.invalid/1
packages: [torch, fakelib]
nproc: [1]
devices: [cpu, cuda]
timeout: 60
signature: "FAKE-SIG"   # what the script prints
variants:
  bug:
    description: the bug path
    expect:
      # predicted from the code, not measured: CUDA keeps the bug longer
      - when: {device: cuda, fakelib: "<1.5"}
        outcome: reproduced
      - when: {fakelib: "<1.1"}   # a first guess
        outcome: reproduced
      - outcome: fixed
    # the workaround never fails
  workaround:
    workaround: true
    args: ["--workaround"]
    expect:
      - outcome: fixed
evidence: |
  2024-03-01: first measured by hand.
"""

SCRIPT = """
import sys
import fakelib
if "--workaround" not in sys.argv and fakelib.BUGGY:
    print("RuntimeError: FAKE-SIG from fakelib", fakelib.__version__)
    sys.exit(1)
"""


def between(case: str, package: str, device: str, before: str, after: str) -> tuple[str, ...]:
    return tuple(v for v in RELEASES if float(before.split(" @ ")[0]) < float(v) < float(after.split(" @ ")[0]))


@pytest.fixture
def case(tmp_path: Path) -> Case:
    folder = tmp_path / "cases" / CASE
    folder.mkdir(parents=True)
    (folder / "case.yaml").write_text(CASE_YAML)
    (folder / "repro.py").write_text(SCRIPT)
    return load_case(folder / "case.yaml")


def result(
    version: str,
    outcome: Outcome,
    *,
    nproc: int = 1,
    device: str = "cpu",
    variant: str = "bug",
    torch: str = "2.5.0",
    launched: bool = True,
    tallies: dict[str, int] | None = None,
) -> Result:
    return Result(
        case=CASE,
        variant=variant,
        nproc=nproc,
        device=device,
        outcome=outcome,
        expected=None,
        reason="fake",
        versions={"torch": torch, "fakelib": version},
        launched=launched,
        tallies=tallies or {},
        started_at=1.0,
    )


def store(path: Path, *cells: tuple[str, Result]) -> ResultStore:
    db = ResultStore(path)
    run = db.begin_run("bugmatrix run", "host", run_id="run-1")
    for cell, r in cells:
        db.save(run, r, cell=cell)
    db.end_run(run)
    return db


def derived(tmp_path: Path, case: Case, *cells: tuple[str, Result], variant: str = "bug"):  # noqa: ANN201
    return derive(case, variant, measurements(store(tmp_path / "r.db", *cells)), between)


def dump(rules: list[Rule] | None) -> list[dict]:
    assert rules is not None
    return [r.model_dump(mode="json", exclude_defaults=True) for r in rules]


def at(rules: list[Rule] | None, version: str, device: str = "cpu", nproc: int = 1) -> Outcome:
    assert rules is not None
    return expected_outcome(Variant(expect=rules), environment_of(result(version, F)), nproc, device)


CUDA_RULE = {"when": {"device": "cuda", "fakelib": "<1.5"}, "outcome": "reproduced"}
FIX_AT_1_3 = [
    ("fakelib-1.0", result("1.0", R)),
    ("bisect-fakelib-1.2", result("1.2", R)),
    ("bisect-fakelib-1.3", result("1.3", F)),
    ("fakelib-2.0", result("2.0", F)),
]


# --- deriving ---------------------------------------------------------------------------------------------------


def test_a_fix_becomes_one_minimal_range_and_a_newer_release_falls_to_the_catch_all(tmp_path: Path, case: Case) -> None:
    d = derived(tmp_path, case, *FIX_AT_1_3)
    assert not d.refused
    # the CUDA rule speaks for results the store does not have: kept, in its place; the first guess is replaced
    assert dump(d.new) == [CUDA_RULE, {"when": {"fakelib": "<1.3"}, "outcome": "reproduced"}, {"outcome": "fixed"}]
    assert d.kept == [0] and d.changed
    assert d.boundaries == ["fixed in fakelib 1.3 (1.2 reproduced)"]
    assert [at(d.new, v) for v in ("0.9", "1.2", "1.3", "2.0", "3.0")] == [R, R, F, F, F]
    assert at(d.new, "1.4", device="cuda") is R  # CUDA rules survive a store without CUDA results
    assert rules_text(d.new) == "device cuda fakelib <1.5: reproduced; fakelib <1.3: reproduced; otherwise fixed"


def test_rules_that_only_cuda_reaches_survive_a_cpu_store(tmp_path: Path, case: Case) -> None:
    """lightning-20307's `bug-trainer-init-module`: `{device: cpu}: skip` first, then rules that only CUDA reaches.
    Every CPU result is skip; the rules after the first hold for CPU results too, but decide none of them, so they
    still speak for CUDA and must not be erased: kept for CUDA, with the old catch-all for CUDA after them."""
    old = [
        {"when": {"device": "cpu"}, "outcome": "skip"},
        {"when": {"fakelib": "<1.3"}, "outcome": "reproduced"},
        {"outcome": "fixed"},
    ]
    spec = yaml.safe_load((case.folder / "case.yaml").read_text())
    spec["variants"]["bug"]["expect"] = old
    (case.folder / "case.yaml").write_text(yaml.safe_dump(spec))
    shadowed = load_case(case.folder / "case.yaml")
    d = derived(tmp_path, shadowed, *[(c, result(r.versions["fakelib"], S)) for c, r in FIX_AT_1_3])
    assert not d.refused, d.refused
    assert dump(d.new) == [
        {"when": {"fakelib": "<1.3", "device": "cuda"}, "outcome": "reproduced"},
        {"when": {"device": "cuda"}, "outcome": "fixed"},
        {"outcome": "skip"},
    ]
    for version, cuda in (("1.0", R), ("1.2", R), ("1.3", F), ("9.0", F)):
        assert at(d.new, version) is S and at(d.new, version, device="cuda") is cuda


def test_an_interval_boundary_is_refused_naming_it_and_the_narrow_command(tmp_path: Path, case: Case) -> None:
    d = derived(tmp_path, case, ("fakelib-1.0", result("1.0", R)), ("fakelib-2.0", result("2.0", F)))
    assert d.new is None
    assert "fixed between 1.0 and 2.0 (9 releases not run)" in d.refused
    assert f"bugmatrix --cases-dir {case.folder.parent} narrow {CASE} --package fakelib --device cpu" in d.refused


def test_a_version_between_that_could_not_say_keeps_the_boundary_an_interval(tmp_path: Path, case: Case) -> None:
    d = derived(tmp_path, case, ("a", result("1.2", R)), ("b", result("1.3", E)), ("c", result("1.4", F)))
    assert d.new is None and "could not say: 1.3" in d.refused
    assert d.notes and "b (cpu, nproc 1) at fakelib 1.3: error" in d.notes[0]


def test_flaky_results_are_refused(tmp_path: Path, case: Case) -> None:
    d = derived(
        tmp_path,
        case,
        *FIX_AT_1_3,
        ("fakelib-1.1", result("1.1", Outcome.FLAKY, tallies={"reproduced": 2, "fixed": 1})),
    )
    assert d.new is None and d.refused.startswith("flaky in fakelib-1.1") and "reproduced 2/3" in d.refused


def test_mixed_results_at_one_version_are_refused_naming_what_differs(tmp_path: Path, case: Case) -> None:
    d = derived(tmp_path, case, *FIX_AT_1_3, ("old-torch", result("2.0", R, torch="2.4.0")))
    assert d.new is None
    assert (
        "mixed at fakelib 2.0 (cpu, nproc 1): fakelib-2.0 fixed with torch 2.5.0, old-torch reproduced with "
        "torch 2.4.0" in d.refused
    )


def test_skips_that_are_consistent_become_a_skip_range_errors_never_a_rule(tmp_path: Path, case: Case) -> None:
    d = derived(
        tmp_path,
        case,
        ("c0", result("1.0", S)),
        ("c1", result("1.1", R)),
        ("c2", result("1.2", R)),
        ("c3", result("1.3", F)),
        ("c9", result("1.9", E)),
        ("cu", result("2.0", S, launched=False)),
    )
    assert dump(d.new)[1:] == [
        {"when": {"fakelib": "<1.1"}, "outcome": "skip"},
        {"when": {"fakelib": ">=1.1,<1.3"}, "outcome": "reproduced"},
        {"outcome": "fixed"},
    ]
    assert "c9 (cpu, nproc 1) at fakelib 1.9: error" in d.notes[0]


def test_world_size_conditions_only_where_outcomes_differ_by_it(tmp_path: Path, case: Case) -> None:
    cells = [
        (f"c{v}", result(v, R if (n == 2 and v < "1.3") else F, nproc=n)) for v in ("1.0", "1.2", "1.3") for n in (1, 2)
    ]
    d = derived(tmp_path, case, *cells)
    assert dump(d.new)[1:] == [
        {"when": {"fakelib": "<1.3", "nproc": [2]}, "outcome": "reproduced"},
        {"outcome": "fixed"},
    ]
    same = derived(
        tmp_path / "same",
        case,
        *[(f"c{v}-{n}", result(v, R if v < "1.3" else F, nproc=n)) for v in ("1.0", "1.2", "1.3") for n in (1, 2)],
    )
    assert dump(same.new)[1:] == [{"when": {"fakelib": "<1.3"}, "outcome": "reproduced"}, {"outcome": "fixed"}]


def test_device_conditions_when_cuda_was_measured_and_differs(tmp_path: Path, case: Case) -> None:
    cells = [
        *FIX_AT_1_3,
        ("cuda-1.3", result("1.3", R, device="cuda")),
        ("cuda-1.4", result("1.4", R, device="cuda")),
        ("cuda-1.5", result("1.5", F, device="cuda")),
    ]
    d = derived(tmp_path, case, *cells)
    assert d.kept == []  # the CUDA rule is now measured (and contradicted at nothing, but replaced)
    assert dump(d.new) == [
        {"when": {"fakelib": "<1.5", "device": "cuda"}, "outcome": "reproduced"},
        {"when": {"fakelib": "<1.3"}, "outcome": "reproduced"},
        {"outcome": "fixed"},
    ]


def test_commits_get_git_rules_only_where_the_ranges_would_be_wrong(tmp_path: Path, case: Case) -> None:
    other = "b" * 40
    d = derived(
        tmp_path,
        case,
        *FIX_AT_1_3,
        ("git-a", result(f"1.2.dev0 @ {SHA}", F)),
        ("git-b", result(f"1.2.dev0 @ {other}", R)),
    )
    assert dump(d.new)[1:] == [
        {"when": {"fakelib": {"git": [SHA]}}, "outcome": "fixed"},
        {"when": {"fakelib": "<1.3"}, "outcome": "reproduced"},
        {"outcome": "fixed"},
    ]


def test_an_existing_git_rule_keeps_its_unmeasured_commits(tmp_path: Path, case: Case) -> None:
    text = CASE_YAML.replace(
        '      - when: {fakelib: "<1.1"}   # a first guess\n',
        f"      - when: {{fakelib: {{git: [{SHA[:8]}, {'c' * 8}]}}}}\n"
        '        outcome: fixed\n      - when: {fakelib: "<1.1"}   # a first guess\n',
    )
    (case.folder / "case.yaml").write_text(text)
    case = load_case(case.folder / "case.yaml")
    d = derived(tmp_path, case, *FIX_AT_1_3, ("git-a", result(f"1.2.dev0 @ {SHA}", F)))
    assert dump(d.new)[1:] == [
        {"when": {"fakelib": {"git": ["cccccccc", SHA]}}, "outcome": "fixed"},
        {"when": {"fakelib": "<1.3"}, "outcome": "reproduced"},
        {"outcome": "fixed"},
    ]


def test_rules_that_already_agree_are_unchanged(tmp_path: Path, case: Case) -> None:
    d = derived(
        tmp_path,
        case,
        ("w1", result("1.0", F, variant="workaround")),
        ("w2", result("2.0", F, variant="workaround")),
        variant="workaround",
    )
    assert dump(d.new) == [{"outcome": "fixed"}] and not d.changed
    assert rewrite(case, [d], "2024-04-01") is None


def test_a_bound_written_with_or_without_trailing_zeros_is_the_same_rule(tmp_path: Path, case: Case) -> None:
    """`"<1.3.0"` in case.yaml and the derived `"<1.3"` allow the same versions: `expect --check` must not call that a
    change (a new user's `"<2.9"` against `"<2.9.0"`); a real change of bound still is one."""
    path = case.folder / "case.yaml"
    path.write_text(CASE_YAML.replace('fakelib: "<1.1"}   # a first guess', 'fakelib: "<1.3.0"}'))
    same = load_case(path)
    d = derived(tmp_path, same, *FIX_AT_1_3)
    assert dump(d.new)[1] == {"when": {"fakelib": "<1.3"}, "outcome": "reproduced"}
    assert not d.changed and d.summary().endswith("(unchanged)")
    assert rewrite(same, [d], "2024-04-01") is None
    path.write_text(CASE_YAML.replace('fakelib: "<1.1"}   # a first guess', 'fakelib: "<1.3.1"}'))
    d = derived(tmp_path / "moved", load_case(path), *FIX_AT_1_3)
    assert d.changed


# --- writing ----------------------------------------------------------------------------------------------------


def test_rewrite_replaces_only_the_expect_block_and_its_provenance_goes_to_the_record(
    tmp_path: Path, case: Case
) -> None:
    d = derived(tmp_path, case, *FIX_AT_1_3)
    edit = rewrite(case, [d], "2024-04-01")
    assert edit is not None
    expected = CASE_YAML.replace(
        '      - when: {fakelib: "<1.1"}   # a first guess\n        outcome: reproduced\n',
        '      - when: {fakelib: "<1.3"}\n        outcome: reproduced\n',
    )
    assert edit.after == expected  # comments, order, quoting and the hand-written evidence: all kept
    assert d.provenance("2024-04-01") == {
        "case": case.id,
        "variant": "bug",
        "set": "2024-04-01",
        "rules": "device cuda fakelib <1.5: reproduced; fakelib <1.3: reproduced; otherwise fixed",
        "boundaries": ["fixed in fakelib 1.3 (1.2 reproduced)"],
        "runs": ["run-1"],
        "on": ["cpu nproc 1"],
        "cells": [
            "fakelib-1.0 (1.0 reproduced)",
            "bisect-fakelib-1.2 (1.2 reproduced)",
            "bisect-fakelib-1.3 (1.3 fixed)",
            "fakelib-2.0 (2.0 fixed)",
        ],
    }
    assert '-      - when: {fakelib: "<1.1"}   # a first guess' in edit.diff
    assert '+      - when: {fakelib: "<1.3"}' in edit.diff
    written = write_case(edit)
    assert (case.folder / "case.yaml").read_text() == edit.after
    assert dump(list(written.spec.variants["bug"].expect)) == dump(d.new)
    assert not list(case.folder.glob(".case.*"))  # no temporary file left


def test_the_comment_after_a_replaced_last_rule_stays(tmp_path: Path, case: Case) -> None:
    cells = [("c1", result("1.0", R)), ("c2", result("1.2", R)), ("c3", result("1.3", R)), ("c4", result("1.4", F))]
    edit = rewrite(case, [derived(tmp_path, case, *cells)], "2024-04-01")
    assert edit is not None
    assert "    # the workaround never fails\n  workaround:\n" in edit.after
    assert "      # predicted from the code, not measured: CUDA keeps the bug longer\n" in edit.after


def test_an_invalid_rewrite_is_never_written(tmp_path: Path, case: Case) -> None:
    d = derived(tmp_path, case, *FIX_AT_1_3)
    edit = rewrite(case, [d], "2024-04-01")
    assert edit is not None
    broken = type(edit)(edit.path, edit.before, edit.after.replace("outcome: fixed", "outcome: sideways", 1))
    from harness.model.case_schema import CaseError

    with pytest.raises(CaseError, match="would be invalid"):
        write_case(broken)
    assert (case.folder / "case.yaml").read_text() == CASE_YAML
    assert not list(case.folder.glob(".case.*"))


# --- end to end: a fake package on a local index ------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    releases = [fake_torch("2.5.0", "2024-01-01T00:00:00Z")]
    for i, version in enumerate(RELEASES):
        releases.append(
            FakeRelease(
                "fakelib",
                version,
                f"2024-02-{i + 1:02d}T00:00:00Z",
                module=f"BUGGY = {version in ('1.0', '1.1', '1.2')}\n__version__ = {version!r}\n",
            )
        )
    index = build_index(tmp_path / "index", releases)
    write_matrix(tmp_path, index, ["1.0", "2.0"])
    folder = tmp_path / "cases" / CASE
    folder.mkdir(parents=True)
    (folder / "repro.py").write_text(SCRIPT)
    (folder / "case.yaml").write_text(CASE_YAML)
    return tmp_path


def write_matrix(root: Path, index: str, versions: list[str]) -> None:
    (root / "matrix.yaml").write_text(
        yaml.safe_dump(
            {
                "indexes": {"local": index},
                "defaults": {"index": "local"},
                "groups": [{"name": "fakelib-{fakelib}", "axes": {"fakelib": versions}, "pins": {"torch": "2.5.0"}}],
            }
        )
    )


def cli(project: Path, *argv: str) -> int:
    envs = ("--envs", str(project / "envs")) if argv[0] in ("run", "narrow") else ()
    record = ("--record", str(project / "record")) if argv[0] in ("expect", "narrow") else ()
    return main(
        [
            "--cases-dir",
            str(project / "cases"),
            *argv,
            "--matrix",
            str(project / "matrix.yaml"),
            "--db",
            str(project / "r.db"),
            *envs,
            *record,
        ]
    )


def test_expect_write_turns_measurements_into_rules_that_run_then_meets(
    project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case_file = project / "cases" / CASE / "case.yaml"
    assert cli(project, "run", "--all-cells", "-j", "1") == 0  # 1.0 reproduces, 2.0 is fixed: the guess holds
    capsys.readouterr()
    # two cells: the boundary is an interval, and expect says so rather than guess
    assert cli(project, "expect") == 1
    out = capsys.readouterr().out
    assert f"{CASE}::bug: refused: fakelib: fixed between 1.0 and 2.0 (9 releases not run)" in out
    assert f"bugmatrix --cases-dir {project / 'cases'} narrow {CASE} --package fakelib --device cpu" in out
    assert f"{CASE}::workaround: fixed (unchanged)" in out
    assert case_file.read_text() == CASE_YAML

    assert cli(project, "narrow", "-j", "1") == 0
    capsys.readouterr()
    assert cli(project, "expect", "--check") == 1  # the diff, not written
    out = capsys.readouterr().out
    assert f"{CASE}::bug: device cuda fakelib <1.5: reproduced; fakelib <1.3: reproduced; otherwise fixed" in out
    assert '+      - when: {fakelib: "<1.3"}' in out and case_file.read_text() == CASE_YAML

    assert cli(project, "expect", "--write") == 0
    capsys.readouterr()
    text = case_file.read_text()
    assert "# predicted from the code, not measured: CUDA keeps the bug longer" in text
    assert '- when: {fakelib: "<1.3"}' in text and "# a first guess" not in text
    assert "2024-03-01: first measured by hand." in text and "expect --write" not in text  # evidence: authored
    [rules] = [json.loads(line) for line in (project / "record" / "rules.jsonl").read_text().splitlines()]
    assert rules["variant"] == "bug" and "bisect-fakelib-1.2 (1.2 reproduced)" in rules["cells"]
    assert cli(project, "expect", "--json") == 0  # a second time: nothing left to change
    doc = json.loads(capsys.readouterr().out)
    assert doc["diffs"] == {} and not any(d["changed"] for d in doc["derivations"])

    # the new rules, in cells on both sides of the fix (and past the newest release measured): as expected
    write_matrix(project, (project / "index" / "simple").as_uri(), ["1.0", "1.2", "1.3", "2.0"])
    assert cli(project, "run", "--all-cells", "-j", "1") == 0, capsys.readouterr().out


def test_expect_without_results_says_so(tmp_path: Path, case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    store(tmp_path / "r.db")
    assert (
        main(
            [
                "--cases-dir",
                str(tmp_path / "cases"),
                "expect",
                "--db",
                str(tmp_path / "r.db"),
                "--matrix",
                str(tmp_path / "none.yaml"),
            ]
        )
        == 5
    )
    assert "no results" in capsys.readouterr().err


def test_expect_without_an_index_refuses_to_guess_what_lies_between(
    tmp_path: Path, case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    store(tmp_path / "r.db", *FIX_AT_1_3)
    assert (
        main(
            [
                "--cases-dir",
                str(tmp_path / "cases"),
                "expect",
                "--db",
                str(tmp_path / "r.db"),
                "--matrix",
                str(tmp_path / "none.yaml"),
            ]
        )
        == 1
    )
    assert "what lies between is unknown (no package index was consulted)" in capsys.readouterr().out


def test_real_case_files_round_trip_byte_for_byte() -> None:
    """Rewriting keeps every byte outside the replaced blocks: the project's own files survive a round trip."""
    from ruamel.yaml.util import load_yaml_guess_indent

    from harness.analysis.expect import _yaml

    for path in sorted((Path(__file__).resolve().parent.parent / "cases").glob("*/case.yaml")):
        text = path.read_text()
        _, indent, offset = load_yaml_guess_indent(text)
        y = _yaml()
        y.indent(mapping=offset, sequence=indent, offset=offset)
        buf = io.StringIO()
        y.dump(y.load(text), buf)
        assert buf.getvalue() == text, path


def test_an_infra_retry_of_a_measured_key_is_not_listed_as_left_out(tmp_path: Path) -> None:
    # a skip measured the key; a later run could not build the environment (infra, no versions recorded): it never
    # shadows the skip, so it is no "left out" non-verdict either; an infra at another script's digest still is
    skip = result("1.0", Outcome.SKIP).model_copy(update={"digest": "d1"})
    retry = result("1.0", Outcome.INFRA).model_copy(update={"digest": "d1", "versions": {}, "started_at": 5.0})
    other = result("1.1", Outcome.INFRA).model_copy(update={"digest": "d1", "versions": {}, "started_at": 5.0})
    db = ResultStore(tmp_path / "r.db")
    for run_id, cell, r in (
        ("run-1", "fakelib-1.0", skip),
        ("run-2", "fakelib-1.0", retry),
        ("run-2", "fakelib-1.1", other),
    ):
        db.save(db.begin_run("bugmatrix run", "host", run_id=run_id), r, cell=cell)
    found = [(cell, r.outcome) for _, cell, r in measurements(db)]
    assert found == [("fakelib-1.0", Outcome.SKIP), ("fakelib-1.1", Outcome.INFRA)]


def test_a_derived_skip_rule_says_why_as_the_old_skip_rules_did(tmp_path: Path, case: Case) -> None:
    """0a97b25 had no `because`: a case whose skip rules say why (absent | untestable, which `bugmatrix audit`
    answers by) must not lose it to `bugmatrix expect --write`; kept rules keep theirs, a derived skip rule takes
    the old skip rules' reason where they agree, and the rewrite writes it."""
    (case.folder / "case.yaml").write_text(
        CASE_YAML.replace(
            '      - when: {fakelib: "<1.1"}   # a first guess\n        outcome: reproduced\n',
            '      - when: {fakelib: "<1.05"}\n        outcome: skip\n        because: absent\n',
        )
    )
    absent = load_case(case.folder / "case.yaml")
    d = derived(
        tmp_path,
        absent,
        ("c0", result("1.0", S)),
        ("c1", result("1.1", R)),
        ("c3", result("1.3", F)),
        ("c4", result("1.4", F)),
        ("c2", result("1.2", R)),
    )
    assert dump(d.new)[1:] == [
        {"when": {"fakelib": "<1.1"}, "outcome": "skip", "because": "absent"},
        {"when": {"fakelib": ">=1.1,<1.3"}, "outcome": "reproduced"},
        {"outcome": "fixed"},
    ]
    edit = rewrite(absent, [d], "2024-04-01")
    assert edit is not None and "        outcome: skip\n        because: absent\n" in edit.after
    assert dump(list(write_case(edit).spec.variants["bug"].expect)) == dump(d.new)
