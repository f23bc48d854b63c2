"""Am I affected? The record's answer for one environment's exact versions, every case x variant, with its
precision said.

    target = target_of(pins, loose, known_packages(results, cases))    # from requirements, arguments or an interpreter
    answers = audit(results, cases, target, device="cpu")              # results: store.latest()
    affected = [a for a in answers if a.affected and not a.workaround]
    diff = compare(answers_a, answers_b)                                # --from A --to B

How an answer is found, per case x bug variant on the device (the workaround variants are answered the same way and
reported as the workarounds that are measured fixed there):

- Not applicable: the case's primary package is not in the environment (or the case does not run on the device).
- Not answered, for want of a pin: the primary package is pinned but another package the case needs is not, and
  that package decides (the rules name it, or the record measured a boundary along it): `unpinned` lists it as not
  covered, naming the cases it would answer. An unpinned package that decides nothing only qualifies the precision
  ("measured with torch 2.9.1"): `litgpt==0.5.12` alone is answered for the litgpt cases.
- The *deciding* packages are those the variant's `expect` rules name, and those along which the record measured a
  boundary (a change of outcome) when they are the case's primary package or named by the rules; with neither, the
  primary package. A coupling (rules naming lightning AND torch) is answered on both at once. A package nothing
  depends on only qualifies the precision ("measured with torch 2.9.1").
- measured at these exact pins: a cell whose deciding versions are the environment's (the local build tag such as
  `+cu124` is not compared; a git install is matched by its commit).
- interpolated: the other deciding packages equal, the nearest measured versions below and above agree, so no
  boundary lies between them.
- extrapolated: beyond the newest (or before the oldest) measured release, from the nearest measured one.
- from the case's rules (not measured): a boundary lies between the nearest measured versions and was not narrowed,
  the rules put one between the nearest measured release (where they agree with the measurement) and these pins
  (never extrapolated across it), nothing was measured near these pins, or nothing on this device at all.

Where the case cannot run, nothing is read across: a cell measured `skip` (every world size skipped) is a barrier,
never dropped as unknown, never interpolated across nor extrapolated from. Where the rules say `skip` at these pins
(or a cell measured them skip), the rule's `because` (harness/model/case_schema.py `Rule`) answers: `absent`, the
code the bug lives in does not exist in these versions -> not affected; `untestable` -> cannot say. Pins outside
the case's `supports:` (the versions its script can run on) -> cannot say, never extrapolated.

Flaky: a cell whose repeats both reproduced and were fixed is `flaky` (harness/analysis/transitions.py
`cell_status`): affected, never "not affected" nor "cannot say", with its rate (`Answer.rate`, reproduced k/n over
the launches of the cells it rests on, pooled). Its `fixed_in` is the first release measured fixed after it only
where the flaky verdict (harness/analysis/flaky.py `decide`: that release's clean runs against the rate) holds at
its confidence, which the answer states (`Answer.confidence`); else there is none ("could not decide", said in the
precision).

Each answer is one of four kinds (`Answer.kind`): `affected`; `not_affected`, why `fixed` (measured, interpolated,
extrapolated or from the rules: the precision says which) or `absent`; `cannot_say`, with why (untestable,
outside `supports:`, a skip the rules do not explain, no verdict); and, for want of a pin, not answered
(`unpinned`). A workaround is listed as measured fixed only where it was measured (exact or interpolated).

`fixed_in` is the upgrade target: along the deciding package that answered (the other deciding packages as pinned),
the first release measured fixed after the pinned one, i.e. after the last reproduced release of the run the pin is
in (None when no newer release is measured fixed).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import partial

from packaging.utils import canonicalize_name

from harness.analysis.flaky import FIXED as FIXED_VERDICT
from harness.analysis.flaky import Tally, decide
from harness.analysis.reproduce import repro_command
from harness.analysis.transitions import (
    FIXED,
    FLAKY,
    MIXED,
    REPRODUCED,
    UNKNOWN,
    cell_axes,
    cell_status,
    cell_versions,
)
from harness.model.case import Case
from harness.model.case_schema import SKIP_KINDS, GitCondition, Rule, Variant
from harness.model.common import logical_name, primary_package
from harness.model.environment import Environment, Installed
from harness.model.expectations import environment_of, expected_outcome, rule_holds, version_matches
from harness.model.outcome import Outcome
from harness.model.requirements import Loose, Pin
from harness.model.result import Result
from harness.model.version import AT_COMMIT, PinVersion, short

# distributions that are the same code as a logical package under an older name
RENAMED = {"pytorch-lightning": "lightning"}
AFFECTED = (REPRODUCED, MIXED, FLAKY)  # flaky: it reproduces at a rate there (never "not affected")
SKIP = Outcome.SKIP.value  # a cell where every world size skipped: the case cannot run there (a barrier)
ABSENT, UNTESTABLE = SKIP_KINDS  # `Rule.because`
MEASURED = ("exact", "interpolated")  # the bases that rest on a measurement at or around the pins
KINDS = ("affected", "not_affected", "cannot_say")


@dataclass(frozen=True)
class Uncovered:
    """A pinned distribution the record cannot answer for, and why."""

    package: str
    version: str
    why: str

    def to_json(self) -> dict[str, str]:
        """`{"package", "version", "why"}`."""
        return {"package": self.package, "version": self.version, "why": self.why}


@dataclass
class Target:
    """The environment audited: logical package -> its pin, what the record cannot answer for, the renames."""

    pins: dict[str, Pin]
    not_covered: list[Uncovered] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)  # logical -> the distribution pinned under an older name
    label: str = ""
    markers_for: str = ""  # the platform and Python a lockfile's markers were evaluated for (lockfiles.py)

    def environment(self) -> Environment:
        """The pins as the rule evaluator sees an installed environment."""
        packages = {
            name: Installed(name=pin.distribution, version=pin.version or "0", commit=pin.commit)
            for name, pin in self.pins.items()
        }
        return Environment(python="", python_version="", packages=packages)

    def public(self) -> dict[str, str]:
        """logical package -> public version (`2.6.0` of `2.6.0+cu124`), the releases only."""
        out = {}
        for name, pin in self.pins.items():
            public = PinVersion.parse(pin.version).public if pin.version and not pin.commit else None
            if public is not None:
                out[name] = str(public)
        return out


def known_packages(results: Iterable[tuple[str, Result]], cases: Iterable[Case]) -> dict[str, set[str]]:
    """Every logical package the record knows (a case needs it, or a result recorded it) -> the recorded versions."""
    known: dict[str, set[str]] = defaultdict(set)
    for case in cases:
        for package in case.spec.packages:
            known[logical_name(package)]  # noqa: B018 - creates the entry
    pinned = {pin for _, result in results for pin in result.versions.items()}  # few distinct (dist, version)
    for dist, version in pinned:
        known[logical_name(dist)].add(version)
    return known


def target_of(pins: Iterable[Pin], loose: Iterable[Loose], known: dict[str, set[str]], label: str = "") -> Target:
    """The audited environment: each pin under its logical name (`fbgemm-gpu-cpu` is fbgemm-gpu, `pytorch-lightning`
    is lightning), a commit resolved to the record's `version @ sha`; a distribution the record does not know, a
    commit it does not hold and every loose requirement go to `not_covered`."""
    target = Target({}, label=label)
    direct = {logical_name(p.distribution) for p in pins}
    for pin in pins:
        name = logical_name(pin.distribution)
        if name in RENAMED:
            if RENAMED[name] in direct:
                continue  # the package itself is pinned: the old name says nothing more
            target.renamed[RENAMED[name]] = pin.distribution
            name = RENAMED[name]
        if name not in known:
            target.not_covered.append(Uncovered(pin.distribution, pin.text, "the record has no results for it"))
            continue
        if pin.commit:
            recorded = [p for v in known[name] if _same_commit(p := PinVersion.parse(v), pin.commit)]
            if not recorded:
                target.not_covered.append(Uncovered(pin.distribution, pin.text, "a commit the record does not hold"))
                continue
            first = min(recorded)
            pin = Pin(pin.distribution, first.release_text, first.commit, pin.where)
        target.pins[name] = pin
    for item in loose:
        target.not_covered.append(Uncovered(item.name, item.text, item.why))
    return target


def target_of_environment(env: Environment, known: dict[str, set[str]], label: str = "") -> Target:
    """The audited environment from an interpreter's installed distributions."""
    pins = [Pin(canonicalize_name(i.name), i.version, i.commit, label) for i in env.packages.values()]
    return target_of(pins, [], known, label)


