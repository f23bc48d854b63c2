"""Small fake packages for hermetic tests: wheels built in a temp folder, served as a `file://` simple index.

Each release may carry a module body, so a fake "library" can behave differently from one version to the next,
and an upload time, so uv's --exclude-newer (time travel) can be tested.
"""

from __future__ import annotations

import base64
import hashlib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from packaging.utils import canonicalize_name


@dataclass
class FakeRelease:
    name: str
    version: str
    uploaded: str = "2024-01-01T00:00:00Z"
    requires: list[str] = field(default_factory=list)
    module: str = ""  # source of <package>/__init__.py
    package: str = ""  # the import package it provides (default: the name with - as _)
    files: dict[str, str] = field(default_factory=dict)  # more files: path inside the wheel -> source


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def build_wheel(release: FakeRelease, out: Path) -> Path:
    """A pure-Python wheel `<name>-<version>-py3-none-any.whl` in `out`."""
    module = release.package or release.name.replace("-", "_")
    dist_info = f"{release.name.replace('-', '_')}-{release.version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {release.name}\nVersion: {release.version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in release.requires
    )
    files = {
        f"{module}/__init__.py": (release.module or f"__version__ = {release.version!r}\n").encode(),
        **{path: text.encode() for path, text in release.files.items()},
        f"{dist_info}/METADATA": meta.encode(),
        f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: fake\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = [_record_line(p, d) for p, d in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{release.name.replace('-', '_')}-{release.version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def build_index(root: Path, releases: list[FakeRelease]) -> str:
    """Write wheels and PEP 503 pages (with data-upload-time) under `root`; return the index URL."""
    files, simple = root / "files", root / "simple"
    by_name: dict[str, list[tuple[Path, str]]] = {}
    for release in releases:
        wheel = build_wheel(release, files)
        by_name.setdefault(canonicalize_name(release.name), []).append((wheel, release.uploaded))
    for name, wheels in by_name.items():
        page = simple / name
        page.mkdir(parents=True, exist_ok=True)
        links = "\n".join(
            f'<a href="{w.as_uri()}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}" '
            f'data-upload-time="{t}">{w.name}</a><br/>'
            for w, t in wheels
        )
        (page / "index.html").write_text(f"<!DOCTYPE html><html><body>\n{links}\n</body></html>\n")
    return simple.as_uri()


# A stand-in for torchrun, for hermetic harness tests only (real cases always run real torch): it starts
# --nproc_per_node copies of the program with RANK/WORLD_SIZE set and, like torchrun, exits 1 when any fails
# (terminating the others).
FAKE_TORCHRUN = """
import os, subprocess, sys, time
args = sys.argv[1:]
nproc = 1
while args and args[0].startswith("--"):
    flag = args.pop(0)
    if flag.startswith("--nproc_per_node="):
        nproc = int(flag.split("=", 1)[1])
procs = []
for rank in range(nproc):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(nproc))
    procs.append(subprocess.Popen([sys.executable, "-u", *args], env=env))
failed = False
while any(p.poll() is None for p in procs):
    if any(p.poll() not in (None, 0) for p in procs):
        failed = True
        for p in procs:
            if p.poll() is None:
                p.terminate()
    time.sleep(0.05)
sys.exit(1 if failed or any(p.returncode != 0 for p in procs) else 0)
"""


def fake_torch(version: str, uploaded: str) -> FakeRelease:
    """A fake `torch` distribution providing only `python -m torch.distributed.run` (see FAKE_TORCHRUN)."""
    return FakeRelease("torch", version, uploaded, files={
        "torch/distributed/__init__.py": "",
        "torch/distributed/run.py": FAKE_TORCHRUN,
    })
