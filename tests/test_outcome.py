"""The documented rules that combine per-rank statuses into one outcome."""

from __future__ import annotations

import pytest

from harness.model.outcome import Outcome, RankState, RankStatus, combine

R, F, E, S, T = RankState.REPRODUCED, RankState.FIXED, RankState.ERROR, RankState.SKIP, RankState.TERMINATED


def ranks(*states: tuple[RankState, float | None]) -> list[RankStatus]:
    return [RankStatus(rank=i, state=s, finished_at=t, detail=s.value) for i, (s, t) in enumerate(states)]


@pytest.mark.parametrize(
    ("states", "expected"),
    [
        ([(F, 1.0), (F, 1.0)], Outcome.FIXED),
        ([(R, 1.0), (R, 1.1)], Outcome.REPRODUCED),
        ([(R, 1.0), (F, 2.0)], Outcome.REPRODUCED),  # a bug seen on one rank is reproduced
        ([(R, 1.0), (T, 2.0)], Outcome.REPRODUCED),  # the peer torchrun terminated is collateral
        ([(R, 1.0), (E, 2.0)], Outcome.REPRODUCED),  # the peer lost its connection afterwards
        ([(E, 0.5), (R, 1.0)], Outcome.ERROR),  # something else broke first
        ([(R, 1.0), (E, None)], Outcome.REPRODUCED),  # peer killed after the reproduction
        ([(F, 1.0), (E, None)], Outcome.ERROR),  # a rank died: never fixed
        ([(F, 1.0), (T, 2.0)], Outcome.ERROR),  # a rank did not finish: never fixed
        ([(T, 1.0), (T, 1.0)], Outcome.ERROR),
        ([(S, 1.0), (F, 1.0)], Outcome.SKIP),
        ([(S, 1.0), (E, 1.0)], Outcome.ERROR),
        ([(S, 1.0), (R, 1.0)], Outcome.REPRODUCED),
        ([], Outcome.ERROR),
    ],
)
def test_combine_rules(states: list[tuple[RankState, float | None]], expected: Outcome) -> None:
    outcome, reason = combine(ranks(*states), timed_out=False)
    assert outcome is expected
    assert reason


def test_timeout_overrides_every_rank_verdict() -> None:
    outcome, _ = combine(ranks((F, 1.0), (F, 1.0)), timed_out=True)
    assert outcome is Outcome.TIMEOUT


def test_fixed_needs_every_rank() -> None:
    """No combination that contains a non-fixed rank yields fixed."""
    for other in (R, E, S, T):
        for order in ([(F, 1.0), (other, 1.0)], [(other, 1.0), (F, 1.0)]):
            assert combine(ranks(*order), timed_out=False)[0] is not Outcome.FIXED
