"""`bugmatrix expect`: a variant's `expect` rules derived from what the results store measured.

    measured = measurements(store)                                  # (run, cell, result): newest per job and version
    d = derive(case, variant, measured, between)                    # a `Derivation`: new rules, or why not
    edit = rewrite(case, [d, ...], today)                           # the new case.yaml text, its diff
    write_case(case, edit)                                          # validated, then replaced atomically

What is measured: for each case x variant, the newest result of each (world size, device, cell, version of the
case's primary package) in the store: matrix cells, bisect and narrow probes (`bisect-*`) alike. The primary package
is the case's first non-torch package (torch if none), as in the report. Outcomes `reproduced`, `fixed` and a
launched `skip` (the script said it cannot test there: exit 125) are measurements; `error`, `timeout` and `infra`
never become rules: they are left out with a note (the existing rules keep speaking for them when nothing else
was measured there); a `skip` that was never launched (package or device missing) needs no rule.

It refuses a variant, saying why, when:
- a result is `flaky` (its repeats disagreed), or two results at one version on one device and world size
  disagree (mixed: the outcome depends on more than the primary package);
- the outcome changes between two versions that are not adjacent on the index (releases between were not run, or
  could not say): the boundary is an interval, which `bugmatrix narrow` closes; or what lies between is unknown.

The rules: along the primary package's releases the measured outcomes form segments. The newest segment's outcome
is the catch-all (so a release newer than any measured falls to it); every other segment whose outcome differs
gets one range rule `{pkg: ">=FIRST,<NEXT"}` (the oldest without a lower bound): minimal ranges, never one `==`
per version. A package installed from git is placed by its version string; a commit whose measured outcome
differs from what the ranges give gets a `{pkg: {git: [sha, ...]}}` rule ahead of them. `device` and `nproc`
conditions appear only where outcomes differ by them (the largest group of results keeps no condition).

Existing rules the store cannot speak to (they hold for no measured result: another device, versions not run) are
kept, in their order, ahead of the derived rules; a git rule loses only the commits that were measured. A rule that
holds for measured results but decides none of them (an earlier rule such as `{device: cpu}: skip` answers first)
speaks only for the devices with no result: it is kept limited to them (`device: cuda` added), followed by the old
catch-all for them, so a store of CPU results does not erase what the rules expect on CUDA. Every
measured result is then checked against the new list with the evaluator `bugmatrix run` uses
(harness/model/expectations.py): the rules agree with every measurement or nothing is written.

Writing (ruamel.yaml round trip): only `variants.<v>.expect` is replaced (the kept rules are the original nodes,
with their comments); everything else, `evidence` included, is kept byte for byte. What the rules rest on (the
date, the runs and cells of the results used, the boundaries) goes to the record (`record/rules.jsonl`, through
`Derivation.provenance`), not into the hand-written case file. The new text is validated with the real loader
before it replaces the file (atomically).
"""

from __future__ import annotations

import difflib
import io
import os
import tempfile
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from harness.analysis.transitions import Between, Boundary
from harness.model.case import Case, cases_dir_option, load_case
from harness.model.case_schema import DEVICE, NPROC, CaseError, GitCondition, Rule, Variant
from harness.model.common import DEVICES, logical_name
from harness.model.common import primary_package as primary_of
from harness.model.environment import Environment, Installed
from harness.model.expectations import environment_of, expected_outcome, rule_holds
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.model.version import PinVersion, short, version_key
from harness.session.contract import Store, entry_identity, entry_measured, unshadowed

DECISIVE = (Outcome.REPRODUCED, Outcome.FIXED, Outcome.SKIP)
IGNORED = (Outcome.ERROR, Outcome.TIMEOUT, Outcome.INFRA)
Measured = tuple[str, str, Result]  # (run_id, cell, result)


def primary_package(case: Case) -> str:
    """The package whose versions a case's rules follow: its first non-torch package, torch if none."""
    return primary_of(case.spec.packages)