def _same_commit(recorded: PinVersion, commit: str) -> bool:
    """Whether `recorded` is a git install (`X @ sha`) of `commit` (either sha a prefix of the other)."""
    a = recorded.commit
    return recorded.kind == AT_COMMIT and bool(a) and bool(commit) and (a.startswith(commit) or commit.startswith(a))


# ------------------------------------------------------------------------------------------------------- answers


@dataclass
class Answer:
    """The record's answer for one case x variant at the target's versions."""

    case: str
    variant: str
    workaround: bool
    title: str
    upstream: str
    status: str  # reproduced | fixed | mixed | skip | error | unknown
    measured: bool
    basis: str  # exact | interpolated | extrapolated | rules
    precision: str
    fixed_in: str | None = None
    workarounds: list[str] = field(default_factory=list)
    reproduce: str = ""
    versions: dict[str, str] = field(default_factory=dict)
    why: str = ""  # not affected: "fixed" | "absent"; cannot say: why not (one line)
    tally: Tally | None = None  # the launches of the cells it rests on, pooled (measured answers)
    confidence: float | None = None  # flaky: the confidence of the boundary to `fixed_in`

    @property
    def rate(self) -> str:
        """A flaky answer's rate, `3/10 reproduced` (pooled over the cells it rests on); "" otherwise."""
        return self.tally.text() if self.status == FLAKY and self.tally is not None else ""

    @property
    def affected(self) -> bool:
        """Whether the bug applies: it reproduces (or, mixed, reproduces in some of the cells at these pins)."""
        return self.status in AFFECTED

    @property
    def kind(self) -> str:
        """`affected`, `not_affected` (fixed, or its code absent at these pins) or `cannot_say` (module doc)."""
        if self.affected:
            return "affected"
        return "not_affected" if self.status == FIXED or self.why == ABSENT else "cannot_say"

    def to_json(self) -> dict:
        """The `--json` shape of one entry: an affected one as it always was, with its `basis` (exact, interpolated,
        extrapolated, rules: what a gate may filter on); the others say `why`."""
        if self.affected:
            return {
                "case": self.case,
                "variant": self.variant,
                "title": self.title,
                "upstream": self.upstream,
                "outcome": self.status,
                "precision": self.precision,
                "basis": self.basis,
                "fixed_in": self.fixed_in,
                "workarounds": self.workarounds,
                "reproduce": self.reproduce,
                "versions": self.versions,
                **({"rate": self.rate, "confidence": self.confidence} if self.rate else {}),
            }
        return {
            "case": self.case,
            "variant": self.variant,
            "title": self.title,
            "upstream": self.upstream,
            "outcome": self.status,
            "why": self.why,
            "precision": self.precision,
            "basis": self.basis,
            "versions": self.versions,
        }


