"""A job (one launch to make) and what its result depends on: the fingerprint a resumed run matches.

A job is a case's variant at one world size on one device (on the case's `nnodes` nodes of `nproc` ranks each),
in a matrix cell or (cell None) in the local environment. Resuming: which earlier results still stand, so that a
re-run launches only what is missing.

A result stands for its *fingerprint*: what decides the outcome of a launch (`run_digest`: the script, and from
case.yaml the packages, sources, timeout, failure signature and the variant's arguments), the variant, world size
and device, the pins it ran with (a matrix cell's resolved environment key, or the interpreter and installed
versions of a local run) and the number of repeats. A later run with the same fingerprint reuses the newest
recorded result instead of launching again, but only when that result established something (`SETTLED`): an
`error`, `timeout` or `infra` result is always tried again. Editing the script or any of those fields, moving a pin
or asking for more repeats changes the fingerprint; `--redo` ignores what is recorded.

A result also carries its *pool* (`pool_of`): the fingerprint less the number of repeats. Results with the same pool
are launches of the same job in the same environment, whatever `--repeat` asked, so their tallies add up across
runs (`contract.Store.pooled`): 5 repeats today and 10 tomorrow are 15 launches of one job, which a flaky verdict
(harness/analysis/flaky.py) reads as one tally. The fingerprint is unchanged by it.

What only describes or judges the bug — title, links, `evidence`, a variant's description and its `expect` rules —
is not in the fingerprint: `bugmatrix expect --write` rewriting the rules or an edit of the evidence must not throw
away every measurement of the case. A reused result's `expected` is evaluated again against the current rules
(`harness.model.expectations.expected_for`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from harness.model.case import Case
from harness.model.cell import LOCAL_CELL, Cell
from harness.model.common import item_id
from harness.model.outcome import Outcome

SETTLED = (Outcome.REPRODUCED, Outcome.FIXED, Outcome.SKIP, Outcome.FLAKY)


@dataclass(frozen=True)
class Job:
    """One launch to make: a case's variant at one world size on one device, in `cell` (None: locally)."""

    case: Case
    variant: str
    nproc: int
    device: str
    cell: Cell | None = None

    @property
    def nnodes(self) -> int:
        """How many nodes (torchrun agents) the job launches, each of `nproc` ranks: the case's `nnodes`."""
        return self.case.spec.nnodes

    @property
    def world_size(self) -> int:
        """Every rank of the launch, on all its nodes: the cores (or GPUs) it holds."""
        return self.nnodes * self.nproc

    @property
    def extra(self) -> dict[str, Any]:
        """The optional result fields (`harness/model/result.py` `OPTIONAL_FIELDS`) that every result of this job
        sets: `nnodes` for a job of several nodes, none for one node (its results are as they were before)."""
        return {"nnodes": self.nnodes} if self.nnodes > 1 else {}

    @property
    def id(self) -> str:
        """`case::variant[device-nproc]` (`[device-nnodesxnproc]` on several nodes; see `item_id`)."""
        return item_id(self.case.id, self.variant, self.device, self.nproc, self.nnodes)

    @property
    def cell_name(self) -> str:
        """The cell this job's result is recorded under: the matrix cell's name, or `local`."""
        return self.cell.name if self.cell else LOCAL_CELL


def run_digest(case: Case, variant: str) -> str:
    """A digest of what decides the outcome of launching `case`'s `variant`: the script's bytes, and the packages,
    sources, timeout, signature and arguments it runs with, a launch that must stay cold and a number of nodes
    other than one — not the title, links, evidence, descriptions or `expect` rules, which describe or judge the
    outcome without changing it."""
    spec = case.spec
    decides = {
        "packages": spec.packages,
        "sources": spec.sources,
        "timeout": spec.timeout,
        "signature": spec.signature_of(variant),
        "args": spec.variants[variant].args,
    }
    if spec.cold_of(variant):  # only when set: no result recorded before the field existed is superseded
        decides["launch"] = "cold"
    if spec.nnodes > 1:  # likewise: one node, the default, leaves every digest as it was
        decides["nnodes"] = spec.nnodes
    digest = hashlib.sha256(case.script.read_bytes())
    digest.update(json.dumps(decides, sort_keys=True).encode())
    return digest.hexdigest()


def _identity(job: Job, pins: str) -> list[object]:
    """What decides a launch of `job` with `pins`: the run digest, variant, world size, device and pins."""
    return [run_digest(job.case, job.variant), job.variant, job.nproc, job.device, pins]


def _hashed(parts: list[object], extra: dict[str, Any] | None) -> str:
    if extra:
        parts.append(sorted(extra.items()))
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:32]


def fingerprint(job: Job, pins: str, repeat: int = 1, extra: dict[str, Any] | None = None) -> str:
    """What a result of `job` depends on, as one hex string (`pins` identifies the environment; `extra`, the
    optional result fields that are set, `harness/model/result.py` `OPTIONAL_FIELDS`: none, the fingerprint they
    had before they existed)."""
    return _hashed([*_identity(job, pins), max(1, repeat)], extra)


def pool_of(job: Job, pins: str, extra: dict[str, Any] | None = None) -> str:
    """The repeat-free identity of a result of `job` (the module docstring): the fingerprint's parts less the
    number of repeats, as one hex string that is never a fingerprint."""
    return _hashed(["pool", *_identity(job, pins)], extra)


def local_pins(python: str, versions: dict[str, str]) -> str:
    """The pins of a run outside the matrix: the interpreter and the installed versions of the case's packages."""
    return json.dumps({"python": python, "versions": versions}, sort_keys=True)
