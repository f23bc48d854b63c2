"""How much of the matrix the record holds: each job `bugmatrix run --all-cells` plans, and whether the record has a
row for it measured with the committed script (the same case x variant x world size x device x cell, and the digest
the case gives today: `run_digest`). A row counts whether it is a verdict (reproduced, fixed, skip, flaky) or a
non-verdict that says why (error, timeout, infra: its reason line); a job with none is *missing*, and a job whose
rows all measured an older script is missing too (its history is superseded).

    jobs = plan_cells(cases, matrix, Selection(devices=("cpu",), all_cells=True))
    cells = coverage(jobs, record.rows)        # per cell, in plan order: planned, verdicts, non-verdicts, missing
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.model.job import SETTLED, Job, run_digest

VERDICTS = frozenset(outcome.value for outcome in SETTLED)  # reproduced, fixed, skip, flaky


@dataclass
class CellCoverage:
    """One cell's planned jobs and what the record holds for them."""

    cell: str
    planned: int = 0
    verdicts: int = 0
    non_verdicts: Counter = field(default_factory=Counter)  # outcome -> jobs whose only current rows are that
    missing: list[str] = field(default_factory=list)  # item ids (case::variant[device-nproc]) with no current row

    @property
    def held(self) -> int:
        """Jobs with a current row, verdict or not."""
        return self.planned - len(self.missing)


def coverage(jobs: Iterable[Job], rows: Iterable[dict]) -> list[CellCoverage]:
    """Each planned job's cell tallied against `rows` (record rows) measured with the job's current digest; cells in
    the order the jobs come."""
    outcomes: dict[tuple, set[str]] = defaultdict(set)
    for row in rows:
        outcomes[(row["case"], row["variant"], row["nproc"], row["device"], row["cell"], row.get("digest", ""))].add(
            row["outcome"]
        )
    digests: dict[tuple[str, str], str] = {}
    cells: dict[str, CellCoverage] = {}
    for job in jobs:
        name = job.cell_name
        cell = cells.setdefault(name, CellCoverage(name))
        cell.planned += 1
        key = (job.case.id, job.variant)
        if key not in digests:
            digests[key] = run_digest(job.case, job.variant)
        where = (job.case.id, job.variant, job.nproc, job.device, name)
        # a row that recorded no digest (an older bugmatrix's) is taken as current, as the readers take it
        found = outcomes.get((*where, digests[key]), set()) | outcomes.get((*where, ""), set())
        if found & VERDICTS:
            cell.verdicts += 1
        elif found:
            cell.non_verdicts[sorted(found)[0] if len(found) == 1 else "+".join(sorted(found))] += 1
        else:
            cell.missing.append(job.id)
    return list(cells.values())
