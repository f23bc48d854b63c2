"""Fuzzed case.yaml and matrix.yaml: every document either loads or gives one line naming file and field.

Documents are valid ones with one random mutation (a field deleted, a value replaced by any YAML value, an unknown
field added), or arbitrary text. The only exception allowed out of the loaders is their own error type; no
traceback, no multi-line message.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from harness.matrix.basics import MatrixError
from harness.matrix.expand import load_matrix
from harness.model.case import load_case
from harness.model.case_schema import CaseError

CASE = {
    "title": "t",
    "upstream": ["https://github.com/o/r/issues/1"],
    "fixed_by": ["https://github.com/o/r/pull/2"],
    "packages": ["torch", "torchrec"],
    "supports": {"torchrec": ">=1.0"},
    "nproc": [1, 2],
    "devices": ["cpu", "cuda"],
    "timeout": 60,
    "signature": "boom",
    "variants": {
        "bug": {
            "args": ["--x"],
            "expect": [
                {"when": {"torchrec": "<1.3", "nproc": [2], "device": "cpu"}, "outcome": "reproduced"},
                {"when": {"torchrec": {"git": ["abc1234"]}}, "outcome": "skip"},
                {"outcome": "fixed"},
            ],
        },
        "workaround": {"workaround": True, "signature": "other", "expect": [{"outcome": "fixed"}]},
    },
    "evidence": "measured",
}
MATRIX = {
    "defaults": {"python": "3.11", "device": "cpu", "index": "pypi"},
    "indexes": {"pypi": "https://pypi.org/simple"},
    "device_packages": {"fbgemm-gpu": {"cpu": "fbgemm-gpu-cpu", "cuda": "fbgemm-gpu"}},
    "imports": {"fbgemm-gpu": "fbgemm_gpu"},
    "couplings": [
        {
            "name": "c",
            "lead": "torchrec",
            "rows": [{"torchrec": "==1.0.*", "torch": "==2.5.*"}, {"torchrec": "==1.1.*", "torch": "==2.6.*"}],
        }
    ],
    "sources": {"litgpt": {"git": "https://github.com/Lightning-AI/litgpt"}},
    "runners": {"cpu": "ubuntu-latest", "cuda": ["self-hosted", "gpu"]},
    "cells": [{"name": "default", "pins": {"torch": "2.6.0", "torchrec": "1.1.0"}}],
    "groups": [
        {"name": "torchrec-{torchrec}", "axes": {"torchrec": ["1.0.0", "1.1.0"]}},
        {
            "name": "litgpt-{litgpt}",
            "pins": {"torch": "2.3.0"},
            "axes": {"litgpt": [{"git": "abc1234"}, "0.5.0"]},
            "exclude": [{"litgpt": "0.5.0"}],
            "include": [{"litgpt": "0.4.0"}],
        },
    ],
}

# Strings that mean something to the loaders (specifiers, name templates, devices, versions, shas) come up often.
MEANINGFUL = [
    "==1.*",
    ">=",
    "<<1",
    "{torch}",
    "{",
    "}",
    "{torch.x}",
    "{0}",
    "{torch!z}",
    "cpu",
    "cuda",
    "meta",
    "1.0.0",
    "2.99.0",
    "not a version",
    "abc1234",
    "git",
    "https://x",
    "",
    " ",
    "-1",
    "1e9",
]
scalars = st.one_of(
    st.sampled_from(MEANINGFUL),
    st.sampled_from(MEANINGFUL),
    st.none(),
    st.booleans(),
    st.integers(-3, 300),
    st.floats(allow_nan=False),
    st.text(max_size=12),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=8,
)


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside a nested document."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, child in node.items():
            found += paths(child, (*prefix, key))
    elif isinstance(node, list):
        for i, child in enumerate(node):
            found += paths(child, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn, valid: dict[str, Any]) -> dict[str, Any]:
    """`valid` with one to five mutations: a field deleted, a value replaced, an unknown field added, or a
    character that means something to a parser (braces, specifier operators, dots...) put into a string."""
    doc = yaml.safe_load(yaml.safe_dump(valid))
    strings_only = draw(st.booleans())  # half the documents: only edits inside strings (names, specifiers...)
    for _ in range(draw(st.integers(1, 5))):
        found = [p for p in paths(doc) if not strings_only or isinstance(_at(doc, p), str)]
        if not found:
            break
        path = draw(st.sampled_from(found))
        *parents, last = path
        node = doc
        for part in parents:
            node = node[part]
        action = "edit" if strings_only else draw(st.sampled_from(["delete", "replace", "add", "edit"]))
        if action == "edit" and isinstance(node[last], str):
            text = node[last]
            at = draw(st.integers(0, len(text)))
            node[last] = text[:at] + draw(st.sampled_from(list("{}{}[]:.!*<>=@, -/"))) + text[at:]
        elif action == "delete":
            del node[last]
        elif action == "add":
            target = node if isinstance(node, dict) else doc
            target[draw(st.text(min_size=1, max_size=8))] = draw(values)
        else:
            node[last] = draw(values)
    return doc


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        doc = doc[part]
    return doc


def documents(valid: dict[str, Any]) -> st.SearchStrategy[str]:
    dumped = mutated(valid).map(lambda d: yaml.safe_dump(d, allow_unicode=True))
    return st.one_of(dumped, dumped, dumped, st.text(max_size=200))


def assert_one_line(message: str, path: Path) -> None:
    assert "\n" not in message and "Traceback" not in message, message
    assert message.startswith(f"{path}: "), message
    field = message[len(f"{path}: ") :].split(": ", 1)[0]
    assert field.strip(), message  # names a field, a line of the file, or "(top level)"


FUZZ = settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(text=documents(CASE))
def test_fuzzed_case_yaml_loads_or_names_file_and_field(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "torchrec-1-fuzz"
        folder.mkdir()
        (folder / "repro.py").write_text("print('hi')\n")
        (folder / "case.yaml").write_text(text, encoding="utf-8")
        try:
            load_case(folder / "case.yaml")
        except CaseError as exc:
            assert_one_line(str(exc), folder / "case.yaml")


@FUZZ
@given(text=documents(MATRIX))
@example(text="' ': ==1.*\ncells: []\n")  # found by this test in CI: a blank field name printed as nothing
def test_fuzzed_matrix_yaml_loads_or_names_file_and_field(text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "matrix.yaml"
        path.write_text(text, encoding="utf-8")
        try:
            load_matrix(path)
        except MatrixError as exc:
            assert_one_line(str(exc), path)


def test_the_valid_documents_load(tmp_path: Path) -> None:
    """The fuzzers start from documents that load, so every failure they find comes from the mutation."""
    folder = tmp_path / "torchrec-1-fuzz"
    folder.mkdir()
    (folder / "repro.py").write_text("print('hi')\n")
    (folder / "case.yaml").write_text(yaml.safe_dump(CASE))
    assert load_case(folder / "case.yaml").spec.variants["workaround"].workaround
    (tmp_path / "matrix.yaml").write_text(yaml.safe_dump(MATRIX))
    assert len(load_matrix(tmp_path / "matrix.yaml").cells) == 5


# ------------------------------------------------------------------------------------- nesting (issue 33, item 4)

DEEP = 50_000  # deep enough to overflow libyaml's C composer: SIGSEGV, no message, before the nesting check
DEEP_SHAPES = {  # a 100 KB document nested DEEP levels, and the line where it passes MAX_NESTING
    "flow sequence": ("id: " + "[" * DEEP + "]" * DEEP + "\n", 1),
    "flow mapping": ("{a: " * DEEP + "1" + "}" * DEEP + "\n", 1),
    "compact block sequence": ("title: t\nx:\n  " + "- " * DEEP + "y\n", 3),
    "complex keys": ("? " * DEEP + "x\n", 1),
    "NEL line breaks": ("title: t\x85x:\x85  " + "- " * DEEP + "y\n", 3),
    "unclosed": ("[" * DEEP, 1),
    "indented mappings": ("".join(" " * i + "a:\n" for i in range(150)) + " " * 150 + "b: 1\n", 101),
}
_LOAD_EACH = """
import sys
from pathlib import Path
from harness.matrix.basics import MatrixError
from harness.matrix.expand import load_matrix
from harness.model.case import load_case
from harness.model.case_schema import CaseError
for path in sys.argv[1:]:
    path = Path(path)
    try:
        (load_matrix if path.name == "matrix.yaml" else load_case)(path)
        print("loaded")
    except (CaseError, MatrixError) as exc:
        print(exc)
