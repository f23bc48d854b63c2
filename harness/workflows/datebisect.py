"""Bisecting by date across dev builds, between two releases and before going to commits (as cargo-bisect-rustc
and mozregression do).

    line = date_line(matrix, "torch", ["torchrec", "fbgemm-gpu"], start, end, device="cpu")  # from the index
    line = plan_dates("torch", builds, start, end)            # the same, pure, over `Build`s already read
    found = search(line.builds, prober)                        # harness/workflows/search.py, one `DevBuild` each
    cell = probe_cell(matrix, build, device)                   # the stack of that date, exact pins
    line.between(found.last_old, found.first_new)              # the days that could not be tested in between
    commit_range(found)                                        # (old sha, new sha) for the commit level, if known

A dev build is dated by its version: `2.10.0.dev20250801` (PyTorch's nightly index: torch, torchrec, fbgemm-gpu
alike) or a date as the version, `2025.8.1` (torchrec-nightly / fbgemm-gpu-nightly on PyPI). One candidate per
calendar day from `start` to `end`: the newest version of the lead package dated that day with a wheel for this
platform and Python, with each companion package's build of the *same* day. A day is a gap, never good or bad,
when the lead or a companion has no build dated that day (pruned from the index, yanked, never made) or none with a
wheel for the platform; the gap says which. A day whose builds are all of the same commits as the day before it
(every commit known) is skipped as the same build. Each build's commit is read from its version's local label
(`+git<sha>` / `+g<sha>`) or, for a wheel on a `file://` index, from `<package>/version.py` in the wheel
(`git_version = '<sha>'`, as torch's wheels carry it: `torch.version.git_version`); otherwise it is unknown (None),
and the commit can still be read from a probe's environment (`python -c "import torch; print(torch.version
.git_version)"`). Reading it from an https index would need HTTP range requests into the wheel: not done here.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import lru_cache
from pathlib import Path
from urllib.parse import unquote, urlparse

from packaging.tags import Tag, compatible_tags, cpython_tags
from packaging.utils import InvalidWheelFilename, parse_wheel_filename
from packaging.version import Version

from harness.matrix import index as _index
from harness.matrix.basics import IndexLookupError
from harness.matrix.expand import Matrix
from harness.model.cell import BISECT_PREFIX, Cell
from harness.model.version import parse_release, parse_release_or_none
from harness.workflows.search import SearchResult

_LOCAL_COMMIT = re.compile(r"^(?:git|g)([0-9a-f]{7,40})$")
_VERSION_PY = re.compile(
    r"""^(?:git_version|__git_version__|git_hash|__git_hash__)\s*[:=]\s*['"]([0-9a-f]{7,40})['"]""", re.MULTILINE
)


class DateLineError(Exception):
    """The dev builds cannot be listed (index unreadable, bad range); one line."""


