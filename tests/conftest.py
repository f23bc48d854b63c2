"""Fixtures for the harness's own tests: small fake case folders with scripts that pass, fail, crash or hang."""

from __future__ import annotations

import os
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

# The harness's own tests never read the repository's committed record (record/ under the current directory): each
# test that wants a record builds one. Set before the harness is imported (its default is read at import).
os.environ.setdefault("BUGMATRIX_RECORD", tempfile.mkdtemp(prefix="bugmatrix-no-record-"))

from harness.launch.interpreter import Environment, inspect_interpreter
from harness.model.case import Case, load_case

MakeCase = Callable[..., Case]


@pytest.fixture(autouse=True)
def _no_chronology_leaks() -> Any:
    """A reader that loaded a record answers the index's and clones' questions from it for the rest of its process
    (harness/session/readers.py `use_chronology`); one test's record must not answer the next test's."""
    from harness.matrix import git, index

    yield
    index.forget()
    git.forget()


@pytest.fixture
def make_case(tmp_path: Path) -> MakeCase:
    """`make_case(script_source, **case_yaml_fields)` writes tmp/cases/<id>/{case.yaml,repro.py} and loads it."""

    def make(script: str, *, case_id: str = "fake-1-case", **fields: Any) -> Case:
        folder = tmp_path / "cases" / case_id
        folder.mkdir(parents=True)
        (folder / "repro.py").write_text(textwrap.dedent(script))
        spec = {
            "title": "a fake case",
            "upstream": ["https://example.invalid/issues/1"],
            "packages": ["torch"],
            "nproc": [1],
            "timeout": 60,
            "signature": "FAKE-BUG-SIGNATURE",
            "variants": {"bug": {"expect": [{"outcome": "reproduced"}]}},
        }
        spec.update(fields)
        (folder / "case.yaml").write_text(yaml.safe_dump(spec))
        return load_case(folder / "case.yaml")

    return make


@pytest.fixture(scope="session")
def env() -> Environment:
    """The environment the tests run in (it has torch, so torchrun works)."""
    return inspect_interpreter(sys.executable)
