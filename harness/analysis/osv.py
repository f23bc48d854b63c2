"""The record as OSV advisories (schema 1.6): one per case, for any OSV client (pip-audit, osv-scanner, uv).

    docs = documents(store.latest(), cases, record.releases)   # {"BUGMATRIX-<case>": {...}}
    index = OSVIndex(docs); index.query("lightning", "PyPI", "2.3.3") -> [doc, ...]

Ranges come from one device's measured boundaries (CPU, unless only CUDA has verdicts): along each package, in
version order, the first measured version reproduces -> `introduced: "0"`, or the release from which the bug's code
exists where every bug variant's rules say so (`{package: "<X"}: skip, because: absent` -> `introduced: "X"`: the
range never starts where the code does not exist, as `bugmatrix audit` answers there); each measured fix ->
`fixed: <the first version measured fixed>`; each regression -> `introduced: <the first version measured reproducing
again>`. An interval boundary (releases between the two measured versions not run) is written at the measured
version, so the releases not run are reported affected; each boundary's precision is said in `database_specific`.
`versions` lists the versions measured reproducing. Superseded results never count (the store does not return them).

What OSV cannot express: a bug that needs two packages in range at once (a coupling such as lightning <= 2.3 with
torch >= 2.6) is written as an `affected` entry per package, and a client ORs them, so it is over-reported there;
`bugmatrix audit` is the exact answer. The packages listed are those along which the record measured a boundary and
that the case's rules name (or its primary package); a case that reproduces at every measured version lists its
primary package from `introduced: "0"`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness.analysis.reproduce import repro_command
from harness.analysis.transitions import FIXED, REPRODUCED, UNKNOWN, cell_status
from harness.model.case import Case
from harness.model.common import distributions, logical_name, primary_package
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.session.record import iso

PREFIX = "BUGMATRIX"
SCHEMA_VERSION = "1.6.0"
ECOSYSTEM = "PyPI"
ALIASES = {"lightning": ("pytorch-lightning",)}  # the same code under an older distribution name


def osv_id(case_id: str) -> str:
    """`BUGMATRIX-<case-id>`."""
    return f"{PREFIX}-{case_id}"


def _public(text: str) -> Version | None:
    try:
        return Version(Version(text).public)
    except InvalidVersion:
        return None


def _points(entries: list[tuple[str, Result]], package: str) -> list[tuple[Version, str]]:
    """(version, status) along `package` over the cells of `entries` (several bug variants OR-ed: a version where
    any cell reproduced reproduces); commits are left out (not PyPI versions)."""
    by_cell: dict[str, list[Result]] = defaultdict(list)
    for cell, result in entries:
        by_cell[cell].append(result)
    at: dict[Version, set[str]] = defaultdict(set)
    for rs in by_cell.values():
        recorded = next((v for r in rs for d, v in r.versions.items() if logical_name(d) == package), None)
        if recorded is None or " @ " in recorded:
            continue
        version = _public(recorded)
        if version is not None:
            at[version].add(cell_status(rs))
    out = []
    for version in sorted(at):
        said = at[version] - {UNKNOWN}
        out.append((version, REPRODUCED if REPRODUCED in said else FIXED if said == {FIXED} else UNKNOWN))
    return out


def _between(releases: dict[str, dict[str, dict]], package: str, low: Version, high: Version) -> int | None:
    """How many releases of `package` the record lists strictly between two versions (None: it lists none)."""
    listed = set()
    for dist in distributions(package):
        for version, point in releases.get(dist, {}).items():
            parsed = _public(version)
            if parsed is not None and not point.get("yanked"):
                listed.add(parsed)
    if not listed:
        return None
    return sum(1 for v in listed if low < v < high and not v.is_prerelease)


def events_of(points: list[tuple[Version, str]], releases: dict[str, dict[str, dict]],
              package: str, exists_from: Version | None = None) -> tuple[list[dict[str, str]], list[str]]:
    """(OSV events, each boundary's precision) from the measured points along one package (module docstring);
    `exists_from`: the release before which the bug's code does not exist (`absent_before`)."""
    known = [(v, s) for v, s in points if s in (REPRODUCED, FIXED)]
    events: list[dict[str, str]] = []
    said: list[str] = []
    if not known or all(s == FIXED for _, s in known):
        return events, said
    if known[0][1] == REPRODUCED:
        if exists_from is not None and exists_from <= known[0][0]:
            events.append({"introduced": str(exists_from)})
            said.append(f"reproduces from the oldest measured release {known[0][0]}; the bug's code does not exist "
                        f"before {exists_from} (the case's rules: skip, absent)")
        else:
            events.append({"introduced": "0"})
            said.append(f"reproduces from the oldest measured release {known[0][0]}")
    for (before, old), (after, new) in zip(known, known[1:], strict=False):
        if old == new:
            continue
        kind = "fixed" if new == FIXED else "introduced"
        events.append({kind: str(after)})
        word = "fixed" if new == FIXED else "regressed"
        gap = _between(releases, package, before, after)
        if gap == 0:
            said.append(f"{word} in {after} ({before} {old}): adjacent, measured")
        elif gap is None:
            said.append(f"{word} between {before} and {after}: what lies between is not listed in the record")
        else:
            said.append(f"{word} between {before} and {after} ({gap} release(s) not run, reported affected)")
    return events, said


def _changes(points: list[tuple[Version, str]]) -> bool:
    known = [s for _, s in points if s in (REPRODUCED, FIXED)]
    return any(a != b for a, b in zip(known, known[1:], strict=False))


def absent_before(case: Case, package: str) -> Version | None:
    """The release before which no bug variant's code exists along `package`: each bug variant's rules say
    `{package: "<X"}: skip, because: absent` (device and world size aside); the earliest such X over the variants,
    None where a bug variant has no such rule."""
    bounds = []
    for variant in case.spec.variants.values():
        if variant.workaround:
            continue
        mine = []
        for rule in variant.expect:
            keys = [k for k in rule.when if k not in ("device", "nproc")]
            spec = rule.when.get(keys[0]) if len(keys) == 1 and logical_name(keys[0]) == package else None
            if rule.because != "absent" or not isinstance(spec, str):
                continue
            try:
                [only] = SpecifierSet(spec)
            except (InvalidSpecifier, ValueError):
                continue
            if only.operator == "<":
                mine.append(Version(only.version))
        if not mine:
            return None
        bounds.append(max(mine))
    return min(bounds, default=None)


def _rule_packages(case: Case) -> set[str]:
    return {logical_name(k) for v in case.spec.variants.values() if not v.workaround for k in v.packages_named()}


def _device_view(case: Case, entries: list[tuple[str, Result]],
                 releases: dict[str, dict[str, dict]]) -> dict[str, tuple[list[dict[str, str]], list[str], list[str]]]:
    """package -> (events, precision, versions measured reproducing) for the packages the advisory lists."""
    primary = logical_name(primary_package(case.spec.packages))
    packages = sorted({logical_name(p) for p in case.spec.packages})
    per = {p: _points(entries, p) for p in packages}
    views = {p: events_of(per[p], releases, p, absent_before(case, p)) for p in packages}
    changed = {p for p in packages if _changes(per[p])}
    chosen = changed & (_rule_packages(case) | {primary}) or changed
    if not chosen and any(s == REPRODUCED for _, s in per.get(primary, [])):
        chosen = {primary}
    return {p: (*views[p], [str(v) for v, s in per[p] if s == REPRODUCED]) for p in sorted(chosen)}


def document(case: Case, entries: list[tuple[str, Result]], releases: dict[str, dict[str, dict]]) -> dict | None:
    """The OSV advisory of one case from its results (None when nothing of it is recorded)."""
    if not entries:
        return None
    bugs = {name for name, v in case.spec.variants.items() if not v.workaround}
    by_device: dict[str, list[tuple[str, Result]]] = defaultdict(list)
    for cell, r in entries:
        if r.variant in bugs:
            by_device[r.device].append((cell, r))
    verdicts = {d for d, es in by_device.items() if any(r.outcome in (Outcome.REPRODUCED, Outcome.FIXED)
                                                         for _, r in es)}
    device = "cpu" if "cpu" in verdicts or "cuda" not in verdicts else "cuda"
    view = _device_view(case, by_device.get(device, []), releases)
    affected = []
    for package, (events, precision, versions) in view.items():
        for name in (*distributions(package), *ALIASES.get(package, ())):
            entry: dict = {"package": {"ecosystem": ECOSYSTEM, "name": canonicalize_name(name)},
                           "ranges": [{"type": "ECOSYSTEM", "events": events}], "versions": versions,
                           "database_specific": {"package": package, "precision": precision}}
            if name in ALIASES.get(package, ()):
                entry["database_specific"]["note"] = f"the same code as {package} under its older name"
            affected.append(entry)
    others = {}
    for other in sorted(set(by_device) - {device}):
        seen = _device_view(case, by_device[other], releases)
        if {p: v[0] for p, v in seen.items()} != {p: v[0] for p, v in view.items()}:
            others[other] = {p: {"events": v[0], "precision": v[1]} for p, v in seen.items()} or "never reproduced"
    reproducing = [r for _, r in by_device.get(device, []) if r.outcome is Outcome.REPRODUCED]
    reproduce = repro_command(case, max(reproducing, key=lambda r: (r.started_at, r.nproc))) if reproducing else ""
    condition = {name: [{"when": {k: (v if isinstance(v, str | list) else v.model_dump()) for k, v in r.when.items()},
                         "outcome": r.outcome.value, **({"because": r.because} if r.because else {})}
                        for r in case.spec.variants[name].expect]
                 for name in sorted(bugs)}
    details = [f"bugmatrix case {case.id}: {case.spec.title}.", ""]
    details += [f"- {name}: {' '.join(case.spec.variants[name].description.split()) or 'the bug path'}"
                for name in sorted(bugs)]
    details += ["", f"Measured on {device}; ranges from the measured boundaries (precision in database_specific)."]
    if len(view) > 1:
        details.append("A coupling: the bug needs all of " + ", ".join(view) + " in range at once; OSV clients OR "
                       "the affected packages, so it is over-reported here (`bugmatrix audit` is exact).")
    doc: dict = {
        "schema_version": SCHEMA_VERSION,
        "id": osv_id(case.id),
        "modified": iso(max(r.started_at for _, r in entries)),
        "published": iso(min(r.started_at for _, r in entries)),
        "summary": case.spec.title[:200],
        "details": "\n".join(details),
        "affected": affected,
        "references": [{"type": "REPORT", "url": u} for u in case.spec.upstream]
        + [{"type": "FIX", "url": u} for u in case.spec.fixed_by],
        "database_specific": {
            "case": case.id, "device": device, "condition": condition,
            "precision": {p: v[1] for p, v in view.items()} or "never reproduced on this device",
            "coupling": list(view) if len(view) > 1 else [],
            "reproduce": reproduce,
            "other_devices": others,
        },
    }
    return doc


def documents(results: Iterable[tuple[str, Result]], cases: list[Case],
              releases: dict[str, dict[str, dict]]) -> dict[str, dict]:
    """Every case's advisory by id (cases with no recorded result have none)."""
    by_case: dict[str, list[tuple[str, Result]]] = defaultdict(list)
    for cell, r in results:
        by_case[r.case].append((cell, r))
    out = {}
    for case in sorted(cases, key=lambda c: c.id):
        doc = document(case, by_case.get(case.id, []), releases)
        if doc is not None:
            out[doc["id"]] = doc
    return out


def affects(entry: dict, version: str) -> bool:
    """Whether one `affected[]` entry holds `version` (its `versions`, or its ECOSYSTEM ranges: introduced <= v <
    fixed, evaluated in version order; a local build tag is not compared)."""
    asked = _public(version)
    if asked is None:
        return version in entry.get("versions", [])
    if any(_public(v) == asked for v in entry.get("versions", [])):
        return True
    for rng in entry.get("ranges", []):
        if rng.get("type") != "ECOSYSTEM":
            continue
        events = []
        for event in rng.get("events", []):
            for kind, text in event.items():
                at = Version("0") if text == "0" else _public(text)
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
