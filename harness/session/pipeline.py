"""One run, one pipeline: every entry point (CLI, pytest plugin, bisect, nightly) drives this.

    jobs = plan_local(cases, selection) or plan_cells(cases, matrix, selection)     # harness/session/plan.py
    session = Session(environments, resume=Resume(store), observers=[Recorder(store, run_id), progress, ...])
    results = session.run(jobs, cores=N)          # scheduled by cores; results in job order
    result = session.run_job(job)                 # one job (a pytest item, a bisect probe)

Each job goes through the same steps, in this order:
  1. device: a job for a device this machine lacks is `skip`, and nothing is resolved or built for it;
  2. resume: the job's fingerprint (script and run settings, variant, world size, device, pins, repeats) is looked up
     in the store; a settled earlier result is reused (nothing built or launched; its `expected` follows today's
     rules; `Resume(store, redo=True)` or `NO_RESUME` never reuses);
  3. environment: the job's environment (a matrix cell's, built once per cell; or the local interpreter); one
     that cannot be made gives `infra` with the reason, never a verdict;
  4. run: `execute_repeated` (a missing package is `skip`; K launches, reproduced and fixed both is `flaky`, an
     error among them kept apart: harness/model/outcome.py `combine_repeats`);
  5. observers: every result, reused or not, is handed to each observer in turn (`result_ready`), under one lock.
     The store (`Recorder`), the progress display, per-launch lines and the JSON collector are observers, as
     pytest's terminal reporter and junitxml observe `pytest_runtest_logreport`.
"""

from __future__ import annotations

import queue
import threading
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from harness.launch.execute import device_missing, execute_repeated, infra_result, skip_result
from harness.launch.interpreter import Environment
from harness.launch.torchrun import LaunchAborted
from harness.model.cell import Cell
from harness.model.expectations import expected_for
from harness.model.job import SETTLED, Job, fingerprint, local_pins, pool_of, run_digest
from harness.model.result import Result
from harness.session.contract import Store
from harness.session.observer import Observer
from harness.session.scheduler import run_scheduled
from harness.session.store import NullStore

if TYPE_CHECKING:
    from harness.matrix.cellenvs import CellEnvironments


class Recorder(Observer):
    """Saves every new result in the store under the job's cell (reused results are already there)."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store, self.run_id = store, run_id

    def result_ready(self, job: Job, result: Result, reused: bool) -> None:
        if not reused:
            self.store.save(self.run_id, result, cell=job.cell_name)


class Collector(Observer):
    """Keeps what was reused, for the summary and the JSON output."""

    def __init__(self) -> None:
        self.reused: list[Result] = []

    def result_ready(self, job: Job, result: Result, reused: bool) -> None:
        if reused:
            self.reused.append(result)


class Resume:
    """Step 2: the settled earlier result of the same case and variant with the same fingerprint, from any run in
    `store`, unless `redo`."""

    def __init__(self, store: Store, redo: bool = False) -> None:
        self.store, self.redo = store, redo

    def lookup(self, job: Job, fprint: str) -> Result | None:
        """The result to reuse for `job` (its cell, case and variant) with `fprint`, or None (launch it)."""
        if self.redo or not fprint:
            return None
        return self.store.standing(job.cell_name, job.case.id, job.variant, fprint, SETTLED)


NO_RESUME = Resume(NullStore(), redo=True)


class Environments(Protocol):
    """Where jobs get their interpreter (step 3), and what their fingerprint's pins are (step 2)."""

    def expect(self, jobs: list[Job]) -> None:
        """The jobs about to run (a matrix evicts a cell's environment once all of its jobs are done)."""

    def pins(self, job: Job) -> str | None:
        """What identifies `job`'s environment, without building anything; None when it cannot be told."""

    def get(self, job: Job) -> tuple[Environment | None, str, dict[str, str]]:
        """(environment, "", versions) when usable, else (None, why not, the versions resolved so far)."""

    def done(self, job: Job) -> None:
        """`job` has its result."""

    def close(self) -> None:
        """The run is over: stop any background work."""


class LocalEnvironment:
    """One interpreter for every job (`bugmatrix run`, `--python`, pytest without `--cell`)."""

    def __init__(self, env: Environment) -> None:
        self.env = env

    def expect(self, jobs: list[Job]) -> None:
        return None

    def pins(self, job: Job) -> str | None:
        return local_pins(self.env.python, self.env.versions_of(job.case.spec.packages))

    def get(self, job: Job) -> tuple[Environment | None, str, dict[str, str]]:
        return self.env, "", {}

    def done(self, job: Job) -> None:
        return None

    def close(self) -> None:
        return None