"""


def _write_deep(root: Path) -> list[tuple[Path, int]]:
    """Each deep shape as a case folder's case.yaml and as a matrix.yaml, with the line it passes the limit."""
    written = []
    for i, (text, line) in enumerate(DEEP_SHAPES.values()):
        folder = root / f"torchrec-{i}-deep"
        folder.mkdir(parents=True)
        (folder / "repro.py").write_text("print('hi')\n")
        for path in (folder / "case.yaml", folder / "matrix.yaml"):
            path.write_text(text, encoding="utf-8", newline="")
            written.append((path, line))
    return written


def test_a_document_nested_too_deep_is_one_line_not_a_crash(tmp_path: Path) -> None:
    """load_case and load_matrix (in a process of their own: the crash was SIGSEGV) refuse every shape with one line
    naming the file and the line where the nesting passes the limit."""
    import subprocess
    import sys

    written = _write_deep(tmp_path / "cases")
    done = subprocess.run(
        [sys.executable, "-c", _LOAD_EACH, *(str(p) for p, _ in written)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.splitlines() == [f"{p}: line {line}: nested more than 100 levels deep" for p, line in written]


def test_every_command_that_reads_the_folder_says_so_in_one_line(tmp_path: Path) -> None:
    """`list`, `check-case` (the invalid case, exit 1 as for any) and `matrix` (an invalid matrix: exit 2) as the user
    runs them; they died with SIGSEGV."""
    import subprocess
    import sys

    cases = tmp_path / "cases"
    (folder := cases / "torchrec-1-deep").mkdir(parents=True)
    (folder / "repro.py").write_text("print('hi')\n")
    (folder / "case.yaml").write_text(DEEP_SHAPES["flow sequence"][0])
    (tmp_path / "matrix.yaml").write_text(DEEP_SHAPES["compact block sequence"][0])
    said = f"{folder / 'case.yaml'}: line 1: nested more than 100 levels deep"
    for argv, code, line in (
        (["list"], 1, f"invalid case {said}"),
        (["check-case", "torchrec-1"], 1, said),
        (
            ["matrix", "--matrix", str(tmp_path / "matrix.yaml")],
            2,
            f"bugmatrix matrix: {tmp_path / 'matrix.yaml'}: line 3: nested more than 100 levels deep",
        ),
    ):
        done = subprocess.run(
            [sys.executable, "-m", "harness", "--cases-dir", str(cases), *argv],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).resolve().parent.parent,
            env={**__import__("os").environ, "COLUMNS": "400"},
        )
        assert done.returncode == code, (argv, done.returncode, done.stderr[-2000:])
        assert line in (done.stdout + done.stderr).splitlines(), (argv, done.stdout[-1000:], done.stderr[-1000:])
        assert "Traceback" not in done.stderr


NAMES = st.sampled_from(["a", "[", "a]", "{x", "- y", "? z", ": w", "#c", "'q", '"d', "&an", "!t", "*al", ""])


@st.composite
def nested(draw: st.DrawFn) -> tuple[Any, int]:
    """A document with one chain of lists and mappings 1..140 deep (only lists, only mappings or either at each
    level; shallow siblings beside it), and its depth (a sibling list below the innermost collection adds one)."""
    depth = draw(st.integers(1, 140))
    kinds = draw(st.sampled_from([[True], [False], [True, False]]))  # True: a list
    node: Any = draw(st.one_of(NAMES, st.integers()))
    for _ in range(depth):
        siblings = draw(st.lists(st.one_of(NAMES, st.lists(NAMES, max_size=2)), max_size=2))
        if draw(st.sampled_from(kinds)):
            node = [node, *siblings] if draw(st.booleans()) else [*siblings, node]
        else:
            node = {draw(NAMES) + "k": node, **{f"s{i}": s for i, s in enumerate(siblings)}}
    return node, _depth(node)


def _depth(node: Any) -> int:
    children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
    return 0 if children is None else 1 + max(map(_depth, children), default=0)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=nested(), flow=st.sampled_from([False, True, None]), indent=st.sampled_from([2, 3, 4]))
