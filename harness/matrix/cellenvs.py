"""Running cases across matrix cells: case -> cell -> environment -> launch -> outcome -> store.

    cell_jobs = plan_cells(cases, matrix, names)      # which cases run in which cells, cells ordered by torch stack
    results = run_cells(cell_jobs, matrix, cache, ...) # environments built lazily (one per key), jobs by cores

A case runs in a cell when the cell pins every package the case needs (torch excepted: every cell has torch)
and the case declares the cell's device; a case that needs torch alone runs in the cells that pin torch alone
(the torch axis), not in every cell. A cell whose pins cannot be resolved, or whose environment cannot be
built or imported, gives every one of its jobs the outcome `infra` with the resolver's or importer's message;
the other cells go on. With a disk budget, environments whose cells are finished are evicted, and uv's cache of
big packages cleaned, before a new environment is built while usage is over the budget.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from harness.launch.execute import Job, execute_repeated, run_scheduled
from harness.launch.interpreter import Environment, ProbeError, cuda_available
from harness.matrix.envcache import EnvCache, clean_cache, disk_usage, uv_binary
from harness.matrix.spec import Cell, Matrix, MatrixError, ResolvedCell, resolve_cell
from harness.model.case import Case
from harness.model.job import fingerprint
from harness.model.outcome import Outcome
from harness.model.result import Result

ALWAYS_PRESENT = {"torch"}


def case_runs_in(case: Case, cell: Cell) -> bool:
    """True when `cell` pins every package `case` needs (torch is in every cell) and `case` declares its device.

    A torch-only case runs only in torch-only cells: elsewhere torch is whatever the other pins drag in, and the
    same torch version would be run once per cell that happens to resolve to it.
    """
    if cell.device not in case.spec.devices:
        return False
    needed = set(case.spec.packages) - ALWAYS_PRESENT
    if not needed:
        return set(cell.pins) <= ALWAYS_PRESENT
    return needed <= set(cell.pins)


@dataclass
class CellJobs:
    """A cell and the jobs to run in it."""

    cell: Cell
    jobs: list[Job] = field(default_factory=list)


def plan_cells(cases: list[Case], matrix: Matrix, names: list[str] | None = None) -> list[CellJobs]:
    """Jobs per cell for the named cells (all when `names` is None), cells sharing a torch stack kept together."""
    cells = matrix.cells if names is None else [matrix.cell(n) for n in names]
    planned = []
    for cell in cells:
        jobs = [
            Job(case, variant, nproc, cell.device)
            for case in cases if case_runs_in(case, cell)
            for variant in case.spec.variants
            for nproc in case.spec.nproc
        ]
        if jobs:
            planned.append(CellJobs(cell, jobs))
    return sorted(planned, key=lambda cj: _torch_order(cj.cell))


def _torch_order(cell: Cell) -> tuple[int, Version, str]:
    pin = cell.pins.get("torch")
    text = str(pin).lstrip("=~<>!").rstrip(".*") if isinstance(pin, str) else ""
    try:
        return (0, Version(text), cell.device)
    except InvalidVersion:
        return (1, Version("0"), cell.device)


class CellEnvironments:
    """Resolves and builds each cell's environment once, however many threads ask; remembers failures."""

    def __init__(self, matrix: Matrix, cache: EnvCache, disk_budget: int | None = None) -> None:
        self.matrix, self.cache, self.disk_budget = matrix, cache, disk_budget
        self._locks: dict[str, threading.Lock] = {}
        self._done: dict[str, tuple[ResolvedCell | None, Environment | None, str]] = {}
        self._resolved: dict[str, tuple[ResolvedCell | None, str]] = {}
        self._guard = threading.Lock()
        self._cells_of: dict[str, set[str]] = {}  # environment key -> the cells that use it
        self._finished: set[str] = set()  # cells whose jobs are all done

    def resolve(self, cell: Cell) -> tuple[ResolvedCell | None, str]:
        """(resolved cell, "") or (None, why it cannot be resolved); resolved once per cell, nothing built."""
        with self._guard:
            lock = self._locks.setdefault("resolve:" + cell.name, threading.Lock())
        with lock:
            if cell.name not in self._resolved:
                try:
                    self._resolved[cell.name] = (resolve_cell(self.matrix, cell), "")
                except MatrixError as exc:
                    self._resolved[cell.name] = (None, f"cannot resolve the cell: {exc}")
            return self._resolved[cell.name]

    def get(self, cell: Cell) -> tuple[ResolvedCell | None, Environment | None, str]:
        """(resolved cell, environment, "") when usable, else (resolved or None, None, why not)."""
        with self._guard:
            lock = self._locks.setdefault(cell.name, threading.Lock())
        with lock:
            if cell.name not in self._done:
                self._done[cell.name] = self._make(cell)
            return self._done[cell.name]

    def _make(self, cell: Cell) -> tuple[ResolvedCell | None, Environment | None, str]:
        resolved, problem = self.resolve(cell)
        if resolved is None:
            return None, None, problem
        with self._guard:
            self._cells_of.setdefault(resolved.key, set()).add(cell.name)
        if self.disk_budget is not None and not self.cache.exists(resolved.key):
            self._fit_budget()
        status = self.cache.build(resolved)
        if not status.ok:
            return resolved, None, f"environment: {status.error}"
        try:
            return resolved, self.cache.environment(status.key), ""
        except ProbeError as exc:
            return resolved, None, f"environment does not start: {exc}"

    def cell_finished(self, cell: Cell) -> None:
        with self._guard:
            self._finished.add(cell.name)

    def evictable(self) -> set[str]:
        """Environments every one of whose cells has finished (a key shared by a running cell is kept)."""
        with self._guard:
            return {key for key, cells in self._cells_of.items() if cells <= self._finished}

    def _fit_budget(self) -> None:
        evictable = self.evictable()
        if self._usage() <= (self.disk_budget or 0):
            return
        for key in sorted(evictable):
            self.cache.remove(key)
        if self._usage() > (self.disk_budget or 0):
            clean_cache()  # environments keep their hardlinks; only later cells would download again

    def _usage(self) -> int:
        cache_dir = subprocess.run([uv_binary(), "cache", "dir"], capture_output=True, text=True,
                                   check=False).stdout.strip()
        return disk_usage(self.cache.root) + (disk_usage(Path(cache_dir)) if cache_dir else 0)


