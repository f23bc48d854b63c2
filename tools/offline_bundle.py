"""Wheels and a launcher for running bugmatrix inside an interpreter that has its own torch and cannot install.

A GPU machine with a fixed image (its own `python3` with torch, no network, no uv) runs the cases in place:

    # here, with PyPI:
    uv run python tools/offline_bundle.py .whl --python-version 3.12 [--with torchrec==1.6.0 ...]
    # there, in a copy of this repository with .whl beside it:
    bash .whl/run.sh [bugmatrix run options, e.g. --nproc 1 lightning]

The bundle holds the harness's own runtime requirements (pyproject's `dependencies`, less what a local run does
not use: uv, pytest, pytest-xdist) with their dependencies, for the target Python and manylinux x86-64, less the
distributions the image already has (`--have`, default: what the H200 image lists in the device notes), plus any
`--with` requirement (case packages the image lacks, e.g. torchrec or litgpt; downloaded without their
dependencies: name each one that is missing). `run.sh` installs them into a private folder (no index, no
network), then runs `python3 -m harness run --device cuda --python python3` ($BUGMATRIX_DEVICE overrides it),
writing the results store and the `--json` report under $OUT (default ./bugmatrix-cuda/); it first prints the
interpreter's torch, CUDA and NCCL versions, so the results file can be read beside them.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

ROOT = Path(__file__).resolve().parent.parent
NOT_FOR_A_LOCAL_RUN = {"uv", "pytest", "pytest-xdist"}  # environments, pytest items: not used by `run --python`
# What the nvidia-h200 image already holds among the harness's needs (device notes, read 2026-11-17).
IMAGE_HAS = [
    "packaging",
    "pyyaml",
    "rich",
    "psutil",
    "pygments",
    "markdown-it-py",
    "mdurl",
    "typing-extensions",
    "pytest",
    "pytest-xdist",
    "execnet",
    "pluggy",
    "iniconfig",
]
PLATFORMS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]

RUN_SH = """#!/usr/bin/env bash
# Runs bugmatrix's cases on this machine's own python3 (its torch), with no network: see tools/offline_bundle.py.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
python="${BUGMATRIX_PYTHON:-$(command -v python3)}"
site="${BUGMATRIX_SITE:-/tmp/bugmatrix-site}"
out="${OUT:-$repo/bugmatrix-cuda}"
device="${BUGMATRIX_DEVICE:-cuda}"
mkdir -p "$out"
"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" "$here"/*.whl
export PYTHONPATH="$site:$repo${PYTHONPATH:+:$PYTHONPATH}"
"$python" - <<'PY' | tee "$out/machine.txt"
import platform, torch
cuda = torch.cuda.is_available()
print("python", platform.python_version(), "torch", torch.__version__, "cuda", torch.version.cuda,
      "nccl", ".".join(map(str, torch.cuda.nccl.version())) if cuda else None,
      "gpus", [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())])
PY
cd "$repo"
set +e
"$python" -m harness run --device "$device" --python "$python" --db "$out/$device.db" --json "$@" > "$out/$device.json"
code=$?
set -e
# no matrix file: the report must not reach for a package index that this machine cannot reach
"$python" -m harness report --db "$out/$device.db" --matrix "$out/no-matrix.yaml" --format markdown \
  -o "$out/report.md" || true
echo "bugmatrix run exited $code; results: $out/$device.json, $out/$device.db, $out/report.md"
exit $code
"""


def requirements(pyproject: Path = ROOT / "pyproject.toml", lock: Path = ROOT / "uv.lock") -> list[str]:
    """The harness's runtime requirements that a local `bugmatrix run --python` uses (pyproject's dependencies and
    its `run` extra, less uv and pytest), each pinned to the version uv.lock holds (what the tests ran with)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    deps = [*project["dependencies"], *project.get("optional-dependencies", {}).get("run", [])]
    locked = {
        canonicalize_name(p["name"]): p["version"] for p in tomllib.loads(lock.read_text())["package"] if "version" in p
    }
    names = [canonicalize_name(Requirement(d).name) for d in deps]
    return [f"{name}=={locked[name]}" if name in locked else name for name in names if name not in NOT_FOR_A_LOCAL_RUN]


def pip_download(specs: list[str], out: Path, python_version: str, deps: bool) -> None:
    """`pip download` wheels for the target interpreter and platform into `out` (binary only)."""
    pip = [sys.executable, "-m", "pip"] if importlib.util.find_spec("pip") else ["uv", "tool", "run", "pip"]
    command = [
        *pip,
        "download",
        "-q",
        "--only-binary=:all:",
        "--python-version",
        python_version,
        "--implementation",
        "cp",
        "-d",
        str(out),
    ]
    for platform in PLATFORMS:
        command += ["--platform", platform]
    if not deps:
        command.append("--no-deps")
    subprocess.run(command + specs, check=True)


def drop_present(out: Path, have: list[str]) -> list[str]:
    """Delete the wheels in `out` of distributions the target already has; returns the names kept."""
    present = {canonicalize_name(name) for name in have}
    kept = []
    for wheel in sorted(out.glob("*.whl")):
        name = parse_wheel_filename(wheel.name)[0]
        if name in present:
            wheel.unlink()
        else:
            kept.append(wheel.name)
    return kept


def main(argv: list[str] | None = None) -> int:
    """Write the bundle: wheels plus run.sh; print what it holds and its size."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the bundle folder (e.g. .whl, ignored by git)")
    parser.add_argument("--python-version", default="3.12", help="the target interpreter's version (default 3.12)")
    parser.add_argument("--have", nargs="*", default=IMAGE_HAS, help="distributions the target already has")
    parser.add_argument(
        "--with",
        dest="extra",
        action="append",
        default=[],
        help="another requirement to carry, without its dependencies (repeatable)",
    )
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    pip_download(requirements(), args.out, args.python_version, deps=True)
    if args.extra:
        pip_download(args.extra, args.out, args.python_version, deps=False)
    kept = drop_present(args.out, args.have)
    (args.out / "run.sh").write_text(RUN_SH)
    size = sum(p.stat().st_size for p in args.out.iterdir()) / 2**20
    print(f"{args.out}: {len(kept)} wheels + run.sh, {size:.1f} MiB")
    for name in kept:
        print("  " + name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