@dataclass
class _Cell:
    name: str
    status: str
    versions: dict[str, str]  # logical package -> recorded version (or "version @ sha")
    results: list[Result]


def _on_axis(text: str) -> PinVersion:
    """Where a recorded version sits on an audit's axis: in the one order, a local build at its release (a
    `2.6.0+cu124` cell measured what a `2.6.0` pin asks, as `_matches` says)."""
    return PinVersion.parse(text).public_at()


def _matches(recorded: str | None, pin: Pin) -> bool:
    if recorded is None:
        return False
    version = PinVersion.parse(recorded)
    if pin.commit:
        return _same_commit(version, pin.commit)
    if version.commit:
        return False
    mine, theirs = version.public, PinVersion.parse(pin.version).public
    return recorded == pin.version if mine is None or theirs is None else mine == theirs


def _combine(statuses: Iterable[str]) -> str:
    said = set(statuses) - {UNKNOWN}
    if len(said) > 1:
        said.discard(SKIP)  # a cell that ran outvotes one that could not
    return UNKNOWN if not said else said.pop() if len(said) == 1 else MIXED


def _cell_status(results: list[Result]) -> str:
    """`cell_status`, but a cell where every world size skipped is `skip` (the case cannot run there), not unknown."""
    if all(r.outcome is Outcome.SKIP for r in results):
        return SKIP
    return cell_status(results)


def _skip_rules(variant: Variant, envs: Iterable[tuple[Environment, int]], device: str) -> list[Rule] | None:
    """The rules that say `skip` in each (environment, world size), in order; None where one of them runs."""
    rules = []
    for env, nproc in envs:
        rule = next((r for r in variant.expect if rule_holds(r, env, nproc, device)), variant.expect[-1])
        if rule.outcome is not Outcome.SKIP:
            return None
        rules.append(rule)
    return rules


