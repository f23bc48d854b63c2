"""Narrowing every interval boundary of a results store: launches used against the sum of ceil(log2 gap), and wall.

    uv run python benchmarks/bench_narrow.py --db STORE [--envs DIR] [-j N] [--commits] [-- narrow args...]

Lists the store's interval boundaries (`bugmatrix narrow --dry-run`), then runs `bugmatrix narrow` as a whole
process on a copy of the store (the original is left as it was), and reports:
    launches = results the narrow run launched (resumed probes and the endpoints are not launched again);
    bound    = sum over the intervals of ceil(log2(gap)), gap = the releases between + 1 (what a bisection between
               two known endpoints needs at most when nothing is skipped), times the world sizes per probe;
    wall     = the narrow run's wall time; and how many boundaries are adjacent afterwards.
A second `bugmatrix narrow` on the result then launches nothing (printed as a check).
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

from harness.analysis.narrow import intervals  # noqa: E402
from harness.analysis.precision import between_on_index  # noqa: E402
from harness.matrix.expand import load_matrix  # noqa: E402
from harness.model.case import discover  # noqa: E402
from harness.session.store import ResultStore  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--envs", type=Path)
    parser.add_argument("-j", "--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--commits", action="store_true")
    parser.add_argument("extra", nargs="*", help="more `bugmatrix narrow` arguments (cases, --package, --device)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-narrow-"))
    db = work / "results.db"
    shutil.copy(args.db, db)
    cases = {c.id: c for c in discover(ROOT / "cases")[0]}
    matrix = load_matrix(ROOT / "matrix.yaml")
    targets = intervals(ResultStore(db).latest(), cases, between_on_index(matrix, cases), matrix)
    bound = sum(math.ceil(math.log2(len(t.boundary.untested or ()) + 1)) * len(cases[t.axis.case].spec.nproc)
                for t in targets if t.boundary.untested)
    print(f"{len(targets)} interval boundaries; {sum(1 for t in targets if t.boundary.untested)} with releases "
          f"not run; bound on launches (sum of ceil(log2 gap) x world sizes): {bound}")
    for t in targets:
        print(f"  {t.axis.case}::{t.axis.variant} ({t.axis.device}) over {t.axis.package}: {t.boundary.text()}")
    command = [sys.executable, "-m", "harness", "narrow", "--db", str(db), "-j", str(args.jobs),
               *(["--envs", str(args.envs)] if args.envs else []), *(["--commits"] if args.commits else []),
               *args.extra]
    runs_before = len(ResultStore(db).runs())
    started = time.monotonic()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.monotonic() - started
    store = ResultStore(db)
    new_runs = store.runs()[runs_before:]
    launches = sum(1 for run in new_runs for _, _, r in store.results(run.run_id) if r.launched)
    print(proc.stdout[-4000:])
    print(f"narrow: exit {proc.returncode}, {launches} launches (bound {bound}), wall {wall:.0f}s, "
          f"load average {os.getloadavg()[0]:.1f}")
    again = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    more = ResultStore(db).runs()[len(store.runs()):]
    print(f"second narrow: exit {again.returncode}, {len(more)} new run(s): "
          f"{(again.stderr.strip().splitlines() or [''])[-1]}")
    print(f"(store copy kept at {db})")


if __name__ == "__main__":
    main()
