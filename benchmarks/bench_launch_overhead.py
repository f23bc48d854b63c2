"""Harness overhead per case: `bugmatrix run CASE --variant V --nproc N --redo` vs bare `torchrun --standalone` of
the same script with the same arguments, as whole-process wall times, interleaved, median ratio over several runs.

    uv run python benchmarks/bench_launch_overhead.py [--case ID] [--variant V] [--nproc N] [--device D] [--runs K]
        [--batch B]

Per invocation: one `bugmatrix run` (start-up, interpreter inspection, launch, classification, recording in a
throw-away store) against one bare torchrun. `--redo` makes every run launch: without it a re-run resumes from the
store and launches nothing. Per launch inside a batch: one `bugmatrix run --repeat B` (B launches in one process)
against B bare torchruns, so the fixed start-up is shared.

Target: median ratio <= 1.05 per invocation.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from harness.model.case import load_case  # noqa: E402


def timed(command: list[str], ok_codes: tuple[int, ...]) -> float:
    started = time.perf_counter()
    proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if proc.returncode not in ok_codes:
        raise SystemExit(f"{command} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", default="lightning-20020-meta-template-submodule")
    parser.add_argument("--variant", default="bug")
    parser.add_argument("--nproc", type=int, default=2)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="the device both sides run on")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch", type=int, default=3, help="launches per bugmatrix process for the batch figure")
    args = parser.parse_args()
    db = Path(tempfile.mkdtemp(prefix="bench-overhead-")) / "results.db"

    case = load_case(ROOT / "cases" / args.case / "case.yaml")
    variant_args = case.spec.variants[args.variant].args
    bare = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={args.nproc}",
        str(case.script),
        "--device",
        args.device,
        *variant_args,
    ]
    harness = [
        sys.executable,
        "-m",
        "harness",
        "run",
        args.case,
        "--variant",
        args.variant,
        "--nproc",
        str(args.nproc),
        "--device",
        args.device,
        "-j",
        "1",
        "--redo",
        "--db",
        str(db),
    ]
    timed(bare, (0, 1, 125))  # warm the page cache for both
    rows = []
    for i in range(args.runs):
        t_bare = timed(bare, (0, 1, 125))  # torchrun exits 1 whenever any rank fails
        t_harness = timed(harness, (0,))  # bugmatrix exits 0 only when observed == expected
        rows.append((t_bare, t_harness, t_harness / t_bare))
        print(f"run {i + 1}: bare torchrun {t_bare:6.2f}s  bugmatrix {t_harness:6.2f}s  ratio {t_harness / t_bare:.3f}")
    ratios = [r[2] for r in rows]
    print(
        f"{args.case}::{args.variant}[{args.device}-{args.nproc}]  "
        f"median bare {statistics.median(r[0] for r in rows):.2f}s  "
        f"median bugmatrix {statistics.median(r[1] for r in rows):.2f}s  median ratio {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}, {args.runs} runs)"
    )
    if args.batch > 1:
        batch = [*harness, "--repeat", str(args.batch)]
        t_bare = sum(timed(bare, (0, 1, 125)) for _ in range(args.batch))
        t_batch = timed(batch, (0,))
        print(
            f"batch of {args.batch}: bare torchrun {t_bare:.2f}s  bugmatrix --repeat {args.batch} {t_batch:.2f}s  "
            f"per launch {t_bare / args.batch:.2f}s vs {t_batch / args.batch:.2f}s  ratio {t_batch / t_bare:.3f}"
        )


if __name__ == "__main__":
    main()
