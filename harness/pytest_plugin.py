"""pytest integration: every `cases/<id>/case.yaml` becomes one item per variant x world size x device.

An item passes when the observed outcome equals the expected one, skips (with the reason) when the environment
lacks a package or the machine lacks the device, and fails otherwise with the reason and a log excerpt.
An invalid case folder becomes one failing item with the one-line error; the other cases still run.
Items carry markers `case`, `cpu`/`cuda` and `workaround`, so `-m`, `-k`, xdist and junitxml work as usual.

With `--cell NAME` (repeatable) or `--all-cells`, items are made per matrix cell instead
(`variant[cell-nproc]`); each cell's environment is built on first use (a file lock shares it between xdist
workers) and a cell that cannot be built fails its items as `infra`. A case of several nodes names its items
`variant[cpu-2x2]` (nodes x ranks per node; `variant[cell-2x2]` per cell, see `harness.model.common.job_tag`).

Options: `--bugmatrix-python PATH` runs the cases in another environment (default: this interpreter);
`--bugmatrix-db PATH` records every result in a results store (one run for the whole session, xdist included).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.launch.interpreter import inspect_interpreter, machine_name
from harness.matrix.basics import DEFAULT_MATRIX, ENVS_FALLBACK, MatrixError
from harness.matrix.cellenvs import CellEnvironments
from harness.matrix.envcache import EnvCache
from harness.matrix.expand import Matrix, load_matrix
from harness.model.case import CASE_FILE, Case, load_case
from harness.model.case_schema import CaseError
from harness.model.common import job_tag
from harness.model.job import Job
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.session.observer import Observer
from harness.session.pipeline import LocalEnvironment, MatrixEnvironments, Recorder, Session
from harness.session.plan import Selection, plan_cells, plan_local
from harness.session.store import ResultStore

_SESSION_KEY = pytest.StashKey[Session]()
_MATRIX_KEY = pytest.StashKey[Matrix]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("bugmatrix")
    group.addoption("--bugmatrix-python", default=None, help="interpreter whose environment runs the cases")
    group.addoption("--bugmatrix-db", default=None, help="record every case result in this results store")
    group.addoption("--cell", action="append", default=[], help="run the cases in this matrix cell (repeatable)")
    group.addoption("--all-cells", action="store_true", help="run the cases in every cell of the matrix")
    group.addoption("--matrix", default=str(DEFAULT_MATRIX), help="the matrix file (default: matrix.yaml)")
    group.addoption(
        "--bugmatrix-envs",
        default=None,
        help=f"the cells' environments folder (default $BUGMATRIX_ENVS, else {ENVS_FALLBACK})",
    )


def pytest_configure(config: pytest.Config) -> None:
    db = config.getoption("--bugmatrix-db")
    if db and not hasattr(config, "workerinput"):  # the controller opens the run; xdist workers inherit its id
        os.environ["BUGMATRIX_RUN_ID"] = ResultStore(db).begin_run("pytest", machine_name())
    for marker in (
        "case: a bugmatrix case item",
        "cpu: runs on CPU",
        "cuda: needs a CUDA device",
        "workaround: a variant that applies a known workaround",
    ):
        config.addinivalue_line("markers", marker)


def pytest_unconfigure(config: pytest.Config) -> None:
    db = config.getoption("--bugmatrix-db")
    if db and not hasattr(config, "workerinput") and "BUGMATRIX_RUN_ID" in os.environ:
        ResultStore(db).end_run(os.environ.pop("BUGMATRIX_RUN_ID"))


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.name == CASE_FILE:
        return CaseFile.from_parent(parent, path=file_path)
    return None


def _selection(config: pytest.Config) -> Selection:
    return Selection(
        cells=tuple(config.getoption("--cell")), all_cells=config.getoption("--all-cells"), devices=("cpu", "cuda")
    )


def _matrix(config: pytest.Config) -> Matrix:
    """The matrix, loaded once per pytest process (each xdist worker)."""
    if _MATRIX_KEY not in config.stash:
        try:
            config.stash[_MATRIX_KEY] = load_matrix(Path(config.getoption("--matrix")))
        except MatrixError as exc:
            raise pytest.UsageError(str(exc)) from None
    return config.stash[_MATRIX_KEY]


def _session(config: pytest.Config) -> Session:
    """The pipeline every item of this pytest process runs through (harness/session/pipeline.py): the local
    environment, or the matrix cells with --cell/--all-cells. Pytest never resumes: every item launches."""
    if _SESSION_KEY not in config.stash:
        if _selection(config).in_matrix:
            envs = config.getoption("--bugmatrix-envs")
            cells = CellEnvironments(_matrix(config), EnvCache(Path(envs) if envs else None))
            environments: LocalEnvironment | MatrixEnvironments = MatrixEnvironments(cells)
        else:
            python = config.getoption("--bugmatrix-python") or sys.executable
            environments = LocalEnvironment(inspect_interpreter(python))
        db = config.getoption("--bugmatrix-db")
        observers: list[Observer] = [Recorder(ResultStore(db), os.environ["BUGMATRIX_RUN_ID"])] if db else []
        config.stash[_SESSION_KEY] = Session(environments, observers=observers)
    return config.stash[_SESSION_KEY]


class CaseFile(pytest.File):
    """A case folder's metadata; collects its jobs as items (per matrix cell with --cell/--all-cells)."""

    def collect(self) -> Any:
        try:
            case = load_case(self.path)
        except CaseError as exc:
            yield InvalidCaseItem.from_parent(self, name="invalid", error=str(exc))
            return
        selection = _selection(self.config)
        if not selection.in_matrix:
            for job in plan_local([case], selection):
                yield CaseItem.from_parent(
                    self, name=f"{job.variant}[{job_tag(job.device, job.nproc, job.nnodes)}]", job=job
                )
            return
        try:
            jobs = plan_cells([case], _matrix(self.config), selection)
        except MatrixError as exc:
            raise pytest.UsageError(str(exc)) from None
        for job in jobs:
            yield CaseItem.from_parent(
                self, name=f"{job.variant}[{job_tag(job.cell_name, job.nproc, job.nnodes)}]", job=job
            )


