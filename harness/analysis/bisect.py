"""`bugmatrix bisect`: the release, and for pure-Python packages the commit, where a case's outcome changes.

    candidates = release_candidates(...) or git_candidates(...)   # ordered oldest first
    prober = CaseProber(...)                                       # one cell per candidate, environments cached
    found = search(candidates, prober, parallel)                   # harness/analysis/search.py

A probe pins the bisected package to one candidate; coupled packages move with it by the matrix's pairing data
(bisecting torchrec moves fbgemm and torch; bisecting torch moves the torchrec/fbgemm the case needs); everything
else resolves as of the probe's release (or commit) date. Each probe is recorded in the results store as a cell
named `bisect-<package>-<candidate>`; with `repeat` > 1 a probe whose repeats disagree is `flaky` (and skipped).
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from harness.launch.execute import Job, execute_repeated, run_scheduled
from harness.matrix.cellenvs import CellEnvironments, infra_result
from harness.matrix.index import releases
from harness.matrix.spec import Cell, GitPin, Matrix, MatrixError, apply_couplings
from harness.model.case import Case
from harness.model.outcome import Outcome
from harness.session.store import ResultStore

GIT_ROOT = Path(os.environ.get("BUGMATRIX_GIT", ".bugmatrix/git"))


class BisectError(Exception):
    """The bisection cannot start: bad arguments, no candidates, unreachable source; one line."""


@dataclass
class Commit:
    """A first-parent commit: its full SHA and subject line."""

    sha: str
    subject: str

    def __str__(self) -> str:
        return self.sha[:12]


def release_candidates(
    matrix: Matrix, case: Case, package: str, device: str, old: str | None, new: str | None, pre: bool = False
) -> list[str]:
    """Released versions of `package` from the index, oldest first, that the case (`supports`) and the matrix's
    pairings allow, between `old` and `new` inclusive (default: the oldest and newest allowed)."""
    dist = matrix.distribution(package, device)
    allowed = SpecifierSet(case.spec.supports.get(package, ""))
    leads = [c for c in matrix.spec.couplings if c.lead == package]
    index = os.environ.get("BUGMATRIX_INDEX_URL") or matrix.spec.indexes[matrix.spec.defaults.index]
    versions = []
    for release in releases(dist, index):
        v = release.version
        if release.yanked or (v.is_prerelease and not pre) or not allowed.contains(v, prereleases=True):
            continue
        if leads and not all(any(SpecifierSet(r[package]).contains(v, True) for r in c.rows) for c in leads):
            continue
        if (old and v < Version(old)) or (new and v > Version(new)):
            continue
        versions.append(str(v))
    for end, name in ((old, "--old"), (new, "--new")):
        if end and end not in versions and str(Version(end)) not in versions:
            raise BisectError(f"{name} {end}: not a release of {dist} the case and matrix allow")
    if len(versions) < 2:
        raise BisectError(f"{package}: fewer than two releases to bisect between ({', '.join(versions) or 'none'})")
    return versions


def git_checkout(url: str, package: str) -> Path:
    """A local bare clone of `url` (a local path is used as it is), fetched up to date."""
    if "://" not in url or url.startswith("file://"):
        return Path(url.removeprefix("file://"))
    target = GIT_ROOT / f"{package}.git"
    command = (["git", "-C", str(target), "fetch", "--quiet", "--tags", "origin"] if target.exists()
               else ["git", "clone", "--quiet", "--bare", url, str(target)])
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise BisectError(f"cannot fetch {url}: {proc.stderr.strip()[-300:]} (set BUGMATRIX_MIRROR_"
                          f"{package.upper().replace('-', '_')} to a local clone)")
    return target


def resolve_ref(repo: Path, ref: str) -> str | None:
    """The commit `ref` names in `repo` (also trying the tag forms v<ref> and <ref>), or None."""
    for name in (ref, f"v{ref}", f"refs/tags/{ref}", f"refs/tags/v{ref}"):
        proc = subprocess.run(["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}"],
                              capture_output=True, text=True, check=False)
        if proc.returncode == 0:
            return proc.stdout.strip()
    return None


def git_candidates(repo: Path, old_ref: str, new_ref: str) -> list[Commit]:
    """`old_ref`, then the first-parent commits after it up to `new_ref`, oldest first."""
    old, new = resolve_ref(repo, old_ref), resolve_ref(repo, new_ref)
    for ref, sha in ((old_ref, old), (new_ref, new)):
        if sha is None:
            raise BisectError(f"{repo}: no commit or tag {ref!r}")
    proc = subprocess.run(
        ["git", "-C", str(repo), "log", "--first-parent", "--reverse", "--format=%H %s", f"{old}..{new}"],
        capture_output=True, text=True, check=True,
    )
    subject = subprocess.run(["git", "-C", str(repo), "log", "-1", "--format=%s", str(old)], capture_output=True,
                             text=True, check=True).stdout.strip()
    commits = [Commit(str(old), subject)]
    for line in proc.stdout.splitlines():
        sha, _, subj = line.partition(" ")
        commits.append(Commit(sha, subj))
    if len(commits) < 2:
        raise BisectError(f"{repo}: no first-parent commits between {old_ref} and {new_ref}")
    return commits


BISECT_PREFIX = "bisect-"  # the cells of bisect probes are named bisect-<package>-<candidate>


def probe_cell(matrix: Matrix, case: Case, package: str, candidate: str | Commit, device: str,
               source: str | None = None, companions: dict[str, str | GitPin] | None = None) -> Cell:
    """The cell that pins `package` to `candidate`, with the packages coupled to it moved along.

    A commit has no version to look up in a pairing: its coupled packages are `companions` (the commit level
    passes the pins of the release the commits lead to, e.g. torchrec 1.2.0's fbgemm 1.2 and torch 2.7).
    """
    pin: str | GitPin = GitPin(git=candidate.sha) if isinstance(candidate, Commit) else candidate
    pins: dict[str, str | GitPin] = {package: pin}
    if isinstance(pin, GitPin):
        pins.update({k: v for k, v in (companions or {}).items() if k != package})
    needed = set(case.spec.packages)
    for coupling in matrix.spec.couplings:
        members = {p for row in coupling.rows for p in row}
        if package in members and package != coupling.lead and coupling.lead in needed and not isinstance(pin, GitPin):
            rows = [r for r in coupling.rows if package in r and SpecifierSet(r[package]).contains(Version(pin), True)]
            if not rows:
                raise MatrixError(f"{package} {pin}: no row of the pairing {coupling.name!r} allows it")
            for member, spec in rows[-1].items():
                pins.setdefault(member, spec)
    pins = apply_couplings(matrix.spec.couplings, pins, f"bisect {package} {candidate}")
    index = os.environ.get("BUGMATRIX_INDEX_URL") or matrix.spec.indexes[matrix.spec.defaults.index]
    return Cell(name=f"{BISECT_PREFIX}{package}-{candidate}", device=device, python=matrix.spec.defaults.python,
                index_url=index, pins=pins, sources={package: source} if source else {})


@dataclass
class CaseProber:
    """Probes candidates: builds each one's cell environment and runs the case there `repeat` times."""

    matrix: Matrix
    envs: CellEnvironments
    case: Case
    variant: str
    nproc: int
    device: str
    package: str
    repeat: int = 1
    cores: int = 1
    source: str | None = None
    store: ResultStore | None = None
    run_id: str = ""
    companions: dict[str, str | GitPin] = field(default_factory=dict)  # coupled pins for commit candidates
    on_probe: Callable[[str, Outcome, str], None] | None = None
    log: list[tuple[str, Outcome, str]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, batch: list[str | Commit]) -> list[Outcome]:
        return run_scheduled(batch, self.one, cost=lambda _: self.nproc * self.repeat, cores=self.cores)

    def one(self, candidate: str | Commit) -> Outcome:
        job = Job(self.case, self.variant, self.nproc, self.device)
        try:
            cell = probe_cell(self.matrix, self.case, self.package, candidate, self.device, self.source,
                              self.companions)
        except MatrixError as exc:
            results = [infra_result(job, str(exc), None)]
            cell_name = f"{BISECT_PREFIX}{self.package}-{candidate}"
        else:
            cell_name = cell.name
            resolved, env, problem = self.envs.get(cell)
            if env is None:
                results = [infra_result(job, problem, resolved)]
            else:
                results = [execute_repeated(job, env, self.repeat)]
        [result] = results
        if self.store:
            self.store.save(self.run_id, result, cell=cell_name)
        with self._lock:
            self.log.append((str(candidate), result.outcome, result.reason))
            if self.on_probe:
                self.on_probe(str(candidate), result.outcome, result.reason)
        return result.outcome
