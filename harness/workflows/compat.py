"""`bugmatrix compat`'s walk: probe the compatibility grid through the session pipeline, one torch at a time, every
probe recorded in the store (what the probes are, their cells, their verdicts and the measured table are the
reading side, harness/analysis/compat.py).

    walk(grid, probes, Probing(matrix, envs, store, run_id, cores=2, say=print), disk_budget=None)

The walk goes one torch at a time (every partner of that torch, then the next torch), so that with a disk budget
(`CellEnvironments`) the environments and cached stacks of finished torches are evicted before the next torch is
downloaded. Resuming (`CompatResume`): a probe whose fingerprint (probe files, pins) has a verdict in the store is not
run again; unlike a case, a resolver refusal, an import failure or a death after the imports is a verdict here (it
is what the table measures), so those are reused too; any other `infra` (a download failure), a hang or a crash
before the call is tried again.
"""

from __future__ import annotations

from harness.analysis.compat import LANES, VARIANT, Grid, Kind, probe_cell, verdict
from harness.model.case import Case
from harness.model.cell import COMPAT_CELLS, Cell
from harness.model.common import logical_name
from harness.model.job import Job
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.model.version import PinVersion
from harness.session.pipeline import MatrixEnvironments, Recorder, Resume, Session
from harness.workflows.probing import Probing


class CompatResume(Resume):
    """Resume for probes: a settled case outcome, or an `infra`/`error` result that is a verdict (a resolver
    refusal, an import failure, a death after the imports), is reused; other infra (downloads), hangs and crashes
    before the call are tried again (they may be the machine's load)."""

    def lookup(self, job: Job, fprint: str) -> Result | None:
        found = super().lookup(job, fprint)
        if found is None and not self.redo and fprint:
            earlier = self.store.standing(
                job.cell_name, job.case.id, job.variant, fprint, (Outcome.INFRA, Outcome.ERROR, Outcome.TIMEOUT)
            )
            if earlier is not None and verdict(earlier)[0] in (Kind.REFUSED, Kind.NO_IMPORT, Kind.FAILS_USED):
                return earlier
        return found


def _job(probe: Case, cell: Cell) -> Job:
    return Job(case=probe, variant=VARIANT, nproc=1, device="cpu", cell=cell)


def recorded_works(latest: list[tuple[str, Result]], torch: str) -> set[str]:
    """The fbgemm-gpu releases whose recorded fbgemm probe works with `torch` (the torchrec lane walked without the
    fbgemm lane pairs each torchrec with these, as the whole walk pairs it with what it just probed)."""
    out = set()
    for _, result in latest:
        if result.case != LANES["fbgemm"].probe or verdict(result)[0] is not Kind.WORKS:
            continue
        versions = {logical_name(name): text for name, text in result.versions.items()}
        public = PinVersion.parse(versions.get("torch", "")).public_release
        if public is not None and str(public) == torch and "fbgemm-gpu" in versions:
            out.add(versions["fbgemm-gpu"])
    return out


def walk(
    grid: Grid, probes: dict[str, Case], probing: Probing, disk_budget: int | None = None
) -> list[tuple[Job, Result]]:
    """Probe the whole grid through the session pipeline, one torch at a time (see the module docstring); every
    result is recorded in `probing.store` under `probing.run_id`. Returns (job, result) in the order run.

    With `disk_budget`, usage is checked once per torch, after its probes (`probing.envs` itself should have no
    budget: uv's cache is shared, and a budget checked before every build would clean the torch stack the next cell
    of the same torch needs)."""
    done: list[tuple[Job, Result]] = []
    resume = CompatResume(probing.store, redo=probing.redo)

    def run(jobs: list[Job]) -> list[Result]:
        if not jobs:
            return []
        session = Session(
            MatrixEnvironments(probing.envs),
            resume=resume,
            repeat=probing.repeat,
            launch_mode=probing.launch_mode,
            observers=[Recorder(probing.store, probing.run_id), *probing.observers],
        )
        results = session.run(jobs, cores=probing.cores)
        done.extend(zip(jobs, results, strict=True))
        return results

    # without the fbgemm lane, the fbgemm verdicts the store holds pair the torchrec probes; the walk adds none
    recorded = probing.store.latest(kinds=COMPAT_CELLS) if "fbgemm" not in probes else []
    for torch in grid.torch:
        jobs = []
        for lane in ("fbgemm", "lightning", "litgpt"):
            if lane in probes and lane in grid.partners:
                package = LANES[lane].packages[-1]
                jobs += [
                    _job(probes[lane], probe_cell(probing.matrix, {"torch": torch, package: v}))
                    for v in grid.partners[lane]
                ]
        results = run(jobs)
        works = (
            {
                job.cell.pins.get("fbgemm-gpu")
                for job, r in zip(jobs, results, strict=True)
                if job.cell and job.case.id == LANES["fbgemm"].probe and verdict(r)[0] is Kind.WORKS
            }
            if "fbgemm" in probes
            else recorded_works(recorded, torch)
        )
        if "torchrec" in probes and grid.torchrec_of:
            run(
                [
                    _job(
                        probes["torchrec"],
                        probe_cell(probing.matrix, {"torch": torch, "fbgemm-gpu": fb, "torchrec": rec}),
                    )
                    for fb, recs in grid.torchrec_of.items()
                    for rec in recs
                    if fb in works
                ]
            )
        tally: dict[str, int] = {}
        for job, result in done:
            if job.cell and job.cell.pins.get("torch") == torch:
                kind = verdict(result)[0].value
                tally[kind] = tally.get(kind, 0) + 1
        # only a torch whose probes built something evicts: one whose verdicts were all reused made nothing to
        # evict, and cleaning uv's cache then would only throw away what another run is about to link from
        evicted = disk_budget is not None and bool(probing.envs.evictable()) and probing.envs.fit(disk_budget)
        probing.say(
            f"torch {torch}: "
            + ", ".join(f"{n} {k}" for k, n in sorted(tally.items()))
            + ("; evicted its environments and cached stacks" if evicted else "")
        )
    return done
