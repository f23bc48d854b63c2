"""Comparing two runs, like `asv compare`: new fixes, new regressions, changed errors.

Results are matched on (case, variant, world size, device, cell). A *regression* is a result that was `fixed` and
is now `reproduced` (the bug came back); a *fix* the reverse. A change into or out of error/infra/timeout/skip is
a *changed error*: the harness could not say, so it is neither. A result that became `flaky` (its repeats
disagreed, `--repeat K`) is *flaky*, listed with its tally and never counted as a regression: the bug did not
clearly come back, the case needs attention. A regression is *unexpected* when the newer result's expected
outcome is not `reproduced` (the case's metadata does not allow it); only those fail `compare`.

`launch_parity` compares two sets of results of the same jobs launched two ways (cold under torchrun, warm forked
from a warm parent): matched by job and environment (`job_key`, not by cell name), each pair equal or not by
outcome. The nightly's aggregate step compares its cold shard with the warm one, and tools/warm_parity.py a store
with the committed record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from harness.model.common import item_id
from harness.model.outcome import Outcome
from harness.model.result import Result

Key = tuple[str, str, int, str, str]
FIX, REGRESSION, FLAKY, CHANGED = "fixed", "regressed", "flaky", "changed"


@dataclass(frozen=True)
class Change:
    """One result whose outcome differs between the two runs."""

    kind: str
    case: str
    variant: str
    nproc: int
    device: str
    cell: str
    before: Outcome | None
    after: Outcome | None
    expected: Outcome | None
    versions: dict[str, str]
    tally: str = ""  # for a flaky result: how often each outcome came up

    @property
    def unexpected(self) -> bool:
        """A regression the case's expectations do not allow."""
        return self.kind == REGRESSION and self.expected is not Outcome.REPRODUCED

    @property
    def item(self) -> str:
        return f"{self.cell}: {item_id(self.case, self.variant, self.device, self.nproc)}"


def _key(cell: str, r: Result) -> Key:
    return (r.case, r.variant, r.nproc, r.device, cell)


def compare(old: list[tuple[str, Result]], new: list[tuple[str, Result]]) -> list[Change]:
    """Every result whose outcome changed from `old` to `new` (present in both), regressions first."""
    before = {_key(c, r): r for c, r in old}
    changes = []
    for cell, r in new:
        prev = before.get(_key(cell, r))
        if prev is None or prev.outcome == r.outcome:
            continue
        if prev.outcome is Outcome.FIXED and r.outcome is Outcome.REPRODUCED:
            kind = REGRESSION
        elif prev.outcome is Outcome.REPRODUCED and r.outcome is Outcome.FIXED:
            kind = FIX
        elif r.outcome is Outcome.FLAKY:
            kind = FLAKY
        else:
            kind = CHANGED
        changes.append(
            Change(
                kind,
                r.case,
                r.variant,
                r.nproc,
                r.device,
                cell,
                prev.outcome,
                r.outcome,
                r.expected,
                r.versions,
                r.tally,
            )
        )
    order = {REGRESSION: 0, FIX: 1, FLAKY: 2, CHANGED: 3}
    return sorted(changes, key=lambda c: (order[c.kind], c.item))


def comparison(changes: list[Change], old: str, new: str) -> dict[str, Any]:
    """The JSON form of a comparison: what `bugmatrix compare --json` prints and the nightly keeps as compare.json."""
    unexpected = [c for c in changes if c.unexpected]
    return {
        "old": old,
        "new": new,
        "unexpected_regressions": len(unexpected),
        "changes": [json.loads(json.dumps(c.__dict__ | {"unexpected": c.unexpected}, default=str)) for c in changes],
    }


# --- launch parity: the same jobs measured twice, launched two ways (cold, warm) ---------------------------------

JobKey = tuple[str, str, int, str, str, tuple[tuple[str, str], ...]]
UNRECORDED = "unrecorded"  # a launched result that predates the `launch` field (they were all cold)


def job_key(result: Result) -> JobKey:
    """The same job in the same environment: case, variant, world size, device, the script and settings it measured
    (`digest`) and the versions installed; not the cell's name (a local run's `local` is the record's `default`)."""
    return (
        result.case,
        result.variant,
        result.nproc,
        result.device,
        result.digest,
        tuple(sorted(result.versions.items())),
    )


def launch_of(result: Result) -> str:
    """How a launched result was launched: `cold` | `warm` (its optional field `launch`), else `unrecorded`."""
    return str(result.extra.get("launch") or UNRECORDED)


