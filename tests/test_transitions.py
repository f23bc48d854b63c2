"""Transitions along an axis that mixes releases and git installs are ordered by date, not by version string."""

from __future__ import annotations

from datetime import datetime, timezone

from harness.analysis.transitions import axes
from harness.model.outcome import Outcome
from harness.model.result import Result

HISTORY = [  # (version recorded, outcome, date): main's version string says nothing about history
    ("0.3.0", Outcome.FIXED, 1), ("0.4.0.dev0 @ " + "b" * 40, Outcome.FIXED, 2),
    ("0.4.0.dev0 @ " + "a" * 40, Outcome.REPRODUCED, 3), ("0.4.0.dev0 @ " + "c" * 40, Outcome.FIXED, 4),
    ("0.3.1", Outcome.FIXED, 5),
]


def results() -> list[tuple[str, Result]]:
    return [(f"cell-{i}", Result(case="c", variant="bug", nproc=1, device="cpu", outcome=o, expected=None, reason="",
                                 versions={"litgpt": v})) for i, (v, o, _) in enumerate(HISTORY)]


def test_commits_are_placed_by_date() -> None:
    dates = {v.partition(" @ ")[2] or v: datetime(2024, 4, d, tzinfo=timezone.utc) for v, _, d in HISTORY}
    [axis] = axes(results(), dater=lambda package, version, commit: dates[commit or version])
    assert axis.changes() == [("regressed", HISTORY[1][0], HISTORY[2][0]), ("fixed", HISTORY[2][0], HISTORY[3][0])]
    assert "regressed between 0.4.0.dev0 @ bbbbbbbbbbbb and 0.4.0.dev0 @ aaaaaaaaaaaa" in axis.summary()


def test_without_dates_versions_order_the_axis() -> None:
    [axis] = axes(results())
    assert [p.version for p in axis.points][:2] == ["0.3.0", "0.3.1"]
