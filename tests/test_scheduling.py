"""Scheduling by cores: a job holds min(nproc, cores) cores, and jobs start in order (no starvation)."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from harness.launch.torchrun import LaunchAborted, allow_launches, refuse_if_interrupted
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


def test_jobs_of_one_width_run_side_by_side_not_alternating(make_case, env) -> None:
    """A plan that alternates 1- and 2-rank jobs (variant by variant) runs, within its cell, the 2-rank jobs first and
    then the 1-rank jobs two at a time: on 2 cores no core waits idle behind a 2-rank job. Results stay in plan
    order."""
    from harness.session.pipeline import LocalEnvironment, Session, execution_order
    from harness.session.plan import Selection, plan_local

    case = make_case(
        "import time\ntime.sleep(1.5)\n",
        nproc=[1, 2],
        variants={v: {"expect": [{"outcome": "fixed"}]} for v in ("a", "b", "c", "d")},
    )
    jobs = plan_local([case], Selection(devices=("cpu",)))
    assert [j.nproc for j in jobs] == [1, 2] * 4
    assert [jobs[i].nproc for i in execution_order(jobs)] == [2] * 4 + [1] * 4
    results = Session(LocalEnvironment(env)).run(jobs, cores=2)
    assert [(r.variant, r.nproc) for r in results] == [(j.variant, j.nproc) for j in jobs]
    singles = [(r.started_at, r.started_at + r.duration_s) for r in results if r.nproc == 1]
    # each 1-rank job ran beside another one (in plan order, each would have waited alone behind a 2-rank job)
    assert all(any(a < d and c < b for c, d in singles if (c, d) != (a, b)) for a, b in singles), singles


def test_an_interrupt_begins_no_job_that_was_queued_or_waiting_for_cores() -> None:
    """Ctrl-C / SIGTERM while a 2-core job runs: the jobs behind it (one waiting for its cores, others queued) never
    begin. They used to begin as soon as the killed job gave its cores back, and the interrupted run waited for
    their steps before the launch (a cell's environment to make: seconds, tens of seconds on a loaded machine)."""
    begun: list[str] = []
    running = threading.Event()

    def work(item: str) -> str:
        begun.append(item)
        if item == "wide":
            running.set()
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:  # a launch in flight, until abort_all kills it
                refuse_if_interrupted()
                time.sleep(0.01)
        return item

    def interrupt() -> None:
        running.wait(30)
        time.sleep(0.2)  # the next job is waiting for the cores
        signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)  # as Ctrl-C (SIGTERM: the same path)

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as harness/cli.py installs it
    threading.Thread(target=interrupt, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            run_scheduled(
                ["wide", "narrow-1", "narrow-2", "narrow-3"],
                work,
                cost=lambda item: 2 if item == "wide" else 1,
                cores=2,
            )
        assert begun == ["wide"]
        with pytest.raises(LaunchAborted):  # and nothing else starts in this run
            refuse_if_interrupted()
    finally:
        signal.signal(signal.SIGINT, previous)
        allow_launches()  # as the next run does: the other tests of this process launch