def measurements(store: Store, run_ids: Iterable[str] | None = None) -> list[Measured]:
    """`(run_id, cell, result)`: the newest result of each case x variant x world size x device x cell x installed
    versions (a cell whose pins float shows each version it ran), from every run or only `run_ids`."""
    wanted = set(run_ids) if run_ids is not None else None
    newest: dict[tuple[Any, ...], Measured] = {}
    found = [(run_id, cell, r) for run_id, cell, r in store.results() if wanted is None or run_id in wanted]
    # an infra result never shadows a settled one of its key and script, as in `Store.latest` (`contract.current`)
    for run_id, cell, r in unshadowed(found, entry_identity, entry_measured):
        key = (r.case, r.variant, r.nproc, r.device, cell, tuple(sorted(r.versions.items())))
        if key not in newest or r.started_at >= newest[key][2].started_at:
            newest[key] = (run_id, cell, r)
    return [newest[k] for k in sorted(newest)]


@dataclass(frozen=True)
class Point:
    """One measured result placed on the primary package's axis."""

    version: str  # "1.3", or "0.4.0.dev0 @ <sha>" for a git install
    outcome: Outcome
    run_id: str
    cell: str
    result: Result

    @property
    def group(self) -> tuple[str, int]:
        return (self.result.device, self.result.nproc)

    @property
    def commit(self) -> str:
        return PinVersion.parse(self.version).commit

    @property
    def release(self) -> str:
        return PinVersion.parse(self.version).release_text


@dataclass
class Derivation:
    """What `derive` found for one case x variant: the new rule list (None when refused, with `refused` saying
    why), the existing rules kept, notes (results left out), the boundaries and the points that establish them."""

    case: Case
    variant: str
    package: str
    old: list[Rule]
    new: list[Rule] | None = None
    refused: str = ""
    notes: list[str] = field(default_factory=list)
    kept: list[int] = field(default_factory=list)  # indexes into `old` (git rules may be narrowed)
    boundaries: list[str] = field(default_factory=list)
    points: list[Point] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when the derived rules differ from the case's."""
        return self.new is not None and _meaning(self.new) != _meaning(self.old)

    @property
    def name(self) -> str:
        return f"{self.case.id}::{self.variant}"

    def summary(self) -> str:
        """One line: the rules in words (`fakelib <1.3: reproduced; otherwise fixed`), or the refusal."""
        if self.new is None:
            return f"{self.name}: refused: {self.refused}"
        return f"{self.name}: {rules_text(self.new)}" + ("" if self.changed else " (unchanged)")

    def provenance(self, today: str) -> dict:
        """What the rules rest on, for the record (`record/rules.jsonl`): the date they were set, the rules in
        words, the boundaries, and the runs and cells (with the version and outcome) of the results used."""
        return {
            "case": self.case.id,
            "variant": self.variant,
            "set": today,
            "rules": rules_text(self.new or []),
            "boundaries": list(self.boundaries) or ["no change of outcome"],
            "runs": sorted({p.run_id for p in self.points}),
            "on": sorted(f"{d} nproc {n}" for d, n in {p.group for p in self.points}),
            "cells": [
                f"{c} ({v} {o})"
                for c, v, o in sorted(
                    {(p.cell, short(p.version), p.outcome.value) for p in self.points},
                    key=lambda t: (version_key(t[1]), t[0]),
                )
            ],
        }


def rules_text(rules: list[Rule]) -> str:
    """A rule list in words: `fakelib <1.3: reproduced; otherwise fixed`."""
    parts: list[str] = []
    for rule in rules:
        if not rule.when:
            parts.append(("otherwise " if parts else "") + rule.outcome.value)
            continue
        conds = []
        for key, cond in rule.when.items():
            if isinstance(cond, GitCondition):
                conds.append(f"{key} @ {', '.join(s[:12] for s in cond.git)}")
            elif key == NPROC:
                conds.append(f"nproc {cond}")
            else:
                conds.append(f"{key} {cond}" if key != DEVICE else f"device {cond}")
        parts.append(f"{' '.join(conds)}: {rule.outcome.value}")
    return "; ".join(parts)


def _meaning(rules: list[Rule]) -> list[tuple[str, dict[str, Any]]]:
    """The rules as compared for a change: a version condition by the versions it allows (`<2.9` is `<2.9.0`), the
    other conditions (device, nproc, git) as written."""
    return [
        (
            rule.outcome.value,
            {
                key: SpecifierSet(cond) if isinstance(cond, str) and key not in (DEVICE, NPROC) else cond
                for key, cond in rule.when.items()
            },
        )
        for rule in rules
    ]


