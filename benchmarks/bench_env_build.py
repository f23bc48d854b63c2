"""Warm build of a full cell (torch + fbgemm + torchrec + lightning + litgpt): bugmatrix's uv path vs
`python -m venv` + `pip install` of the identical package set, whole-process wall times, interleaved.

    uv run python benchmarks/bench_env_build.py [--cell default] [--runs 3]

bugmatrix: `uv venv` + `uv pip install` (offline first: resolution from uv's warm cache, hardlinks), with the
command harness/matrix/envcache.py builds a cell with, without the import smoke
check (timed separately: the first import
of a fresh environment compiles bytecode, which any tool pays once). pip: `python -m venv` + `pip install
--no-deps` of the frozen list of the environment uv built (pip's fastest path: no resolution), after one untimed
pip run warms pip's cache.
Target (issue 3): bugmatrix <= 2 s and >= 20x faster than pip.
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

from harness.matrix.envcache import install_command, uv_command  # noqa: E402
from harness.matrix.expand import load_matrix  # noqa: E402
from harness.matrix.resolve import resolve_cell  # noqa: E402

PIP_ENV = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def run(command: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, env=env)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell", default="default")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    matrix = load_matrix(ROOT / "matrix.yaml")
    cell = resolve_cell(matrix, matrix.cell(args.cell))
    work = Path(tempfile.mkdtemp(prefix="bench-env-"))
    overrides = work / "overrides.txt"

    def uv_build(target: Path) -> float:
        """What EnvCache.build does before its smoke check: a venv, then the offline-first install."""
        shutil.rmtree(target, ignore_errors=True)
        venv = run(uv_command("venv", "--quiet", "--python", cell.cell.python, str(target)))
        try:
            return venv + run(install_command(cell, target / "bin/python", overrides, offline=True))
        except subprocess.CalledProcessError:
            return venv + run(install_command(cell, target / "bin/python", overrides))

    def pip_build(target: Path, frozen: Path) -> float:
        shutil.rmtree(target, ignore_errors=True)
        return run([sys.executable, "-m", "venv", str(target)]) + run(
            [
                str(target / "bin/python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-deps",
                "--index-url",
                cell.cell.index_url,
                "-r",
                str(frozen),
            ],
            env=PIP_ENV,
        )

    try:
        uv_build(work / "uv")  # warm uv's cache (a no-op when it already is)
        frozen = work / "frozen.txt"
        frozen.write_text(
            subprocess.run(
                uv_command("pip", "freeze", "--python", str(work / "uv/bin/python")),
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        smoke = run([str(work / "uv/bin/python"), "-c", "; ".join(f"import {m}" for m in cell.imports)])
        print(
            f"cell {args.cell}: {len(frozen.read_text().splitlines())} packages; first import (smoke check) "
            f"{smoke:.1f}s"
        )
        pip_build(work / "pip", frozen)  # warm pip's cache
        rows = []
        for i in range(args.runs):
            t_uv = uv_build(work / "uv")
            t_pip = pip_build(work / "pip", frozen)
            rows.append((t_uv, t_pip))
            print(f"run {i + 1}: bugmatrix (uv) {t_uv:6.2f}s   venv + pip {t_pip:7.2f}s   ratio {t_pip / t_uv:6.1f}x")
        med_uv, med_pip = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
        ratio = statistics.median(r[1] / r[0] for r in rows)
        print(
            f"median: bugmatrix (uv) {med_uv:.2f}s, venv + pip {med_pip:.2f}s, median ratio {ratio:.1f}x "
            f"({args.runs} runs)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