def _skip_kind(rules: list[Rule]) -> str:
    """`absent` when every rule says so, `untestable` when one does, "" when they do not say why."""
    said = {r.because for r in rules}
    return ABSENT if said == {ABSENT} else UNTESTABLE if UNTESTABLE in said else ""


def _when_text(rule: Rule) -> str:
    """A rule's conditions in words: `torch <2.4.0`, `litgpt @ 60140755d7db, ...`, `device cuda` ("" for none)."""
    return ", ".join(
        f"{key} @ {', '.join(sha[:12] for sha in cond.git)}" if isinstance(cond, GitCondition) else f"{key} {cond}"
        for key, cond in rule.when.items()
    )


def _rule_packages(variant: Variant, device: str) -> set[str]:
    return {logical_name(k) for k in variant.packages_named(device)}


def _by_group(results: Iterable[tuple[str, Result]]) -> dict[tuple[str, str, str], list[tuple[str, Result]]]:
    grouped: dict[tuple[str, str, str], list[tuple[str, Result]]] = defaultdict(list)
    for cell, result in results:
        grouped[(result.case, result.variant, result.device)].append((cell, result))
    return grouped


def _cells(entries: list[tuple[str, Result]]) -> list[_Cell]:
    by_cell: dict[str, list[Result]] = defaultdict(list)
    for cell, result in entries:
        by_cell[cell].append(result)
    out = []
    for name, rs in sorted(by_cell.items()):
        out.append(_Cell(name, _cell_status(rs), cell_versions(rs), rs))
    return out


def _exact(cells: list[_Cell], deciding: list[str], target: Target) -> list[_Cell]:
    """The cells measured at the target's deciding versions, those that match most of its other pins."""
    pins = target.pins
    exact = [c for c in cells if all(_matches(c.versions.get(p), pins[p]) for p in deciding)]
    if not exact:
        return []
    best = max(sum(_matches(c.versions.get(p), pins[p]) for p in pins) for c in exact)
    return [c for c in exact if sum(_matches(c.versions.get(p), pins[p]) for p in pins) == best]


def _moved(target: Target, package: str, recorded: str) -> Target:
    """The target with `package` at a recorded version (`2.6.0`, `0.4.0.dev0 @ <sha>`) instead of its pin."""
    at = PinVersion.parse(recorded)
    pins = {**target.pins, package: Pin(target.pins[package].distribution, at.release_text, at.commit or None)}
    return Target(pins, renamed=target.renamed, label=target.label)


def _outside(case: Case, target: Target) -> str:
    """`torch 2.2.1 (supports torch >=2.7)` where a pinned release is outside the case's `supports:` (the
    versions its script can run on); "" where every one is inside (a git install is not compared)."""
    for package, spec in case.spec.supports.items():
        pin = target.pins.get(logical_name(package))
        if pin is None or pin.commit or not spec:
            continue
        version = PinVersion.parse(pin.version).public
        if version is not None and not version_matches(version, spec):
            return f"{package} {pin.text} (supports {package} {spec})"
    return ""


def _pins_text(rules: list[Rule], case: Case, target: Target, device: str) -> str:
    """The pins the skip rules speak of (`torch 2.2.1`; the primary package's for a catch-all), and the device
    when a rule names it or none names a package."""
    named = [k for r in rules for k in r.when if k not in ("nproc", "device")]
    names = dict.fromkeys(logical_name(k) for k in named or [primary_package(case.spec.packages)])
    text = ", ".join(f"{n} {target.pins[n].text}" for n in names if n in target.pins)
    return text + f" on {device}" if not named or any("device" in r.when for r in rules) else text


