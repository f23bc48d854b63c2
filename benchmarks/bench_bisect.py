"""Release-level bisect vs the obvious alternative (running the case in every release), whole-process wall times.

    uv run python benchmarks/bench_bisect.py CASE --package P [--variant V] [--nproc N] [--cells GLOB] [-j J]

1. `bugmatrix bisect CASE --package P --no-commits --json` once to warm every probe's environment (not timed),
   then again, timed: the warm figure (probes, wall).
2. `bugmatrix run CASE --variant V --nproc N --cell ... --redo --no-store` over every matrix cell matching GLOB
   (default `P-*`, CPU cells): the linear scan a user would otherwise do, timed with the same warm environments.
Prints one line per measurement and the ratio; the versions bisect considered come from the package index.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.matrix.expand import load_matrix  # noqa: E402


def timed(command: list[str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.monotonic()
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=False)
    return time.monotonic() - started, proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case")
    parser.add_argument("--package", required=True)
    parser.add_argument("--variant", default="bug")
    parser.add_argument("--nproc", type=int, default=1)
    parser.add_argument("--cells", help="matrix cells of the linear scan (glob; default '<package>-*')")
    parser.add_argument("-j", "--jobs", type=int, default=2)
    parser.add_argument("--skip-warmup", action="store_true", help="the environments are known to be warm")
    args = parser.parse_args()
    bisect = [
        sys.executable,
        "-m",
        "harness",
        "bisect",
        args.case,
        "--package",
        args.package,
        "--variant",
        args.variant,
        "--nproc",
        str(args.nproc),
        "--no-commits",
        "--json",
        "-j",
        str(args.jobs),
        "--device",
        "cpu",
    ]
    if not args.skip_warmup:
        wall, proc = timed(bisect)
        print(f"warm-up bisect: {wall:.0f} s (exit {proc.returncode})", flush=True)
    wall, proc = timed(bisect)
    if proc.returncode != 0:
        raise SystemExit(f"bisect failed (exit {proc.returncode}): {proc.stdout[-2000:]} {proc.stderr[-2000:]}")
    payload = json.loads(proc.stdout)
    [release] = [level for level in payload["levels"] if level["level"] == "release"]
    probes = release["probes"]
    print(f"bisect (warm): {len(probes)} probes, {wall:.0f} s wall: {payload['summary']}")
    print("  probes: " + ", ".join(f"{p['candidate']}={p['outcome']}" for p in probes))

    pattern = args.cells or f"{args.package}-*"
    cells = [
        c.name
        for c in load_matrix(ROOT / "matrix.yaml").cells
        if fnmatch.fnmatch(c.name, pattern) and c.device == "cpu"
    ]
    linear = [
        sys.executable,
        "-m",
        "harness",
        "run",
        args.case,
        "--variant",
        args.variant,
        "--nproc",
        str(args.nproc),
        "--redo",
        "--no-store",
        "-j",
        str(args.jobs),
        "--device",
        "cpu",
    ]
    for cell in cells:
        linear += ["--cell", cell]
    wall_linear, proc = timed(linear)
    print(f"linear scan of {len(cells)} matrix cells (warm): {wall_linear:.0f} s wall (exit {proc.returncode})")
    print(f"ratio linear / bisect: {wall_linear / wall:.2f}x; launches {len(cells)} vs {len(probes)}")


if __name__ == "__main__":
    main()
