"""A bugmatrix run as a pipeline of small steps: plan jobs -> check each can run -> launch -> classify -> result.

Each step takes the previous step's output, so each can be tested alone:
    jobs = plan(cases, devices)                   # case x variant x world size x device
    reason = unrunnable(job, env)                 # missing package or device -> a skip, never a launch
    result = execute(job, env)                    # torchrun launch, classification, expectation
    result = execute_repeated(job, env, K)        # K launches; disagreement -> flaky, with the tally
    results = run_jobs(jobs, env, cores=N)        # all of it, scheduled by cores (a 2-rank job takes 2)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from harness.launch.classify import classify
from harness.launch.expectations import expected_outcome
from harness.launch.interpreter import Environment, cuda_available
from harness.launch.torchrun import abort_all, allow_launches, launch
from harness.model.case import Case
from harness.model.job import fingerprint, local_pins
from harness.model.outcome import Outcome, combine_repeats
from harness.model.result import Result, excerpt

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class Job:
    """One launch to make: a case's variant at one world size on one device."""

    case: Case
    variant: str
    nproc: int
    device: str

    @property
    def id(self) -> str:
        return f"{self.case.id}::{self.variant}[{self.device}-{self.nproc}]"


def plan(cases: Iterable[Case], devices: Iterable[str] | None = None) -> list[Job]:
    """Every case x variant x declared world size x declared device (limited to `devices` when given)."""
    wanted = set(devices) if devices is not None else None
    return [
        Job(case, variant, nproc, device)
        for case in cases
        for variant in case.spec.variants
        for device in case.spec.devices
        if wanted is None or device in wanted
        for nproc in case.spec.nproc
    ]


def default_devices() -> list[str]:
    """The device a plain run uses: cuda where this machine has a GPU, else cpu."""
    return ["cuda"] if cuda_available() else ["cpu"]


def unrunnable(job: Job, env: Environment) -> str | None:
    """Why `job` cannot run in `env` on this machine (a missing package or device), or None when it can."""
    missing = env.missing(job.case.spec.packages)
    if missing:
        return f"not installed in {env.python}: {', '.join(missing)}"
    if job.device == "cuda" and not cuda_available():
        return "needs a CUDA device; this machine has none"
    return None


def execute(job: Job, env: Environment) -> Result:
    """Launch `job` under torchrun in `env` and return its classified, expectation-checked result."""
    spec, variant = job.case.spec, job.case.spec.variants[job.variant]
    expected = expected_outcome(variant, env, job.nproc, job.device)
    base = dict(
        case=job.case.id, variant=job.variant, nproc=job.nproc, device=job.device, expected=expected,
        versions=env.versions_of(spec.packages), python=env.python_version, started_at=time.time(),
    )
    reason = unrunnable(job, env)
    if reason:
        return Result(outcome=Outcome.SKIP, reason=reason, launched=False, **base)
    args = ["--device", job.device, *variant.args]
    launched = launch(env.python, job.case.script.resolve(), args, job.nproc, spec.timeout)
    outcome, why, ranks = classify(launched, spec.signature_of(job.variant))
    logs = "\n".join(
        f"--- rank {r} ---\n{excerpt(rec.log, 1500)}" for r, rec in sorted(launched.ranks.items())
    )
    if outcome in (Outcome.ERROR, Outcome.TIMEOUT) or not any(rec.log for rec in launched.ranks.values()):
        logs += f"\n--- torchrun ---\n{excerpt(launched.agent_log, 1500)}"
    stacks = "\n".join(
        f"--- rank {r} ---\n{rec.stacks}" for r, rec in sorted(launched.ranks.items()) if rec.stacks
    )
    return Result(
        outcome=outcome, reason=why, ranks=ranks, duration_s=round(launched.duration_s, 2),
        log_excerpt=excerpt(logs), stacks=stacks, launched=True, **base,
    )


def execute_repeated(job: Job, env: Environment, repeat: int = 1) -> Result:
    """`execute` `repeat` times: the common outcome when all agree, else `flaky` with the tally in its reason.

    The evidence (logs, stacks, ranks) is the last launch's, or for a flaky job the last launch that disagreed
    with the first. A job that cannot run here is not repeated.
    """
    first = execute(job, env)
    results = [first]
    while first.launched and len(results) < repeat:
        results.append(execute(job, env))
    if repeat <= 1 or not first.launched:
        return first
    tallies: dict[str, int] = {}
    for r in results:
        tallies[r.outcome.value] = tallies.get(r.outcome.value, 0) + 1
    outcome = combine_repeats([r.outcome for r in results])
    if outcome is Outcome.FLAKY:
        odd = [r for r in results if r.outcome is not first.outcome][-1]
        shown = first.model_copy(update={"tallies": tallies})
        reason = f"flaky: {shown.tally}; e.g. {odd.outcome.value}: {odd.reason}"
        evidence = odd
    else:
        reason, evidence = results[-1].reason, results[-1]
    return evidence.model_copy(update={
        "outcome": outcome, "reason": reason, "tallies": tallies, "started_at": first.started_at,
        "duration_s": round(sum(r.duration_s for r in results), 2),
    })


def run_jobs(
    jobs: list[Job],
    env: Environment,
    cores: int = 1,
    on_result: Callable[[Result], None] | None = None,
    repeat: int = 1,
    recorded: Callable[[str], Result | None] | None = None,
) -> list[Result]:
    """Execute `jobs` in `env` (each `repeat` times), at most `cores` ranks at a time; results in job order.

    Each result carries its fingerprint (see `harness/model/job.py`). `recorded(fingerprint)` may return an earlier
    result that still stands (a resumed run): it is used as is, nothing is launched and `on_result` is not called.
    """
    def one(job: Job) -> Result:
        pins = local_pins(env.python, env.versions_of(job.case.spec.packages))
        fprint = fingerprint(job, pins, repeat)
        earlier = recorded(fprint) if recorded else None
        if earlier is not None:
            return earlier
        result = execute_repeated(job, env, repeat).model_copy(update={"fingerprint": fprint})
        if on_result:
            on_result(result)
        return result

    return run_scheduled(jobs, one, cost=lambda job: job.nproc, cores=cores)


def run_scheduled(items: list[T], work: Callable[[T], R], cost: Callable[[T], int], cores: int) -> list[R]:
    """`work(item)` for every item on up to `cores` threads, each holding min(cost(item), cores) cores while it
    runs; results in item order. Ctrl-C/SIGTERM (any exception) kills every launch in flight and starts no more."""
    budget = _CoreBudget(cores)

    def held(item: T) -> R:
        with budget.take(min(max(1, cost(item)), max(1, cores))):
            return work(item)

    allow_launches()
    pool = ThreadPoolExecutor(max_workers=max(1, cores))
    try:
        return list(pool.map(held, items))
    except BaseException:
        abort_all()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def run_ok(results: list[Result]) -> bool:
    """True when every launched result's outcome equals its expected one and no cell was `infra`."""
    return all(r.ok for r in results if r.launched or r.outcome is Outcome.INFRA)


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