def _version_of(result: Result, package: str) -> str | None:
    for name, version in result.versions.items():
        if logical_name(name) == logical_name(package):
            return version
    return None


class Refused(Exception):
    """A variant's rules cannot be derived from the store; the message says why and what would help."""


def derive(case: Case, variant: str, measured: list[Measured], between: Between | None) -> Derivation:
    """The smallest rule list for `case`'s `variant` that agrees with every measured result (see the module
    docstring); a refusal is a `Derivation` with `new` None and `refused` saying why."""
    old = list(case.spec.variants[variant].expect)
    package = primary_package(case)
    d = Derivation(case, variant, package, old)
    try:
        _derive(d, measured, between)
    except Refused as exc:
        d.new, d.refused = None, str(exc)
    return d


def _derive(d: Derivation, measured: list[Measured], between: Between | None) -> None:
    case, package = d.case, d.package
    points, ignored = [], []
    for run_id, cell, r in measured:
        if (r.case, r.variant) != (case.id, d.variant):
            continue
        version = _version_of(r, package)
        where = f"{cell} ({r.device}, nproc {r.nproc})"
        if r.outcome is Outcome.FLAKY:
            raise Refused(
                f"flaky in {where} at {package} {version}: {r.tally or 'repeats disagreed'}; run it again "
                "(--repeat K) until it is decided, or make the case deterministic"
            )
        if version is None or (r.outcome is Outcome.SKIP and not r.launched):
            continue
        if r.outcome in IGNORED:
            ignored.append(f"{where} at {package} {short(version)}: {r.outcome.value}")
            continue
        points.append(Point(version, r.outcome, run_id, cell, r))
    if ignored:
        d.notes.append(f"left out ({', '.join(o.value for o in IGNORED)} never become rules): " + "; ".join(ignored))
    if not points:
        raise Refused(f"no reproduced, fixed or skip result for {package} in the store")
    d.points = points
    by_group: dict[tuple[str, int], dict[str, list[Point]]] = defaultdict(lambda: defaultdict(list))
    for p in points:
        by_group[p.group][p.version].append(p)
    outcome_at: dict[tuple[str, int], dict[str, Outcome]] = {}
    for group, at in by_group.items():
        outcome_at[group] = {}
        for version, ps in at.items():
            seen = {p.outcome for p in ps}
            if len(seen) > 1:
                differ = sorted(
                    {
                        k
                        for p in ps
                        for k, v in p.result.versions.items()
                        if any(q.result.versions.get(k) != v for q in ps)
                    }
                )
                shown = ", ".join(
                    f"{p.cell} {p.outcome.value}"
                    + "".join(f" with {k} {p.result.versions.get(k, '-')}" for k in differ)
                    for p in sorted(ps, key=lambda p: p.cell)
                )
                raise Refused(
                    f"mixed at {package} {short(version)} ({group[0]}, nproc {group[1]}): {shown}; the "
                    f"outcome depends on more than {package} (another package's version?): write these "
                    "rules by hand"
                )
            outcome_at[group][version] = seen.pop()
    ran_all = {(g, v) for g, at in by_group.items() for v in at} | {
        ((r.device, r.nproc), _version_of(r, package))
        for _, _, r in measured
        if (r.case, r.variant) == (case.id, d.variant) and r.outcome in IGNORED
    }
    partitions = _partitions(outcome_at)
    kept = _kept_rules(d, points)
    derived: list[Rule] = []
    for i, (conds, groups) in enumerate(partitions):
        last = i == len(partitions) - 1
        merged: dict[str, Outcome] = {}
        for g in groups:
            merged.update(outcome_at[g])
        run_here = {v for (g, v) in ran_all if g in groups and v is not None}
        derived += _axis_rules(d, merged, run_here, sorted({g[0] for g in groups}), between, {} if last else conds)
    rules = _merge_git(kept, derived)
    _check(d, rules, points)
    for tail in [r for r in derived if r.when and set(r.when) <= {DEVICE, NPROC}]:
        trial = [r for r in rules if r is not tail]  # a group's catch-all that the next rules give anyway
        try:
            _check(d, trial, points)
        except Refused:
            continue
        rules = trial
    d.new = _said_why(d.old, rules)


