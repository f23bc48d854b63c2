"""`uvx --from <wheel> bugmatrix audit torch==2.6.0` from a folder with no clone: the cold install and first answer
(an empty uv cache: pydantic and the rest come from PyPI, uv makes the environment) and the warm one (the same cache
again, as a second CI job or a second command on a desk finds it). Whole process, wall time.

    uv run python benchmarks/bench_install.py [--runs 3] [--wheel dist/bugmatrix-0.1.0-py3-none-any.whl]

Without `--wheel`, the wheel is built first (`uv build --wheel` into a scratch folder, not timed). Each cold run gets
a new empty UV_CACHE_DIR (the managed Pythons live outside the cache: the interpreter is not downloaded); each warm
run follows the cold one in its cache. The audit answers `AFFECTED` (exit 1): timed all the same. The machine's load
average is printed before and after, since on a shared machine only the load says what a figure is worth.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.matrix.envcache import uv_binary as uv  # noqa: E402 - the harness's uv: $BUGMATRIX_UV, the locked one

QUESTION = ["bugmatrix", "audit", "torch==2.6.0"]


def timed(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    """Wall seconds of `argv`; a failure other than `AFFECTED` (exit 1) stops the benchmark."""
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    took = time.perf_counter() - start
    if done.returncode not in (0, 1) or not done.stdout.startswith("checked torch==2.6.0 against the record in "):
        sys.exit(f"{' '.join(argv)}: exit {done.returncode}\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--wheel", type=Path, help="the wheel to install (default: build one from this checkout)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-install-") as scratch:
        tmp = Path(scratch)
        wheel = args.wheel.resolve() if args.wheel else None
        if wheel is None:
            subprocess.run(
                [uv(), "build", "--wheel", "--out-dir", str(tmp / "dist")], cwd=ROOT, check=True, capture_output=True
            )
            [wheel] = (tmp / "dist").glob("bugmatrix-*.whl")
        away = tmp / "elsewhere"
        away.mkdir()
        env = {k: v for k, v in os.environ.items() if k not in {"BUGMATRIX_RECORD", "BUGMATRIX_DB", "VIRTUAL_ENV"}}
        argv = [uv(), "tool", "run", "--from", str(wheel), *QUESTION]  # = uvx --from WHEEL bugmatrix ...
        print(f"{wheel.name} ({wheel.stat().st_size / 1e6:.2f} MB), load before {os.getloadavg()}", flush=True)
        cold, warm = [], []
        for run in range(args.runs):
            cache = tmp / f"cache-{run}"
            env_run = {**env, "UV_CACHE_DIR": str(cache), "UV_TOOL_DIR": str(tmp / f"tools-{run}")}
            cold.append(timed(argv, away, env_run))
            warm.append(timed(argv, away, env_run))
            print(f"run {run + 1}: cold {cold[-1]:.2f} s, warm {warm[-1]:.2f} s", flush=True)
            shutil.rmtree(cache, ignore_errors=True)
        print(
            f"cold: median {statistics.median(cold):.2f} s (min {min(cold):.2f}, max {max(cold):.2f}); "
            f"warm: median {statistics.median(warm):.2f} s (min {min(warm):.2f}, max {max(warm):.2f}); "
            f"load after {os.getloadavg()}"
        )


if __name__ == "__main__":
    main()