def _cannot_run(
    case: Case, variant: str, target: Target, device: str, exact: list[_Cell]
) -> tuple[str, str, str, str] | None:
    """(status, basis, precision, why) where the case cannot run at the target's pins: the rules say `skip` there
    or a cell measured these pins skip (then the rule's `because` answers: absent -> not affected, untestable ->
    cannot say), or a pin is outside `supports:` (cannot say); None where it can run."""
    spec = case.spec
    rules = _skip_rules(spec.variants[variant], [(target.environment(), n) for n in spec.nproc], device)
    if exact:  # measured skip here: why, by the rules at these pins, else by those that held for what was run
        rules = rules or _skip_rules(
            spec.variants[variant], [(environment_of(r), r.nproc) for c in exact for r in c.results], device
        )
        basis, said = "exact", "; measured skip at these exact pins"
    elif rules is not None:
        basis, said = "rules", ""
    else:
        outside = _outside(case, target)
        if not outside:
            return None
        return (
            SKIP,
            "rules",
            f"outside the case's supports: {outside}, where its script cannot run (not extrapolated)",
            f"outside supports: {outside}",
        )
    kind = _skip_kind(rules or [])
    where = _pins_text(rules or [], case, target, device)
    rule = next((r for r in rules or [] if r.because == kind), None)
    cited = f" (the case's {f'rule {_when_text(rule)}' if rule.when else 'last rule'}: skip, {kind})" if rule else ""
    if kind == ABSENT:
        return SKIP, basis, f"absent in {where}: the code this bug lives in does not exist there{cited}{said}", ABSENT
    if kind == UNTESTABLE:
        return (
            SKIP,
            basis,
            f"untestable at {where}: the code exists but the case cannot test it there{cited}{said}",
            f"untestable at {where}{cited}",
        )
    said = said or "; from the case's rules"
    return (
        SKIP,
        basis,
        f"skip at {where}{said}: the rules do not say why (absent or untestable)",
        f"skip at {where}, the rules do not say why",
    )