@dataclass(frozen=True)
class Pair:
    """One job measured on both sides: the reference's result (and its cell) and the other's."""

    reference_cell: str
    reference: Result
    cell: str
    other: Result

    @property
    def equal(self) -> bool:
        """The same outcome on both sides (a result that launched nothing, a skip, compares by outcome too)."""
        return self.reference.outcome == self.other.outcome

    @property
    def item(self) -> str:
        return f"{self.cell}: {self.other.item_id}"


@dataclass(frozen=True)
class CellParity:
    """One cell of the other side: its jobs, how its results were launched (launched results by mode; `launches`)
    and those of the reference they were matched with (`reference_launches`), how many matched equal, differ, or
    had no match."""

    cell: str
    jobs: int
    launches: dict[str, int]
    reference_launches: dict[str, int]
    equal: int
    differ: int
    unmatched: int


@dataclass(frozen=True)
class Parity:
    """Two sets of results of the same jobs compared job by job (see `launch_parity`)."""

    pairs: list[Pair]
    only_reference: list[tuple[str, Result]]
    only_other: list[tuple[str, Result]]

    @property
    def matched(self) -> int:
        return len(self.pairs)

    @property
    def equal(self) -> int:
        return sum(p.equal for p in self.pairs)

    @property
    def differences(self) -> list[Pair]:
        return [p for p in self.pairs if not p.equal]

    def cells(self) -> list[CellParity]:
        """Per cell of the other side (sorted by name): its counts."""
        names = sorted({p.cell for p in self.pairs} | {c for c, _ in self.only_other})
        rows = []
        for name in names:
            pairs = [p for p in self.pairs if p.cell == name]
            unmatched = [r for c, r in self.only_other if c == name]
            rows.append(
                CellParity(
                    name,
                    len(pairs) + len(unmatched),
                    _launches([p.other for p in pairs] + unmatched),
                    _launches([p.reference for p in pairs]),
                    sum(p.equal for p in pairs),
                    sum(not p.equal for p in pairs),
                    len(unmatched),
                )
            )
        return rows


def _launches(results: list[Result]) -> dict[str, int]:
    counted: dict[str, int] = {}
    for r in results:
        if r.launched:
            counted[launch_of(r)] = counted.get(launch_of(r), 0) + 1
    return dict(sorted(counted.items()))


def _newest(results: list[tuple[str, Result]]) -> dict[JobKey, tuple[str, Result]]:
    newest: dict[JobKey, tuple[str, Result]] = {}
    for cell, r in results:
        key = job_key(r)
        if key not in newest or (r.started_at, cell) > (newest[key][1].started_at, newest[key][0]):
            newest[key] = (cell, r)
    return newest


def launch_parity(reference: list[tuple[str, Result]], other: list[tuple[str, Result]]) -> Parity:
    """`other`'s results matched with `reference`'s of the same job in the same environment (`job_key`: the cells'
    names may differ), each compared by outcome; the jobs found on one side only. Where one side holds a job more
    than once (two cells with the same versions), its newest result stands for it. `reference`, `other`: (cell,
    result) pairs, as a store's `latest()` gives them."""
    before, after = _newest(reference), _newest(other)
    order = sorted(after, key=lambda k: (after[k][0], after[k][1].item_id, k))
    pairs = [Pair(*before[k], *after[k]) for k in order if k in before]
    only_other = [after[k] for k in order if k not in before]
    only_reference = sorted(
        (before[k] for k in before if k not in after), key=lambda cr: (cr[0], cr[1].item_id, job_key(cr[1]))
    )
    return Parity(pairs, only_reference, only_other)


def parity_json(parity: Parity, names: tuple[str, str]) -> dict[str, Any]:
    """The JSON form of a `Parity`: the two sides' names, the totals, each cell, each difference (both outcomes,
    tallies, reasons and launches) and the jobs found on one side only."""

    def side(cell: str, r: Result) -> dict[str, Any]:
        return {
            "cell": cell,
            "outcome": r.outcome.value,
            "tally": r.tally,
            "reason": r.reason,
            "launch": launch_of(r) if r.launched else None,
        }

    def job(r: Result) -> dict[str, Any]:
        return {"case": r.case, "variant": r.variant, "nproc": r.nproc, "device": r.device, "versions": r.versions}

    return {
        "reference": names[0],
        "other": names[1],
        "matched": parity.matched,
        "equal": parity.equal,
        "differ": len(parity.differences),
        "cells": [c.__dict__ for c in parity.cells()],
        "differences": [
            job(p.other) | {"reference": side(p.reference_cell, p.reference), "other": side(p.cell, p.other)}
            for p in parity.differences
        ],
        "only_reference": [job(r) | {"cell": c, "outcome": r.outcome.value} for c, r in parity.only_reference],
        "only_other": [job(r) | {"cell": c, "outcome": r.outcome.value} for c, r in parity.only_other],
    }
