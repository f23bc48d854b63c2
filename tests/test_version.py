"""model/version.py: a recorded version parsed once, in one order, shown one way (issue 35, item 1)."""

from __future__ import annotations

import itertools
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from packaging.version import InvalidVersion, Version

from harness.model.version import (
    AT_COMMIT,
    COMMIT,
    OTHER,
    RELEASE,
    PinVersion,
    parse_release,
    parse_release_or_none,
    version_key,
)
from tests.helpers import ROOT

SHA = "47806045a376cd4dbf48d6bfc4d1bd2d4c6a7e9f"

releases = st.builds(
    lambda parts, pre, local: ".".join(map(str, parts)) + pre + local,
    st.lists(st.integers(0, 30), min_size=1, max_size=4),
    st.sampled_from(["", "a1", "rc2", ".dev0", ".post1"]),
    st.sampled_from(["", "+cu124", "+cpu", "+cu130"]),
)
shas = st.text("0123456789abcdef", min_size=7, max_size=40)
texts = st.one_of(
    releases,
    st.builds(lambda r, s: f"{r} @ {s}", releases, shas),
    st.builds(lambda s: f"git:{s}", shas),
    st.text(min_size=1, max_size=12),  # anything a distribution may report
)


def test_each_form_parses_to_its_kind() -> None:
    """The four forms of the record, each with its release, commit and public version."""
    release = PinVersion.parse("2.11.0+cu130")
    assert (release.kind, release.release, release.commit, release.public) == (
        RELEASE,
        Version("2.11.0+cu130"),
        "",
        Version("2.11.0"),
    )
    built = PinVersion.parse(f"0.4.0.dev0 @ {SHA}")
    assert (built.kind, built.release_text, built.commit) == (AT_COMMIT, "0.4.0.dev0", SHA)
    assert built.short() == "0.4.0.dev0 @ 47806045a376"
    pinned = PinVersion.parse(f"git:{SHA}")
    assert (pinned.kind, pinned.release, pinned.commit, pinned.release_text) == (COMMIT, None, SHA, "")
    assert pinned.short() == "git:47806045a376"
    assert PinVersion.parse("not-a-version").kind == OTHER
    assert PinVersion.of("0.4.0.dev0", SHA) == built
    assert PinVersion.parse("2.6.0+cu124").public_at() == PinVersion.parse("2.6.0")


@given(texts)
def test_text_round_trips(text: str) -> None:
    """`str()` gives back the very text parsed: the record stays byte-identical."""
    assert str(PinVersion.parse(text)) == text


@given(texts, texts, texts)
def test_the_order_is_total_and_agrees_with_equality(a: str, b: str, c: str) -> None:
    """Any two versions compare one way; equal in the order only when their text is; transitive."""
    x, y, z = map(PinVersion.parse, (a, b, c))
    assert sum((x < y, x == y, x > y)) == 1
    assert (x == y) == (a == b) == (version_key(a) == version_key(b))
    for p, q, r in itertools.permutations((x, y, z)):
        if p <= q <= r:
            assert p <= r


def test_the_three_former_sort_keys_disagreed_and_one_order_decides() -> None:
    """`audit._key`, `expect._key` and `transitions._sort_key` (before this type) ordered a local build against its
    release differently: audit by public version (`2.6.0` tied with `2.6.0+cu124`, one point), the other two by the
    whole version (`2.6.0` first, two points); and text that is not a version (audit: after every commit at 0; the
    others among those commits by text). One order now: no release first (`git:<sha>`, not a version), then the
    whole version, a local build after its release, at a release the release before its commits. Audit counts a
    local build as its release explicitly, with `public_at()`."""
    ordered = [
        "unknown",
        f"git:{SHA}",
        "0",
        f"0 @ {SHA}",
        "2.6.0",
        "2.6.0+cpu",
        "2.6.0+cu124",
        f"2.6.0+cu124 @ {SHA}",
        "2.6.1",
    ]
    assert sorted(reversed(ordered), key=version_key) == ordered
    assert sorted(map(PinVersion.parse, reversed(ordered))) == list(map(PinVersion.parse, ordered))
    local, plain = PinVersion.parse("2.6.0+cu124"), PinVersion.parse("2.6.0")
    assert plain < local
    assert local.public_at() == plain.public_at()


def test_public_keeps_the_text_as_written() -> None:
    """`2.5` stays `2.5` after `2.5.0` was read (an OSV range is written from it): a cache keyed by `Version` would
    answer `2.5.0`, as `Version("2.5") == Version("2.5.0")`."""
    assert str(PinVersion.parse("2.5.0+cpu").public) == "2.5.0"
    assert str(PinVersion.parse("2.5").public) == "2.5"
    assert PinVersion.parse(f"2.5 @ {SHA}").public_release is None


def test_the_reproduce_command_of_a_commit_pin_installs_the_commit(make_case) -> None:  # noqa: ANN001
    """A result whose pin never installed records `git:<sha>`: its command installs that commit from the case's
    source (the `version @ sha` split read `git:<sha>` as a release: `--with litgpt==git:<sha>`)."""
    from harness.analysis.reproduce import repro_command
    from harness.model.outcome import Outcome
    from harness.model.result import Result

    case = make_case(
        "print('x')\n",
        case_id="litgpt-1-pin",
        packages=["torch", "litgpt"],
        sources={"litgpt": "https://github.com/Lightning-AI/litgpt"},
    )
    result = Result(
        case=case.id,
        variant="bug",
        nproc=1,
        device="cpu",
        outcome=Outcome.INFRA,
        expected=None,
        reason="",
        python="3.11.7",
        versions={"litgpt": f"git:{SHA}", "torch": "2.5.0"},
    )
    command = repro_command(case, result)
    assert f"'litgpt @ git+https://github.com/Lightning-AI/litgpt@{SHA}'" in command
    assert "litgpt==" not in command


@given(releases)
def test_a_release_text_parses_as_packaging_does(text: str) -> None:
    assert parse_release(text) == Version(text) and str(parse_release(text)) == str(Version(text))
    assert parse_release_or_none(text) == Version(text)


def test_text_that_is_not_a_release_is_one_line_or_none() -> None:
    with pytest.raises(InvalidVersion, match=r"^Invalid version: '2\.x'$"):
        parse_release("2.x")
    assert parse_release_or_none("2.x") is None and parse_release_or_none("cuda") is None


def test_no_module_outside_model_parses_a_version_from_text() -> None:
    """A release's text is parsed in model/version.py (`parse_release`): counted as
    `git grep -nE '\\bVersion\\(|InvalidVersion|key=Version\\b' -- 'harness/*.py' ':!harness/model'` (33 on e884ae9)."""
    parse = re.compile(r"\bVersion\(|InvalidVersion|key=Version\b")
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted((ROOT / "harness").rglob("*.py"))
        if path.relative_to(ROOT / "harness").parts[0] != "model"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if parse.search(line)
    ]
    assert not found, "\n".join(found)
