"""`bugmatrix narrow`: turn every interval boundary in the store into an adjacent one, by bisecting between them.

    targets = intervals(results, cases, between, ...)     # boundaries with releases between that were not run
    outcomes = narrow(targets, cases, probing)            # each bisected; probes recorded (workflows/probing.py)

For each case x variant x device x package axis whose outcome changes between two versions that are not adjacent
on the index, the releases strictly between are bisected. The two endpoints are not run again: their recorded
statuses seed the search. Each probe is the cell at the older endpoint (its other pins kept) with the package moved
to the candidate (coupled packages moved along by the pairing), run at the world sizes the case declares and
combined as a matrix cell combines them; probes are recorded as `bisect-<package>-<version>` cells and resumed
from the store, so a second `narrow` launches nothing. On a coupled slice (harness/analysis/slices.py: torch where
lightning 2.6.6's cells disagree) the older endpoint is one of the slice's cells, the held version is always pinned,
and the probe cells are named after it too (`bisect-torch-2.7.0-lightning-2.6.6`). With `commits`, an adjacent
release boundary of a package whose repository is known (a local clone: `sources`, $BUGMATRIX_MIRROR_<NAME>) goes
on to the first-parent commits between the two releases. A boundary that cannot be narrowed says why, citing the
results that show it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from packaging.version import Version

from harness.analysis.transitions import FIXED, REPRODUCED, Axis, Between, Boundary, axes
from harness.analysis.undecided import gist as _gist
from harness.matrix.expand import Matrix
from harness.matrix.git import Commit, git_candidates, resolve_ref
from harness.matrix.resolve import dater
from harness.model.case import Case
from harness.model.cell import GitPin, Pin
from harness.model.common import primary_package
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.model.version import RELEASE, PinVersion, short, version_key
from harness.session.pipeline import Resume
from harness.workflows.bisect import CaseProber
from harness.workflows.probing import Probing
from harness.workflows.search import BisectRefused, SearchResult, search, verdict_line

STATUS = {REPRODUCED: Outcome.REPRODUCED, FIXED: Outcome.FIXED}


@dataclass(frozen=True)
class Target:
    """One boundary to narrow, on its axis, with the pins of the cell at its older endpoint."""

    axis: Axis
    boundary: Boundary
    base: dict[str, Pin]


@dataclass
class Narrowed:
    """What narrowing one boundary found: the new boundary (or why there is none), and the probes it took."""

    target: Target
    found: SearchResult | None = None
    level: str = "release"
    why_not: str = ""
    probes: list[tuple[str, Outcome, str]] = field(default_factory=list)

    @property
    def adjacent(self) -> bool:
        """Narrowed to two sides with nothing between them: no version left untested, none that could not say."""
        return self.found is not None and self.found.decided and not self.found.ambiguous and not self.unsaid

    @property
    def unsaid(self) -> list[str]:
        """Versions between the found sides that were run before the narrowing and could not say (not probed again:
        an error or a skip measures the same on a second launch)."""
        if self.found is None:
            return []
        return _between(self.target.boundary.undecided, self.found.last_old, self.found.first_new)

    def line(self) -> str:
        """One line fit for an upstream comment."""
        a, b = self.target.axis, self.target.boundary
        head = a.label
        if self.found is None:
            return f"{head}: {b.text()} — not narrowed: {self.why_not}"
        f = self.found
        if f.verdict is not None:  # a flaky search (`--repeat auto`): its verdict and confidence, or undecided
            return f"{head}: {verdict_line(f)} [{self.level} level]"
        new = f'{f.first_new.sha[:12]} "{f.first_new.subject}"' if isinstance(f.first_new, Commit) else f.first_new
        old = f.last_old.sha[:12] if isinstance(f.last_old, Commit) else f.last_old
        where = f"{b.kind} in {new} ({old} {f.old.value})"
        if f.ambiguous:
            where = (
                f"{b.kind} between {old} and {new} (untestable in between: "
                f"{', '.join(map(str, f.ambiguous))}; {self.why_not})"
            )
        elif self.unsaid:
            where = f"{b.kind} between {old} and {new} (could not say: {', '.join(map(short, self.unsaid))})"
        return f"{head}: {where} [{len(self.probes)} probes, {self.level} level]"


def _between(versions: tuple[str, ...], low: object, high: object) -> list[str]:
    """The release `versions` that lie strictly between `low` and `high` (releases; nothing for commits)."""
    if not isinstance(low, str) or not isinstance(high, str):
        return []
    lo, hi = _release(low), _release(high)
    if lo is None or hi is None:
        return []
    return [v for v in versions if (r := _release(v)) is not None and lo < r < hi]


def _release(text: str) -> Version | None:
    """The release of a recorded version that is a plain release (`2.6.0`), else None (a commit, a git install)."""
    pin = PinVersion.parse(text)
    return pin.release if pin.kind == RELEASE else None


def selected_axes(
    results: list[tuple[str, Result]],
    cases: dict[str, Case],
    matrix: Matrix,
    packages: set[str] | None = None,
    devices: set[str] | None = None,
    case_ids: set[str] | None = None,
) -> list[Axis]:
    """The axes `narrow` looks at: each case's primary package unless `packages` names others (a lightning case's
    torch only follows lightning's date, so a "torch interval" there is no boundary to narrow), then the coupled
    slices of the primary axes (harness/analysis/slices.py: torch with lightning held at 2.6.6, where lightning
    2.6.6's cells disagree) along the packages asked for (any, when none is), limited to the given devices and
    cases. An axis whose `unplaced` is not empty holds git installs no local clone dates: whether a boundary
    hides among them cannot be said until one is set."""
    from harness.analysis.slices import slices

    when = dater(matrix)
    chosen, primaries = [], []
    for axis in axes(results, {cid: list(c.spec.packages) for cid, c in cases.items()}, when):
        if (
            axis.case not in cases
            or (devices and axis.device not in devices)
            or (case_ids and axis.case not in case_ids)
        ):
            continue
        primary = primary_package(list(cases[axis.case].spec.packages))
        if axis.package in (packages or {primary}):
            chosen.append(axis)
        if axis.package == primary:
            primaries.append(axis)
    return chosen + [sub for sub in slices(primaries, results, cases, when) if not packages or sub.package in packages]


def interval_targets(chosen: list[Axis], between: Between, matrix: Matrix) -> list[Target]:
    """Every boundary on `chosen` that is not adjacent, with the pins of the matrix cell at its older endpoint (on a
    slice, one of the slice's cells, and always its held version)."""
    targets = []
    for axis in chosen:
        for boundary in axis.boundaries(between):
            if not boundary.adjacent:
                targets.append(Target(axis, boundary, _base(axis, boundary.before, matrix)))
    return targets


def _base(axis: Axis, version: str, matrix: Matrix) -> dict[str, Pin]:
    """The pins a probe between `axis`'s sides keeps: the matrix cell's at `version`, and on a slice (another of
    its matrix cells when only probes ran at `version`) the version it holds, lightning 2.6.6, whatever that pins."""
    cells = {c.name: c for c in matrix.cells}
    point = next(p for p in axis.points if p.version == version)
    named = [cells[c] for c in point.cells if c in cells]
    if not named and axis.within:  # a slice's side that only a probe measured: another cell of the slice
        named = [cells[c] for p in axis.points for c in p.cells if c in cells]
    base: dict[str, Pin] = dict(named[0].pins) if named else {}
    if axis.within:
        package, held = axis.within
        pin = PinVersion.parse(held)
        base[package] = GitPin(git=pin.commit) if pin.commit else held
    return base


def intervals(
    results: list[tuple[str, Result]],
    cases: dict[str, Case],
    between: Between,
    matrix: Matrix,
    packages: set[str] | None = None,
    devices: set[str] | None = None,
    case_ids: set[str] | None = None,
) -> list[Target]:
    """Every boundary in `results` that is not adjacent, on the axes `selected_axes` chooses."""
    return interval_targets(selected_axes(results, cases, matrix, packages, devices, case_ids), between, matrix)


def measured_between(target: Target, results: list[tuple[str, Result]], cases: dict[str, Case]) -> str:
    """Why `target` is as narrow as it can be measured, or "" when something between can still be launched or said
    otherwise. That holds when no release between was left unrun and every version between that could not say is
    either *mixed* (its cells disagree: another package decides there, and the report reads the boundary along it) or
    measured as the case's rules expect (an `error` or `skip` its rules name, e.g. a release whose kernel is missing):
    launching again would measure the same, so the boundary is stated with what lies between, not as an interval."""
    from harness.analysis.reproduce import results_at
    from harness.analysis.transitions import MIXED
    from harness.model.expectations import environment_of, expected_outcome

    b, axis = target.boundary, target.axis
    case = cases.get(axis.case)
    if case is None or b.untested != () or not b.undecided or axis.variant not in case.spec.variants:
        return ""
    variant = case.spec.variants[axis.variant]
    status = {p.version: p.status for p in axis.points}
    said = []
    for version in b.undecided:
        if status.get(version) == MIXED:
            said.append(f"{short(version)}: reproduces in some cells, not others (another package decides)")
            continue
        found = [r for r in results_at(results, axis, version) if r.outcome is not Outcome.INFRA]
        if not found or any(
            r.outcome in (Outcome.REPRODUCED, Outcome.FIXED)
            or r.outcome != expected_outcome(variant, environment_of(r), r.nproc, r.device)
            for r in found
        ):
            return ""
        r = max(found, key=lambda r: r.nproc)
        said.append(f"{short(version)}: {r.outcome.value} as the case's rules expect ({_gist(r.reason)})")
    return "measured between: " + "; ".join(said)


def narrow(targets: list[Target], cases: dict[str, Case], probing: Probing, commits: bool = False) -> list[Narrowed]:
    """Bisect each target between its endpoints (see the module docstring); every probe is recorded in
    `probing.store`."""
    matrix, store, say = probing.matrix, probing.store, probing.say
    done = []
    if probing.policy is not None and targets:
        say(probing.policy.text() + " (--max-launches)")
    for target in targets:
        axis, b = target.axis, target.boundary
        latest = store.latest() if b.undecided else []  # read once: what the versions between showed
        retry = _nothing_measured(axis, b, latest) if b.undecided and b.untested is not None else ()
        if retry:  # an environment that could not be made measured nothing: probe it again, as a resumed run does
            again = (*(b.untested or ()), *retry)  # commits: the clone gives the candidates, in its order
            b = replace(
                b,
                untested=again if b.commits else tuple(sorted(again, key=version_key)),
                undecided=tuple(v for v in b.undecided if v not in retry),
            )
            target = replace(target, boundary=b)
        outcome = Narrowed(target)
        if not b.untested:
            outcome.why_not = _undecided_why(axis, b, latest) if b.undecided else "what lies between is unknown"
            say(outcome.line())
            done.append(outcome)
            continue
        case = cases[axis.case]
        prober = CaseProber(
            probing,
            case,
            axis.variant,
            max(case.spec.nproc),
            axis.device,
            axis.package,
            base=target.base,
            suffix=probe_suffix(axis),
            nprocs=tuple(case.spec.nproc),
            resume=Resume(store),
            source=matrix.source(axis.package),
        )
        candidates = _candidates(b, prober)
        old, new = STATUS[b.old], STATUS[FIXED if b.kind == "fixed" else REPRODUCED]
        say(
            f"narrowing {axis.label}: {b.before} … {b.after} "
            f"({len(b.untested)} {'commit(s)' if b.commits else 'release(s)'} between)"
        )
        try:
            found = search(
                candidates,
                prober,
                parallel=max(1, probing.cores // max(case.spec.nproc)),
                known={0: old, len(candidates) - 1: new},
                adaptive=prober.adaptive,
            )
        except BisectRefused as exc:  # cannot happen with two decisive endpoints; kept honest if it does
            outcome.why_not = str(exc)
        else:
            outcome.found = found
            if isinstance(found.first_new, Commit):  # the endpoints were git installs: commits all along
                outcome.level = "commit"
            if not found.decided:
                outcome.why_not = verdict_line(found)
            elif found.ambiguous:
                outcome.why_not = _probe_reasons(prober.log, {str(a) for a in found.ambiguous})
            elif commits and prober.source and outcome.level != "commit":
                _commit_level(outcome, prober, matrix, say)
        outcome.probes = list(prober.log)
        say(outcome.line())
        done.append(outcome)
    return done


def comments(
    done: list[Narrowed], results: list[tuple[str, Result]], cases: dict[str, Case], between: Between, matrix: Matrix
) -> list[str]:
    """For each narrowed boundary, the comment to paste upstream (harness/analysis/reproduce.py), read from the
    store's results after the narrowing: the boundary as it now stands (on its slice, for a slice's), and the command
    for each side."""
    from harness.analysis.reproduce import upstream_comment
    from harness.analysis.slices import slices

    out = []
    when = dater(matrix)
    now = axes(results, {cid: list(c.spec.packages) for cid, c in cases.items()}, when)
    primaries = [a for a in now if a.case in cases and a.package == primary_package(list(cases[a.case].spec.packages))]
    now += slices(primaries, results, cases, when)
    for d in done:
        old, was = d.target.boundary, d.target.axis
        for axis in now:
            if (axis.case, axis.variant, axis.device, axis.package, axis.within) != (
                was.case,
                was.variant,
                was.device,
                was.package,
                was.within,
            ):
                continue
            versions = [p.version for p in axis.points]
            if old.before not in versions or old.after not in versions:  # the endpoints cannot be placed any more
                continue
            lo, hi = versions.index(old.before), versions.index(old.after)
            for b in axis.boundaries(between):
                if b.kind == old.kind and lo <= versions.index(b.before) and versions.index(b.after) <= hi:
                    out.append(upstream_comment(cases[axis.case], axis, b, results, matrix))
    return out


def _commit_level(outcome: Narrowed, prober: CaseProber, matrix: Matrix, say: Callable[[str], None]) -> None:
    """Go on to the first-parent commits between the two adjacent releases (a local clone is needed)."""
    found = outcome.found
    assert found is not None and prober.source
    source = prober.source.removeprefix("file://")
    repo = Path(source)
    if "://" in source or not all(resolve_ref(repo, str(v)) for v in (found.last_old, found.first_new)):
        outcome.why_not = f"no local clone with tags for {found.last_old} and {found.first_new} (commit level skipped)"
        return
    commits = git_candidates(repo, str(found.last_old), str(found.first_new))
    newer = {k: v for k, v in prober.base.items() if k != prober.package}
    prober.companions = newer
    say(f"  {len(commits)} first-parent commits of {prober.package} between {found.last_old} and {found.first_new}")
    try:
        known = {0: found.old, len(commits) - 1: found.new}
        outcome.found = search(commits, prober, known=known, adaptive=prober.adaptive)
        outcome.level = "commit"
    except BisectRefused as exc:
        outcome.why_not = f"commit level: {exc}"
    prober.companions = {}


def probe_suffix(axis: Axis) -> str:
    """What a slice's probe cells are named after their candidate (`-lightning-2.6.6`), so that they are never taken
    for a probe with another base; "" off a slice."""
    if axis.within is None:
        return ""
    package, held = axis.within
    pin = PinVersion.parse(held)
    return f"-{package}-{pin.commit[:12] if pin.commit else held}"


def _candidates(b: Boundary, prober: CaseProber) -> list[str | Commit]:
    """The boundary's endpoints and what lies between, oldest first: releases as version strings, and where either
    endpoint is a git install (`0.4.0.dev0 @ <sha>`), the first-parent commits of the local clone between the two
    (the clone `between` read them from), so that each probe installs its commit rather than a version."""
    if not b.commits:
        return [b.before, *(b.untested or ()), b.after]  # `narrow` asks only where some lie between
    repo = Path((prober.source or "").removeprefix("file://"))
    old, new = (p.commit or p.text for p in map(PinVersion.parse, (b.before, b.after)))
    return list(git_candidates(repo, old, new))


def _nothing_measured(axis: Axis, boundary: Boundary, results: list[tuple[str, Result]]) -> tuple[str, ...]:
    """The versions between `boundary`'s sides (releases between releases, commits pinned as `git:<sha>` between
    commits) whose every result on `axis` is `infra` (the environment could not be made: nothing was measured there,
    unlike an error or a timeout, which are measurements)."""
    cells = {p.version: set(p.cells) for p in axis.points}
    commits = boundary.commits  # a commit boundary probes commits, a release one releases
    out = []
    for version in boundary.undecided:
        if bool(PinVersion.parse(version).commit) != commits:
            continue
        found = [
            r
            for cell, r in results
            if cell in cells.get(version, ())
            and (r.case, r.variant, r.device) == (axis.case, axis.variant, axis.device)
        ]
        if found and all(r.outcome is Outcome.INFRA for r in found):
            out.append(version)
    return tuple(out)


def _undecided_why(axis: Axis, boundary: Boundary, results: list[tuple[str, Result]]) -> str:
    """Why a boundary with only undecided versions between cannot be narrowed: the results that show it."""
    from harness.analysis.reproduce import at

    cells = {p.version: ", ".join(p.cells) for p in axis.points}
    shown = [(version, at(results, axis, version)) for version in boundary.undecided]
    return "the versions between could not say: " + "; ".join(
        f"{version} in {cells[version]}: {r.outcome.value} ({_gist(r.reason)})" for version, r in shown if r
    )


def _probe_reasons(log: list[tuple[str, Outcome, str]], wanted: set[str]) -> str:
    shown = [f"{c}: {o.value} ({_gist(why)})" for c, o, why in log if c in wanted]
    return "the releases between could not say: " + ("; ".join(shown) or "not probed")