class Auditor:
    """Answers case x variant questions for targets over one set of results (built once, asked many times)."""

    def __init__(self, results: list[tuple[str, Result]], cases: list[Case]) -> None:
        self.cases = {c.id: c for c in cases}
        self.groups = _by_group(results)
        self._cells: dict[tuple[str, str, str], list[_Cell]] = {}
        self._boundaries: dict[tuple[str, str, str, frozenset[str]], set[str]] = {}

    def cells(self, case: str, variant: str, device: str) -> list[_Cell]:
        """The cells of one case x variant on one device, each with one status over its world sizes."""
        key = (case, variant, device)
        if key not in self._cells:
            self._cells[key] = _cells(self.groups.get(key, []))
        return self._cells[key]

    def boundary_packages(self, case: str, variant: str, device: str, candidates: set[str]) -> set[str]:
        """The packages of `candidates` along which the record measured a change of outcome."""
        key = (case, variant, device, frozenset(candidates))
        if key not in self._boundaries:  # the cells' status and versions as `cells` found them; no other axis built
            cells = {
                c.name: (UNKNOWN if c.status == SKIP else c.status, c.versions)  # a skip is no change of outcome
                for c in self.cells(case, variant, device)
            }
            self._boundaries[key] = {
                a.package for a in cell_axes(case, variant, device, cells, candidates) if a.changes()
            }
        return self._boundaries[key]

    def deciding(self, case: Case, variant: str, device: str, target: Target) -> list[str]:
        """The deciding packages (see the module docstring), the primary first."""
        rules = _rule_packages(case.spec.variants[variant], device)
        primary = logical_name(primary_package(case.spec.packages))
        chosen = rules | self.boundary_packages(case.id, variant, device, rules | {primary})
        if not chosen:
            chosen = {primary}
        chosen = {p for p in chosen if p in target.pins}  # a rule on a package outside the case and the pins
        return sorted(chosen or {primary}, key=lambda p: (p != primary, p))

    def answer(self, case: Case, variant: str, target: Target, device: str, with_workarounds: bool = True) -> Answer:
        """The record's answer for `case` x `variant` at the target's pins on `device` (module docstring)."""
        spec = case.spec
        versions = {
            target.pins[logical_name(p)].distribution: target.pins[logical_name(p)].text
            for p in spec.packages
            if logical_name(p) in target.pins
        }
        about = partial(  # what every answer for this case and variant says
            Answer,
            case=case.id,
            variant=variant,
            workaround=spec.variants[variant].workaround,
            title=spec.title,
            upstream=spec.upstream[0],
            versions=versions,
        )
        cells = [c for c in self.cells(case.id, variant, device) if c.status != UNKNOWN]
        deciding = self.deciding(case, variant, device, target)
        notes = [
            f"{dist} {target.pins[name].text} answered as {name} (the same code under its older name)"
            for name, dist in target.renamed.items()
            if name in {logical_name(p) for p in spec.packages}
        ]
        used: list[_Cell] = []
        along: str | None = None
        why = ""
        exact = _exact(cells, deciding, target)
        if exact and _combine(c.status for c in exact) != SKIP:
            status, basis, precision = _combine(c.status for c in exact), "exact", "measured at these exact pins"
            used, along = exact, deciding[0]
        elif (cannot := _cannot_run(case, variant, target, device, exact)) is not None:
            status, basis, precision, why = cannot
            used = exact
        elif not cells:
            status, basis = self._rules(case, variant, target, device), "rules"
            precision = f"not measured on this device ({device}): from the case's rules"
        else:
            status, basis, precision, used, along = self._measured(case, variant, cells, deciding, target, device)
        if status == FIXED:
            why = FIXED
        elif status not in AFFECTED and not why:
            why = precision if status == SKIP else f"{status}: {precision}"  # no verdict here: the precision says why
        if used:
            differ = sorted(
                {
                    f"{p} {short(c.versions[p])}"
                    for c in used
                    for p in c.versions
                    if p not in deciding and (p not in target.pins or not _matches(c.versions[p], target.pins[p]))
                }
            )
            if differ:
                precision += f"; measured with {', '.join(differ)}"
        precision = "; ".join([precision, *notes])
        tally = sum((Tally.of(r.tallies, r.outcome) for c in used for r in c.results if r.launched), Tally())
        if status == FLAKY:
            precision += f"; flaky: {tally.text()}"
        answer = about(status=status, measured=basis != "rules", basis=basis, precision=precision, why=why)
        answer.tally = tally if used else None
        if answer.affected:
            answer.fixed_in = self._fixed_in(cells, deciding, target, along, answer)
            answer.reproduce = self._reproduce(case, variant, target, device, used)
        if with_workarounds and answer.affected and not answer.workaround:
            for name, other in spec.variants.items():
                if other.workaround:
                    w = self.answer(case, name, target, device, with_workarounds=False)
                    if w.status == FIXED and w.basis in MEASURED:  # never an extrapolation or the rules' word
                        answer.workarounds.append(name)
        return answer

    def _rules(self, case: Case, variant: str, target: Target, device: str) -> str:
        env = target.environment()
        outcomes = {expected_outcome(case.spec.variants[variant], env, n, device) for n in case.spec.nproc}
        if Outcome.REPRODUCED in outcomes:
            return REPRODUCED
        if outcomes == {Outcome.FIXED}:
            return FIXED
        return sorted(o.value for o in outcomes)[0]

    def _measured(
        self, case: Case, variant: str, cells: list[_Cell], deciding: list[str], target: Target, device: str
    ) -> tuple[str, str, str, list[_Cell], str | None]:
        """(status, basis, precision, the cells it rests on, the package it was read along) where no cell was
        measured at these exact pins: interpolated, extrapolated or from the rules, never across a cell measured
        `skip` (it is read as what it is: the case could not run there)."""
        pins = target.pins
        for q in deciding:
            others = [p for p in deciding if p != q]
            line = [c for c in cells if q in c.versions and all(_matches(c.versions.get(p), pins[p]) for p in others)]
            if not line:
                continue
            here = _on_axis(pins[q].text)
            below = [c for c in line if _on_axis(c.versions[q]) < here]
            above = [c for c in line if _on_axis(c.versions[q]) > here]
            low = max((_on_axis(c.versions[q]) for c in below), default=None)
            high = min((_on_axis(c.versions[q]) for c in above), default=None)
            low_cells = [c for c in below if _on_axis(c.versions[q]) == low]
            high_cells = [c for c in above if _on_axis(c.versions[q]) == high]
            low_status = _combine(c.status for c in low_cells) if low_cells else None
            high_status = _combine(c.status for c in high_cells) if high_cells else None
            lo_v = short(low_cells[0].versions[q]) if low_cells else ""
            hi_v = short(high_cells[0].versions[q]) if high_cells else ""
            ruled = self._rules(case, variant, target, device)
            if low_status and high_status:
                if low_status == high_status == SKIP:
                    return (
                        SKIP,
                        "interpolated",
                        f"between {q} {lo_v} and {hi_v}, both measured skip (the case cannot run there): no answer",
                        low_cells + high_cells,
                        q,
                    )
                if low_status == high_status:
                    return (
                        low_status,
                        "interpolated",
                        f"inside measured releases {q} {lo_v} and {hi_v} with no boundary between them (interpolated)",
                        low_cells + high_cells,
                        q,
                    )
                return (
                    ruled,
                    "rules",
                    f"between {q} {lo_v} ({low_status}) and {hi_v} ({high_status}), a boundary "
                    "not narrowed: from the case's rules (not measured)",
                    [],
                    q,
                )
            side, status, cells_used = (hi_v, high_status, high_cells) if high_status else (lo_v, low_status, low_cells)
            where = "before the oldest" if high_status else "beyond the newest"
            if status == SKIP:  # a barrier: what lies past a release the case could not run on is not read from it
                return (
                    SKIP,
                    "extrapolated",
                    f"{where} measured release {q} {side}, measured skip (the case cannot run there): not extrapolated",
                    cells_used,
                    q,
                )
            text = f"{where} measured release {q} {side} (extrapolated)"
            if ruled != status and ruled in (REPRODUCED, FIXED):
                if self._rules(case, variant, _moved(target, q, cells_used[0].versions[q]), device) == status:
                    # the rules agree with the measurement there and change between it and the pins: a boundary
                    # lies between, which nothing measured crosses (as between two measured sides)
                    return (
                        ruled,
                        "rules",
                        f"{where} measured release {q} {side} ({status}), across a boundary the "
                        "case's rules put between: from the case's rules (not measured)",
                        [],
                        q,
                    )
                text += f"; the case's rules say {ruled}"
            return status or UNKNOWN, "extrapolated", text, cells_used, q
        return (
            self._rules(case, variant, target, device),
            "rules",
            "not measured at these pins: from the case's rules",
            [],
            None,
        )

    def _fixed_in(
        self, cells: list[_Cell], deciding: list[str], target: Target, along: str | None, answer: Answer
    ) -> str | None:
        """The first release measured fixed after the pins along the package that answered; for a flaky answer,
        only where the flaky verdict holds between its rate and that release's clean runs (its confidence set on
        `answer`, else "could not decide" added to the precision)."""
        order = ([along] if along else []) + [p for p in deciding if p != along]
        for q in order:
            if q not in target.pins:
                continue
            others = [p for p in deciding if p != q]
            line = [
                c
                for c in cells
                if q in c.versions
                and not PinVersion.parse(c.versions[q]).commit
                and all(_matches(c.versions.get(p), target.pins[p]) for p in others)
            ]
            points: dict[PinVersion, list[_Cell]] = defaultdict(list)
            for c in line:
                points[_on_axis(c.versions[q])].append(c)
            here = _on_axis(target.pins[q].text)
            after = [k for k in points if k > here and _combine(c.status for c in points[k]) == FIXED]
            if after:  # the first release measured fixed after the pin (one pass: no sort needed)
                first = points[min(after)][0].versions[q]
                public = PinVersion.parse(first).public
                if answer.status == FLAKY and answer.tally is not None:
                    fixed = sum(
                        (Tally.of(r.tallies, r.outcome) for c in points[min(after)] for r in c.results), Tally()
                    )
                    verdict = decide(answer.tally, fixed)
                    if verdict.kind != FIXED_VERDICT:  # too few clean runs there: never called fixed
                        answer.precision += (
                            f"; not called fixed in {q} {public}: {verdict.text(target.pins[q].text, str(public))}"
                        )
                        return None
                    answer.confidence = verdict.confidence
                    answer.precision += f"; {verdict.text(target.pins[q].text, str(public))}"
                return f"{q}=={public}"
        return None

    def _reproduce(self, case: Case, variant: str, target: Target, device: str, used: list[_Cell]) -> str:
        results = [r for c in used for r in c.results if r.outcome is Outcome.REPRODUCED]
        results = results or [r for c in used for r in c.results]
        results = results or [r for _, r in self.groups.get((case.id, variant, device), [])]
        if results:
            base = min(results, key=lambda r: r.nproc)
            recorded = {logical_name(d): (d, v) for d, v in base.versions.items()}
        else:
            base = Result(
                case=case.id,
                variant=variant,
                nproc=case.spec.nproc[0],
                device=device,
                outcome=Outcome.REPRODUCED,
                expected=None,
                reason="",
            )
            recorded = {}
        names = {logical_name(p) for p in case.spec.packages} | set(recorded)
        versions = {}
        for name in sorted(names):
            if name in target.pins:
                pin = target.pins[name]
                versions[pin.distribution] = str(PinVersion.of(pin.version, pin.commit))
            elif name in recorded:
                versions[recorded[name][0]] = recorded[name][1]
        job = base.model_copy(update={"versions": versions, "device": device, "variant": variant})
        return repro_command(case, job)


