"""Executing one job in one environment: can it run here? -> torchrun launch -> classify -> expected outcome.

    reason = unrunnable(job, env)                 # missing package or device -> a skip, never a launch
    result = execute(job, env)                    # torchrun launch, classification, expectation
    result = execute_repeated(job, env, K)        # K launches; reproduced and fixed both -> flaky, with the tally

Planning, resuming, environments, scheduling and recording are the session's (harness/session/pipeline.py).
"""

from __future__ import annotations

import os
import time
from typing import Any

from harness.launch.classify import classify
from harness.launch.interpreter import Environment, cuda_available, gpu_count
from harness.launch.torchrun import RankRecord, launch
from harness.model.expectations import expected_outcome
from harness.model.job import Job
from harness.model.outcome import CLEAN, Outcome, combine_repeats
from harness.model.result import Result, excerpt


def default_devices() -> list[str]:
    """The device a plain run uses: cuda where this machine has a GPU, else cpu."""
    return ["cuda"] if cuda_available() else ["cpu"]


def unrunnable(job: Job, env: Environment) -> str | None:
    """Why `job` cannot run in `env` on this machine (a missing package or device), or None when it can."""
    missing = env.missing(job.case.spec.packages)
    if missing:
        return f"not installed in {env.python}: {', '.join(missing)}"
    return device_missing(job.device, job.world_size)


# Read only to say that it is ignored: it once let ranks share a GPU, which no case can do (see `device_missing`).
DROPPED_RANKS_PER_GPU = "BUGMATRIX_RANKS_PER_GPU"


def device_missing(device: str, nproc: int = 1) -> str | None:
    """Why this machine cannot run `nproc` ranks on `device`, or None when it can: `cuda` needs a GPU, and one GPU
    per rank — NCCL (>= 2.5) refuses two ranks of a communicator on one GPU ("Duplicate GPU detected: rank 1 and
    rank 0 both on CUDA device ...", ncclInvalidUsage; NVIDIA/nccl#418), and the case scripts pin rank R to
    `cuda:LOCAL_RANK` (rank 1 of two on one GPU: "invalid device ordinal"). Such a job is a `skip` saying so, decided
    before any launch, never an `error` blamed on the case. There is no override: $BUGMATRIX_RANKS_PER_GPU, which
    once let ranks share a GPU, only ever produced errors (measured on an H100, 2026-11-24) and is ignored."""
    if device != "cuda":
        return None
    gpus = gpu_count()
    if gpus == 0:
        return "needs a CUDA device; this machine has none"
    if nproc > gpus:
        ignored = (
            f"; ${DROPPED_RANKS_PER_GPU} is ignored: ranks cannot share a GPU"
            if os.environ.get(DROPPED_RANKS_PER_GPU)
            else ""
        )
        return (
            f"world size {nproc} needs {nproc} GPUs for nccl (one rank per GPU: NCCL refuses two ranks on one "
            f"device, 'Duplicate GPU detected'); this machine has {gpus}{ignored}"
        )
    return None


def execute(job: Job, env: Environment, mode: str | None = None) -> Result:
    """Launch `job` in `env` and return its classified, expectation-checked result. `mode` is how (cold: under
    torchrun; warm: forked from a warm parent; None: $BUGMATRIX_LAUNCH_MODE, else the default); a case or variant
    that says `cold:` always launches cold. The result says how it was launched (`launch`)."""
    spec, variant = job.case.spec, job.case.spec.variants[job.variant]
    expected = expected_outcome(variant, env, job.nproc, job.device)
    base: dict[str, Any] = dict(
        case=job.case.id,
        variant=job.variant,
        nproc=job.nproc,
        device=job.device,
        expected=expected,
        versions=env.versions_of(spec.recorded_packages),
        python=env.python_version,
        started_at=time.time(),
        extra=job.extra,
    )
    reason = unrunnable(job, env)
    if reason:
        return Result(outcome=Outcome.SKIP, reason=reason, launched=False, **base)
    args = ["--device", job.device, *variant.args]
    signature = spec.signature_of(job.variant)
    try:
        launched = launch(
            env.python,
            job.case.script.resolve(),
            args,
            job.nproc,
            spec.timeout,
            signature=signature,
            # a case that says `cold:`, and one of several nodes (one warm parent forks one node), launch cold
            mode="cold" if spec.cold_of(job.variant) or job.nnodes > 1 else mode,
            nnodes=job.nnodes,
        )
    except OSError as exc:  # the environment vanished under the run (pruned, deleted): this job cannot say
        return Result(outcome=Outcome.INFRA, reason=f"could not start {env.python}: {exc}", launched=False, **base)
    outcome, why, ranks = classify(launched, signature)
    logs = "\n".join(_rank_excerpt(r, rec) for r, rec in sorted(launched.ranks.items()))
    if outcome in (Outcome.ERROR, Outcome.TIMEOUT, Outcome.INFRA) or not any(r.log for r in launched.ranks.values()):
        logs += f"\n--- torchrun ---\n{excerpt(launched.agent_log, 1500)}"
    if launched.strays:
        shown = [stray[:120] for stray in launched.strays[:5]]
        more = [f"... and {len(launched.strays) - 5} more"] if len(launched.strays) > 5 else []
        logs += "\n--- stray processes killed after the launch ---\n" + "\n".join(shown + more)
    stacks = "\n".join(f"--- rank {r} ---\n{rec.stacks}" for r, rec in sorted(launched.ranks.items()) if rec.stacks)
    return Result(
        outcome=outcome,
        reason=why,
        ranks=ranks,
        duration_s=round(launched.duration_s, 2),
        log_excerpt=excerpt(logs),
        stacks=stacks,
        launched=True,
        **{**base, "extra": {"launch": launched.mode, **job.extra}},
    )


