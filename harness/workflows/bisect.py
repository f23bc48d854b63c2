"""`bugmatrix bisect`: the release, and for pure-Python packages the commit, where a case's outcome changes.

    levels = bisect(Probing(matrix, envs, store, run_id, cores, repeat, say=say), request)   # the whole policy
    candidates = release_candidates(...) or git_candidates(...)   # ordered oldest first
    prober = CaseProber(...)                                       # one cell per candidate, through the pipeline
    found = search(candidates, prober, parallel)                   # harness/workflows/search.py

The policy (`bisect`): the release level first, unless refs are given; then, when the package's source repository
is known (`--git`, the case's or the matrix's `sources`, $BUGMATRIX_MIRROR_<NAME>) and the release level found an
unambiguous boundary, the first-parent commits between those two releases, each paired with what the newer release
pairs with (torchrec main goes with the next fbgemm and torch).

A probe pins the bisected package to one candidate; coupled packages move with it by the matrix's pairing data
(bisecting torchrec moves fbgemm and torch; bisecting torch moves the torchrec/fbgemm the case needs); everything
else resolves as of the probe's release (or commit) date. Each probe is recorded in the results store as a cell
named `bisect-<package>-<candidate>`; with `repeat` > 1 a probe whose repeats disagree is `flaky` (and skipped).
A probe the store already holds (same script, pins and run settings) is reused, and its line says so.

With `--repeat auto` (a flaky case: `Probing.policy`) a candidate is launched in batches, as many as
`Policy.more` says (10, doubling to the cap), at the case's largest world size; each batch is saved under the run
with the candidate's repeat-free `pool`, added to that run's earlier batches of the candidate (the store keeps one
result per key a run, so no launch counts twice), and the candidate's tally is read back pooled over every run
(`Store.pooled`): earlier runs' repeats count, and the answer says how many were reused. The search locates the
rate's change point (harness/workflows/search.py `search_flaky`) and states its confidence, or that it could not
decide within the cap.

An endpoint that cannot be tested here is stepped over to the nearest release that can, and named with why: one
that cannot be installed or imported (`infra`), or one whose launcher failed before any rank started (an `error`,
`no_rank_started`: torch 1.13.0's torchrun on a newer Python; not `infra`, which is retried elsewhere). Before the
first probe, `plan_line` says how many environments the release level may build, its first probes, and what the
environments already built here say of the download; with a disk budget, finished probes' environments are
evicted before a new one is built (`CellEnvironments`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from harness.analysis.flaky import Tally
from harness.analysis.precision import allowed_releases
from harness.analysis.transitions import FIXED, FLAKY, REPRODUCED, cell_status, short
from harness.launch.classify import NO_RANK_STARTED, no_rank_started
from harness.launch.execute import infra_result
from harness.launch.logscan import human_size
from harness.matrix.basics import MatrixError
from harness.matrix.envcache import EnvCache, disk_usage
from harness.matrix.expand import Matrix, apply_couplings, pairing_row
from harness.matrix.git import Commit, git_candidates, git_checkout, resolve_ref
from harness.model.case import Case
from harness.model.cell import BISECT_PREFIX, Cell, CellKind, GitPin, kind_of
from harness.model.common import logical_name
from harness.model.errors import BugmatrixError
from harness.model.job import Job, fingerprint, pool_of
from harness.model.outcome import Outcome, combine_repeats
from harness.model.result import Result, launch_tallies
from harness.model.version import parse_release
from harness.session.observer import Observer
from harness.session.pipeline import NO_RESUME, MatrixEnvironments, Recorder, Resume, Session
from harness.session.scheduler import run_scheduled
from harness.workflows.datebisect import DevBuild, commit_range, date_line, date_summary
from harness.workflows.datebisect import probe_cell as dev_cell
from harness.workflows.probing import Probing
from harness.workflows.search import Adaptive, BisectRefused, SearchResult, search, tally_outcome, verdict_line


class BisectError(BugmatrixError):
    """The bisection cannot start: bad arguments, no candidates, unreachable source; one line."""


def release_candidates(
    matrix: Matrix, case: Case, package: str, device: str, old: str | None, new: str | None, pre: bool = False
) -> list[str]:
    """`allowed_releases` between `old` and `new` inclusive (default: the oldest and newest allowed). An endpoint
    given outside the case's `supports` (its default range) widens the range to every release between the two that
    the index and pairings have: bounding where the script starts to be able to test (a `skip` endpoint) needs the
    versions it cannot test."""
    inside = allowed_releases(matrix, case, package, device, pre)
    listed = allowed_releases(matrix, case, package, device, pre, supports=False)
    outside = any(e and e not in inside and str(parse_release(e)) not in inside for e in (old, new))
    versions = [
        v
        for v in (listed if outside else inside)
        if not (old and parse_release(v) < parse_release(old)) and not (new and parse_release(v) > parse_release(new))
    ]
    for end, name in ((old, "--old"), (new, "--new")):
        if end and end not in versions and str(parse_release(end)) not in versions:
            raise BisectError(
                f"{name} {end}: not a release of {matrix.distribution(package, device)} the matrix allows"
            )
    if len(versions) < 2:
        raise BisectError(f"{package}: fewer than two releases to bisect between ({', '.join(versions) or 'none'})")
    return versions


def probe_cell(
    matrix: Matrix,
    case: Case,
    package: str,
    candidate: str | Commit,
    device: str,
    source: str | None = None,
    companions: dict[str, str | GitPin] | None = None,
    base: dict[str, str | GitPin] | None = None,
    suffix: str = "",
) -> Cell:
    """The cell that pins `package` to `candidate`, with the packages coupled to it moved along, and the other pins
    of `base` (a matrix cell's, when narrowing between two of its cells) kept; named `bisect-<package>-<candidate>`
    and `suffix` (a coupled slice's held pin, `-lightning-2.6.6`: its probes are not another base's).

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
        # The pairing moves the case's other members along (fbgemm-gpu 1.4 takes torch 2.9 with it, whether or not
        # the case needs torchrec, the pairing's lead); the lead itself only when the case needs it.
        followers = (needed & members) - {package}
        if package in members and package != coupling.lead and followers and not isinstance(pin, GitPin):
            row = pairing_row(coupling, package, parse_release(pin))
            if row is None:
                raise MatrixError(f"{package} {pin}: no row of the pairing {coupling.name!r} allows it")
            for member, spec in row.items():
                if member in needed or coupling.lead in needed:
                    pins.setdefault(member, spec)
    coupled = {p for c in matrix.spec.couplings for row in c.rows if package in row for p in row}
    for member, kept in (base or {}).items():
        if member not in coupled:
            pins.setdefault(member, kept)
    pins = apply_couplings(matrix.spec.couplings, pins, f"bisect {package} {candidate}")
    return Cell(
        name=f"{BISECT_PREFIX}{package}-{candidate}{suffix}",
        device=device,
        python=matrix.spec.defaults.python,
        index_url=matrix.index_url(),
        pins=pins,
        sources={package: source} if source else {},
    )


Candidate = str | Commit | DevBuild  # what a probe installs: a release, a commit of a clone, or a day's dev builds


@dataclass
class CaseProber:
    """Probes candidates: each one's cell, built once, runs the case `probing.repeat` times through the session
    pipeline; every probe is recorded in `probing.store` under `probing.run_id`."""

    probing: Probing  # where the probes run and are recorded, with how many cores and repeats
    case: Case
    variant: str
    nproc: int
    device: str
    package: str
    source: str | None = None
    companions: dict[str, str | GitPin] = field(default_factory=dict)  # coupled pins for commit candidates
    base: dict[str, str | GitPin] = field(default_factory=dict)  # other pins every probe keeps (narrow)
    suffix: str = ""  # after the candidate in each probe's cell name (narrow of a slice: `-lightning-2.6.6`)
    nprocs: tuple[int, ...] = ()  # world sizes per probe, combined like a matrix cell (default: `nproc` alone)
    resume: Resume = NO_RESUME  # bisect and narrow pass Resume(store): recorded probes are reused
    index_url: str | None = None  # where dev builds come from (a pre-release channel), for date candidates
    on_probe: Callable[[str, Outcome, str, bool], None] | None = None  # candidate, outcome, reason, reused
    log: list[tuple[str, Outcome, str]] = field(default_factory=list)
    results: dict[str, Result] = field(default_factory=dict)  # candidate -> its result (the largest world size)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        p = self.probing
        self.matrix = p.matrix
        pooling = p.policy is not None  # batches of a flaky case: each added to the run's earlier ones, never reused
        recorder = _Batches(self) if pooling else Recorder(p.store, p.run_id)
        self.session = Session(
            MatrixEnvironments(p.envs),
            repeat=p.repeat,
            launch_mode=p.launch_mode,
            resume=NO_RESUME if pooling else self.resume,
            observers=[recorder, _ProbeLog(self), *p.observers],
        )
        self._cells: dict[str, Cell] = {}

    @property
    def adaptive(self) -> Adaptive[Any] | None:
        """How the search launches a flaky case (`--repeat auto`), or None: probe outcomes as usual."""
        policy = self.probing.policy
        return Adaptive(self.measure, self.pooled, policy) if policy is not None else None

    def _job(self, candidate: Candidate) -> Job:
        """`candidate`'s job at the largest world size (a flaky case's batches), its cell formed once."""
        key = str(candidate)
        if key not in self._cells:
            self._cells[key] = self._cell(candidate)
        return Job(self.case, self.variant, max(self.nprocs or (self.nproc,)), self.device, self._cells[key])

    def pooled(self, candidate: Candidate) -> Tally:
        """`candidate`'s launches pooled over every run the store holds (`Store.pooled`): nothing when its cell
        cannot be formed or resolved."""
        try:
            job = self._job(candidate)
        except MatrixError:
            return Tally()
        pins = self.session.environments.pins(job)
        pool = pool_of(job, pins) if pins else ""
        return Tally.of(self.probing.store.pooled(job.cell_name, self.case.id, self.variant, pool))

    def measure(self, candidate: Candidate, n: int) -> Tally:
        """Launch `n` more repeats of `candidate` as one batch (saved with its pool) and give what they added to its
        pooled tally; a cell that cannot be formed counts `n` launches that said nothing."""
        before = self.pooled(candidate)
        try:
            job = self._job(candidate)
        except MatrixError as exc:
            self.probing.say(f"  probe {candidate}: infra  {exc}")
            return Tally(other=n)
        self.session.repeat = n  # one batch; its environment is kept for the next (no eviction between batches)
        result = self.session.run_job(job)
        after = self.pooled(candidate)
        if not after.launches:  # nothing pooled to read back (no environment, nothing launched): this batch alone
            self.probing.say(f"  probe {candidate}: {result.outcome.value}  {(result.reason.splitlines() or [''])[0]}")
            return Tally.of(result.tallies, result.outcome) if result.launched else Tally(other=n)
        added = Tally(after.reproduced - before.reproduced, after.fixed - before.fixed, after.other - before.other)
        self.probing.say(
            f"  probe {candidate}: +{added.launches} launches ({added.text()}); pooled over every run: "
            f"{after.text()} ({tally_outcome(after).value})"
        )
        return added

    def __call__(self, batch: Sequence[Candidate]) -> list[Outcome]:
        cost = max(self.nprocs or (self.nproc,)) * self.probing.repeat
        return run_scheduled(batch, self.one, cost=lambda _: cost, cores=self.probing.cores)

    def unusable(self, candidate: Candidate, outcome: Outcome) -> bool:
        """Whether `candidate`'s probe (its `outcome`) shows it cannot be tested here beyond `infra`: its launcher
        failed before any rank started (`no_rank_started`). The search steps over such an endpoint."""
        result = self.results.get(str(candidate))
        return result is not None and no_rank_started(outcome, result.reason)

    def why(self, candidate: Candidate) -> str:
        """`candidate`'s outcome and the first line of its reason, as probed (empty when it was not)."""
        result = self.results.get(str(candidate))
        if result is None:
            return ""
        return f"{result.outcome.value}: {(result.reason.splitlines() or [''])[0][:200]}"

    def _cell(self, candidate: Candidate) -> Cell:
        """The cell that probes `candidate` (raises `MatrixError` when it cannot be formed)."""
        if isinstance(candidate, DevBuild):  # a day's dev builds: the whole stack of that day, pinned
            return dev_cell(self.matrix, candidate, self.device, self.index_url)
        return probe_cell(
            self.matrix,
            self.case,
            self.package,
            candidate,
            self.device,
            self.source,
            self.companions,
            self.base,
            self.suffix,
        )

    def one(self, candidate: Candidate) -> Outcome:
        """The outcome of the case with `package` at `candidate` (`infra` when its cell cannot be formed)."""
        try:
            cell = self._cell(candidate)
        except MatrixError as exc:  # recorded where the probe would have run, as `infra`
            cell = Cell(
                name=f"{BISECT_PREFIX}{self.package}-{candidate}{self.suffix}",
                device=self.device,
                python=self.matrix.spec.defaults.python,
                index_url=self.matrix.index_url(),
                pins={},
            )
            job = Job(self.case, self.variant, self.nproc, self.device, cell)
            result = infra_result(job, str(exc))
            self.session.settle(job, result)
            return result.outcome
        results = [
            self.session.run_job(Job(self.case, self.variant, n, self.device, cell))
            for n in self.nprocs or (self.nproc,)
        ]
        self.probing.envs.cell_finished(cell)  # its environment may go under a disk budget
        if len(results) == 1:
            return results[0].outcome
        status = cell_status(results)  # several world sizes: as a matrix cell combines them
        return {REPRODUCED: Outcome.REPRODUCED, FIXED: Outcome.FIXED, FLAKY: Outcome.FLAKY}.get(status, Outcome.ERROR)


class _Batches(Observer):
    """Saves a flaky case's batches (`--repeat auto`): each added to the run's earlier batches of the same job (one
    result per key a run, so that no launch counts twice), with its pool and the fingerprint of its launches in all."""

    def __init__(self, prober: CaseProber) -> None:
        self.prober = prober
        self.saved: dict[tuple[str, int], Result] = {}

    def result_ready(self, job: Job, result: Result, reused: bool) -> None:
        store, run_id = self.prober.probing.store, self.prober.probing.run_id
        key = (job.cell_name, job.nproc)
        earlier = self.saved.get(key)
        if earlier is not None and not result.launched:  # a batch that launched nothing adds nothing to keep
            return
        if earlier is not None:
            tallies = launch_tallies(earlier)
            for outcome, count in launch_tallies(result).items():
                tallies[outcome] = tallies.get(outcome, 0) + count
            outcome = combine_repeats([Outcome(o) for o, c in tallies.items() for _ in range(c)])
            merged = result.model_copy(update={"tallies": tallies, "outcome": outcome})
            pins = self.prober.session.environments.pins(job)
            result = merged.model_copy(
                update={
                    "reason": f"{merged.tally} in this run; last batch: {result.reason}"[:2000],
                    "started_at": earlier.started_at,
                    "duration_s": round(earlier.duration_s + result.duration_s, 2),
                    "fingerprint": fingerprint(job, pins, merged.repeats) if pins else result.fingerprint,
                }
            )
        self.saved[key] = result
        store.save(run_id, result, cell=job.cell_name)


class _ProbeLog(Observer):
    def __init__(self, prober: CaseProber) -> None:
        self.prober = prober

    def result_ready(self, job: Job, result: Result, reused: bool) -> None:
        candidate = job.cell_name.removeprefix(f"{BISECT_PREFIX}{self.prober.package}-")
        candidate = candidate.removesuffix(self.prober.suffix) if self.prober.suffix else candidate
        self.prober.log.append((candidate, result.outcome, result.reason))
        kept = self.prober.results.get(candidate)
        if kept is None or result.nproc >= kept.nproc:  # reused or launched alike
            self.prober.results[candidate] = result
        if self.prober.on_probe and self.prober.probing.policy is None:  # a flaky batch's line is `measure`'s
            self.prober.on_probe(candidate, result.outcome, result.reason, reused)


@dataclass(frozen=True)
class BisectRequest:
    """What to bisect: a case's variant at one world size and device, over one package's releases (from `old`
    to `new`, default the oldest and newest allowed) or between two refs of its source repository."""

    case: Case
    variant: str
    nproc: int
    device: str
    package: str
    old: str | None = None
    new: str | None = None
    pre: bool = False
    git: str | None = None  # source repository (URL or local clone) for the commit level
    old_ref: str | None = None
    new_ref: str | None = None
    commits: bool = True  # go on to the commit level when a source is known
    dates: tuple[date, date] | None = None  # bisect the dev builds of these days first (cargo-bisect-rustc style)
    channel: str | None = None  # the `indexes` entry that serves the dev builds (default: the matrix's index)


Level = tuple[str, SearchResult]  # ("release" | "commit", what the search found)


def bisect(probing: Probing, request: BisectRequest, probed: dict[str, Result] | None = None) -> list[Level]:
    """The release level (unless both refs are given), then the commit level when a source repository is known
    (see the module docstring). Raises `BisectError`/`BisectRefused`/`MatrixError`/`GitError` when it cannot
    start or the endpoints do not differ; every probe is recorded. `probed`, when given, is filled with each
    candidate's result, reused ones included (for `bisect_summary` and `bisect_commands`)."""
    r, matrix, say = request, probing.matrix, probing.say
    source = r.git or r.case.spec.sources.get(r.package) or matrix.source(r.package)
    prober = CaseProber(
        probing,
        r.case,
        r.variant,
        r.nproc,
        r.device,
        r.package,
        source,
        on_probe=lambda c, o, why, reused: say(
            f"  probe {c}: {o.value}{' (reused from the store, not launched)' if reused else ''}"
            f"  {(why.splitlines() or [''])[0]}"
        ),
        resume=Resume(probing.store),  # a probe the record or the store already holds (same script, pins) is reused
    )
    if probed is not None:
        prober.results = probed
    parallel = max(1, probing.cores // r.nproc)
    levels: list[Level] = []
    if r.dates:
        url = matrix.index_url(r.channel) if r.channel else matrix.index_url()
        companions = [
            p
            for c in matrix.spec.couplings
            for row in c.rows
            if r.package in row
            for p in row
            if p != r.package and p in r.case.spec.packages
        ]
        line = date_line(matrix, r.package, dict.fromkeys(companions), *r.dates, r.device, url)
        say(
            f"bisecting {r.case.id}::{r.variant} over {len(line.builds)} days of {r.package} dev builds "
            f"{r.dates[0]} … {r.dates[1]} ({len(line.gaps)} gap(s), {len(line.same)} repeated build(s) skipped)"
        )
        prober.index_url = url
        by_date = search(line.builds, prober, parallel=parallel, unusable=prober.unusable, adaptive=prober.adaptive)
        say(date_summary(line, by_date))
        levels.append(("date", by_date))
        span = commit_range(by_date)
        if source and r.commits and span and not by_date.ambiguous and by_date.decided:
            repo = git_checkout(source, r.package)
            candidates = git_candidates(repo, *span)
            say(f"bisecting {len(candidates)} first-parent commits of {r.package} {span[0][:12]} … {span[1][:12]}")
            prober.companions = dict(by_date.first_new.pins)
            levels.append(
                (
                    "commit",
                    search(candidates, prober, parallel=parallel, unusable=prober.unusable, adaptive=prober.adaptive),
                )
            )
        return levels
    if not (r.old_ref and r.new_ref):
        versions = release_candidates(matrix, r.case, r.package, r.device, r.old, r.new, r.pre)
        say(
            f"bisecting {r.case.id}::{r.variant} over {len(versions)} {r.package} releases "
            f"{versions[0]} … {versions[-1]}"
        )
        say(plan_line(versions, r.package, probing.envs.cache, probing.envs.disk_budget))
        if probing.policy is not None:
            say(probing.policy.text() + " (--max-launches)")
        try:
            found = search(versions, prober, parallel=parallel, unusable=prober.unusable, adaptive=prober.adaptive)
        except BisectRefused as exc:
            stepped = [c for c, o, _ in prober.log if c in versions and (o is Outcome.INFRA or prober.unusable(c, o))]
            if stepped:
                raise BisectRefused(f"{exc}; {untestable_hint(r.case, r.package, stepped, why=prober.why)}") from None
            raise
        if found.untestable:
            say(f"[yellow]{untestable_hint(r.case, r.package, found.untestable, versions, found, prober.why)}[/]")
        levels.append(("release", found))
    refs: tuple[str, str] | None = None
    if r.old_ref and r.new_ref:
        refs = (r.old_ref, r.new_ref)
    elif source and r.commits and not levels[-1][1].ambiguous and levels[-1][1].decided:
        found = levels[-1][1]
        refs = (str(found.last_old), str(found.first_new))
        newer = probe_cell(matrix, r.case, r.package, str(found.first_new), r.device)
        prober.companions = {k: v for k, v in newer.pins.items() if k != r.package}
    if refs and source:
        repo = git_checkout(source, r.package)
        if all(resolve_ref(repo, ref) for ref in refs):
            commits = git_candidates(repo, *refs)
            say(f"bisecting {len(commits)} first-parent commits of {r.package} {refs[0]} … {refs[1]}")
            levels.append(
                (
                    "commit",
                    search(commits, prober, parallel=parallel, unusable=prober.unusable, adaptive=prober.adaptive),
                )
            )
        else:
            say(f"[yellow]no tags for {refs[0]} / {refs[1]} in {source}: stopping at the release level[/]")
    elif refs:
        say("[yellow]no source repository known for the commit level (use --git)[/]")
    return levels


def untestable_hint(
    case: Case,
    package: str,
    stepped: list[str],
    versions: list[str] | None = None,
    found: SearchResult | None = None,
    why: Callable[[str], str] | None = None,
) -> str:
    """What a bisection whose default range starts (or ends) at releases that cannot be tested here did, naming
    each probed one and `why` (its outcome and reason), and how to start where it can: the case's `supports:` or
    `--old`/`--new`. Without a `found` search (it was refused), the probes `stepped` over are named."""
    where = case.folder / "case.yaml"
    if found is None or versions is None:
        return (
            f"cannot be installed, imported or launched here: {package} {_named(stepped, why) or 'an endpoint'}; "
            f"give --old/--new releases that can, or narrow `supports: {{{package}: ...}}` in {where}"
        )
    older = stepped[0] == versions[0]
    start = versions[len(stepped)] if older else versions[-len(stepped) - 1]
    probed = [str(c) for c, _ in found.probes if c in stepped]
    launched = why is not None and any(NO_RANK_STARTED in why(c) for c in probed)
    shown = stepped[0] if len(stepped) == 1 else f"{stepped[0]} … {stepped[-1]} ({len(stepped)} releases)"
    flag, bound = ("--old", ">=") if older else ("--new", "<=")
    what = "installed or imported" if not launched else "installed, imported or launched"
    return (
        f"{package} {shown} cannot be {what} here (probed {_named(probed, why)}): started at {start}, the "
        f"{'oldest' if older else 'newest'} that installs{' and launches' if launched else ''}; to start there next "
        f'time, set `supports: {{{package}: "{bound}{start}"}}` in {where} or pass {flag} {start}'
    )


def _named(candidates: list[str], why: Callable[[str], str] | None) -> str:
    """`1.0.0, 1.1.0: error: torchrun failed ...; 2.11.0: infra: ...`: the candidates, grouped by why."""
    same: dict[str, list[str]] = {}
    for c in dict.fromkeys(candidates):
        same.setdefault(why(c) if why else "", []).append(c)
    return "; ".join(f"{', '.join(cs)}: {text}" if text else ", ".join(cs) for text, cs in same.items())


def plan_line(versions: list[str], package: str, cache: EnvCache, budget: int | None) -> str:
    """What the release level plans before its first probe: how many environments it may build (one per probe;
    reused probes build none), the first probes, and the download, estimated from the environments with `package`
    already built under the cache (said to be unknown when there are none: the index's pages give no sizes)."""
    n = len(versions)
    most = 2 + math.ceil(math.log2(n - 1)) if n > 2 else n
    first = f"{versions[0]} and {versions[-1]}" + (f", then {versions[(n - 1) // 2]}" if n > 2 else "")
    built = [e["key"] for e in cache.list() if package in e.get("versions", {})]
    sizes = sorted(disk_usage(cache.path(key)) for key in built[:3])
    if sizes:
        each = sizes[len(sizes) // 2]
        download = (
            f"about {human_size(each)} an environment (the median of {len(sizes)} with {package} built under "
            f"{cache.root}), so up to {human_size(each * most)}, less what uv's cache already holds"
        )
    else:
        download = (
            f"download unknown: no environment with {package} is built under {cache.root} to measure, and the "
            "index's pages give no file sizes"
        )
    evict = (
        f"finished probes' environments are evicted over --disk-budget {human_size(budget)}"
        if budget is not None
        else "nothing is evicted (--disk-budget SIZE evicts finished probes' environments)"
    )
    return (
        f"plan: at most {most} probe environments when no probe is skipped (each probe that cannot be used adds "
        f"one, up to {n}), first {first}; {download}; {evict}"
    )


def bisect_summary(
    case: str,
    variant: str,
    package: str,
    levels: list[Level],
    probed: dict[str, Result] | None = None,
    packages: list[str] | tuple[str, ...] = (),
) -> str:
    """One line fit for an upstream issue comment. With the probes' results (`probed`) and the case's `packages`,
    each side names the case's other packages that moved with the bisected one (lightning 2.5.2 + torch 2.7.1 →
    2.5.3 + torch 2.8.0): the change may be theirs."""
    parts = []
    for level, r in levels:
        if r.verdict is not None:  # a flaky search: its verdict and confidence, or that it could not decide
            parts.append(f"{level}s {verdict_line(r)}")
            continue
        old_with, new_with = _moved_with(
            package, packages, (probed or {}).get(str(r.last_old)), (probed or {}).get(str(r.first_new))
        )
        where = f"{r.last_old}{old_with} ({r.old.value}) → {r.first_new}{new_with} ({r.new.value})"
        if level == "commit":
            where += f' — first {r.new.value} commit {r.first_new.sha} "{r.first_new.subject}"'
        elif level == "date":
            where = f"{r.last_old.day} {where}"
        if r.ambiguous:
            where += f"; untestable in between: {', '.join(map(str, r.ambiguous))}"
        parts.append(f"{level}s {where} [{len(r.probes)} probes]")
    return f"bugmatrix bisect {case}::{variant} over {package}: " + "; ".join(parts)


def _moved_with(
    package: str, packages: list[str] | tuple[str, ...], old: Result | None, new: Result | None
) -> tuple[str, str]:
    """(` + torch 2.7.1`, ` + torch 2.8.0`): the case's other packages whose versions differ between the two sides."""
    if old is None or new is None:
        return "", ""
    sides = [{logical_name(d): v for d, v in r.versions.items()} for r in (old, new)]
    others = [logical_name(p) for p in packages if logical_name(p) != logical_name(package)]
    moved = [p for p in others if p in sides[0] and p in sides[1] and sides[0][p] != sides[1][p]]
    if not moved:
        return "", ""
    before, after = (" + " + ", ".join(f"{p} {short(side[p])}" for p in moved) for side in sides)
    return before, after


def bisect_commands(
    case: Case,
    found: SearchResult,
    results: list[tuple[str, str, Result]],
    matrix: Matrix | None = None,
    reused: dict[str, Result] | None = None,
) -> list[str]:
    """For the two sides of a boundary (`last_old`, `first_new`), a comment line and the command that reproduces
    the recorded probe anywhere (harness/analysis/reproduce.py)."""
    from harness.analysis.reproduce import repro_command

    lines = []
    for candidate in (found.last_old, found.first_new):
        probed = [r for _, cell, r in results if cell.endswith(f"-{candidate}") and kind_of(cell) is CellKind.BISECT]
        probed += [r for c, r in (reused or {}).items() if c == str(candidate)]  # a probe reused, not launched
        if probed:
            result = max(probed, key=lambda r: r.nproc)
            lines += [f"# {candidate}: {result.outcome.value}", repro_command(case, result, matrix)]
    return lines
