"""Git sources of pure-Python packages: URLs for uv, commit dates from local clones, and first-parent history."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from harness.model.errors import BugmatrixError

GIT_ROOT = Path(os.environ.get("BUGMATRIX_GIT", ".bugmatrix/git"))  # clones of remote sources


class GitError(BugmatrixError):
    """A source repository cannot be fetched, or a ref is not in it; one line."""


@dataclass
class Commit:
    """A first-parent commit: its full SHA and subject line."""

    sha: str
    subject: str

    def __str__(self) -> str:
        return self.sha[:12]


def git_url(url: str) -> str:
    """A URL uv can install from: `url` itself, or a local mirror folder as a file:// URL."""
    if "://" in url:
        return url
    return Path(url).resolve().as_uri()  # a local mirror folder


def commit_date(url: str, ref: str) -> datetime | None:
    """The committer date of `ref` when the source is a local clone (else unknown without cloning); what a record
    knows of it, `Chronology.commit_date` (harness/matrix/chronology.py) answers first."""
    if "://" in url and not url.startswith("file://"):
        return None
    repo = url.removeprefix("file://")
    try:
        out = subprocess.run(
            ["git", "-C", repo, "show", "-s", "--format=%cI", ref],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout.strip()
        return datetime.fromisoformat(out).astimezone(timezone.utc)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None


def git_checkout(url: str, package: str) -> Path:
    """A local bare clone of `url` (a local path is used as it is), fetched up to date."""
    if "://" not in url or url.startswith("file://"):
        return Path(url.removeprefix("file://"))
    target = GIT_ROOT / f"{package}.git"
    command = (
        ["git", "-C", str(target), "fetch", "--quiet", "--tags", "origin"]
        if target.exists()
        else ["git", "clone", "--quiet", "--bare", url, str(target)]
    )
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise GitError(
            f"cannot fetch {url}: {proc.stderr.strip()[-300:]} (set BUGMATRIX_MIRROR_"
            f"{package.upper().replace('-', '_')} to a local clone)"
        )
    return target


def resolve_ref(repo: Path, ref: str) -> str | None:
    """The commit `ref` names in `repo` (also trying the tag forms v<ref> and <ref>), or None."""
    for name in (ref, f"v{ref}", f"refs/tags/{ref}", f"refs/tags/v{ref}"):
        proc = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode == 0:
            return proc.stdout.strip()
    return None


def git_candidates(repo: Path, old_ref: str, new_ref: str) -> list[Commit]:
    """`old_ref`, then the first-parent commits after it up to `new_ref`, oldest first."""
    old, new = resolve_ref(repo, old_ref), resolve_ref(repo, new_ref)
    for ref, sha in ((old_ref, old), (new_ref, new)):
        if sha is None:
            raise GitError(f"{repo}: no commit or tag {ref!r}")
    proc = subprocess.run(
        ["git", "-C", str(repo), "log", "--first-parent", "--reverse", "--format=%H %s", f"{old}..{new}"],
        capture_output=True,
        text=True,
        check=True,
    )
    subject = subprocess.run(
        ["git", "-C", str(repo), "log", "-1", "--format=%s", str(old)], capture_output=True, text=True, check=True
    ).stdout.strip()
    commits = [Commit(str(old), subject)]
    for line in proc.stdout.splitlines():
        sha, _, subj = line.partition(" ")
        commits.append(Commit(sha, subj))
    if len(commits) < 2:
        raise GitError(f"{repo}: no first-parent commits between {old_ref} and {new_ref}")
    return commits


def first_parent_position(repo: Path, ref: str) -> int | None:
    """How many first-parent commits lead from the root to `ref` in `repo` (its position in history), or None."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-list", "--first-parent", "--count", ref],
        capture_output=True,
        text=True,
        check=False,
    )
    return int(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip().isdigit() else None
