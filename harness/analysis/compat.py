"""`bugmatrix compat`: a measured compatibility table of torch with fbgemm-gpu, torchrec, lightning and litgpt.

    grid = Grid.from_index(matrix, torch=">=2.4,<2.15", lanes={"fbgemm": ">=1.0,<1.10", ...})   # what to probe
    walk(grid, probes, probing)             # harness/workflows/compat.py: through the one pipeline, per torch
    table = measured(store)                                                # the newest verdict of every probe
    problems = check(table, matrix)                                        # rows vs measurement (--check)
    rows = generated_rows(table, matrix)                                   # the rows the measurement supports

A *probe* is a standalone script shaped like a case (`probes/compat-<lane>/`), run as one job in a cell that pins
torch and the lane's partner versions. A probe cell is built by `probe_cell`, not from matrix.yaml's couplings:
probing pairings that no row allows is the point. Each probe cell is named `compat-torch-<v>-<package>-<v>...`
(`COMPAT_PREFIX`): its results go to the store like every result, and the store keeps them apart from the cases'
(report, compare, narrow and expect never see them).

Lanes: `fbgemm` (torch x fbgemm-gpu: one fbgemm operator called directly), `torchrec` (torch x fbgemm-gpu 1.N x
torchrec 1.N, probed where that torch x fbgemm pairing works: a sharded EmbeddingBagCollection lookup),
`lightning` (torch x lightning: a one-step Trainer.fit), `litgpt` (torch x litgpt: a tiny GPT forward).

The walk that launches the probes, one torch at a time, and resumes what the store holds, is
harness/workflows/compat.py; this module only reads: what to probe, the probe cells, the verdicts, the table.

Verdicts (`verdict`), one per probe, never "works" unless the probe itself exited 0:
  works ............... the probe exited 0 (fixed)
  resolver refuses .... uv found no solution for the pins (uv's reason)
  fails to import ..... installed, but importing a pinned package failed or aborted (the import smoke check, or
                        the probe's own imports: the undefined symbol or error)
  fails when used ..... imported, then the call failed: an exception, or death by a signal after the probe said
                        `COMPAT-PROBE stage: use`
  hangs or crashes .... the probe timed out, or died by a signal before it reached its call
  not established ..... anything else (a download failure, flaky repeats): never counted as works
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from packaging.specifiers import SpecifierSet

from harness.matrix.axes import rule_versions
from harness.matrix.expand import Matrix
from harness.matrix.spec import AxisRule
from harness.model.case import PROBES_DIR, Case, load_case
from harness.model.cell import COMPAT_CELLS, COMPAT_PREFIX, Cell
from harness.model.outcome import Outcome
from harness.model.result import Result
from harness.model.version import COMMIT, RELEASE, PinVersion, parse_release
from harness.session.contract import Store

STAGE_USE = "COMPAT-PROBE stage: use"
FAILED = "COMPAT-PROBE-FAILED"
VARIANT = "probe"


@dataclass(frozen=True)
class Lane:
    """One kind of probe: its script's folder and the packages (besides torch) its cells pin."""

    name: str
    packages: tuple[str, ...]

    @property
    def probe(self) -> str:
        """The probe's id (its folder under probes/)."""
        return f"{COMPAT_PREFIX}{self.name}"


LANES = {
    lane.name: lane
    for lane in (
        Lane("fbgemm", ("fbgemm-gpu",)),
        Lane("torchrec", ("fbgemm-gpu", "torchrec")),
        Lane("lightning", ("lightning",)),
        Lane("litgpt", ("litgpt",)),
    )
}
PACKAGES = ("torch", "fbgemm-gpu", "torchrec", "lightning", "litgpt")  # the order of pins in a probe cell's name


class Kind(str, Enum):
    """A probe's verdict (see the module docstring)."""

    WORKS = "works"
    REFUSED = "resolver refuses"
    NO_IMPORT = "fails to import"
    FAILS_USED = "fails when used"
    CRASH = "hangs or crashes"
    UNKNOWN = "not established"

    @property
    def mark(self) -> str:
        """One character for a table cell."""
        return {
            "works": "✓",
            "resolver refuses": "R",
            "fails to import": "I",
            "fails when used": "U",
            "hangs or crashes": "C",
            "not established": "?",
        }[self.value]