class CaseItem(pytest.Item):
    """One launch of a case: passes when observed == expected."""

    def __init__(self, *, job: Job, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job = job
        self.result: Result | None = None
        self.add_marker("case")
        self.add_marker(job.device)
        if job.case.spec.variants[job.variant].workaround:
            self.add_marker("workaround")

    def runtest(self) -> None:
        self.result = result = _session(self.config).run_job(self.job)
        if result.outcome is Outcome.SKIP and not result.launched:
            pytest.skip(result.reason)
        for key in ("outcome", "expected", "reason", "duration_s"):
            self.user_properties.append((key, str(getattr(result, key))))
        self.user_properties.append(("versions", str(result.versions)))
        if not result.ok:
            raise CaseMismatch(result)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CaseMismatch):
            r = excinfo.value.result
            return (
                f"{r.item_id}: observed {r.outcome.value}, expected {r.expected.value if r.expected else '?'}\n"
                f"reason: {r.reason}\nversions: {r.versions}\n{r.log_excerpt}"
                + (f"\nstacks:\n{r.stacks}" if r.stacks else "")
            )
        return str(super().repr_failure(excinfo))

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.job.case.id}::{self.name}"


class InvalidCaseItem(pytest.Item):
    """Stands for a case folder whose metadata or script is invalid; always fails with the one-line error."""

    def __init__(self, *, error: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.error = error

    def runtest(self) -> None:
        raise CaseError(self.error)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        return self.error

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"{self.path.parent.name}::invalid"


class CaseMismatch(AssertionError):
    """The observed outcome differs from the expected one."""

    def __init__(self, result: Result) -> None:
        super().__init__(result.reason)
        self.result = result


__all__ = ["Case", "CaseFile", "CaseItem", "InvalidCaseItem"]