def build_date(version: Version | str) -> date | None:
    """The date a dev build is of: `X.Y.Z.devYYYYMMDD` or `YYYY.M.D`; None for any other version."""
    v = version if isinstance(version, Version) else parse_release_or_none(version)
    if v is None:
        return None
    try:
        if v.dev is not None and 10_000_000 <= v.dev <= 99_999_999:
            return date(v.dev // 10_000, v.dev // 100 % 100, v.dev % 100)
        if v.dev is None and not v.pre and len(v.release) == 3 and 2000 <= v.release[0] <= 9999:
            return date(*v.release)
    except ValueError:  # dev19 / 2025.13.40: not a date
        return None
    return None


@dataclass(frozen=True)
class Build:
    """One dev build of one package on the index: its version, day, a wheel for this platform (or None), commit."""

    package: str
    version: str
    day: date
    wheel: str | None
    commit: str | None = None


@dataclass(frozen=True)
class DevBuild:
    """A day's candidate: the lead package's build and its companions' builds of the same day, as exact pins."""

    lead: str
    day: date
    pins: dict[str, str]  # logical package -> exact version (lead first)
    commits: dict[str, str | None] = field(default_factory=dict)

    @property
    def version(self) -> str:
        return self.pins[self.lead]

    def __str__(self) -> str:  # how bisect's log and summary name a candidate
        return self.version


@dataclass(frozen=True)
class Gap:
    """A day that cannot be tested, and why (never good or bad)."""

    day: date
    why: str


@dataclass
class DateLine:
    """The candidates, oldest first (one per day with a distinct build), and the days that are not candidates."""

    lead: str
    builds: list[DevBuild] = field(default_factory=list)
    gaps: list[Gap] = field(default_factory=list)
    same: list[tuple[date, date]] = field(default_factory=list)  # (day skipped, earlier day with the same commits)

    def between(self, old: DevBuild, new: DevBuild) -> list[str]:
        """The days strictly between two candidates that were not tested, each with why."""
        lo, hi = min(old.day, new.day), max(old.day, new.day)
        out = [(g.day, f"{g.day}: {g.why}") for g in self.gaps if lo < g.day < hi]
        out += [(d, f"{d}: the same commit(s) as {earlier}") for d, earlier in self.same if lo < d < hi]
        return [text for _, text in sorted(out)]


def plan_dates(lead: str, builds: Mapping[str, Sequence[Build]], start: date, end: date) -> DateLine:
    """The date line from `start` to `end` (inclusive) over the builds of `lead` and of each companion (the other
    keys of `builds`); pure (see the module docstring for the rules)."""
    if end < start:
        raise DateLineError(f"{start} … {end}: the range ends before it starts")
    line = DateLine(lead)
    by_day: dict[str, dict[date, list[Build]]] = {}
    for package, found in builds.items():
        for b in found:
            by_day.setdefault(package, {}).setdefault(b.day, []).append(b)
    previous: DevBuild | None = None
    day = start
    while day <= end:
        chosen: dict[str, Build] = {}
        why = ""
        for package in [lead, *(p for p in builds if p != lead)]:
            that_day = by_day.get(package, {}).get(day, [])
            usable = [b for b in that_day if b.wheel]
            if not that_day:
                why = f"no {package} build dated {day} on the index (pruned, yanked or never made)"
            elif not usable:
                why = f"{package} {', '.join(sorted({b.version for b in that_day}))}: no wheel for this platform"
            else:
                chosen[package] = max(usable, key=lambda b: parse_release(b.version))
                continue
            break
        if why:
            line.gaps.append(Gap(day, why))
        else:
            candidate = DevBuild(
                lead, day, {p: b.version for p, b in chosen.items()}, {p: b.commit for p, b in chosen.items()}
            )
            commits = list(candidate.commits.values())
            if previous is not None and all(commits) and candidate.commits == previous.commits:
                line.same.append((day, previous.day))
            else:
                line.builds.append(candidate)
                previous = candidate
        day += timedelta(days=1)
    return line


@lru_cache(maxsize=8)
def _supported(python: str) -> frozenset[Tag]:
    major, minor = (int(x) for x in python.split(".")[:2])
    return frozenset([*cpython_tags((major, minor)), *compatible_tags((major, minor))])


def fits(filename: str, python: str = "3.11") -> bool:
    """Whether a wheel installs on this machine's platform for CPython `python` (sdists never count here)."""
    try:
        tags = parse_wheel_filename(filename)[3]
    except (InvalidWheelFilename, ValueError):
        return False
    return not tags.isdisjoint(_supported(python))


def commit_of(version: str, wheel_url: str | None) -> str | None:
    """The commit a build was made from: its local label (`+git<sha>`), else `git_version` in a `version.py` of
    a wheel on a `file://` index; None when neither says."""
    local = parse_release(version).local or ""
    for part in local.split("."):
        m = _LOCAL_COMMIT.match(part)
        if m:
            return m.group(1)
    if not wheel_url or not wheel_url.startswith("file://"):
        return None
    try:
        with zipfile.ZipFile(Path(unquote(urlparse(wheel_url).path))) as zf:
            for name in zf.namelist():
                if name.count("/") == 1 and name.endswith("/version.py"):
                    m = _VERSION_PY.search(zf.read(name).decode("utf-8", errors="replace"))
                    if m:
                        return m.group(1)
    except (OSError, zipfile.BadZipFile):
        return None
    return None


def read_builds(
    package: str, distribution: str, index_url: str, start: date, end: date, python: str = "3.11"
) -> list[Build]:
    """The dev builds of `distribution` on the index dated `start` … `end` (yanked files left out, so a yanked
    day is a gap), each with a wheel for this platform (or None) and its commit where it can be read."""
    try:
        found = _index.files(distribution, index_url)
    except IndexLookupError as exc:
        raise DateLineError(str(exc)) from None
    by_version: dict[str, list[tuple[str, str]]] = {}
    for f in found:
        day = build_date(f.version)
        if f.yanked or day is None or not start <= day <= end:
            continue
        by_version.setdefault(str(f.version), []).append((f.filename, f.url))
    out = []
    for version, its in by_version.items():
        wheel = next((url for name, url in its if fits(name, python)), None)
        out.append(
            Build(package, version, build_date(version) or start, wheel, commit_of(version, wheel) if wheel else None)
        )
    return sorted(out, key=lambda b: (b.day, parse_release(b.version)))


def date_line(
    matrix: Matrix,
    package: str,
    companions: Iterable[str],
    start: date,
    end: date,
    device: str,
    index_url: str | None = None,
    python: str | None = None,
) -> DateLine:
    """`plan_dates` over the builds read from the index (default: the matrix's; PyTorch's nightlies are on their
    own, an entry of `indexes`), the distributions those of `device`."""
    url = index_url or matrix.index_url()
    py = python or matrix.spec.defaults.python
    builds = {
        p: read_builds(p, matrix.distribution(p, device), url, start, end, py)
        for p in dict.fromkeys([package, *companions])
    }
    return plan_dates(package, builds, start, end)


def probe_cell(matrix: Matrix, build: DevBuild, device: str, index_url: str | None = None) -> Cell:
    """The cell of one day: every package of the stack pinned to that day's build, from the same index. The
    pairing rows are not applied: builds of one day go together (a release row says nothing about dev builds)."""
    return Cell(
        name=f"{BISECT_PREFIX}{build.lead}-{build.version}",
        device=device,
        python=matrix.spec.defaults.python,
        index_url=index_url or matrix.index_url(),
        pins=dict(build.pins),
    )


def commit_range(found: SearchResult[DevBuild]) -> tuple[str, str] | None:
    """The lead's commits of the two builds around the change, for the commit level; None unless both are known."""
    old, new = found.last_old.commits.get(found.last_old.lead), found.first_new.commits.get(found.first_new.lead)
    return (old, new) if old and new else None


def date_summary(line: DateLine, found: SearchResult[DevBuild]) -> str:
    """One line: the two days around the change, their versions and commits, and what could not be tested."""

    def one(b: DevBuild, outcome: str) -> str:
        commit = b.commits.get(b.lead)
        return f"{b.day} ({b.version}{', ' + commit[:12] if commit else ''}) ({outcome})"

    text = (
        f"dates {one(found.last_old, found.old.value)} → {one(found.first_new, found.new.value)} "
        f"[{len(found.probes)} probes]"
    )
    untested = line.between(found.last_old, found.first_new)
    return text + (f"; untestable in between: {'; '.join(untested)}" if untested else "")
