"""The environments of matrix cells during a run: each cell resolved and built once, whatever asks for it.

A cell whose pins cannot be resolved, or whose environment cannot be built or imported, is reported with the
resolver's or importer's message (its jobs become `infra`); the other cells go on. With a disk budget, environments
whose cells are finished are evicted, and uv's cache of big packages cleaned, before a new environment is built
while usage is over the budget.
"""

from __future__ import annotations

import threading

from harness.launch import warm
from harness.launch.interpreter import Environment, InterpreterError
from harness.matrix.basics import MatrixError
from harness.matrix.envcache import EnvCache, clean_cache, disk_tally, uv_cache_dir
from harness.matrix.expand import Matrix
from harness.matrix.resolve import ResolvedCell, resolve_cell
from harness.model.cell import Cell

CLEAN_WORTH = 1 << 30  # clean uv's cache only when it frees at least this much (1 GiB: a torch stack is 1-5 GiB)


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
        self.cache.hold(resolved.key)  # before the build: no other process's eviction deletes it from here on
        status = self.cache.build(resolved)
        if not status.ok:
            self.cache.release(resolved.key)
            return resolved, None, f"environment: {status.error}"
        try:
            return resolved, self.cache.environment(status.key), ""
        except InterpreterError as exc:
            return resolved, None, f"environment does not start: {exc}"

    def build_ahead(self, cell: Cell) -> None:
        """Build `cell`'s environment now, for jobs that will need it later; skipped (left to `get`) when a disk
        budget is set and usage is over it even after evicting finished cells."""
        if self.disk_budget is not None and self._fit(self.disk_budget)[1] > self.disk_budget:
            return
        self.get(cell)

    def cell_finished(self, cell: Cell) -> None:
        """`cell` has run all it will: an environment none of whose cells is left to run ends its warm parents
        (harness/launch/warm.py; one held per environment would grow with the cells a run walks, ~0.3-0.5 GiB each)."""
        with self._guard:
            self._finished.add(cell.name)
            done = [key for key, cells in self._cells_of.items() if cell.name in cells and cells <= self._finished]
        for key in done:
            warm.retire(under=self.cache.path(key))

    def evictable(self) -> set[str]:
        """Environments every one of whose cells has finished (a key shared by a running cell is kept)."""
        with self._guard:
            return {key for key, cells in self._cells_of.items() if cells <= self._finished}

    def _fit_budget(self) -> None:
        self.fit(self.disk_budget or 0)

    def fit(self, budget: int) -> bool:
        """When usage (environments + uv's cache) is over `budget`: evict the environments of finished cells, then,
        if still over and the cache holds at least `CLEAN_WORTH` that no environment links, clean the big packages
        from uv's cache. True when something was evicted. (A walk that knows its own phases, like `bugmatrix
        compat` going one torch at a time, calls this between phases instead of giving a budget that is checked
        before every build.)"""
        return self._fit(budget)[0]

    def _fit(self, budget: int) -> tuple[bool, int]:
        """`fit`, and the usage it leaves: each folder walked once per measurement (uv's cache is the big walk)."""
        usage, _ = self._usage()
        if usage <= budget:
            return False, usage
        for key in sorted(self.evictable()):
            self.cache.remove(key)  # kept when another process holds it (see EnvCache.hold)
        usage, loose = self._usage()
        if usage > budget and loose >= CLEAN_WORTH:
            # environments keep their hardlinks; only later cells would download again. A cache whose wheels
            # environments still link (another run's, in a shared folder) frees nothing when cleaned: left alone
            clean_cache()
            usage, _ = self._usage()
        return True, usage

    def _usage(self) -> tuple[int, int]:
        """(bytes used by the environments and uv's cache, bytes of uv's cache no environment links)."""
        envs, _ = disk_tally(self.cache.root)
        cache_dir = uv_cache_dir()
        cache, loose = disk_tally(cache_dir) if cache_dir else (0, 0)
        return envs + cache, loose