def _rank_excerpt(rank: int, record: RankRecord) -> str:
    """A rank's log for the result: its last lines; for a truncated log, its size, first lines and signature line."""
    if not record.log_truncated:
        return f"--- rank {rank} ---\n{excerpt(record.log, 1500)}"
    head = record.log[:400]
    head = head[: head.rfind("\n") + 1] if "\n" in head else head
    seen = f"[first signature line] {record.seen}\n" if record.seen else ""
    return (
        f"--- rank {rank} --- [{record.log_note}]\n{head}[...]\n{seen}"
        f"{excerpt(record.log.rsplit(' are kept ...]', 1)[-1].lstrip(), 1200)}"
    )


def execute_repeated(job: Job, env: Environment, repeat: int = 1, mode: str | None = None) -> Result:
    """`execute` `repeat` times (each launched as `mode` says), combined by `combine_repeats`: the bug's own
    outcomes (reproduced, fixed) decide; an error, timeout, infra or skip among them is kept apart in the tallies
    and does not make the set `flaky` by itself (4 reproduced + 1 error: reproduced, tallies saying so).

    The evidence (logs, stacks, ranks) is the last launch with the set's outcome, or for a flaky job the last clean
    launch that disagreed with the first clean one. A job that cannot run here is not repeated; a launch the machine
    failed (`infra`) ends the repeats only when every launch so far was `infra` (the set measured nothing), else it
    counts among the others and the set goes on to `repeat` launches.
    """
    first = execute(job, env, mode)
    results = [first]
    while first.launched and len(results) < repeat:
        if all(r.outcome is Outcome.INFRA for r in results):  # the machine failed every launch: nothing measured
            break
        results.append(execute(job, env, mode))
    if repeat <= 1 or not first.launched:
        return first
    spent = {"started_at": first.started_at, "duration_s": round(sum(r.duration_s for r in results), 2)}
    if all(r.outcome is Outcome.INFRA for r in results):
        return results[-1].model_copy(update=spent)
    tallies: dict[str, int] = {}
    for r in results:
        tallies[r.outcome.value] = tallies.get(r.outcome.value, 0) + 1
    outcome = combine_repeats([r.outcome for r in results])
    shown = first.model_copy(update={"tallies": tallies}).tally
    if outcome is Outcome.FLAKY:
        clean = [r for r in results if r.outcome in CLEAN]
        evidence = [r for r in clean if r.outcome is not clean[0].outcome][-1]
        reason = f"flaky: {shown}; e.g. {evidence.outcome.value}: {evidence.reason}"
    else:
        evidence = [r for r in results if r.outcome is outcome][-1]
        odd = [r for r in results if r.outcome is not outcome]
        kept = f" [{shown}; e.g. {odd[-1].outcome.value}: {odd[-1].reason}]" if odd else ""
        reason = f"{evidence.reason}{kept}"
    return evidence.model_copy(update={"outcome": outcome, "reason": reason, "tallies": tallies, **spent})


def skip_result(job: Job, reason: str) -> Result:
    """The result of a job that cannot run on this machine: `skip`, not launched, no verdict on the bug."""
    return Result(
        case=job.case.id,
        variant=job.variant,
        nproc=job.nproc,
        device=job.device,
        outcome=Outcome.SKIP,
        expected=None,
        reason=reason,
        started_at=time.time(),
        launched=False,
        extra=job.extra,
    )


def infra_result(job: Job, problem: str, versions: dict[str, str] | None = None) -> Result:
    """The result of a job whose cell has no usable environment: `infra`, never a verdict on the bug."""
    return Result(
        case=job.case.id,
        variant=job.variant,
        nproc=job.nproc,
        device=job.device,
        outcome=Outcome.INFRA,
        expected=None,
        reason=problem[:2000],
        versions=dict(versions or {}),
        started_at=time.time(),
        launched=False,
        extra=job.extra,
    )
