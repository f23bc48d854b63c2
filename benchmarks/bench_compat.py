"""Walking the compatibility grid: `bugmatrix compat` as a whole process, with how much of the grid was reused.

    uv run python benchmarks/bench_compat.py [--db STORE] [--fresh] [-- compat args...]

Runs `bugmatrix compat ARGS` (default: `--lane fbgemm -j 2 --disk-budget 25G`, the whole torch x fbgemm grid) on the
store `--db` (default .bugmatrix/results.db; with `--fresh`, an empty temporary store, so every cell is probed), and
reports:
    cells    = compat probe cells with a verdict in the store afterwards (all lanes, not only those ARGS select);
    reused   = those already there before (not launched again: a nightly re-run reuses every verdict);
    probed   = new ones this run added, and the wall time per probed cell (with `--redo` in ARGS, cells probed
               again are counted as reused);
    wall     = the whole process, environments included (torch stacks downloaded or taken from uv's cache).
The store is the real one unless `--fresh`: what a run probes stays recorded, as a `bugmatrix compat` run's would.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT = ["--lane", "fbgemm", "-j", "2", "--disk-budget", "25G"]


def grid(db: Path, args: list[str]) -> set[str]:
    """The compat probe cells with a verdict in the store (`compat --no-probe --json`)."""
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "compat", *args, "--no-probe", "--json", "--db", str(db)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"compat --no-probe failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return {probe["cell"] for probe in json.loads(proc.stdout)["probes"] if probe.get("verdict")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--db", type=Path, default=ROOT / ".bugmatrix" / "results.db")
    parser.add_argument("--fresh", action="store_true", help="an empty temporary store: probe every cell")
    parser.add_argument("compat_args", nargs="*", help="arguments for `bugmatrix compat` (after --)")
    args = parser.parse_args()
    compat_args = args.compat_args or DEFAULT
    db = Path(tempfile.mkdtemp(prefix="bench-compat-")) / "results.db" if args.fresh else args.db
    before = grid(db, compat_args) if db.exists() else set()
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "harness", "compat", *compat_args, "--db", str(db)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    after = grid(db, compat_args)
    probed = after - before
    print(f"bugmatrix compat {' '.join(compat_args)}: exit {proc.returncode}, wall {wall:.0f} s")
    print(
        f"cells {len(after)}: reused {len(after & before)}, probed {len(probed)}"
        + (f" ({wall / len(probed):.0f} s per probed cell, environments included)" if probed else "")
    )
    if proc.returncode not in (0, 1):
        print(proc.stderr[-2000:], file=sys.stderr)


if __name__ == "__main__":
    main()