SETTLED_KINDS = (Kind.WORKS, Kind.REFUSED, Kind.NO_IMPORT, Kind.FAILS_USED, Kind.CRASH)
_NO_SOLUTION = re.compile(
    r"No solution found|unsatisfiable|cannot be satisfied|no version of|"
    r"no matching distribution|cannot resolve the cell",
    re.I,
)


def verdict(result: Result) -> tuple[Kind, str]:
    """The probe's verdict and its one-line reason, from its recorded result (rules: the module docstring)."""
    reason = result.reason
    text = "\n".join((result.log_excerpt, result.stacks, reason))
    if result.outcome is Outcome.FIXED:
        return Kind.WORKS, "the probe ran: " + _probe_line(result.log_excerpt, "COMPAT-PROBE works")
    if result.outcome is Outcome.REPRODUCED:
        line = _probe_line(text, FAILED) or reason
        stage = Kind.NO_IMPORT if f"{FAILED} import" in line else Kind.FAILS_USED
        return stage, line.split(f"{FAILED} ", 1)[-1]
    if result.outcome is Outcome.INFRA:
        if "import smoke check failed" in reason:
            return Kind.NO_IMPORT, _error_line(reason.split("import smoke check failed", 1)[1])
        if _NO_SOLUTION.search(reason):
            return Kind.REFUSED, _short(reason.split("uv failed:", 1)[-1].strip())
        return Kind.UNKNOWN, _short(reason)
    if result.outcome is Outcome.TIMEOUT:
        return Kind.CRASH, "hangs: " + _short(reason)
    if result.outcome is Outcome.ERROR:
        if STAGE_USE in text:
            return Kind.FAILS_USED, "died after importing: " + _short(reason)
        return Kind.CRASH, _short(reason)
    return Kind.UNKNOWN, f"{result.outcome.value}: {_short(reason)}"


_ERROR = re.compile(r"^[\w.]*(Error|Exception|Warning)\b|undefined symbol|killed by signal|Aborted|terminate called")
_SITE = re.compile(r"\S*/site-packages/")


def _error_line(text: str) -> str:
    """The telling part of a failed import's output (`exit 1: ... | OSError: ...so: undefined symbol: _ZN...`):
    the last segment that names an error or a signal, with the environment's path cut to the package's own."""
    parts = [part.strip() for part in re.split(r" \| |\n", text) if part.strip()]
    telling = [part for part in parts if _ERROR.search(part)]
    picked = telling[-1] if telling else (parts[-1] if parts else text)
    head = re.match(r"\s*\((.*?)\): (exit -?\d+|killed by signal \d+)", text)
    prefix = f"{head.group(2)}: " if head and head.group(2) not in picked else ""
    return _short(prefix + _SITE.sub("", picked))


def _probe_line(text: str, marker: str) -> str:
    found = [line.strip() for line in text.splitlines() if marker in line]
    return _short(found[-1]) if found else ""


