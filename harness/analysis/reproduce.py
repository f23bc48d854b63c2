"""The one command that reproduces a recorded verdict anywhere, and the comment to paste upstream.

    repro_command(case, result, matrix)   # uv run --no-project --exclude-newer ... --with torch==... torchrun ...

A verdict is reproduced with exactly the versions the result recorded for the case's packages (a git install at its
commit), plus the `companions` those releases need (matrix.yaml), everything else resolved as of the newest upload
among them (uv `--exclude-newer`, as the matrix cells do), and the same torchrun line the harness used: the world
size, `--device` and the variant's arguments.
"""

from __future__ import annotations

import shlex
from datetime import datetime
from typing import TYPE_CHECKING

from harness.analysis.transitions import Axis, Boundary
from harness.analysis.undecided import causes_text
from harness.matrix.git import git_url
from harness.model.case import Case, script_path
from harness.model.common import logical_name
from harness.model.result import Result
from harness.model.version import PinVersion

if TYPE_CHECKING:  # the planner is imported only when a matrix is given (`audit` prints commands without one)
    from harness.matrix.expand import Matrix


def repro_command(case: Case, result: Result, matrix: Matrix | None = None, python: str = "3.11") -> str:
    """A shell command that runs `result`'s job again with its exact versions (see the module docstring). With a
    matrix, the cut-off date comes from its index (and commit dates from local clones); without, it is left out."""
    if matrix is not None:
        from harness.matrix.resolve import companions, exclude_newer, made_at
    withs, stamps = [], []
    for dist, recorded in sorted(result.versions.items()):
        pinned = PinVersion.parse(recorded)
        version, commit = pinned.release_text, pinned.commit
        if commit:
            source = case.spec.sources.get(logical_name(dist)) or (
                matrix.source(logical_name(dist)) if matrix else None
            )
            withs.append(f"{dist} @ git+{git_url(source)}@{commit}" if source else f"{dist}=={version}")
        else:
            withs.append(f"{dist}=={version}")
        if matrix is not None:
            stamp = made_at(matrix, logical_name(dist) if commit else dist, version, commit or None)
            if stamp is not None:
                stamps.append(stamp)
    if matrix is not None:  # what those releases need but do not declare, as their cells get it (matrix.yaml)
        released = {logical_name(d): v for d, v in result.versions.items() if not PinVersion.parse(v).commit}
        withs += [req for req in companions(matrix, released) if req not in withs]
    command = ["uv", "run", "--no-project", "--python", result.python.rpartition(".")[0] or python]
    if stamps:
        command += ["--exclude-newer", exclude_newer(max(stamps))]
    for requirement in withs:
        command += ["--with", requirement]
    args = case.spec.variants[result.variant].args if result.variant in case.spec.variants else []
    command += [
        "python",
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={result.nproc}",
        script_path(case),
        "--device",
        result.device,
        *args,
    ]
    return shlex.join(command)


def results_at(results: list[tuple[str, Result]], axis: Axis, version: str) -> list[Result]:
    """Every result that put `axis` at `version` (each world size of each cell there)."""
    point = next((p for p in axis.points if p.version == version), None)
    if point is None:
        return []
    return [
        r
        for c, r in results
        if c in point.cells and (r.case, r.variant, r.device) == (axis.case, axis.variant, axis.device)
    ]


def _largest(found: list[Result], nproc: int | None = None) -> Result | None:
    same = [r for r in found if r.nproc == nproc]
    return max(same or found, key=lambda r: r.nproc) if found else None


def at(results: list[tuple[str, Result]], axis: Axis, version: str) -> Result | None:
    """The result that put `axis` at `version` (the largest world size there)."""
    return _largest(results_at(results, axis, version))


def sides(results: list[tuple[str, Result]], axis: Axis, boundary: Boundary) -> tuple[Result | None, Result | None]:
    """The results that put `axis` at each side of `boundary` (before, after), at one world size: the largest run on
    both sides, so that their commands differ only in the versions (each side's largest when they share none)."""
    before, after = results_at(results, axis, boundary.before), results_at(results, axis, boundary.after)
    shared = {r.nproc for r in before} & {r.nproc for r in after}
    nproc = max(shared) if shared else None
    return _largest(before, nproc), _largest(after, nproc)


def upstream_comment(
    case: Case,
    axis: Axis,
    boundary: Boundary,
    results: list[tuple[str, Result]],
    matrix: Matrix | None = None,
    when: datetime | None = None,
) -> str:
    """Markdown to paste into the upstream issue: the boundary with its precision (each version between that could
    not say with its cause), and the command for each side."""
    said = boundary.text(lambda versions: causes_text(results, axis, versions))
    held = f" with `{axis.within[0]}` {axis.within[1]}" if axis.within else ""  # a coupled slice's
    lines = [f"**bugmatrix**: `{case.id}` (`{axis.variant}`, {axis.device}) along `{axis.package}`{held}: {said}."]
    labels = ("still reproduces", "fixed") if boundary.kind == "fixed" else ("works", "reproduces again")
    for label, version, result in zip(
        labels, (boundary.before, boundary.after), sides(results, axis, boundary), strict=True
    ):
        if result is not None:
            lines += [
                "",
                f"{axis.package} {version} ({label}: `{result.outcome.value}`):",
                "```",
                repro_command(case, result, matrix),
                "```",
            ]
    if when is not None:
        lines += ["", f"_Measured {when:%Y-%m-%d}; the case is {case.spec.upstream[0]}_"]
    return "\n".join(lines)
