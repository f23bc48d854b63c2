"""Comparing two runs, like `asv compare`: new fixes, new regressions, changed errors.

Results are matched on (case, variant, world size, device, cell). A *regression* is a result that was `fixed` and
is now `reproduced` (the bug came back); a *fix* the reverse. A change into or out of error/infra/timeout/skip is
a *changed error*: the harness could not say, so it is neither. A result that became `flaky` (its repeats
disagreed, `--repeat K`) is *flaky*, listed with its tally and never counted as a regression: the bug did not
clearly come back, the case needs attention. A regression is *unexpected* when the newer result's expected
outcome is not `reproduced` (the case's metadata does not allow it); only those fail `compare`.
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
