"""tools/gpu_kit.py end to end on this machine: prepare a kit (a stand-in fbgemm wheel, tiny wheels for the
bundle, no download), send its pieces as the device calls would, run it with $BUGMATRIX_DEVICE=cpu on a subset of the
cases, and fold the store it leaves into a record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.fakewheel import cuda_wheel

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import gpu_kit  # noqa: E402

CASE, VARIANT = "torch-121157-assign-requires-grad", "frozen"  # a quick CPU case that also runs at 2 ranks


def tiny_wheel(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(f"{name}.py", "VALUE = 1\n")
        wheel.writestr(f"{name}-0.1.dist-info/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        wheel.writestr(f"{name}-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr(f"{name}-0.1.dist-info/RECORD", "")
    return path


def test_pieces_cut_and_reassemble_and_a_missing_one_is_named(tmp_path: Path) -> None:
    files = []
    for name, size in (("bundle/a.whl", 700), ("torchrec/b.whl", 0), ("fbgemm.tar.xz", 2500)):
        path = tmp_path / name.replace("/", "_")
        path.write_bytes(os.urandom(size))
        files.append((name, path))
    manifest = gpu_kit.cut(files, 1000)
    assert [sum(s["length"] for s in piece) for piece in manifest["pieces"]] == [1000, 1000, 1000, 200]
    folders = gpu_kit.write_pieces(manifest, dict(files), tmp_path / "kit")
    stash = tmp_path / "stash"
    for folder in folders[:2]:
        gpu_kit.receive(folder, stash)
    done, missing = gpu_kit.assemble(stash, [])
    assert sorted(done) == ["bundle/a.whl", "torchrec/b.whl"] and missing == ["piece 3", "piece 4"]
    done, missing = gpu_kit.assemble(stash, folders[2:])
    assert missing == [] and done["fbgemm.tar.xz"].read_bytes() == files[2][1].read_bytes()
    (folders[3] / manifest["pieces"][3][0]["segment"]).write_bytes(b"x" * 200)  # corrupted in transfer
    with pytest.raises(gpu_kit.KitError, match="fbgemm.tar.xz: reassembled file does not match its sha256"):
        gpu_kit.assemble(stash, folders[2:])


def test_the_kit_runs_end_to_end_on_cpu_and_its_store_folds(tmp_path: Path) -> None:
    fbgemm = cuda_wheel(tmp_path, {80: b"\x80" * 5000, 90: b"\x90" * 5000})
    folders = gpu_kit.prepare(
        tmp_path / "kit",
        fbgemm,
        90,
        600,
        "3.12",
        tiny_wheel(tmp_path / "b", "kitprobe").parent,
        tiny_wheel(tmp_path / "t", "kitprobe_b").parent,
    )
    assert len(folders) >= 2 and all(sum(p.stat().st_size for p in f.glob("seg-*")) <= 600 for f in folders)
    stash, out = tmp_path / "stash", tmp_path / "out"
    kit = [sys.executable, str(ROOT / "tools" / "gpu_kit.py")]
    env = {**os.environ, "BUGMATRIX_DEVICE": "cpu"}
    subset = ["--repeat", "1", "--cases", CASE, "fbgemm-5816", "--variant", VARIANT, "bug"]

    def call(*args: str, out: Path) -> str:  # one device call; its $OUT starts empty
        proc = subprocess.run(
            [*kit, *args, "--stash", str(stash)] + (["--out", str(out)] if args[0] == "run" else []),
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        return proc.stdout

    # as gpu_kit.device_calls says: the first piece and the first steps, the middle pieces, the last piece and pass b
    call("receive", str(folders[0]), out=out)
    call(
        "run",
        "--pieces",
        *subset,
        "--steps",
        "a",
        "two-rank",
        "bench",
        "--two-rank",
        CASE,
        VARIANT,
        "--bench",
        CASE,
        VARIANT,
        "--bench-runs",
        "1",
        out=out / "1",
    )
    for folder in folders[1:-1]:
        call("receive", str(folder), out=out)
    call("run", "--pieces", str(folders[-1]), *subset, "--steps", "b", "report", out=out / "2")
    assert sorted(p.name for p in (out / "1").iterdir()) == [
        "kit.db",
        "kit.log",
        "machine.json",
        "overhead.txt",
        "pass-a.json",
        "world-size-2.json",
    ]
    assert sorted(p.name for p in (out / "2").iterdir()) == [
        "kit.db",
        "kit.log",
        "machine.json",
        "pass-b.json",
        "report.md",
    ]
    log = (out / "2" / "kit.log").read_text()  # both calls' lines
    assert "[site-a] kitprobe-0.1" in log and "[site-b] fbgemm_gpu-1.6.0, kitprobe-0.1, kitprobe_b-0.1" in log
    assert "[pass-b] exit 5" in log  # on CPU the CUDA-only case has nothing to run
    assert "[overhead] " in log and "(launched: True)" in log  # on CPU the 2-rank job runs
    out = out / "2"
    machine = json.loads((out / "machine.json").read_text())
    assert machine["cores"] == os.cpu_count() and machine["cpu"] and machine["torch"]
    results = json.loads((out.parent / "1" / "pass-a.json").read_text())["results"]
    assert [(r["case"], r["variant"], r["nproc"], r["device"]) for r in results] == [(CASE, VARIANT, 1, "cpu")]
    assert all(r["outcome"] == r["expected"] for r in results), results
    two = json.loads((out.parent / "1" / "world-size-2.json").read_text())["results"]
    assert [(r["nproc"], r["launched"]) for r in two] == [(2, True)]  # on CPU two ranks run (gloo)
    assert "median ratio" in (out.parent / "1" / "overhead.txt").read_text()
    cell = gpu_kit.cell_name(machine)
    assert f"record fold <files_at>/kit.db --cell {cell}" in log
    record = tmp_path / "record"
    fold = subprocess.run(
        [
            sys.executable,
            "-m",
            "harness",
            "record",
            "fold",
            str(out / "kit.db"),
            "--cell",
            cell,
            "--record",
            str(record),
            "--offline",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert fold.returncode == 0, fold.stderr
    rows = [json.loads(line) for line in (record / "results" / f"{CASE}.jsonl").read_text().splitlines()]
    assert {r["cell"] for r in rows} == {cell}
    assert sorted(r["nproc"] for r in rows) == [1] * len(results) + [2]  # on CPU the 2-rank job is a measurement
    machines = [json.loads(line) for line in (record / "machines.jsonl").read_text().splitlines()]
    assert [m["cores"] for m in machines] == [os.cpu_count()]


def test_prepare_says_which_device_calls_to_make() -> None:
    folders = [gpu_kit.ROOT / ".kit" / f"piece-{k}" for k in (1, 2, 3)]
    assert gpu_kit.device_calls(folders) == [
        "carry [.kit/piece-1]: python3 tools/gpu_kit.py receive .kit/piece-1 && python3 tools/gpu_kit.py run "
        "--steps a two-rank bench",
        "carry [.kit/piece-2]: python3 tools/gpu_kit.py receive .kit/piece-2",
        "carry [.kit/piece-3]: python3 tools/gpu_kit.py run --steps b report",
    ]


def test_cell_names_say_the_gpu_and_the_torch_build() -> None:
    assert gpu_kit.cell_name({"gpu": ["NVIDIA H100 80GB HBM3"], "torch": "2.11.0+cu130"}) == "h100-torch-2.11.0+cu130"
    assert gpu_kit.cell_name({"gpu": ["NVIDIA H200"], "torch": "2.11.0+cu130"}) == "h200-torch-2.11.0+cu130"
    assert gpu_kit.cell_name({"torch": "2.14.1"}) == "cpu-torch-2.14.1"
