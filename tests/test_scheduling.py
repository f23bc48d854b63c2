"""Scheduling by cores: a job holds min(nproc, cores) cores, and jobs start in order (no starvation)."""

from __future__ import annotations

import threading
import time

from harness.session.scheduler import run_scheduled


def test_two_core_jobs_are_not_overtaken_and_the_budget_holds() -> None:
    costs = [1, 1, 2, 1, 1, 1, 2, 1]
    started: list[int] = []
    running = {"cores": 0, "peak": 0}
    lock = threading.Lock()

    def work(i: int) -> int:
        with lock:
            started.append(i)
            running["cores"] += costs[i]
            running["peak"] = max(running["peak"], running["cores"])
        time.sleep(0.05)
        with lock:
            running["cores"] -= costs[i]
        return i * 10

    results = run_scheduled(list(range(len(costs))), work, cost=lambda i: costs[i], cores=2)
    assert results == [i * 10 for i in range(len(costs))]
    assert running["peak"] <= 2
    assert started == sorted(started)  # first come, first served


def test_a_job_wider_than_the_machine_still_runs() -> None:
    assert run_scheduled([4], lambda n: n, cost=lambda n: n, cores=2) == [4]
