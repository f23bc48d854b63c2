"""A 2-rank gloo launch of a trivial script: warm (forked from a warm parent) vs bare `torchrun --standalone`
(issue 36, item 5, first figure), interleaved, median over several rounds, machine load stated.

    uv run python benchmarks/bench_warm_launch.py [--runs K] [--nproc N] [--no-cold]

Per round, in turn: one bare `python -m torch.distributed.run --standalone --nproc_per_node=N script` (a whole
process: torchrun's agent and N fresh interpreters importing torch); one harness launch forked from a warm parent
(`launch(..., mode="warm")` in this process: the fork, the ranks' run and interpreter shutdown, the harness's
bookkeeping: records, stray sweep, log reads); and, unless --no-cold, one harness launch under torchrun
(`mode="cold"`: what `bugmatrix run` does today). The warm parent's one-time start (importing torch) is timed apart.
Every launch must exit 0 on every rank (the all_reduce sums to the expected value).

Target (issue 36): the warm launch >= 20x cheaper than bare torchrun.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.launch import warm  # noqa: E402
from harness.launch.torchrun import launch  # noqa: E402

SCRIPT = """
import sys, torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
ok = t.item() == dist.get_world_size()
dist.destroy_process_group()
sys.exit(0 if ok else 1)
"""


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores)"


def bare(script: Path, nproc: int) -> float:
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}", str(script)]
    started = time.perf_counter()
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"bare torchrun exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return elapsed


def harness(script: Path, nproc: int, mode: str) -> float:
    started = time.perf_counter()
    result = launch(sys.executable, script, [], nproc, 120, mode=mode)
    elapsed = time.perf_counter() - started
    codes = [r.exit_code for r in result.ranks.values()]
    if result.mode != mode or codes != [0] * nproc:
        raise SystemExit(f"{mode} launch: mode {result.mode} {result.warm_refused}, exit codes {codes}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--no-cold", action="store_true", help="leave out the harness's cold (torchrun) launch")
    args = parser.parse_args()
    script = Path(tempfile.mkdtemp(prefix="bench-warm-")) / "trivial.py"
    script.write_text(SCRIPT)
    print(f"load before: {load()}")
    started = time.perf_counter()
    harness(script, args.nproc, "warm")  # starts the parent (imports torch) and runs one launch
    print(f"warm parent start + first launch: {time.perf_counter() - started:.2f} s")
    times: dict[str, list[float]] = {"bare torchrun": [], "warm": []}
    if not args.no_cold:
        times["harness cold"] = []
    for i in range(args.runs):
        times["bare torchrun"].append(bare(script, args.nproc))
        times["warm"].append(harness(script, args.nproc, "warm"))
        if not args.no_cold:
            times["harness cold"].append(harness(script, args.nproc, "cold"))
        print(f"round {i + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
    print(f"load after: {load()}")
    medians = {k: statistics.median(v) for k, v in times.items()}
    for name, median in medians.items():
        print(f"{name:>14}: median {median:.3f} s (min {min(times[name]):.3f}, max {max(times[name]):.3f})")
    ratio = medians["bare torchrun"] / medians["warm"]
    print(f"bare torchrun / warm: {ratio:.1f}x (target >= 20x)")
    warm.shutdown()


if __name__ == "__main__":
    main()