def _said_why(old: list[Rule], rules: list[Rule]) -> list[Rule]:
    """A derived `skip` rule says why as the old skip rules do, where they all say the same (`because`); where
    they differ or none says, it says nothing, and `bugmatrix check-case` asks for it."""
    said = {r.because for r in old if r.outcome is Outcome.SKIP}
    if len(said) != 1 or None in said:
        return rules
    because = said.pop()
    return [
        r.model_copy(update={"because": because}) if r.outcome is Outcome.SKIP and r.because is None else r
        for r in rules
    ]


def _partitions(outcome_at: dict[tuple[str, int], dict[str, Outcome]]) -> list[tuple[dict[str, Any], list]]:
    """Groups of (device, world size) whose outcomes agree at every shared version, each with the `when`
    conditions that single it out; the largest group last (it keeps no condition)."""
    groups = sorted(outcome_at)
    keys: list[Callable[[tuple[str, int]], tuple[Any, ...]]] = [
        lambda g: (),
        lambda g: (g[0],),
        lambda g: (g[1],),
        lambda g: g,
    ]
    for key in keys:
        parts: dict[tuple[Any, ...], list[tuple[str, int]]] = defaultdict(list)
        for g in groups:
            parts[key(g)].append(g)
        if all(_consistent([outcome_at[g] for g in members]) for members in parts.values()):
            break
    # partitions that behave the same are one (nproc [2, 4]); conditions only name what differs
    by_behaviour: dict[tuple[tuple[str, str], ...], list[list[tuple[str, int]]]] = defaultdict(list)
    for members in parts.values():
        merged: dict[str, Outcome] = {}
        for g in members:
            merged.update(outcome_at[g])
        by_behaviour[tuple(sorted((v, o.value) for v, o in merged.items()))].append(members)
    out = []
    for lists in by_behaviour.values():
        members = [g for m in lists for g in m]
        conds: dict[str, Any] = {}
        devices, nprocs = {g[0] for g in members}, {g[1] for g in members}
        if len({g[0] for g in groups}) > 1 and len(devices) == 1:
            conds[DEVICE] = devices.pop()
        if len({g[1] for g in groups}) > 1 and nprocs != {g[1] for g in groups}:
            conds[NPROC] = sorted(nprocs)
        out.append((conds, members))
    # the partition with the most results keeps no condition: on a tie, the one with cpu, then the smallest nproc
    out.sort(
        key=lambda cm: (
            sum(len(outcome_at[g]) for g in cm[1]),
            any(g[0] == "cpu" for g in cm[1]),
            -min(g[1] for g in cm[1]),
        )
    )
    return out


def _consistent(maps: list[dict[str, Outcome]]) -> bool:
    seen: dict[str, Outcome] = {}
    for m in maps:
        for v, o in m.items():
            if seen.setdefault(v, o) != o:
                return False
    return True


def _axis_rules(
    d: Derivation,
    at: dict[str, Outcome],
    run_here: set[str],
    devices: list[str],
    between: Between | None,
    conds: dict[str, Any],
) -> list[Rule]:
    """The rules of one partition: git rules, then one range rule per segment that differs from the newest, then
    the catch-all (with `conds`, unless this partition is the last)."""
    package = d.package
    releases = sorted((v for v in at if not PinVersion.parse(v).commit), key=version_key)
    segments: list[list[str]] = []
    for v in releases:
        if segments and at[segments[-1][-1]] == at[v]:
            segments[-1].append(v)
        else:
            segments.append([v])
    label = ", ".join(f"{k} {v[0] if k == NPROC and len(v) == 1 else v}" for k, v in conds.items())
    for prev, nxt in zip(segments, segments[1:], strict=False):
        _adjacent(d, prev[-1], nxt[0], at[prev[-1]], at[nxt[0]], run_here, devices, between, label)
    commits = sorted((v for v in at if PinVersion.parse(v).commit), key=version_key)
    catch_all = at[segments[-1][0]] if segments else at[commits[-1]]
    ranges: list[Rule] = []
    for i, seg in enumerate(segments[:-1]):
        if at[seg[0]] == catch_all:
            continue
        upper = f"<{PinVersion.parse(segments[i + 1][0]).public}"
        spec = upper if i == 0 else f">={PinVersion.parse(seg[0]).public},{upper}"
        ranges.append(Rule(when={package: spec, **conds}, outcome=at[seg[0]]))
    tail = Rule(when=dict(conds), outcome=catch_all) if conds else Rule(outcome=catch_all)
    by_ranges = Variant(
        expect=[
            *[Rule(when={k: v for k, v in r.when.items() if k == package}, outcome=r.outcome) for r in ranges],
            Rule(outcome=catch_all),
        ]
    )
    wrong: dict[Outcome, list[str]] = defaultdict(list)
    for v in commits:
        env = Environment(
            python="",
            python_version="",
            packages={canonicalize_name(package): Installed(name=package, version=PinVersion.parse(v).release_text)},
        )
        if expected_outcome(by_ranges, env, 0, "") != at[v]:
            wrong[at[v]].append(PinVersion.parse(v).commit)
    gits = [Rule(when={package: GitCondition(git=shas), **conds}, outcome=o) for o, shas in wrong.items()]
    return [*gits, *ranges, tail]