def _applies(case: Case, target: Target, device: str, skipped: set[str]) -> bool:
    if case.id in skipped or any(i and case.id.startswith(i) for i in skipped):
        return False
    return device in case.spec.devices and logical_name(primary_package(case.spec.packages)) in target.pins


def _undecided(auditor: Auditor, case: Case, variant: str, target: Target, device: str) -> list[str]:
    """The case's packages that are not pinned and that decide `variant`'s outcome (rules or a measured
    boundary along them): its `packages` and every other package a rule names (`recorded_packages`: a coupling
    case's second package, such as litgpt-2156's transformers)."""
    missing = {logical_name(p) for p in case.spec.recorded_packages} - set(target.pins)
    if not missing:
        return []
    rules = _rule_packages(case.spec.variants[variant], device)
    primary = logical_name(primary_package(case.spec.packages))
    deciding = rules | auditor.boundary_packages(case.id, variant, device, rules | missing | {primary})
    return sorted(deciding & missing)


def audit(
    results: list[tuple[str, Result]],
    cases: list[Case],
    target: Target,
    device: str = "cpu",
    ignore: Iterable[str] = (),
    auditor: Auditor | None = None,
) -> list[Answer]:
    """Every applicable case x variant's answer at the target's pins on `device` (bug variants and workarounds;
    see `Answer.affected`). A case whose primary package is not pinned, or that does not run on `device`, is not
    applicable; a variant that an unpinned package decides has no answer (`unpinned` names it)."""
    auditor = auditor or Auditor(results, cases)
    skipped = set(ignore)
    out = []
    for case in sorted(cases, key=lambda c: c.id):
        if not _applies(case, target, device, skipped):
            continue
        for variant in case.spec.variants:
            if not _undecided(auditor, case, variant, target, device):
                out.append(auditor.answer(case, variant, target, device))
    return out


