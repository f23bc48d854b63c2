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
        "bug": {"args": ["--x"], "expect": [{"when": {"torchrec": "<1.3", "nproc": [2], "device": "cpu"},
                                             "outcome": "reproduced"},
                                            {"when": {"torchrec": {"git": ["abc1234"]}}, "outcome": "skip"},
                                            {"outcome": "fixed"}]},
        "workaround": {"workaround": True, "signature": "other", "expect": [{"outcome": "fixed"}]},
    },
    "evidence": "measured",
}
MATRIX = {
    "defaults": {"python": "3.11", "device": "cpu", "index": "pypi"},
    "indexes": {"pypi": "https://pypi.org/simple"},
    "device_packages": {"fbgemm-gpu": {"cpu": "fbgemm-gpu-cpu", "cuda": "fbgemm-gpu"}},
    "imports": {"fbgemm-gpu": "fbgemm_gpu"},
    "couplings": [{"name": "c", "lead": "torchrec",
                   "rows": [{"torchrec": "==1.0.*", "torch": "==2.5.*"}, {"torchrec": "==1.1.*", "torch": "==2.6.*"}]}],
    "sources": {"litgpt": {"git": "https://github.com/Lightning-AI/litgpt"}},
    "runners": {"cpu": "ubuntu-latest", "cuda": ["self-hosted", "gpu"]},
    "cells": [{"name": "default", "pins": {"torch": "2.6.0", "torchrec": "1.1.0"}}],
    "groups": [
        {"name": "torchrec-{torchrec}", "axes": {"torchrec": ["1.0.0", "1.1.0"]}},
        {"name": "litgpt-{litgpt}", "pins": {"torch": "2.3.0"}, "axes": {"litgpt": [{"git": "abc1234"}, "0.5.0"]},
         "exclude": [{"litgpt": "0.5.0"}], "include": [{"litgpt": "0.4.0"}]},
    ],
}

# Strings that mean something to the loaders (specifiers, name templates, devices, versions, shas) come up often.
MEANINGFUL = ["==1.*", ">=", "<<1", "{torch}", "{", "}", "{torch.x}", "{0}", "{torch!z}", "cpu", "cuda", "meta",
              "1.0.0", "2.99.0", "not a version", "abc1234", "git", "https://x", "", " ", "-1", "1e9"]
scalars = st.one_of(st.sampled_from(MEANINGFUL), st.sampled_from(MEANINGFUL), st.none(), st.booleans(),
                    st.integers(-3, 300), st.floats(allow_nan=False), st.text(max_size=12))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                       st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                      max_leaves=8)


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
    field = message[len(f"{path}: "):].split(": ", 1)[0]
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