def run_cells(
    planned: list[CellJobs],
    matrix: Matrix,
    cache: EnvCache,
    cores: int = 1,
    disk_budget: int | None = None,
    on_result: Callable[[str, Result], None] | None = None,
    repeat: int = 1,
    recorded: Callable[[str, str], Result | None] | None = None,
) -> list[tuple[str, Result]]:
    """Run every planned job in its cell's environment (each `repeat` times); `(cell name, result)` in plan order.

    `recorded(cell name, fingerprint)` may return an earlier result that still stands (see `harness/model/job.py`):
    it is used as is, nothing is built or launched for it, and `on_result` is not called for it.
    """
    work = [(cj.cell, job) for cj in planned for job in cj.jobs]
    remaining = {cj.cell.name: sum(1 for cell, _ in work if cell.name == cj.cell.name) for cj in planned}
    envs = CellEnvironments(matrix, cache, disk_budget)
    lock = threading.Lock()

    def one(item: tuple[Cell, Job]) -> tuple[str, Result]:
        cell, job = item
        earlier = None
        if cell.device == "cuda" and not cuda_available():  # no environment is built for a device that is absent
            result = skip_result(job, "needs a CUDA device; this machine has none")
        else:
            resolved, _ = envs.resolve(cell)
            fprint = fingerprint(job, resolved.key, repeat) if resolved else ""
            earlier = recorded(cell.name, fprint) if recorded and fprint else None
            if earlier is not None:
                result = earlier
            else:
                resolved, env, problem = envs.get(cell)
                result = infra_result(job, problem, resolved) if env is None else execute_repeated(job, env, repeat)
                result = result.model_copy(update={"fingerprint": fprint})
        with lock:
            remaining[cell.name] -= 1
            if remaining[cell.name] == 0:
                envs.cell_finished(cell)
        if on_result and earlier is None:
            on_result(cell.name, result)
        return cell.name, result

    return run_scheduled(work, one, cost=lambda item: item[1].nproc, cores=cores)


def skip_result(job: Job, reason: str) -> Result:
    """The result of a job that cannot run on this machine: `skip`, not launched, no verdict on the bug."""
    return Result(case=job.case.id, variant=job.variant, nproc=job.nproc, device=job.device, outcome=Outcome.SKIP,
                  expected=None, reason=reason, started_at=time.time(), launched=False)


def infra_result(job: Job, problem: str, resolved: ResolvedCell | None) -> Result:
    """The result of a job whose cell has no usable environment: `infra`, never a verdict on the bug."""
    versions = dict(resolved.versions) if resolved else {}
    return Result(
        case=job.case.id, variant=job.variant, nproc=job.nproc, device=job.device, outcome=Outcome.INFRA,
        expected=None, reason=problem[:2000], versions=versions, started_at=time.time(), launched=False,
    )

