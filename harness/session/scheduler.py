"""Running work items on a budget of cores: a 2-rank job holds 2 cores, first come, first served.

    results = run_scheduled(items, work, cost=lambda job: job.nproc, cores=N)   # results in item order

Ctrl-C / SIGTERM (any exception) kills every launch in flight and starts no more: a job not yet begun, queued or
waiting for cores, never begins (its steps before the launch, such as making its cell's environment, can take
seconds that nothing aborts, and the interrupted run would wait for them). An error in one item's work (a store
whose disk is full) does so at once, not when the results reach that item, and is what `run_scheduled` raises.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from harness.launch.torchrun import LaunchAborted, abort_all, allow_launches, refuse_if_interrupted

T = TypeVar("T")
R = TypeVar("R")


def run_scheduled(items: Sequence[T], work: Callable[[T], R], cost: Callable[[T], int], cores: int) -> list[R]:
    """`work(item)` for every item on up to `cores` threads, each holding min(cost(item), cores) cores while it
    runs; results in item order. Ctrl-C/SIGTERM (any exception) kills every launch in flight and starts no more; an
    item's error does so as soon as it happens, and is raised rather than the aborted launches' `LaunchAborted`."""
    budget = _CoreBudget(cores)
    failed: list[BaseException] = []  # the items' own errors, first first (not the aborts they caused)

    def held(item: T) -> R:
        refuse_if_interrupted()  # a queued job a thread takes up after the interrupt
        with budget.take(min(max(1, cost(item)), max(1, cores))):
            refuse_if_interrupted()  # a job that waited for the cores the interrupted launches held
            try:
                return work(item)
            except LaunchAborted:
                raise
            except BaseException as exc:
                failed.append(exc)
                abort_all()
                raise

    allow_launches()
    pool = ThreadPoolExecutor(max_workers=max(1, cores))
    try:
        return list(pool.map(held, items))
    except LaunchAborted:  # a launch killed because an item failed: that failure is what to report
        abort_all()
        if failed:
            raise failed[0] from None
        raise
    except BaseException:
        abort_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


class _CoreBudget:
    """Cores handed out first come, first served: a job needing 2 cores is not overtaken forever by 1-core jobs."""

    def __init__(self, cores: int) -> None:
        self._free = max(1, cores)
        self._cond = threading.Condition()
        self._next_ticket = 0
        self._serving = 0

    def take(self, n: int) -> _Held:
        return _Held(self, n)


class _Held:
    def __init__(self, budget: _CoreBudget, n: int) -> None:
        self.budget, self.n = budget, n

    def __enter__(self) -> None:
        b = self.budget
        with b._cond:
            ticket = b._next_ticket
            b._next_ticket += 1
            b._cond.wait_for(lambda: b._serving == ticket and b._free >= self.n)
            b._free -= self.n
            b._serving += 1
            b._cond.notify_all()

    def __exit__(self, *exc: object) -> None:
        with self.budget._cond:
            self.budget._free += self.n
            self.budget._cond.notify_all()