def _adjacent(
    d: Derivation,
    before: str,
    after: str,
    old: Outcome,
    new: Outcome,
    run_here: set[str],
    devices: list[str],
    between: Between | None,
    label: str = "",
) -> None:
    """Refuse unless nothing lies between `before` and `after` on the index (for each device); record the
    boundary's text."""
    kind = {(Outcome.REPRODUCED, Outcome.FIXED): "fixed", (Outcome.FIXED, Outcome.REPRODUCED): "regressed"}.get(
        (old, new)
    )
    for device in devices:
        cands = between(d.case.id, d.package, device, before, after) if between else None
        if cands is None:
            why = "no package index was consulted" if between is None else "the index does not list them"
            raise Refused(
                f"{old.value} in {d.package} {before}, {new.value} in {after} ({device}): what lies "
                f"between is unknown ({why})"
            )
        run = {_norm(v) for v in run_here}
        untested = tuple(v for v in cands if _norm(v) not in run)
        undecided = tuple(v for v in cands if _norm(v) in run)
        if untested or undecided:
            if kind:
                text = Boundary(kind, before, after, untested, undecided).text()
            else:
                text = f"{old.value} in {before}, {new.value} in {after}, with {len(untested)} release(s) not run" + (
                    f" and {', '.join(undecided)} undecided" if undecided else ""
                )
            bugmatrix = f"bugmatrix {cases_dir_option(d.case.folder.parent)}"
            hint = (
                f"narrow it with `{bugmatrix}narrow {d.case.id} --package {d.package} --device {device}`"
                if kind
                else f"run the releases between (`{bugmatrix}bisect {d.case.id} --package {d.package} --variant "
                f"{d.variant} --device {device} --old {before} --new {after}`, at each world size: `--nproc N`)"
            )
            raise Refused(f"{d.package}: {text}: the boundary is an interval; {hint}")
    word = kind or f"{new.value}"
    d.boundaries.append(
        f"{word} in {d.package} {short(after)} ({short(before)} {old.value})" + (f" ({label})" if label else "")
    )


def _norm(version: str) -> str:
    """A version as the index lists it: normalised (`2.6` is `2.6.0`), its commit left out."""
    release = PinVersion.parse(version).release
    return version if release is None else str(release)


def _kept_rules(d: Derivation, points: list[Point]) -> list[tuple[int, Rule]]:
    """The existing rules that hold for no measured result (a git rule without its measured commits), and those
    that decide no measured result (an earlier rule, e.g. `{device: cpu}: skip`, answers for every measured one):
    they speak only where nothing was measured, so they are kept there, limited to the devices with no result, and
    followed by the old catch-all for those devices (a store of CPU results must not erase what CUDA expects)."""
    envs = [(environment_of(p.result), p.result.nproc, p.result.device) for p in points]
    deciding = {next(i for i, r in enumerate(d.old) if rule_holds(r, *e)) for e in envs}
    unmeasured = [device for device in DEVICES if device not in {e[2] for e in envs}]
    kept: list[tuple[int, Rule]] = []
    shadowed = False
    for i, rule in enumerate(d.old):
        if not rule.when:
            continue
        if any(rule_holds(rule, *e) for e in envs):
            if i not in deciding and unmeasured and DEVICE not in rule.when:
                for device in unmeasured:
                    kept.append(
                        (-1, Rule(when={**rule.when, DEVICE: device}, outcome=rule.outcome, because=rule.because))
                    )
                shadowed = True
                continue
            narrowed = _without_measured_commits(rule, points)
            if narrowed is None or any(rule_holds(narrowed, *e) for e in envs):
                continue
            rule = narrowed
        kept.append((i, rule))
    if shadowed:
        kept += [
            (-1, Rule(when={DEVICE: device}, outcome=d.old[-1].outcome, because=d.old[-1].because))
            for device in unmeasured
        ]
    d.kept = [i for i, _ in kept]
    return kept