def unpinned(
    results: list[tuple[str, Result]],
    cases: list[Case],
    target: Target,
    device: str = "cpu",
    ignore: Iterable[str] = (),
    auditor: Auditor | None = None,
) -> list[Uncovered]:
    """Each package the environment does not pin that decides a case `audit` could otherwise answer (its primary
    package is pinned), with the cases it would answer: what to pin for a complete answer."""
    auditor = auditor or Auditor(results, cases)
    skipped = set(ignore)
    wanted: dict[str, set[str]] = defaultdict(set)
    for case in cases:
        if _applies(case, target, device, skipped):
            for variant in case.spec.variants:
                for package in _undecided(auditor, case, variant, target, device):
                    wanted[package].add(case.id)
    return [
        Uncovered(package, "", f"not pinned, and it decides {', '.join(sorted(ids))} (pin it to answer them)")
        for package, ids in sorted(wanted.items())
    ]


def by_kind(answers: Iterable[Answer]) -> dict[str, list[Answer]]:
    """The bug variants (never a workaround) by `Answer.kind`: `affected`, `not_affected`, `cannot_say`."""
    out: dict[str, list[Answer]] = {kind: [] for kind in KINDS}
    for answer in answers:
        if not answer.workaround:
            out[answer.kind].append(answer)
    return out


# ------------------------------------------------------------------------------------------------------- upgrade


@dataclass
class Change:
    """One bug variant across an upgrade: `fixes`, `brings` (in) or `keeps`, with both answers."""

    kind: str
    before: Answer | None
    after: Answer | None

    @property
    def item(self) -> tuple[str, str]:
        """(case, variant)."""
        answer = self.after or self.before
        assert answer is not None
        return answer.case, answer.variant

    def to_json(self) -> dict:
        """`{"case", "variant", "change", "before", "after"}` with each side's answer (None where not applicable)."""
        case, variant = self.item
        return {
            "case": case,
            "variant": variant,
            "change": self.kind,
            "before": self.before.to_json() if self.before else None,
            "after": self.after.to_json() if self.after else None,
        }


def compare(before: list[Answer], after: list[Answer]) -> list[Change]:
    """The bug variants an upgrade fixes (affected before, not after), brings in (the reverse) and keeps (both)."""
    a = {(x.case, x.variant): x for x in before if not x.workaround}
    b = {(x.case, x.variant): x for x in after if not x.workaround}
    out = []
    for item in sorted(set(a) | set(b)):
        was, now = a.get(item), b.get(item)
        hit_a, hit_b = bool(was and was.affected), bool(now and now.affected)
        if hit_a and hit_b:
            out.append(Change("keeps", was, now))
        elif hit_a:
            out.append(Change("fixes", was, now))
        elif hit_b:
            out.append(Change("brings", was, now))
    return out
