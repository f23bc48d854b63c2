"""Cases as pytest items: names, pass/fail/skip by expectation, invalid folders, and pytest-xdist."""

from __future__ import annotations

import re
import textwrap

import pytest

pytest_plugins = ["pytester"]

CASE = """
title: fake
upstream: [https://example.invalid/1]
packages: [torch]
nproc: [1]
devices: [cpu, cuda]
timeout: 60
signature: FAKE-SIG
variants:
  bug:
    expect: [{outcome: reproduced}]
  workaround:
    workaround: true
    args: [--fixed]
    expect: [{outcome: fixed}]
  wrong:
    expect: [{outcome: fixed}]
"""
SCRIPT = """
import sys
if "--fixed" in sys.argv:
    sys.exit(0)
print("FAKE-SIG reproduced")
sys.exit(1)
"""


@pytest.fixture
def project(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest('pytest_plugins = ["harness.pytest_plugin"]')
    case = pytester.mkdir("cases").joinpath("fake-1-case")
    case.mkdir()
    case.joinpath("case.yaml").write_text(CASE)
    case.joinpath("repro.py").write_text(textwrap.dedent(SCRIPT))
    bad = pytester.path / "cases" / "fake-2-bad"
    bad.mkdir()
    bad.joinpath("case.yaml").write_text("title: t\n")
    return pytester


def test_items_pass_fail_and_skip_by_expectation(project: pytest.Pytester) -> None:
    result = project.runpytest_subprocess("cases", "-v", "-rs")
    result.stdout.fnmatch_lines(
        [
            "*fake-1-case/case.yaml::bug?cpu-1? PASSED*",
            "*fake-1-case/case.yaml::bug?cuda-1? SKIPPED*",
            "*fake-1-case/case.yaml::workaround?cpu-1? PASSED*",
            "*fake-1-case/case.yaml::wrong?cpu-1? FAILED*",
            "*fake-2-bad/case.yaml::invalid FAILED*",
        ]
    )
    result.stdout.fnmatch_lines(["*needs a CUDA device*"])
    result.stdout.fnmatch_lines(["*wrong?cpu-1?: observed reproduced, expected fixed*"])
    result.stdout.fnmatch_lines(["*fake-2-bad/case.yaml: upstream: Field required*"])
    result.assert_outcomes(passed=2, failed=2, skipped=3)


def test_markers_select_and_xdist_spreads(project: pytest.Pytester) -> None:
    """`-m` selects by the plugin's markers (device, workaround) and the selected items run on xdist's workers with
    the same verdicts as without them."""
    result = project.runpytest_subprocess("cases", "-n", "2", "-m", "cpu and not workaround", "-p", "xdist", "-v")
    result.stdout.fnmatch_lines(["*created: 2/2 workers*"])
    ran = {
        match.groups()
        for line in result.outlines
        if (match := re.match(r"\[gw\d\] \[ *\d+%\] (PASSED|FAILED|SKIPPED) (\S+)", line))
    }
    assert ran == {
        ("PASSED", "cases/fake-1-case/case.yaml::bug[cpu-1]"),
        ("FAILED", "cases/fake-1-case/case.yaml::wrong[cpu-1]"),
    }, result.outlines
    result.assert_outcomes(passed=1, failed=1)