def _without_measured_commits(rule: Rule, points: list[Point]) -> Rule | None:
    measured = {p.commit for p in points if p.commit}
    when: dict[str, Any] = {}
    for key, cond in rule.when.items():
        if isinstance(cond, GitCondition):
            left = [s for s in cond.git if not any(c.startswith(s) for c in measured)]
            if not left:
                return None
            cond = GitCondition(git=left)
        when[key] = cond
    return Rule(when=when, outcome=rule.outcome, because=rule.because) if when != rule.when else None


def _merge_git(kept: list[tuple[int, Rule]], derived: list[Rule]) -> list[Rule]:
    """Kept rules first, then the derived ones; a derived git rule joins a kept git rule with the same outcome and
    the same other conditions (one list of commits per outcome)."""
    rules = [r for _, r in kept]
    for rule in derived:
        gits = [k for k, c in rule.when.items() if isinstance(c, GitCondition)]
        twin = next(
            (
                i
                for i, r in enumerate(rules)
                if gits
                and r.outcome == rule.outcome
                and set(r.when) == set(rule.when)
                and isinstance(r.when.get(gits[0]), GitCondition)
                and all(r.when[k] == v for k, v in rule.when.items() if k != gits[0])
            ),
            None,
        )
        if twin is None:
            rules.append(rule)
            continue
        old = rules[twin].when[gits[0]]
        assert isinstance(old, GitCondition)
        new = rule.when[gits[0]]
        assert isinstance(new, GitCondition)
        shas = [*old.git, *(s for s in new.git if not any(s.startswith(o) for o in old.git))]
        rules[twin] = Rule(
            when={**rules[twin].when, gits[0]: GitCondition(git=shas)},
            outcome=rule.outcome,
            because=rules[twin].because,
        )
    return rules


def _check(d: Derivation, rules: list[Rule], points: list[Point]) -> None:
    """Every measured result meets the new rules, by the evaluator `bugmatrix run` uses."""
    variant = Variant(expect=rules)
    for p in points:
        got = expected_outcome(variant, environment_of(p.result), p.result.nproc, p.result.device)
        if got != p.outcome:
            raise Refused(
                f"the derived rules would expect {got.value} in {p.cell} ({p.result.device}, nproc "
                f"{p.result.nproc}, {d.package} {short(p.version)}) where {p.outcome.value} was measured "
                f"(an existing rule the store cannot speak to overlaps it?): write these rules by hand"
            )


# --- writing case.yaml ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Edit:
    """A case file's text before and after, and its unified diff."""

    path: Path
    before: str
    after: str

    @property
    def diff(self) -> str:
        name = str(self.path)
        try:
            name = str(self.path.resolve().relative_to(Path.cwd().resolve()))
        except ValueError:
            name = name.lstrip("/")
        return "".join(
            difflib.unified_diff(self.before.splitlines(True), self.after.splitlines(True), f"a/{name}", f"b/{name}")
        )


def _yaml() -> Any:
    from ruamel.yaml import YAML

    y = YAML()
    y.preserve_quotes = True
    y.width = 4096
    return y


def rewrite(case: Case, derivations: list[Derivation], today: str) -> Edit | None:
    """The case file with the changed variants' `expect` replaced (None when nothing changes; what the rules rest
    on goes to the record: `Derivation.provenance`). Raises CaseError if the result would not be the same case
    with new rules."""
    changed = [d for d in derivations if d.changed and d.case.id == case.id]
    if not changed:
        return None
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    from ruamel.yaml.util import load_yaml_guess_indent

    path = case.folder / "case.yaml"
    before = path.read_text(encoding="utf-8")
    _, indent, offset = load_yaml_guess_indent(before)
    y = _yaml()
    y.indent(mapping=offset or 2, sequence=indent or 4, offset=offset or 2)
    doc = y.load(before)
    for d in changed:
        assert d.new is not None
        node = doc["variants"][d.variant]
        old_seq = node["expect"]
        seq = CommentedSeq()
        for j, rule in enumerate(d.new):  # the kept rules come first, in their order
            if j < len(d.kept) and d.kept[j] >= 0 and rule == d.old[d.kept[j]]:
                seq.append(old_seq[d.kept[j]])  # the original node, comments and all
            else:
                seq.append(_rule_node(rule, CommentedMap))
        _carry_comments(old_seq, seq)
        node["expect"] = seq
    buf = io.StringIO()
    y.dump(doc, buf)
    after = buf.getvalue()
    _same_but_rules(path, before, after, {d.variant for d in changed})
    return Edit(path, before, after)


