"""Finding case folders and loading them into `Case` objects (folder + validated metadata)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from harness.model.basics import data_path, default_cases_dir
from harness.model.case_schema import CaseError, CaseSpec, load_spec
from harness.model.names import UnsafeName, check_name, inside

CASE_FILE = "case.yaml"
# the compatibility probes (`bugmatrix compat`): shaped like cases, kept beside the harness (in a wheel, inside it)
PROBES_DIR = data_path("probes", here=False)


@dataclass(frozen=True)
class Case:
    """One upstream bug: its folder, its id (the folder name) and its validated metadata."""

    id: str
    folder: Path
    spec: CaseSpec

    @property
    def script(self) -> Path:
        return self.folder / self.spec.script


def load_case(case_file: Path) -> Case:
    """Load `cases/<id>/case.yaml`; raise `CaseError` (file + field) if the metadata or the folder is invalid."""
    folder = case_file.parent
    try:
        check_name("case id", folder.name)
    except UnsafeName as exc:
        raise CaseError(f"{case_file}: {exc}") from None
    spec = load_spec(case_file)
    script = folder / spec.script
    try:  # an absolute path, `../` or a symbolic link out of the folder: the case would run another folder's code
        inside(folder, spec.script)
    except UnsafeName:
        raise CaseError(f"{case_file}: script: {spec.script} lies outside the case folder {folder}") from None
    if not script.is_file():
        raise CaseError(f"{case_file}: script: {spec.script} does not exist in {folder}")
    try:
        compile(script.read_bytes(), str(script), "exec")
    except SyntaxError as exc:
        raise CaseError(f"{case_file}: script: {spec.script} line {exc.lineno}: {exc.msg}") from None
    return Case(id=folder.name, folder=folder, spec=spec)


def discover(root: Path, patterns: list[str] | None = None) -> tuple[list[Case], list[CaseError]]:
    """Load every `case.yaml` under `root` (only in folders whose name contains one of `patterns`, when given),
    sorted by id; invalid cases are returned as errors, not raised."""
    cases: list[Case] = []
    errors: list[CaseError] = []
    for case_file in sorted(root.glob(f"*/{CASE_FILE}")):
        if patterns and not any(p in case_file.parent.name for p in patterns):
            continue
        try:
            cases.append(load_case(case_file))
        except CaseError as exc:
            errors.append(exc)
    return cases, errors


def every_case(root: Path) -> list[Case]:
    """Every case under `root`, for a command whose answer must cover the whole catalogue (`audit`, `osv export`):
    an invalid case folder is a `CaseError` naming it (and how many more), never a case silently left out -- an
    answer without it could read as "not affected"."""
    cases, errors = discover(root)
    if errors:
        more = f" (and {len(errors) - 1} more invalid case folder(s))" if len(errors) > 1 else ""
        raise CaseError(f"{errors[0]}{more}")
    return cases


def _is_default(cases_dir: Path) -> bool:
    return cases_dir.resolve() == default_cases_dir().resolve()


def cases_dir_option(cases_dir: Path | None) -> str:
    """`--cases-dir DIR ` for a `bugmatrix` command printed for the user to run, when DIR is not the folder a plain
    `bugmatrix` reads (else ''): without it, the printed command would not find the case."""
    return "" if cases_dir is None or _is_default(cases_dir) else f"--cases-dir {shlex.quote(str(cases_dir))} "


def script_path(case: Case) -> str:
    """The case's script as a printed command names it: `cases/<id>/repro.py` for a case of the default folder (the
    form an upstream comment shows), else where the case really lives (relative to here when below it)."""
    if _is_default(case.folder.parent):
        return f"cases/{case.id}/{case.spec.script}"
    try:
        return str(case.script.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(case.script.resolve())


def select(cases: list[Case], patterns: list[str]) -> list[Case]:
    """The cases whose id contains any of `patterns` (all cases when `patterns` is empty)."""
    if not patterns:
        return cases
    return [c for c in cases if any(p in c.id for p in patterns)]