def test_the_nesting_check_never_passes_a_document_deeper_than_its_limit(
    doc: tuple[Any, int], flow: bool | None, indent: int
) -> None:
    """The cheap bound that lets most documents skip the exact count never says 'shallow enough' wrongly: at a limit
    one below the document's depth the check finds it (block, flow and mixed styles; names that quote)."""
    from harness.model.nesting import yaml_too_deep

    value, depth = doc
    text = yaml.safe_dump(value, default_flow_style=flow, indent=indent, width=10_000)
    assert yaml_too_deep(text, limit=depth - 1) is not None, text
    assert yaml_too_deep(text, limit=depth) is None


def test_the_nesting_check_of_json_skips_strings() -> None:
    """Brackets inside strings (escaped quotes and backslashes included) are not nesting; those outside are."""
    from harness.model.nesting import json_too_deep

    assert json_too_deep("[" * 101 + "]" * 101) and not json_too_deep("[" * 100 + "]" * 100)
    assert not json_too_deep('["' + "[" * 500 + '"]')
    three = '{"a\\"[[[": "\\\\", "b": [[]], "c": "]]]"}'
    assert not json_too_deep(three, limit=3) and json_too_deep(three, limit=2)


def test_a_case_yaml_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    """It raised UnicodeDecodeError (a traceback out of every command that reads the folder)."""
    import pytest

    folder = tmp_path / "torchrec-1-latin1"
    folder.mkdir()
    (folder / "case.yaml").write_bytes("title: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(CaseError) as raised:
        load_case(folder / "case.yaml")
    assert str(raised.value) == f"{folder / 'case.yaml'}: not UTF-8 text (byte 10)"
