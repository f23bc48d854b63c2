"""Narrowing every interval boundary of a results store: launches used against the sum of ceil(log2 gap), and wall.

    uv run python benchmarks/bench_narrow.py --db STORE [--envs DIR] [-j N] [--commits] [-- narrow args...]

Lists the store's interval boundaries (`bugmatrix narrow --dry-run`), then runs `bugmatrix narrow` as a whole
process on a copy of the store (the original is left as it was), and reports:
    launches = results the narrow run launched (resumed probes and the endpoints are not launched again);
    bound    = sum over the intervals of ceil(log2(gap)), gap = the releases between + 1 (what a bisection between
               two known endpoints needs at most when nothing is skipped), times the world sizes per probe;
    wall     = the narrow run's wall time; and how many boundaries are adjacent afterwards.
A second `bugmatrix narrow` on the result then launches nothing (printed as a check).

    uv run python benchmarks/bench_narrow.py --db STORE --recorded

measures the narrowing already recorded in a store instead of running it again: the intervals are those of the
results from every run that was not a `narrow` (the newest per case x variant x world size x device x cell), the
launches are the launched results of the `narrow` runs, and the wall is the sum of those runs' durations.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.analysis.precision import between_on_index  # noqa: E402
from harness.matrix.expand import load_matrix  # noqa: E402
from harness.model.case import discover  # noqa: E402
from harness.session.store import ResultStore  # noqa: E402
from harness.workflows.narrow import intervals  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--envs", type=Path)
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--commits", action="store_true")
    parser.add_argument("--recorded", action="store_true", help="measure the narrow runs already in the store")
    parser.add_argument("extra", nargs="*", help="more `bugmatrix narrow` arguments (cases, --package, --device)")
    args = parser.parse_args()
    if args.recorded:
        recorded(args.db)
        return
    work = Path(tempfile.mkdtemp(prefix="bench-narrow-"))
    db = work / "results.db"
    shutil.copy(args.db, db)
    cases = {c.id: c for c in discover(ROOT / "cases")[0]}
    matrix = load_matrix(ROOT / "matrix.yaml")
    targets = intervals(ResultStore(db).latest(), cases, between_on_index(matrix, cases), matrix)
    bound = sum(
        math.ceil(math.log2(len(t.boundary.untested or ()) + 1)) * len(cases[t.axis.case].spec.nproc)
        for t in targets
        if t.boundary.untested
    )
    print(
        f"{len(targets)} interval boundaries; {sum(1 for t in targets if t.boundary.untested)} with releases "
        f"not run; bound on launches (sum of ceil(log2 gap) x world sizes): {bound}"
    )
    for t in targets:
        print(f"  {t.axis.case}::{t.axis.variant} ({t.axis.device}) over {t.axis.package}: {t.boundary.text()}")
    command = [
        sys.executable,
        "-m",
        "harness",
        "narrow",
        "--db",
        str(db),
        "-j",
        str(args.jobs),
        *(["--envs", str(args.envs)] if args.envs else []),
        *(["--commits"] if args.commits else []),
        *args.extra,
    ]
    runs_before = len(ResultStore(db).runs())
    started = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    store = ResultStore(db)
    new_runs = store.runs()[runs_before:]
    launches = sum(1 for run in new_runs for _, _, r in store.results(run.run_id) if r.launched)
    print(proc.stdout[-4000:])
    print(
        f"narrow: exit {proc.returncode}, {launches} launches (bound {bound}), wall {wall:.0f}s, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    more = ResultStore(db).runs()[len(store.runs()) :]
    print(
        f"second narrow: exit {again.returncode}, {len(more)} new run(s): "
        f"{(again.stderr.strip().splitlines() or [''])[-1]}"
    )
    print(f"(store copy kept at {db})")


def bound_of(targets: list, cases: dict) -> int:
    """Sum over the interval boundaries of ceil(log2(gap)) times the case's world sizes."""
    return sum(
        math.ceil(math.log2(len(t.boundary.untested or ()) + 1)) * len(cases[t.axis.case].spec.nproc)
        for t in targets
        if t.boundary.untested
    )


def recorded(path: Path) -> None:
    """The narrowing a store already holds: intervals before it, launches and wall of its `narrow` runs."""
    store = ResultStore(path)
    narrow_runs = [r for r in store.runs() if " narrow" in f" {r.command}" and r.finished_at]
    narrow_ids = {r.run_id for r in narrow_runs}
    newest: dict[tuple, tuple[float, str, object]] = {}
    for run_id, cell, result in store.results():
        if run_id in narrow_ids:
            continue
        key = (result.case, result.variant, result.nproc, result.device, cell)
        if key not in newest or result.started_at >= newest[key][0]:
            newest[key] = (result.started_at, cell, result)
    before = [(cell, result) for _, cell, result in newest.values()]
    cases = {c.id: c for c in discover(ROOT / "cases")[0]}
    matrix = load_matrix(ROOT / "matrix.yaml")
    between = between_on_index(matrix, cases)
    targets = [t for t in intervals(before, cases, between, matrix) if t.boundary.untested]
    after = intervals(store.latest(), cases, between, matrix)
    launches = sum(1 for run_id in narrow_ids for _, _, r in store.results(run_id) if r.launched)
    wall = sum((r.finished_at or r.started_at) - r.started_at for r in narrow_runs)
    print(
        f"{len(targets)} interval boundaries with releases not run before narrowing; bound on launches "
        f"(sum of ceil(log2 gap) x world sizes): {bound_of(targets, cases)}"
    )
    for t in targets:
        print(f"  {t.axis.case}::{t.axis.variant} ({t.axis.device}) over {t.axis.package}: {t.boundary.text()}")
    print(
        f"{len(narrow_runs)} narrow run(s): {launches} launches, wall {wall:.0f} s; "
        f"{sum(1 for t in after if t.boundary.untested)} interval boundaries left with releases not run"
    )
    for t in after:
        if t.boundary.untested:
            print(f"  left: {t.axis.case}::{t.axis.variant} over {t.axis.package}: {t.boundary.text()}")


if __name__ == "__main__":
    main()