def _rule_node(rule: Rule, mapping: type) -> Any:
    from ruamel.yaml.comments import CommentedSeq
    from ruamel.yaml.scalarstring import DoubleQuotedScalarString

    node = mapping()
    if rule.when:
        when = mapping()
        flow = True
        for key, cond in rule.when.items():
            if isinstance(cond, GitCondition):
                shas = CommentedSeq(cond.git)
                git = mapping()
                git["git"] = shas
                when[key] = git
                flow = False
            elif isinstance(cond, list):
                nprocs = CommentedSeq(cond)
                nprocs.fa.set_flow_style()
                when[key] = nprocs
            elif key == DEVICE:
                when[key] = cond
            else:
                when[key] = DoubleQuotedScalarString(cond)
        if flow:
            when.fa.set_flow_style()
        node["when"] = when
    node["outcome"] = rule.outcome.value
    if rule.because:
        node["because"] = rule.because
    return node


def _carry_comments(old: Any, new: Any) -> None:
    """The comment before the first rule and the one after the last (the next variant's heading) stay put."""
    if getattr(old, "ca", None) is None:
        return
    new.ca.comment = old.ca.comment
    if len(old) and len(new):
        last_old, last_new = old[-1], new[-1]
        if last_old is last_new:
            return
        key_old = list(last_old)[-1] if hasattr(last_old, "ca") and len(last_old) else None
        key_new = list(last_new)[-1] if len(last_new) else None
        if key_old is not None and key_new is not None and key_old in last_old.ca.items:
            tokens = last_old.ca.items[key_old]
            after = tokens[2] if len(tokens) > 2 else None
            if after is not None and after.value.lstrip(" ").startswith("\n"):  # only whole-line comments move
                last_new.ca.items.setdefault(key_new, [None, None, None, None])[2] = after


def _same_but_rules(path: Path, before: str, after: str, variants: set[str]) -> None:
    """The rewritten document equals the old one but for those variants' `expect`."""
    old, new = yaml.safe_load(before), yaml.safe_load(after)
    for doc in (old, new):
        for v in variants:
            doc["variants"][v].pop("expect", None)
    if old != new:
        raise CaseError(f"{path}: rewriting the expect rules would change other fields; nothing written")


def write_case(edit: Edit) -> Case:
    """Validate the new text with the case loader, then replace the file atomically; returns the loaded case."""
    folder = edit.path.parent
    fd, tmp = tempfile.mkstemp(prefix=".case.", suffix=".yaml", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(edit.after)
        try:
            loaded = load_case(Path(tmp))
        except CaseError as exc:
            raise CaseError(f"{edit.path}: the rewritten file would be invalid ({exc}); nothing written") from None
        os.chmod(tmp, os.stat(edit.path).st_mode & 0o777)
        os.replace(tmp, edit.path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return Case(id=folder.name, folder=folder, spec=loaded.spec)


def derive_all(
    cases: list[Case], measured: list[Measured], between: Between | None, variants: Iterable[str] = ()
) -> list[Derivation]:
    """`derive` for every variant of every case (only `variants`, when given) that has results in `measured`."""
    have = {(r.case, r.variant) for _, _, r in measured}
    wanted = set(variants)
    out = []
    for case in cases:
        for variant in case.spec.variants:
            if (case.id, variant) in have and (not wanted or variant in wanted):
                out.append(derive(case, variant, measured, between))
    return out


__all__ = [
    "DECISIVE",
    "Derivation",
    "Edit",
    "Point",
    "Refused",
    "derive",
    "derive_all",
    "environment_of",
    "measurements",
    "primary_package",
    "rewrite",
    "rules_text",
    "write_case",
]
