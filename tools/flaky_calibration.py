"""Calibration of flaky verdicts (harness/analysis/flaky.py): simulated bisects over a version list with a known
boundary, and how often the stated answer is right against the confidence it states. docs/flaky.md holds the table.

    uv run python tools/flaky_calibration.py                      # 200 bisects per setting, 16 versions, seed 37
    uv run python tools/flaky_calibration.py --bisects 1000 --seed 1 --confidence 0.9

Each bisect draws the boundary at a random position (the first "new" version, 1 .. versions-1) and a direction
(half regressions, half fixes: the bug side's rate then comes first), and runs `flaky.locate` with a simulated
`measure`. An answer is *right* when its adjacent pair is the true boundary; "could not decide" is counted apart
(it claims nothing). Settings (rates: old side vs new side):

    clean            every run independent, the same rate on every version of a side
    drift            the rate drifts by 0.01 a version (up or down) across the whole list, on top of the step
    bursts           runs come in bursts: each run of a version repeats that version's previous outcome with
                     probability 0.3 or 0.6, else is drawn afresh (the rate is unchanged; the runs are not
                     independent, as the test assumes); once with `Policy.dispersion` set to the bursts' design
                     effect, (1 + 0.6) / (1 - 0.6) = 4
    errors           20 % of runs are errors, which say nothing of the bug (kept apart, counted in the cap)
    too small        a change smaller than the policy's effect, under a low cap: it must say "could not decide"

Columns: bisects; answered (a boundary stated) and could not decide; the mean and the least confidence stated;
the achieved accuracy (right / answered); mean launches per bisect. The run is deterministic for a seed.
"""

from __future__ import annotations

import argparse
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from harness.analysis.flaky import Policy, Tally, locate  # noqa: E402

Rates = Callable[[int, int, int], float]  # (version, boundary, versions) -> the reproduction rate there


@dataclass(frozen=True)
class Setting:
    """One simulated world: the rate at each version, how runs correlate, how many say nothing."""

    name: str
    rate: Rates
    burst: float = 0.0  # probability that a run repeats the previous run's outcome
    errors: float = 0.0  # probability that a run is an error
    policy: Policy = Policy()


def step(old: float, new: float) -> Rates:
    """`old` before the boundary, `new` from it on."""
    return lambda v, b, n: new if v >= b else old


def drift(old: float, new: float, slope: float) -> Rates:
    """`old` before the boundary and `new` from it on, and on top the rate drifts by `slope` a version over the whole
    list (clamped to [0, 1]): adjacent versions of one side differ too, by less than the boundary's change."""
    return lambda v, b, n: min(1.0, max(0.0, (new if v >= b else old) + slope * v))


SETTINGS = [
    Setting("clean 0 vs 0.3", step(0.0, 0.3)),
    Setting("clean 0 vs 0.1", step(0.0, 0.1)),
    Setting("clean 0.05 vs 0.4", step(0.05, 0.4)),
    Setting("drift +0.01/version, 0 vs 0.3", drift(0.0, 0.3, 0.01)),
    Setting("drift -0.01/version, 0.2 vs 0.5", drift(0.2, 0.5, -0.01)),
    Setting("bursts 0 vs 0.3 (repeat 0.3)", step(0.0, 0.3), burst=0.3),
    Setting("bursts 0 vs 0.3 (repeat 0.6)", step(0.0, 0.3), burst=0.6),
    Setting("bursts 0.05 vs 0.4 (repeat 0.6)", step(0.05, 0.4), burst=0.6),
    Setting("bursts 0 vs 0.3 (repeat 0.6), dispersion 4", step(0.0, 0.3), burst=0.6, policy=Policy(dispersion=4)),
    Setting("errors 20 % 0 vs 0.3", step(0.0, 0.3), errors=0.2),
    Setting("too small 0 vs 0.03, cap 40", step(0.0, 0.03), policy=Policy(cap=40)),
    Setting("none 0.2 everywhere", step(0.2, 0.2)),
]


@dataclass
class Row:
    """One setting's outcome over its bisects."""

    setting: str
    bisects: int = 0
    answered: int = 0
    right: int = 0
    undecided: int = 0
    launches: int = 0
    stated_sum: float = 0.0
    stated_min: float = 1.0

    @property
    def accuracy(self) -> float | None:
        """Right among the answered (None when nothing was answered)."""
        return self.right / self.answered if self.answered else None


def simulate(setting: Setting, bisects: int, versions: int, rng: random.Random, confidence: float) -> Row:
    """`bisects` simulated flaky bisects of `setting` (see the module docstring)."""
    policy = Policy(confidence, setting.policy.start, setting.policy.cap, setting.policy.dispersion)
    row = Row(setting.name)
    for _ in range(bisects):
        boundary = rng.randint(1, versions - 1)
        fix = rng.random() < 0.5
        rates = [setting.rate(v, boundary, versions) for v in range(versions)]
        if fix:  # the bug side first: the rate falls at the boundary
            rates = [setting.rate(versions - 1 - v, versions - boundary, versions) for v in range(versions)]
        last: dict[int, bool] = {}

        def measure(version: int, n: int, rates: list[float] = rates, last: dict[int, bool] = last) -> Tally:
            reproduced = fixed = other = 0
            for _ in range(n):
                if rng.random() < setting.errors:
                    other += 1
                    continue
                if version in last and rng.random() < setting.burst:
                    hit = last[version]
                else:
                    hit = rng.random() < rates[version]
                last[version] = hit
                reproduced, fixed = reproduced + hit, fixed + (not hit)
            return Tally(reproduced, fixed, other)

        answer = locate(versions, measure, policy)
        row.bisects += 1
        row.launches += answer.launches
        if not answer.verdict.decided:
            row.undecided += 1
            continue
        row.answered += 1
        row.right += (answer.first_new == boundary) and (answer.last_old == boundary - 1)
        row.stated_sum += answer.verdict.confidence
        row.stated_min = min(row.stated_min, answer.verdict.confidence)
    return row


def table(rows: list[Row], confidence: float) -> str:
    """The calibration table, as markdown."""
    lines = [
        f"| setting | bisects | answered | could not decide | stated (mean, least; asked {confidence:g}) "
        "| achieved accuracy | mean launches |",
        "|---|---:|---:|---:|---|---:|---:|",
    ]
    for r in rows:
        stated = f"{r.stated_sum / r.answered:.3f}, {r.stated_min:.3f}" if r.answered else "-"
        accuracy = f"{r.accuracy:.3f} ({r.right}/{r.answered})" if r.accuracy is not None else "-"
        lines.append(
            f"| {r.setting} | {r.bisects} | {r.answered} | {r.undecided} | {stated} | {accuracy} "
            f"| {r.launches / max(1, r.bisects):.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run every setting and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bisects", type=int, default=200, help="simulated bisects per setting")
    parser.add_argument("--versions", type=int, default=16, help="versions in the simulated list")
    parser.add_argument("--seed", type=int, default=37)
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args(argv)
    rows = []
    for setting in SETTINGS:  # one generator per setting: a setting's numbers do not depend on the others
        rows.append(
            simulate(
                setting, args.bisects, args.versions, random.Random(f"{args.seed}:{setting.name}"), args.confidence
            )
        )
    print(
        f"seed {args.seed}, {args.versions} versions, {args.bisects} bisects per setting, "
        f"confidence {args.confidence:g}, Policy defaults otherwise"
    )
    print(table(rows, args.confidence))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
