"""The record as OSV advisories (schema 1.7), for any OSV client (pip-audit, osv-scanner, uv audit): each answers
as `bugmatrix audit` answers, projected onto what OSV can say.

    docs = documents(store.latest(), cases, record.releases)   # {"x_BUGMATRIX-<case>": {...}, ...}
    index = OSVIndex(docs); index.query("lightning", "PyPI", "2.3.3") -> [doc, ...]

One advisory per case and bug variant (the case split by variant): the case's first bug variant (in case.yaml's
order) is `x_BUGMATRIX-<case>`, each other one that reproduces somewhere `x_BUGMATRIX-<case>.<variant>`, each
naming its siblings in `related`. Kept apart so that a variant's fix is never offered as another's (one advisory
holding both would have pip-audit suggest torch 2.7.0 for torch-143828, where its empty-group-first variant
still reproduces). `x_` is the OSV schema's prefix for a database that osv.dev does not aggregate.

Ranges come from `bugmatrix audit` itself (harness/analysis/audit.py), asked on a grid of versions: along each
package that decides the variant (the rules name it, or the record measured a boundary along it; else the case's
primary package), every version measured, every version a rule or `supports:` names, the oldest release the
record lists in each interval between those (the answer is the same across an interval), and "0"; every
combination of the deciding packages is asked. A version is in a package's range when audit says *affected* there
with some versions of the others (`place`). So every barrier audit respects holds here too: no range where the rules
say the code is absent, outside `supports:`, past a cell measured `skip`; `introduced: "0"` only where audit
extrapolates to the oldest releases. A range ends with `fixed` where audit says not affected next, with
`last_affected` (the newest listed release before) where it cannot say next (untestable, no verdict): nothing
unsaid is reported, nothing unsaid is called fixed. A flaky version (audit: affected, with its rate) is in range;
where its range ends at a version not affected, the flaky verdict between the two (harness/analysis/flaky.py
`decide`) is stated with its confidence in the precision, and a version with too few clean runs to be called fixed
ends the range with `last_affected` instead. The releases not run between a measured reproducing and a
measured fixed side are answered as audit answers them, from the case's rules (a regression whose rules put it
between its measured sides starts there, not at the first release measured reproducing); each range's precision
(audit's words on both sides of each event) is in `affected[].database_specific.precision`.

What OSV cannot express: a bug that needs two packages in range at once (lightning-21757: lightning < 2.4 or
>= 2.6, AND torch >= 2.6). A client ORs the `affected` entries, so listing every package would report each one's
whole range alone. The advisory lists one package (`listed_package`): the case's primary package, unless its range
holds every version of it the record measured (it narrows nothing), then the deciding package whose range holds the
smallest share of its measured versions. Where more than one package decides, `database_specific.coupling` names
each with its range: an install whose other packages are out of range is over-reported (`bugmatrix audit` is exact).
The device: ranges come from one device's results (CPU unless only CUDA has verdicts), said in
`database_specific.device`; a CUDA advisory never names a CPU-only distribution (`fbgemm-gpu-cpu`), though a
torch range cannot tell a CPU torch from a CUDA one. Superseded results never count (the store does not return
them).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Iterable

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from harness.analysis.audit import Answer, Auditor, Target
from harness.analysis.flaky import Tally, decide
from harness.analysis.reproduce import repro_command
from harness.model.case import Case
from harness.model.common import DEVICE_PACKAGES, distributions, logical_name, primary_package
from harness.model.outcome import Outcome
from harness.model.requirements import Pin
from harness.model.result import Result
from harness.model.version import ZERO, PinVersion, parse_release
from harness.session.record import iso

PREFIX = "x_BUGMATRIX"  # `x_`: the schema's prefix for a local database (one osv.dev does not aggregate)
SCHEMA_VERSION = "1.7.5"
ECOSYSTEM = "PyPI"
ALIASES = {"lightning": ("pytorch-lightning",)}  # the same code under an older distribution name


def osv_id(case_id: str, variant: str | None = None) -> str:
    """`x_BUGMATRIX-<case-id>` (the case's first bug variant), `x_BUGMATRIX-<case-id>.<variant>` (another)."""
    return f"{PREFIX}-{case_id}" + (f".{variant}" if variant else "")


class Listing:
    """The releases the record lists for each logical package (any of its distributions), yanked and pre-releases
    left out, sorted; each package's read once."""

    def __init__(self, releases: dict[str, dict[str, dict]]) -> None:
        self.releases = releases
        self._by: dict[str, list[Version]] = {}

    def __call__(self, package: str) -> list[Version]:
        """`package`'s listed releases."""
        if package not in self._by:
            found = set()
            for dist in distributions(package):
                for version, point in self.releases.get(dist, {}).items():
                    parsed = PinVersion.parse(version).public_release
                    if parsed is not None and not point.get("yanked") and not parsed.is_prerelease:
                        found.add(parsed)
            self._by[package] = sorted(found)
        return self._by[package]


def _spec_points(spec: object) -> set[Version]:
    """The versions a specifier string turns at (`<2.4` -> 2.4; `==1.2.*` -> 1.2 and 1.3)."""
    if not isinstance(spec, str):
        return set()
    try:
        specifiers = SpecifierSet(spec)
    except InvalidSpecifier:
        return set()
    out = set()
    for one in specifiers:
        text = one.version.removesuffix(".*")
        at = PinVersion.parse(text).public_release
        if at is None:
            continue
        out.add(at)
        if one.version.endswith(".*") or one.operator == "~=":
            parts = list(at.release[:-1] if one.operator == "~=" and len(at.release) > 1 else at.release)
            parts[-1] += 1
            out.add(parse_release(".".join(map(str, parts))))
    return out


def grid(case: Case, variant: str, package: str, measured: Iterable[str], listing: Listing) -> list[Version]:
    """The versions of `package` audit is asked at (module docstring): "0", every version measured, every
    version the variant's rules or `supports:` name, and the oldest listed release in each interval between them
    (and above the newest)."""
    points = {ZERO}
    for text in measured:
        if (at := PinVersion.parse(text).public_release) is not None:
            points.add(at)
    for rule in case.spec.variants[variant].expect:
        for key, spec in rule.when.items():
            if logical_name(key) == package:
                points |= _spec_points(spec)
    for key, spec in case.spec.supports.items():
        if logical_name(key) == package:
            points |= _spec_points(spec)
    listed = listing(package)
    spelled = {v: v for v in listed}
    points = {spelled.get(v, v) for v in points}  # `2.3` of a rule is written as the release lists it: `2.3.0`
    edges = sorted(points)
    between = (
        next((v for v in listed if low < v < high), None)
        for low, high in zip(edges, [*edges[1:], parse_release("999999")], strict=False)
    )
    return sorted(points | {v for v in between if v is not None})


def deciding(auditor: Auditor, case: Case, variant: str, device: str) -> list[str]:
    """The packages that decide `variant` on `device`, the primary first (audit's `Auditor.deciding`, every
    package of the case and its rules taken as pinned)."""
    everything = Target({logical_name(p): Pin(logical_name(p), "0") for p in case.spec.recorded_packages})
    return auditor.deciding(case, variant, device, everything)


def _answers(
    auditor: Auditor, case: Case, variant: str, device: str, packages: list[str], grids: dict[str, list[Version]]
) -> dict[tuple[Version, ...], Answer]:
    """Audit's answer at every combination of the deciding packages' grid versions."""
    out = {}
    for combo in itertools.product(*(grids[p] for p in packages)):
        pins = {p: Pin(p, str(v)) for p, v in zip(packages, combo, strict=True)}
        out[combo] = auditor.answer(case, variant, Target(pins), device, with_workarounds=False)
    return out


IN, OUT, UNSAID = "in", "out", "unsaid"  # a version's place in a range: affected, not affected, cannot say


def place(answer: Answer) -> str:
    """`in` where audit says affected, `out` where it says not affected (fixed, or the code absent), `unsaid`
    where it cannot say (untestable, outside `supports:`, no verdict, a skip the rules do not explain): neither
    reported nor called fixed."""
    return IN if answer.affected else OUT if answer.kind == "not_affected" else UNSAID


def _short(answer: Answer) -> str:
    return f"{answer.status} ({answer.basis}: {answer.precision})"


def ranges_of(
    along: list[Version], said: dict[Version, tuple[str, Answer]], listed: list[Version]
) -> tuple[list[list[dict[str, str]]], list[str]]:
    """(OSV ranges, each range's precision) along one package's grid: one range per run of `in` versions, from
    `introduced` to `fixed` where audit says not affected next, to `last_affected` (the newest listed release
    before the next grid version) where it cannot say next, open where the run reaches the newest."""
    ranges: list[list[dict[str, str]]] = []
    notes: list[str] = []
    start: Version | None = None
    words: list[str] = []
    for i, at in enumerate(along):
        where, answer = said[at]
        name = "0" if at == ZERO else str(at)
        if where == IN and start is None:
            start = at
            below = f"; below, {along[i - 1]}: {_short(said[along[i - 1]][1])}" if i else ""
            words = [f"introduced {name}: {_short(answer)}{below}"]
        elif where != IN and start is not None:
            flaky = _flaky_verdict(said[along[i - 1]][1], answer, str(along[i - 1]), name) if where == OUT else None
            if flaky is not None and not flaky.startswith("fixed in"):  # too few clean runs to call it fixed
                last = max(v for v in [along[i - 1], *listed] if along[i - 1] <= v < at)
                end = {"last_affected": str(last)}
                words.append(f"last affected {last}: next, {name}: not called fixed, {flaky}")
            elif where == OUT:
                end = {"fixed": name}
                words.append(f"fixed {name}: {_short(answer)}" + (f"; {flaky}" if flaky else ""))
            else:
                last = max(v for v in [along[i - 1], *listed] if along[i - 1] <= v < at)
                end = {"last_affected": str(last)}
                words.append(f"last affected {last}: next, {name}: cannot say, not called fixed ({_short(answer)})")
            ranges.append([{"introduced": "0" if start == ZERO else str(start)}, end])
            notes.append("; ".join(words))
            start = None
    if start is not None:
        ranges.append([{"introduced": "0" if start == ZERO else str(start)}])
        notes.append("; ".join([*words, f"open: {_short(said[along[-1]][1])} at the newest, {along[-1]}"]))
    return ranges, notes


def _flaky_verdict(last: Answer, next_: Answer, old: str, new: str) -> str | None:
    """Where a range of a flaky answer (audit's `rate`) ends at one not affected: the flaky verdict between the two
    versions' pooled launches with its confidence ("fixed in 2.8.0 (2.7.0: 9/24 reproduced; 2.8.0: 0/40;
    confidence 0.97)", or "could not decide ..."); None where the last affected version has no rate."""
    if not last.rate or last.tally is None:
        return None
    return decide(last.tally, next_.tally or Tally()).text(old, new)


def _bound(text: str) -> Version:
    return ZERO if text == "0" else parse_release(text)


def matches(ranges: list[list[dict[str, str]]], version: Version) -> bool:
    """Whether any of `ranges` (each: introduced, then fixed or last_affected or nothing) holds `version`."""
    for events in ranges:
        start = _bound(events[0]["introduced"])
        end = events[1] if len(events) > 1 else {}
        if (
            start <= version
            and ("fixed" not in end or version < _bound(end["fixed"]))
            and ("last_affected" not in end or version <= _bound(end["last_affected"]))
        ):
            return True
    return False


def _ranges(
    auditor: Auditor, case: Case, variant: str, device: str, listing: Listing
) -> dict[str, tuple[list[list[dict[str, str]]], list[str]]]:
    """package -> (ranges, precision) for every deciding package of `variant` on `device`: a version is `in` where
    some versions of the other deciding packages put it in, else `out` where some put it out, else `unsaid`."""
    packages = deciding(auditor, case, variant, device)
    cells = auditor.cells(case.id, variant, device)
    grids = {p: grid(case, variant, p, [c.versions[p] for c in cells if p in c.versions], listing) for p in packages}
    answers = _answers(auditor, case, variant, device, packages, grids)
    rank = {IN: 0, OUT: 1, UNSAID: 2}
    basis = {"exact": 0, "interpolated": 1, "extrapolated": 2, "rules": 3}  # the answer quoted: the best measured
    out = {}
    for i, package in enumerate(packages):
        said: dict[Version, tuple[str, Answer]] = {}
        for combo, answer in answers.items():
            where = place(answer)
            was = said.get(combo[i])
            if was is None or (rank[where], basis[answer.basis]) < (rank[was[0]], basis[was[1].basis]):
                said[combo[i]] = (where, answer)
        out[package] = ranges_of(grids[package], said, listing(package))
    return out


def share(ranges: list[list[dict[str, str]]], measured: set[Version]) -> float:
    """The share of the measured versions that `ranges` hold (1.0 where none was measured: it narrows nothing)."""
    return sum(matches(ranges, v) for v in measured) / len(measured) if measured else 1.0


def listed_package(
    ranged: dict[str, list[list[dict[str, str]]]], measured: dict[str, set[Version]], primary: str
) -> str:
    """The one package an advisory lists (module docstring): the primary, unless its range holds every version of
    it the record measured (it narrows nothing), then the package whose range holds the smallest share of its
    measured versions."""
    shares = {p: share(r, measured.get(p, set())) for p, r in ranged.items()}
    if shares.get(primary, 1.0) < 1.0:
        return primary
    return min(ranged, key=lambda p: (shares[p], p != primary, p))


def _names(package: str, device: str) -> list[str]:
    """The distributions an advisory on `device` names for logical `package` (a CUDA one: no CPU-only wheel)."""
    cpu_only = {canonicalize_name(d) for dev, d in DEVICE_PACKAGES.get(package, {}).items() if dev == "cpu"}
    names = [canonicalize_name(n) for n in (*distributions(package), *ALIASES.get(package, ()))]
    return [n for n in names if device == "cpu" or n not in cpu_only]


def _device(entries: list[tuple[str, Result]]) -> str:
    """The device whose results the ranges come from: CPU unless only CUDA has verdicts."""
    verdicts = {r.device for _, r in entries if r.outcome in (Outcome.REPRODUCED, Outcome.FIXED)}
    return "cpu" if "cpu" in verdicts or "cuda" not in verdicts else "cuda"


def document(
    case: Case, variant: str, entries: list[tuple[str, Result]], listing: Listing, auditor: Auditor, siblings: list[str]
) -> dict:
    """The OSV advisory of one case's bug variant from its results (`entries`: the case's, every variant)."""
    spec = case.spec
    bugs = [name for name, v in spec.variants.items() if not v.workaround]
    device = _device([(c, r) for c, r in entries if r.variant in bugs])
    ranged = {p: v for p, v in _ranges(auditor, case, variant, device, listing).items() if v[0]}
    cells = auditor.cells(case.id, variant, device)
    measured = {
        p: {v for c in cells if p in c.versions and (v := PinVersion.parse(c.versions[p]).public)} for p in ranged
    }
    primary = logical_name(primary_package(spec.packages))
    listed = listed_package({p: v[0] for p, v in ranged.items()}, measured, primary) if ranged else None
    affected = []
    if listed is not None:
        runs, precision = ranged[listed]
        versions = sorted(
            {
                str(v)
                for c in cells
                if c.status in ("reproduced", "mixed")
                and listed in c.versions
                and (v := PinVersion.parse(c.versions[listed]).public_release) is not None
                and matches(runs, v)
            },
            key=parse_release,
        )
        for name in _names(listed, device):
            entry: dict = {
                "package": {"ecosystem": ECOSYSTEM, "name": name},
                "ranges": [{"type": "ECOSYSTEM", "events": events} for events in runs],
                "versions": versions,
                "database_specific": {"package": listed, "device": device, "precision": precision},
            }
            if name in ALIASES.get(listed, ()):
                entry["database_specific"]["note"] = f"the same code as {listed} under its older name"
            affected.append(entry)
    others = {}
    verdicts = {
        r.device for _, r in entries if r.variant == variant and r.outcome in (Outcome.REPRODUCED, Outcome.FIXED)
    }
    for other in sorted(verdicts - {device}):  # a device that measured no verdict has nothing to tell apart
        seen = {p: v[0] for p, v in _ranges(auditor, case, variant, other, listing).items()}
        if seen != {p: v[0] for p, v in ranged.items()}:
            others[other] = {p: e for p, e in seen.items() if e} or "never reproduced"
    mine = [r for _, r in entries if r.variant == variant] or [r for _, r in entries]
    reproducing = [r for r in mine if r.device == device and r.outcome is Outcome.REPRODUCED]
    reproduce = repro_command(case, max(reproducing, key=lambda r: (r.started_at, r.nproc))) if reproducing else ""
    condition = [
        {
            "when": {k: (v if isinstance(v, str | list) else v.model_dump()) for k, v in r.when.items()},
            "outcome": r.outcome.value,
            **({"because": r.because} if r.because else {}),
        }
        for r in spec.variants[variant].expect
    ]
    coupled = sorted(ranged) if len(ranged) > 1 else []  # audit's answer turns along each of them
    details = [
        f"bugmatrix case {case.id}, variant {variant}: {spec.title}.",
        "",
        " ".join(spec.variants[variant].description.split()) or "the bug path",
        "",
        f"Measured on {device}; the ranges are `bugmatrix audit`'s answers (precision in database_specific).",
    ]
    if device != "cpu":
        details.append(f"Only measured on {device}: a CPU install may not have this bug.")
    if coupled:
        details.append(
            f"A coupling: the bug needs {' and '.join(f'{p} in range' for p in coupled)} at once; OSV "
            f"clients OR the affected packages, so only {listed} is listed and an install whose "
            f"{', '.join(p for p in coupled if p != listed)} is out of range is over-reported "
            "(`bugmatrix audit` is exact)."
        )
    summary = spec.title if variant == bugs[0] else f"{spec.title} (variant {variant})"
    return {
        "schema_version": SCHEMA_VERSION,
        "id": osv_id(case.id, None if variant == bugs[0] else variant),
        "modified": iso(max(r.started_at for r in mine)),
        "published": iso(min(r.started_at for r in mine)),
        "summary": summary[:200],
        "details": "\n".join(details),
        "related": siblings,
        "affected": affected,
        "references": [{"type": "REPORT", "url": u} for u in spec.upstream]
        + [{"type": "FIX", "url": u} for u in spec.fixed_by],
        "database_specific": {
            "case": case.id,
            "variant": variant,
            "device": device,
            "condition": condition,
            "listed": listed,
            "primary": primary,
            "precision": {p: v[1] for p, v in ranged.items()} or f"never reproduced on {device}",
            "coupling": {p: ranged[p][0] for p in coupled},
            "reproduce": reproduce,
            "other_devices": others,
        },
    }


def documents(
    results: Iterable[tuple[str, Result]], cases: list[Case], releases: dict[str, dict[str, dict]]
) -> dict[str, dict]:
    """Every advisory by id: one per case and bug variant that reproduces on its device, and the case's first bug
    variant always (cases with no recorded result have none)."""
    results = list(results)
    auditor = Auditor(results, cases)
    listing = Listing(releases)
    by_case: dict[str, list[tuple[str, Result]]] = defaultdict(list)
    for cell, r in results:
        by_case[r.case].append((cell, r))
    out = {}
    for case in sorted(cases, key=lambda c: c.id):
        entries = by_case.get(case.id, [])
        bugs = [name for name, v in case.spec.variants.items() if not v.workaround]
        if not entries or not bugs:
            continue
        docs = [document(case, name, entries, listing, auditor, []) for name in bugs]
        docs = [d for i, d in enumerate(docs) if i == 0 or d["affected"]]
        for doc in docs:
            doc["related"] = [d["id"] for d in docs if d is not doc]
            out[doc["id"]] = doc
    return out


def affects(entry: dict, version: str) -> bool:
    """Whether one `affected[]` entry holds `version` (its `versions`, or its ECOSYSTEM ranges: introduced <= v <
    fixed, evaluated in version order; a local build tag is not compared)."""
    asked = PinVersion.parse(version).public_release
    if asked is None:
        return version in entry.get("versions", [])
    if any(PinVersion.parse(v).public_release == asked for v in entry.get("versions", [])):
        return True
    for rng in entry.get("ranges", []):
        if rng.get("type") != "ECOSYSTEM":
            continue
        events = []
        for event in rng.get("events", []):
            for kind, text in event.items():
                at = ZERO if text == "0" else PinVersion.parse(text).public_release
                if at is not None:
                    events.append((at, 0 if kind == "fixed" else 1, kind))
        inside = False
        for at, _, kind in sorted(events):
            if asked < at:
                break
            if kind == "introduced":
                inside = True
            elif kind in ("fixed", "limit"):
                inside = False
            elif kind == "last_affected":
                inside = asked == at or inside and asked < at
        if inside:
            return True
    return False


class OSVIndex:
    """The advisories, queryable as the OSV API answers: by package and version, or by id."""

    def __init__(self, docs: dict[str, dict]) -> None:
        self.docs = docs
        self._by_package: dict[tuple[str, str], list[tuple[dict, dict]]] = defaultdict(list)
        for doc in docs.values():
            for entry in doc.get("affected", []):
                package = entry["package"]
                self._by_package[(package["ecosystem"], canonicalize_name(package["name"]))].append((doc, entry))

    def query(self, name: str, ecosystem: str, version: str) -> list[dict]:
        """The advisories affecting `name` at `version` in `ecosystem`."""
        found = {}
        for doc, entry in self._by_package.get((ecosystem, canonicalize_name(name)), []):
            if doc["id"] not in found and affects(entry, version):
                found[doc["id"]] = doc
        return [found[k] for k in sorted(found)]

    def get(self, vuln_id: str) -> dict | None:
        """One advisory by id."""
        return self.docs.get(vuln_id)
