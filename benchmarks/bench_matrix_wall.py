"""Wall time of a matrix run vs the ideal (sum of case times / cores), from the results store.

    uv run python benchmarks/bench_matrix_wall.py [--db .bugmatrix/results.db] [--run RUN_ID] [--cores N]

Reads one recorded run (default: the newest complete one): wall = run end - run start (environment builds and
everything else included); ideal = sum over launches of duration x cores it held (min(nproc, cores)) / cores.
Target (issue 3): wall / ideal <= 1.2.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.session.store import DEFAULT_DB, ResultStore  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, default=DEFAULT_DB)
    parser.add_argument("--run")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    store = ResultStore(args.db)
    runs = [r for r in store.runs() if r.status == "complete" and (args.run is None or r.run_id == args.run)]
    if not runs:
        raise SystemExit(f"no complete run in {args.db}")
    run = runs[-1]
    results = [r for _, _, r in store.results(run.run_id)]
    launched = [r for r in results if r.launched]
    wall = (run.finished_at or run.started_at) - run.started_at
    core_seconds = sum(r.duration_s * min(r.nproc, args.cores) for r in launched)
    ideal = core_seconds / args.cores
    cells = len({c for _, c, _ in store.results(run.run_id)})
    print(f"run {run.run_id}: {len(launched)} launches in {cells} cells, {len(results) - len(launched)} not launched")
    print(f"wall {wall:.1f}s; sum of launch times {sum(r.duration_s for r in launched):.1f}s; "
          f"core-seconds {core_seconds:.1f}; ideal on {args.cores} cores {ideal:.1f}s; ratio {wall / ideal:.2f}")


if __name__ == "__main__":
    main()
