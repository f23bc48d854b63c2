"""Planning a run: which jobs to make, locally or across matrix cells, and the one object that filters them.

    selection = Selection(cases=["torchrec"], variants=["bug"], nprocs=[1], devices=["cpu"], cells=["default"])
    jobs = plan_local(cases, selection)                  # case x variant x world size x device, here
    jobs = plan_cells(cases, matrix, selection)          # ... in every cell each case belongs to

A case runs in a cell when the cell pins every package the case needs (torch excepted: every cell has torch) and
the case declares the cell's device; a case that needs torch alone runs in the cells that pin torch alone (the torch
axis), not in every cell. Cells sharing a torch stack are kept together (fewer environments alive at once).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from packaging.version import Version

from harness.launch.execute import default_devices
from harness.model.case import Case
from harness.model.cell import Cell
from harness.model.common import Device
from harness.model.job import Job
from harness.model.version import ZERO, parse_release_or_none

if TYPE_CHECKING:
    from harness.matrix.expand import Matrix

ALWAYS_PRESENT = {"torch"}


@dataclass(frozen=True)
class Selection:
    """What the user asked for; empty means everything. Owns every filter a run applies (cases by id substring,
    variants, world sizes, devices, and matrix cells by name, `all_cells` for every cell)."""

    cases: tuple[str, ...] = ()
    variants: tuple[str, ...] = ()
    nprocs: tuple[int, ...] = ()
    devices: tuple[str, ...] = ()
    cells: tuple[str, ...] = ()
    all_cells: bool = False

    @property
    def in_matrix(self) -> bool:
        """Whether the jobs run in matrix cells (`--cell`/`--all-cells`) rather than in one local environment."""
        return self.all_cells or bool(self.cells)

    def chosen_cases(self, cases: Iterable[Case]) -> list[Case]:
        """The cases whose id contains any of `self.cases` (all when none is given)."""
        return [c for c in cases if not self.cases or any(p in c.id for p in self.cases)]

    def unmatched(self, cases: list[Case]) -> list[str]:
        """What in the selection matched nothing, one phrase each, naming it (empty when every part matched)."""
        problems = []
        missing = [p for p in self.cases if not any(p in c.id for c in cases)]
        if missing:
            problems.append(f"no case id contains {', '.join(map(repr, missing))}")
        chosen = self.chosen_cases(cases)
        have: dict[str, set[object]] = {
            "variant": {v for c in chosen for v in c.spec.variants},
            "world size": {n for c in chosen for n in c.spec.nproc},
            "device": {d for c in chosen for d in c.spec.devices},
        }
        for what, asked in (("variant", self.variants), ("world size", self.nprocs), ("device", self.devices)):
            absent = [a for a in asked if a not in have[what]]
            if absent and chosen:
                shown = ", ".join(map(str, sorted(have[what], key=str)))
                problems.append(f"no selected case has {what} {', '.join(map(repr, absent))} (they have: {shown})")
        return problems

    def keeps(self, job: Job) -> bool:
        """Whether `job` is among the selected variants, world sizes and devices."""
        return (
            (not self.variants or job.variant in self.variants)
            and (not self.nprocs or job.nproc in self.nprocs)
            and (not self.devices or job.device in self.devices)
        )


def case_runs_in(case: Case, cell: Cell) -> bool:
    """True when `cell` pins every package `case` needs (torch is in every cell) and `case` declares its device.

    A torch-only case runs only in torch-only cells: elsewhere torch is whatever the other pins drag in, and the
    same torch version would be run once per cell that happens to resolve to it.
    """
    if cell.device not in case.spec.devices:
        return False
    needed = set(case.spec.packages) - ALWAYS_PRESENT
    if not needed:
        return set(cell.pins) <= ALWAYS_PRESENT
    return needed <= set(cell.pins)


def case_jobs(case: Case, device: str, cell: Cell | None = None) -> list[Job]:
    """Every variant x declared world size of `case` on `device` (in `cell`, or locally)."""
    return [Job(case, variant, nproc, device, cell) for variant in case.spec.variants for nproc in case.spec.nproc]


def plan_local(cases: Iterable[Case], selection: Selection = Selection()) -> list[Job]:
    """Every selected case x variant x world size x declared device, in the local environment. Without a device
    in the selection, the device a plain run uses (cuda where this machine has a GPU, else cpu), or for a case
    that declares none of those, its own devices (it then skips, saying what is missing)."""
    devices = selection.devices or tuple(default_devices())

    def planned(case: Case) -> list[Device]:
        here = [d for d in case.spec.devices if d in devices]
        # a case only for a device this machine lacks (a CUDA-only bug on a CPU machine) is planned on its own
        # devices when none was asked for: it ends as a skip that says why, never as "nothing to run"
        return here if here or selection.devices else list(case.spec.devices)

    return [
        job
        for case in selection.chosen_cases(cases)
        for variant in case.spec.variants
        for device in planned(case)
        for job in (Job(case, variant, nproc, device) for nproc in case.spec.nproc)
        if selection.keeps(job)
    ]


def plan_cells(cases: Iterable[Case], matrix: Matrix, selection: Selection = Selection(all_cells=True)) -> list[Job]:
    """Every selected job in every selected cell its case belongs to, cells sharing a torch stack together.
    An unknown cell name is a `MatrixError` naming it."""
    cells = matrix.cells if selection.all_cells or not selection.cells else [matrix.cell(n) for n in selection.cells]
    chosen = selection.chosen_cases(cases)
    return [
        job
        for cell in sorted(cells, key=_torch_order)
        for case in chosen
        if case_runs_in(case, cell)
        for job in case_jobs(case, cell.device, cell)
        if selection.keeps(job)
    ]


def _torch_order(cell: Cell) -> tuple[int, Version, str]:
    pin = cell.pins.get("torch")
    text = str(pin).lstrip("=~<>!").rstrip(".*") if isinstance(pin, str) else ""
    version = parse_release_or_none(text)
    return (1, ZERO, cell.device) if version is None else (0, version, cell.device)