def _short(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ---------------------------------------------------------------------------------------------- the grid and walk


@dataclass(frozen=True)
class Grid:
    """What to probe: torch versions, and per lane the partner versions (torchrec's follow fbgemm's minors)."""

    torch: list[str]
    partners: dict[str, list[str]]  # lane -> versions of its last package (fbgemm: fbgemm-gpu, lightning, litgpt)
    # fbgemm version -> every torchrec release of its minor (torchrec 1.6.0 and 1.6.1 both pair with fbgemm 1.6.0)
    torchrec_of: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def from_index(cls, matrix: Matrix, ranges: dict[str, str], lanes: Iterable[str]) -> Grid:
        """The newest release of each minor in each range, read from the matrix's index (CPU distributions); for the
        torchrec lane, every torchrec release of each fbgemm minor (a torchrec patch release can differ in what it
        ships: torchrec 1.6.0 has wheels for Python 3.13 only)."""
        url = matrix.index_url()

        def minors(dist: str, spec: str) -> list[str]:
            return rule_versions(AxisRule(releases=spec, per="minor"), dist, url, chronology=matrix.chronology)

        lanes = list(lanes)
        partners: dict[str, list[str]] = {}
        torchrec_of: dict[str, list[str]] = {}
        if "fbgemm" in lanes or "torchrec" in lanes:
            partners["fbgemm"] = minors(matrix.distribution("fbgemm-gpu", "cpu"), ranges["fbgemm"])
            if "torchrec" in lanes:
                recs = rule_versions(AxisRule(releases=ranges["fbgemm"]), "torchrec", url, chronology=matrix.chronology)
                for fb in partners["fbgemm"]:
                    same = [r for r in recs if parse_release(r).release[:2] == parse_release(fb).release[:2]]
                    if same:
                        torchrec_of[fb] = same
        for lane in ("lightning", "litgpt"):
            if lane in lanes:
                partners[lane] = minors(lane, ranges[lane])
        return cls(minors("torch", ranges["torch"]), partners, torchrec_of)


def cell_name(pins: dict[str, str]) -> str:
    """`compat-torch-2.5.1-fbgemm-gpu-1.0.0[-torchrec-1.0.0]`: the pins in `PACKAGES` order."""
    return COMPAT_PREFIX + "-".join(f"{p}-{pins[p]}" for p in PACKAGES if p in pins)


_PIN = re.compile(r"(torch|fbgemm-gpu|torchrec|lightning|litgpt)-(\d[^-]*)")


def cell_pins(name: str) -> dict[str, str]:
    """The pins a probe cell's name holds (the inverse of `cell_name`)."""
    return dict(_PIN.findall(name.removeprefix(COMPAT_PREFIX)))


def probe_cell(matrix: Matrix, pins: dict[str, str]) -> Cell:
    """The cell that pins exactly `pins` on CPU, whatever matrix.yaml's pairing rows say (probing pairings no row
    allows is the point; the rows are checked against the results, see `check`)."""
    return Cell(
        name=cell_name(pins),
        device="cpu",
        python=matrix.spec.defaults.python,
        index_url=matrix.index_url(),
        pins=dict(pins),
        group="compat",
    )


def load_probes(root: Path = PROBES_DIR) -> dict[str, Case]:
    """The probe scripts, by lane."""
    return {
        name: load_case(root / lane.probe / "case.yaml")
        for name, lane in LANES.items()
        if (root / lane.probe / "case.yaml").is_file()
    }


def lane_of(probe_id: str) -> str:
    """The lane a probe id belongs to (`compat-fbgemm` -> `fbgemm`)."""
    return probe_id.removeprefix(COMPAT_PREFIX)


# ---------------------------------------------------------------------------------------------- the measured table


@dataclass(frozen=True)
class Probe:
    """One measured probe: its lane, its pins, its verdict and reason, and where it was recorded."""

    lane: str
    pins: dict[str, str]
    kind: Kind
    reason: str
    cell: str
    repeats: int = 1
    started_at: float = 0.0

    @property
    def torch(self) -> str:
        return self.pins.get("torch", "")

    @property
    def partner(self) -> str:
        """The version of the lane's own package (fbgemm-gpu, torchrec, lightning or litgpt)."""
        return self.pins.get(LANES[self.lane].packages[-1], "") if self.lane in LANES else ""


def measured(store: Store, run_id: str | None = None) -> list[Probe]:
    """The newest verdict of every probe cell in the store (or in one run), sorted by lane and versions."""
    out = []
    for cell, result in store.latest(run_id, COMPAT_CELLS):
        lane = lane_of(result.case)
        if lane not in LANES:
            continue
        kind, reason = verdict(result)
        out.append(Probe(lane, cell_pins(cell), kind, reason, cell, result.repeats, result.started_at))
    return sorted(
        out, key=lambda p: (list(LANES).index(p.lane), parse_release(p.torch or "0"), parse_release(p.partner or "0"))
    )


def lookup(table: list[Probe], lane: str, torch: str, partner: str) -> Probe | None:
    """The measured probe of `lane` for torch `torch` and the lane's package at `partner` (exact versions, or a
    major.minor that matches the newest patch measured)."""
    found = [p for p in table if p.lane == lane and _same(p.torch, torch) and _same(p.partner, partner)]
    return found[-1] if found else None


def _same(measured_version: str, asked: str) -> bool:
    """Whether a measured exact version is what `asked` names: the same version, the same major.minor (`2.5`), or
    one a specifier allows (`==2.5.*`, as a matrix cell's coupled pins are written)."""
    measured = PinVersion.parse(measured_version)
    if not measured_version or not asked or measured.kind == COMMIT:
        return False
    if measured_version == asked:
        return True
    release = measured.release
    if measured.kind != RELEASE or release is None:  # not a release: a git install is never a coupled pin
        return False
    if asked[0] in "=<>!~":
        return SpecifierSet(asked).contains(release, prereleases=True)
    return asked.count(".") == 1 and release.release[:2] == parse_release(asked).release[:2]


# ---------------------------------------------------------------------------------------------- rows vs measurement


@dataclass(frozen=True)
class Finding:
    """One disagreement between matrix.yaml's pairing rows and the measured table."""

    kind: str  # "contradicted" (a row claims a pairing that does not work) or "missing" (works, no row allows it)
    text: str


def _row_allows(row: dict[str, str], pins: dict[str, str]) -> bool:
    return all(SpecifierSet(row[p]).contains(parse_release(v), prereleases=True) for p, v in pins.items() if p in row)


def _coupling_members(matrix: Matrix) -> list[tuple[str, list[dict[str, str]]]]:
    return [
        (c.name, list(c.rows))
        for c in matrix.spec.couplings
        if {"torch", "fbgemm-gpu"} <= {p for row in c.rows for p in row}
    ]


def _evidence(table: list[Probe], rows: list[dict[str, str]]) -> tuple[list[Probe], list[Probe]]:
    """(the working probes that speak for a coupling's rows, the working fbgemm probes with no torchrec probe):
    for a coupling with torchrec, a pairing works when its torchrec probe works; for one without, its fbgemm
    probe."""
    has_rec = any("torchrec" in row for row in rows)
    works = [p for p in table if p.kind is Kind.WORKS]
    if not has_rec:
        return [p for p in works if p.lane == "fbgemm"], []
    probed = {(p.pins.get("fbgemm-gpu"), p.torch) for p in table if p.lane == "torchrec"}
    return (
        [p for p in works if p.lane == "torchrec"],
        [p for p in works if p.lane == "fbgemm" and (p.pins.get("fbgemm-gpu"), p.torch) not in probed],
    )


_NO_WHEEL_FOR_PYTHON = re.compile(
    r"has no wheels with a matching Python|no wheels? (?:are )?compatible with .*Python", re.I
)


def not_for_this_python(probe: Probe) -> bool:
    """Whether the resolver refused a release for the probe's Python itself (torchrec 1.6.0 shipped wheels for
    Python 3.13 only), which says nothing about its pairing with torch: no row is contradicted by it."""
    return probe.kind is Kind.REFUSED and bool(_NO_WHEEL_FOR_PYTHON.search(probe.reason))


def check(table: list[Probe], matrix: Matrix) -> list[Finding]:
    """Where matrix.yaml's torch/fbgemm(/torchrec) pairing rows disagree with the measurement: a row whose measured
    pairing does not work (`contradicted`), or a measured working pairing that no row allows (`missing`). A row is
    checked against the torchrec probe where one was measured for it, else against the fbgemm probe; a row that
    nothing measured says nothing, nor does a release the resolver refused for this Python (`not_for_this_python`)."""
    findings: list[Finding] = []
    for name, rows in _coupling_members(matrix):
        for row in rows:
            covered = [
                p
                for p in table
                if p.lane in ("fbgemm", "torchrec")
                and _row_allows(row, p.pins)
                and {"torch", "fbgemm-gpu"} <= set(p.pins)
            ]
            rec = [p for p in covered if p.lane == "torchrec" and "torchrec" in row]
            for p in rec or [p for p in covered if p.lane == "fbgemm"]:
                if p.kind is not Kind.WORKS and not not_for_this_python(p):
                    findings.append(
                        Finding(
                            "contradicted",
                            f"{name}: row {_row_text(row)} claims "
                            f"{_pins_text(p.pins)}, measured: {p.kind.value} ({p.reason})",
                        )
                    )
        working, unprobed = _evidence(table, rows)
        for p in working + unprobed:
            if not any(_row_allows(row, p.pins) for row in rows):
                note = " (torchrec not probed with it)" if p in unprobed else ""
                findings.append(
                    Finding(
                        "missing", f"{name}: {_pins_text(p.pins)} works ({p.lane} probe){note} but no row allows it"
                    )
                )
    return findings


def generated_rows(table: list[Probe], matrix: Matrix) -> dict[str, list[dict[str, str]]]:
    """Per torch/fbgemm coupling, the rows the measurement supports, in order of preference: each existing row
    that no measurement contradicts, then every other working pairing (the torchrec probe's, for a coupling with
    torchrec; else the fbgemm probe's) right after the rows of its fbgemm minor, oldest torch first."""
    out: dict[str, list[dict[str, str]]] = {}
    contradicted = {
        f.text.split(" claims ", 1)[0].split("row ", 1)[1] for f in check(table, matrix) if f.kind == "contradicted"
    }
    for name, rows in _coupling_members(matrix):
        new = [r for r in rows if _row_text(r) not in contradicted]
        order = list(rows[0]) if rows else ["torch", "fbgemm-gpu"]
        working, _ = _evidence(table, rows)
        for p in sorted(working, key=lambda p: (parse_release(p.pins["fbgemm-gpu"]), parse_release(p.torch))):
            if any(_row_allows(r, p.pins) for r in new):
                continue
            row = {k: _minor_spec(p.pins[k]) for k in order if k in p.pins}
            fb = {"fbgemm-gpu": p.pins["fbgemm-gpu"]}
            at = max((i for i, r in enumerate(new) if _row_allows(r, fb)), default=len(new) - 1)
            new.insert(at + 1, row)
        out[name] = new
    return out


def _minor_spec(version: str) -> str:
    major, minor = parse_release(version).release[:2]
    return f"=={major}.{minor}.*"


def _row_text(row: dict[str, str]) -> str:
    return "{" + ", ".join(f"{p}: {s}" for p, s in row.items()) + "}"


def _pins_text(pins: dict[str, str]) -> str:
    return " + ".join(f"{p} {v}" for p, v in pins.items())


# ---------------------------------------------------------------------------------------------- upgrade A -> B


@dataclass(frozen=True)
class CaseChange:
    """A catalogue case whose outcome differs between the two pinned sets."""

    item: str
    before: str
    after: str


@dataclass(frozen=True)
class Upgrade:
    """What the table says about the pairings of two pinned sets, and which cases change outcome between them."""

    before: dict[str, str]
    after: dict[str, str]
    pairings: list[tuple[str, Probe | None, Probe | None, str, str]]  # lane, probe A, probe B, partner A, partner B
    changes: list[CaseChange]
    cells: tuple[list[str], list[str]]  # the catalogue cells found for A and for B


def pinned_set(text: str, matrix: Matrix | None) -> dict[str, str]:
    """`torch=2.7.1,fbgemm-gpu=1.2.0` -> pins; a matrix cell's name -> its exact pins."""
    if "=" in text:
        return dict(part.split("=", 1) for part in re.split(r"[,\s]+", text.strip()) if part)
    if matrix is None:
        raise ValueError(f"{text!r}: not PACKAGE=VERSION,... and no matrix to look a cell up in")
    cell = matrix.cell(text)
    return {p: str(v) for p, v in cell.pins.items() if isinstance(v, str)}


def upgrade(
    table: list[Probe], before: dict[str, str], after: dict[str, str], results: list[tuple[str, Result]]
) -> Upgrade:
    """The pairings of `before` and `after` in the measured table, and the catalogue cases (newest results in the
    store) whose outcome differs between cells whose installed versions match each set."""
    pairings = []
    for lane in LANES:
        package = LANES[lane].packages[-1]
        if "torch" in before and "torch" in after and (package in before or package in after):
            a = lookup(table, lane, before["torch"], before.get(package, ""))
            b = lookup(table, lane, after["torch"], after.get(package, ""))
            pairings.append((lane, a, b, before.get(package, "-"), after.get(package, "-")))

    def cells_of(pins: dict[str, str]) -> dict[str, dict[str, Result]]:
        found: dict[str, dict[str, Result]] = {}
        for cell, r in results:
            if all(_same(r.versions.get(p, ""), v) for p, v in pins.items()):
                found.setdefault(cell, {})[r.item_id] = r
        return found

    a_cells, b_cells = cells_of(before), cells_of(after)
    newest_a: dict[str, Result] = {}
    newest_b: dict[str, Result] = {}
    for source, target in ((a_cells, newest_a), (b_cells, newest_b)):
        for by_item in source.values():
            for item, r in by_item.items():
                if item not in target or r.started_at > target[item].started_at:
                    target[item] = r
    changes = [
        CaseChange(item, newest_a[item].outcome.value, newest_b[item].outcome.value)
        for item in sorted(set(newest_a) & set(newest_b))
        if newest_a[item].outcome is not newest_b[item].outcome
    ]
    return Upgrade(before, after, pairings, changes, (sorted(a_cells), sorted(b_cells)))
