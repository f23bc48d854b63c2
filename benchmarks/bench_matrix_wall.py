"""Wall time of a cold matrix run vs the ideal, the ideal taken from the *warm* launch times of the same jobs.

    uv run python benchmarks/bench_matrix_wall.py --cells 'lightning-*' 'litgpt-*' [--cases ID ...] [--cores N]
                                                  [--nproc N] [--work DIR]
    uv run python benchmarks/bench_matrix_wall.py --db STORE --cold RUN --warm RUN      # from recorded runs

With `--cells`, two whole-process runs of `bugmatrix run --cell ... --redo -j N` in a scratch folder: the first from an
empty uv cache and an empty environments folder (cold: every download, install and first-import compile is paid),
the second right after it (warm: environments built, nothing left but launches). Then:
    wall  = the cold run's end - start (everything included);
    ideal = sum over the warm run's launches of duration x cores held (min(nproc, cores)) / cores,
for the jobs both runs launched. The ratio says how much longer the cold run took than its launches alone would: cores
idle while waiting for environments, or busy building them (downloads, unzipping, first-import compiles), which is
why each run also prints the share of the machine's core time that went unused (from /proc/stat). (Taking the ideal
from the cold run's own launch times would flatter it: builds competing for the cores inflate those.)
Target: cold wall / ideal <= 1.2. The machine's load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.matrix.expand import load_matrix  # noqa: E402
from harness.session.store import ResultStore  # noqa: E402


def ratio(store: ResultStore, cold: str, warm: str, cores: int) -> str:
    """The figures for one cold run against one warm run of the same jobs."""
    runs = {r.run_id: r for r in store.runs()}
    key = lambda cell, r: (cell, r.case, r.variant, r.nproc, r.device)  # noqa: E731
    warm_times = {key(c, r): r.duration_s for _, c, r in store.results(warm) if r.launched}
    cold_results = [(c, r) for _, c, r in store.results(cold) if r.launched]
    both = [(c, r) for c, r in cold_results if key(c, r) in warm_times]
    wall = (runs[cold].finished_at or runs[cold].started_at) - runs[cold].started_at
    ideal = sum(warm_times[key(c, r)] * min(r.nproc, cores) for c, r in both) / cores
    cold_ideal = sum(r.duration_s * min(r.nproc, cores) for _, r in both) / cores
    warm_wall = (runs[warm].finished_at or runs[warm].started_at) - runs[warm].started_at
    return (
        f"{len(both)} launches in {len({c for c, _ in both})} cells on {cores} cores: cold wall {wall:.0f}s, "
        f"ideal (warm launch times) {ideal:.0f}s, ratio {wall / ideal:.2f} (against the cold run's own launch "
        f"times {wall / cold_ideal:.2f}); warm wall {warm_wall:.0f}s, ratio {warm_wall / ideal:.2f}"
    )


def cpu_times() -> tuple[float, float] | None:
    """(idle + iowait, total) jiffies of all cores since boot, from /proc/stat; None where there is no /proc."""
    try:
        fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    return fields[3] + fields[4], sum(fields[:8])


def idle_share(before: tuple[float, float] | None, after: tuple[float, float] | None) -> str:
    """How much of the machine's core time went unused between two `cpu_times` readings."""
    if before is None or after is None or after[1] <= before[1]:
        return "cores idle: unknown"
    return f"cores idle {100 * (after[0] - before[0]) / (after[1] - before[1]):.0f}% of the run"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cells", nargs="+", help="cell names or globs (see `bugmatrix matrix`)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--nproc", type=int, action="append", help="only these world sizes (repeatable)")
    parser.add_argument(
        "--cases",
        nargs="+",
        default=[],
        help="only these cases (id substrings, as `bugmatrix run` takes them): the same jobs as an "
        "earlier measurement, when cases have been added since",
    )
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one, removed after)")
    parser.add_argument("--db", type=Path)
    parser.add_argument("--cold")
    parser.add_argument("--warm")
    args = parser.parse_args()
    if not args.cells:
        if not (args.db and args.cold and args.warm):
            parser.error("give --cells, or --db with --cold and --warm")
        print(ratio(ResultStore(args.db), args.cold, args.warm, args.cores))
        return
    names = [
        c.name
        for c in load_matrix(ROOT / "matrix.yaml").cells
        if any(fnmatch.fnmatch(c.name, pattern) for pattern in args.cells) and c.device == "cpu"
    ]
    work = args.work or Path(tempfile.mkdtemp(prefix="bench-matrix-"))
    db = work / "results.db"
    env = dict(os.environ, UV_CACHE_DIR=str(work / "uv-cache"))
    command = [
        sys.executable,
        "-m",
        "harness",
        "run",
        "--redo",
        "-j",
        str(args.cores),
        "--db",
        str(db),
        "--envs",
        str(work / "envs"),
        *(f"--cell={n}" for n in names),
        *(f"--nproc={n}" for n in args.nproc or ()),
        *args.cases,
    ]
    try:
        for label in ("cold", "warm"):
            started, before = time.monotonic(), cpu_times()
            proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
            print(
                f"{label}: exit {proc.returncode} in {time.monotonic() - started:.0f}s; "
                f"{proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-500:]}; "
                f"load average {os.getloadavg()[0]:.1f}; {idle_share(before, cpu_times())}",
                flush=True,
            )
        cold, warm = [r.run_id for r in ResultStore(db).runs()][-2:]
        print(ratio(ResultStore(db), cold, warm, args.cores))
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
