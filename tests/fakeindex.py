"""Small fake packages for hermetic tests: wheels built in a temp folder, served as a `file://` simple index.

Each release may carry a module body, so a fake "library" can behave differently from one version to the next,
and an upload time, so uv's --exclude-newer (time travel) can be tested. A release may also be yanked, built for
another platform (`tag`), or carry the commit it was built from (`git_version`, in `<package>/version.py` as torch's
wheels do), for nightly channels and the date bisection.
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
    tag: str = "py3-none-any"  # the wheel's tag (e.g. cp311-cp311-win_amd64: no wheel for this machine)
    yanked: bool = False
    git_version: str = ""  # the commit, written as `git_version = '<sha>'` in <package>/version.py (like torch)


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
        **(
            {
                f"{module}/version.py": (
                    f"__version__ = {release.version!r}\ngit_version = {release.git_version!r}\n"
                ).encode()
            }
            if release.git_version
            else {}
        ),
        **{path: text.encode() for path, text in release.files.items()},
        f"{dist_info}/METADATA": meta.encode(),
        f"{dist_info}/WHEEL": (
            f"Wheel-Version: 1.0\nGenerator: fake\nRoot-Is-Purelib: true\nTag: {release.tag}\n"
        ).encode(),
    }
    record = [_record_line(p, d) for p, d in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{release.name.replace('-', '_')}-{release.version}-{release.tag}.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return path


def build_index(root: Path, releases: list[FakeRelease]) -> str:
    """Write wheels and PEP 503 pages (with data-upload-time) under `root`; return the index URL."""
    files, simple = root / "files", root / "simple"
    by_name: dict[str, list[tuple[Path, str, bool]]] = {}
    for release in releases:
        wheel = build_wheel(release, files)
        by_name.setdefault(canonicalize_name(release.name), []).append((wheel, release.uploaded, release.yanked))
    for name, wheels in by_name.items():
        page = simple / name
        page.mkdir(parents=True, exist_ok=True)
        links = "\n".join(
            f'<a href="{w.as_uri()}#sha256={hashlib.sha256(w.read_bytes()).hexdigest()}" '
            f'data-upload-time="{t}"{" data-yanked" if y else ""}>{w.name}</a><br/>'
            for w, t, y in wheels
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
    return FakeRelease(
        "torch",
        version,
        uploaded,
        files={
            "torch/distributed/__init__.py": "",
            "torch/distributed/run.py": FAKE_TORCHRUN,
        },
    )


# A stdlib-only in-tree PEP 517 backend, so a fake git repository builds without any index.
FAKE_BACKEND = """
import base64, hashlib, os, zipfile

NAME, VERSION = "fakelib", "2.0.dev0"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    dist_info = f"{NAME}-{VERSION}.dist-info"
    files = {f"{NAME}/__init__.py": open(os.path.join(NAME, "__init__.py"), "rb").read(),
             f"{dist_info}/METADATA": f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n"
                                        f"Requires-Dist: torch\\n".encode(),
             f"{dist_info}/WHEEL": b"Wheel-Version: 1.0\\nGenerator: fake\\nRoot-Is-Purelib: true\\n"
                                     b"Tag: py3-none-any\\n"}
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    files[f"{dist_info}/RECORD"] = ("\\n".join(record + [f"{dist_info}/RECORD,,"]) + "\\n").encode()
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    return name
"""


def make_git_repo(path: Path, buggy: list[bool], tags: dict[int, str]) -> list[str]:
    """A git repository of a pure-Python `fakelib`, one commit per entry of `buggy`; returns the SHAs."""
    import subprocess

    def git(*args: str, date: str = "") -> str:
        env = {
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
            "PATH": "/usr/bin:/bin",
            "HOME": str(path),
        }
        if date:  # the commit date too (what `git log %cI` and the harness's history order read), not only the author's
            env["GIT_COMMITTER_DATE"] = date
        return subprocess.run(
            ["git", "-C", str(path), *args], check=True, capture_output=True, text=True, env=env
        ).stdout.strip()

    path.mkdir(parents=True)
    git("init", "-q", "-b", "main")
    (path / "backend.py").write_text(FAKE_BACKEND)
    (path / "pyproject.toml").write_text(
        '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n\n'
        '[project]\nname = "fakelib"\nversion = "2.0.dev0"\ndependencies = ["torch"]\n'
    )
    (path / "fakelib").mkdir()
    shas = []
    for i, bug in enumerate(buggy):
        (path / "fakelib" / "__init__.py").write_text(f"BUGGY = {bug}\n__version__ = '2.0.dev0'\nCOMMIT = {i}\n")
        git("add", "-A")
        git(
            "commit",
            "-q",
            "-m",
            f"change {i}" + (" (fixes the bug)" if i and buggy[i - 1] and not bug else ""),
            "--date",
            f"2024-02-{i + 1:02d}T00:00:00Z",
            date=f"2024-02-{i + 1:02d}T00:00:00Z",
        )
        shas.append(git("rev-parse", "HEAD"))
        if i in tags:
            git("tag", tags[i])
    return shas