class MatrixEnvironments:
    """Each job's matrix cell: resolved once, built on first use, evictable once all its jobs are done.

    Build-ahead: when a job first asks for its cell's environment, the environments of the next `ahead` cells in
    job order are built in the background (one at a time, within the disk budget), so that downloads, installs and
    first-import compiles overlap the current cell's launches instead of idling the cores between cells. A cell is
    built ahead only once the run has reached the cell before it; a run that resumes everything builds nothing.
    """

    def __init__(self, cells: CellEnvironments, ahead: int = 2) -> None:
        self.cells, self.ahead = cells, ahead
        self._remaining: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._order: list[Cell] = []  # distinct cells in job order, on devices this machine has
        self._queued: set[str] = set()
        self._ahead: queue.Queue[Cell | None] = queue.Queue()
        self._builder: threading.Thread | None = None

    def expect(self, jobs: list[Job]) -> None:
        with self._lock:
            self._remaining.update(job.cell_name for job in jobs)
            for job in jobs:
                if job.cell is not None and job.cell not in self._order and device_missing(job.device) is None:
                    self._order.append(job.cell)

    def pins(self, job: Job) -> str | None:
        assert job.cell is not None, "a matrix job has a cell"
        resolved, _ = self.cells.resolve(job.cell)
        return resolved.key if resolved else None

    def get(self, job: Job) -> tuple[Environment | None, str, dict[str, str]]:
        assert job.cell is not None, "a matrix job has a cell"
        self._build_after(job.cell)
        resolved, env, problem = self.cells.get(job.cell)
        return env, problem, dict(resolved.versions) if resolved else {}

    def done(self, job: Job) -> None:
        with self._lock:
            if self._remaining[job.cell_name] <= 0:
                return
            self._remaining[job.cell_name] -= 1
            finished = self._remaining[job.cell_name] == 0
        if finished and job.cell is not None:
            self.cells.cell_finished(job.cell)

    def close(self) -> None:
        """Stop building ahead: queued builds are dropped (one in progress finishes in the background)."""
        with self._lock:
            self._queued.update(cell.name for cell in self._order)
        self._ahead.put(None)

    def _build_after(self, cell: Cell) -> None:
        with self._lock:
            if self.ahead < 1 or cell not in self._order:
                return
            start = self._order.index(cell) + 1
            upcoming = [c for c in self._order[start : start + self.ahead] if c.name not in self._queued]
            self._queued.update(c.name for c in upcoming)
            if upcoming and self._builder is None:
                self._builder = threading.Thread(target=self._build_loop, name="bugmatrix-build-ahead", daemon=True)
                self._builder.start()
        for upcoming_cell in upcoming:
            self._ahead.put(upcoming_cell)

    def _build_loop(self) -> None:
        while (cell := self._ahead.get()) is not None:
            try:
                self.cells.build_ahead(cell)
            except LaunchAborted:  # the run was interrupted (its main thread says so): this thread just ends
                return


def execution_order(jobs: list[Job]) -> list[int]:
    """Indices of `jobs` in the order to run them: cells in the order they first appear (environments are built and
    evicted cell by cell), and within a cell the widest jobs first, so that jobs of one width run side by side."""
    first: dict[str, int] = {}
    for i, job in enumerate(jobs):
        first.setdefault(job.cell_name, i)
    return sorted(range(len(jobs)), key=lambda i: (first[jobs[i].cell_name], -jobs[i].world_size, i))


class Session:
    """Runs jobs through the pipeline's steps (see the module docstring); safe to call from many threads."""

    def __init__(
        self,
        environments: Environments,
        *,
        resume: Resume = NO_RESUME,
        observers: Sequence[Observer] = (),
        repeat: int = 1,
        launch_mode: str | None = None,
    ) -> None:
        self.environments, self.resume, self.observers, self.repeat = environments, resume, list(observers), repeat
        self.launch_mode = launch_mode  # cold | warm; None: $BUGMATRIX_LAUNCH_MODE, else the default
        self._lock = threading.Lock()

    def run(self, jobs: list[Job], cores: int = 1) -> list[Result]:
        """Every job, at most `cores` ranks at a time (a 2-rank job holds 2 cores); results in job order.

        Jobs run in `execution_order`: cell by cell as planned, the widest jobs of a cell first. Cores are handed out
        first come, first served (no job starves), so a plan that alternates 1- and 2-rank jobs would leave a core
        idle during every 1-rank job that a 2-rank job waits behind."""
        self.environments.expect(jobs)
        for observer in self.observers:
            observer.run_started(jobs)
        order = execution_order(jobs)
        try:
            done = run_scheduled([jobs[i] for i in order], self.run_job, cost=lambda job: job.world_size, cores=cores)
        finally:
            self.environments.close()
        by_index = dict(zip(order, done, strict=True))  # `order` is a permutation of the jobs' indices
        return [by_index[i] for i in range(len(jobs))]

    def run_job(self, job: Job) -> Result:
        """One job's result, handed to every observer before it is returned."""
        with self._lock:
            for observer in self.observers:
                observer.job_started(job)
        result, reused = self._result(job)
        self.settle(job, result, reused)
        return result

    def settle(self, job: Job, result: Result, reused: bool = False) -> None:
        """Hand a job's result to the observers (also for a result decided before the pipeline, e.g. a bisect
        probe whose cell cannot be formed)."""
        self.environments.done(job)
        with self._lock:
            for observer in self.observers:
                observer.result_ready(job, result, reused)

    def _result(self, job: Job) -> tuple[Result, bool]:
        missing = device_missing(job.device, job.world_size)
        if missing:
            return skip_result(job, missing), False
        pins = self.environments.pins(job)
        fprint = fingerprint(job, pins, self.repeat) if pins else ""
        pool = pool_of(job, pins) if pins else ""  # the same for any --repeat: tallies pool across runs
        earlier = self.resume.lookup(job, fprint)
        if earlier is not None:  # what it observed still stands; what is expected of it is today's rules' call
            return expected_for(job.case.spec.variants[job.variant], earlier), True
        env, problem, versions = self.environments.get(job)
        if env is None:
            result = infra_result(job, problem, versions)
        else:
            result = execute_repeated(job, env, self.repeat, self.launch_mode)
        identity = {"fingerprint": fprint, "digest": run_digest(job.case, job.variant), "pool": pool}
        return result.model_copy(update=identity), False
