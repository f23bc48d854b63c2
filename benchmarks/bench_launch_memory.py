"""The harness's own peak resident memory while a case prints a lot: `python -m harness run` on a fake case whose
rank prints ~N MiB of 100-byte lines, with the failure signature in the middle, then exits 1 (reproduced).

    uv run python benchmarks/bench_launch_memory.py [--mb 400] [--jobs 1] [--tree PATH ...]

The peak is the harness process's own `VmHWM` (not torchrun's, not the ranks'), reported from inside it at
exit (not `ru_maxrss`: Linux carries the forking parent's peak across execve). Each `--tree` is a checkout of
bugmatrix to measure (default: this one); give a checkout of an older commit as a second `--tree` to compare.
With `--jobs J`, J copies of the case run in parallel in one `bugmatrix run`.

Target (issue: launch hardening): under 200 MiB for 400 MiB printed (it was ~1.1 GiB: the whole log was read).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import sys
MB = int(sys.argv[-1])
block = ("x" * 99 + "\\n") * 10486                   # ~1 MiB of 100-byte lines
for i in range(MB):
    sys.stdout.write(block)
    if i == MB // 2:
        sys.stdout.write("RuntimeError: FAKE-BUG-SIGNATURE in the middle\\n")
sys.exit(1)
"""
CASE = """
title: a chatty fake case
upstream: [https://example.invalid/1]
packages: [torch]
nproc: [1]
devices: [cpu]
timeout: 600
signature: FAKE-BUG-SIGNATURE
variants:
  bug:
    args: ["{mb}"]
    expect: [{{outcome: reproduced}}]
"""
# Runs `python -m harness ARGS` and prints the process's own peak RSS when it exits (atexit runs on SystemExit).
RUNNER = """
import atexit, runpy, sys
def peak_rss_kib():
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
atexit.register(lambda: print("PEAK_RSS_KIB", peak_rss_kib(), file=sys.stderr))
sys.argv = ["bugmatrix", *sys.argv[1:]]
runpy.run_module("harness", run_name="__main__", alter_sys=True)
"""


def measure(tree: Path, cases: Path, jobs: int) -> tuple[int, float, int, str]:
    command = [
        sys.executable,
        "-c",
        RUNNER,
        "--cases-dir",
        str(cases),
        "run",
        "fake-",
        "--device",
        "cpu",
        "--no-store",
        "-j",
        str(jobs),
    ]
    started = time.perf_counter()
    proc = subprocess.run(
        command, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)}, capture_output=True, text=True, check=False
    )
    wall = time.perf_counter() - started
    peak = re.search(r"PEAK_RSS_KIB (\d+)", proc.stderr)
    if not peak:
        raise SystemExit(f"no measurement from {tree} (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return int(peak.group(1)), wall, proc.returncode, proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=400, help="MiB each rank prints (default 400)")
    parser.add_argument("--jobs", type=int, default=1, help="copies of the case run in parallel (default 1)")
    parser.add_argument("--tree", type=Path, action="append", help="bugmatrix checkout(s) to measure")
    args = parser.parse_args()
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    with tempfile.TemporaryDirectory(prefix="bench-launch-memory-") as tmp:
        cases = Path(tmp)
        for j in range(args.jobs):
            folder = cases / f"fake-{j + 1}-chatty"
            folder.mkdir()
            (folder / "case.yaml").write_text(CASE.format(mb=args.mb))
            (folder / "repro.py").write_text(textwrap.dedent(SCRIPT))
        print(f"{args.jobs} launch(es) in parallel, each rank printing {args.mb} MiB, signature in the middle")
        for tree in trees:
            peak, wall, code, out = measure(tree, cases, args.jobs)
            verdict = "reproduced" if "reproduced" in out else "NOT reproduced"
            print(f"{tree}: harness peak RSS {peak / 1024:.0f} MiB, wall {wall:.1f} s, exit {code}, {verdict}")


if __name__ == "__main__":
    main()
