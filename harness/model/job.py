"""A job (one launch to make) and what its result depends on: the fingerprint a resumed run matches.

A job is a case's variant at one world size on one device, in a matrix cell or (cell None) in the local
environment. Resuming: which earlier results still stand, so that a re-run launches only what is missing.

A result stands for its *fingerprint*: the case's files (case.yaml and script), the variant, world size and
device, the pins it ran with (a matrix cell's resolved environment key, or the interpreter and installed versions
of a local run) and the number of repeats. A later run with the same fingerprint reuses the newest recorded
result instead of launching again, but only when that result established something (`SETTLED`): an `error`,
`timeout` or `infra` result is always tried again. Editing a case, moving a pin or asking for more repeats changes
the fingerprint; `--redo` ignores what is recorded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from harness.model.case import Case
from harness.model.cell import Cell
from harness.model.common import item_id
from harness.model.outcome import Outcome

SETTLED = (Outcome.REPRODUCED, Outcome.FIXED, Outcome.SKIP, Outcome.FLAKY)
LOCAL_CELL = "local"  # the cell recorded for runs in the current (or --python) environment, outside the matrix


@dataclass(frozen=True)
class Job:
    """One launch to make: a case's variant at one world size on one device, in `cell` (None: locally)."""

    case: Case
    variant: str
    nproc: int
    device: str
    cell: Cell | None = None

    @property
    def id(self) -> str:
        """`case::variant[device-nproc]` (see `item_id`)."""
        return item_id(self.case.id, self.variant, self.device, self.nproc)

    @property
    def cell_name(self) -> str:
        """The cell this job's result is recorded under: the matrix cell's name, or `local`."""
        return self.cell.name if self.cell else LOCAL_CELL


def case_digest(case: Case) -> str:
    """A digest of the files that make up `case` (its metadata and its script)."""
    digest = hashlib.sha256()
    for path in sorted({case.folder / "case.yaml", case.script}):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def fingerprint(job: Job, pins: str, repeat: int = 1) -> str:
    """What a result of `job` depends on, as one hex string (`pins` identifies the environment)."""
    parts = [case_digest(job.case), job.variant, job.nproc, job.device, pins, max(1, repeat)]
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def local_pins(python: str, versions: dict[str, str]) -> str:
    """The pins of a run outside the matrix: the interpreter and the installed versions of the case's packages."""
    return json.dumps({"python": python, "versions": versions}, sort_keys=True)
