"""`bugmatrix --version`: the code's version and commit, and the record's newest result and commit.

An installed wheel has no git: the build writes what git says into the wheel (`hatch_build.py` calls `facts` and
writes harness/_data/VERSION.json). A clone, which has no such file, asks git when asked. Standard library only, and
nothing of the harness beyond the light defaults: the build hook loads this file on its own, and `--version` must
answer as fast as `--help`.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

BUILT = "VERSION.json"  # in harness/_data/ (harness/model/basics.py PACKAGED), written by hatch_build.py
_ROW_DATE = re.compile(rb'"date":"([0-9T:Z-]+)"')  # a row's own field: inside an excerpt its quotes are escaped


def git(folder: Path, *args: str) -> str | None:
    """What `git -C folder args` prints (stripped), or None where git or a repository is not there."""
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def commit_of(folder: Path, path: str | None = None) -> str | None:
    """The commit of the work tree at `folder` (with `path`, the last commit that changed it), `-dirty` appended
    where the work tree differs from it; None outside a git repository."""
    limit = ["--", path] if path else []
    found = git(folder, "log", "-1", "--format=%H", *limit)
    if not found:
        return None
    changed = git(folder, "status", "--porcelain", "--untracked-files=no", *limit)
    return f"{found}-dirty" if changed else found


def newest_result(record: Path) -> str | None:
    """The date of the newest result row of `record` (results/*.jsonl, compat.jsonl), None where it holds none."""
    files = sorted((record / "results").glob("*.jsonl")) + [record / "compat.jsonl"]
    dates = [m.group(1).decode() for f in files if f.is_file() for m in _ROW_DATE.finditer(f.read_bytes())]
    return max(dates, default=None)


def record_facts(record: Path) -> dict[str, str | None]:
    """What `--version` says of the record at `record`: its newest result's date and the last commit that changed
    it (None outside git)."""
    folder = record if record.is_dir() else record.parent
    return {"date": newest_result(record), "commit": commit_of(folder, ".") if record.is_dir() else None}


def facts(root: Path) -> dict[str, Any]:
    """What `--version` says of the source tree at `root`: the code's commit and its record's facts (what a build
    writes into the wheel)."""
    return {"commit": commit_of(root), "record": record_facts(root / "record")}


def built() -> dict[str, Any] | None:
    """The facts a build wrote into this installed wheel, or None (a clone)."""
    from harness.model.basics import PACKAGED

    path = PACKAGED / BUILT
    return json.loads(path.read_text()) if path.is_file() else None


def version_text() -> str:
    """The `--version` answer: the code's version and commit, then the record a plain command reads, with its newest
    result and commit (from the build for the wheel's own record, else from the record and git now)."""
    from importlib.metadata import PackageNotFoundError, version

    from harness.model.basics import PACKAGED, SOURCE_TREE
    from harness.session.basics import default_record

    try:
        code = version("bugmatrix")
    except PackageNotFoundError:  # run from a source tree that was never installed
        code = "unknown"
    known = built()
    commit = known["commit"] if known else commit_of(SOURCE_TREE)
    record = default_record()
    wheel_record = known is not None and record.resolve() == (PACKAGED / "record").resolve()
    about = known["record"] if known is not None and wheel_record else record_facts(record)
    return (
        f"bugmatrix {code} (commit {commit or 'unknown'})\n"
        f"the record in {record}: newest result {about['date'] or 'none'}, commit {about['commit'] or 'unknown'}"
    )
