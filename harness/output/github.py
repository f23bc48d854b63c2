"""GitHub Actions glue: the nightly workflow's job matrix, computed from matrix.yaml.

`bugmatrix matrix --github [--cells A,B] [--cases X,Y]` prints `job_matrix(...)` as one line of JSON. The nightly
workflow's `plan` job hands that line to the `cell` job as `strategy.matrix: ${{ fromJSON(...) }}`, so every cell
becomes one job, on the runner that `runners:` in matrix.yaml names for the cell's device:

    {"include": [{"cell": "default", "device": "cpu", "runs-on": "ubuntu-latest", "slug": "default", "launch": ""},
                 {"cell": "default-cuda", "device": "cuda", "runs-on": ["self-hosted", "linux", "x64", "gpu"],
                  "slug": "default-cuda", "launch": ""}]}

- `cell`: the cell's name, for `bugmatrix env build CELL` and `bugmatrix run --cell CELL`;
- `device`: `cpu` or `cuda`;
- `runs-on`: the label (a string) or labels (a list: the runner must have all of them) of `runners[device]`;
- `slug`: the name made safe for an artifact or a file name (the same as `cell` for the names matrix.yaml has now);
- `launch`: how the cell's jobs launch, for `bugmatrix nightly cell --launch`: `""` (the default mode,
  harness/launch/warm.py), or `cold` for the second entry of the one CPU cell that runs cold tonight (`cold_day`);
- `cases`: only when `cases` was given: the case-id substrings, space-separated, for `bugmatrix run $cases`.

With `cold_day` (the nightly's plan), one selected CPU cell, in turn by date (`cold_cell`), gets a second entry
that runs it cold (`launch: cold`, slug `<slug>--cold`), right after its own: the aggregate step compares the two
(warm/cold parity) and merges only the first.

It only reads the expanded cells (names, devices) and `runners:`: no index, no network, nothing is resolved.
Any problem is a one-line `MatrixError` (unknown cell, a device without a runner, too many jobs for GitHub) or,
for a malformed case substring, `ValueError`, so a bad manual dispatch fails in the `plan` job with the reason.
"""

from __future__ import annotations

import datetime
import fnmatch
import re
from collections.abc import Iterable
from typing import Any

from harness.matrix.basics import MatrixError
from harness.matrix.expand import Matrix

MAX_JOBS = 256  # GitHub Actions runs at most 256 jobs from one matrix
_CASE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")  # a case-id substring: never an option, never a glob
_UNSAFE = re.compile(r"[^A-Za-z0-9._+-]")  # characters not allowed (or not wanted) in artifact and file names
COLD = "--cold"  # the slug suffix of the entry that runs a cell cold


def split_list(text: str | Iterable[str] | None) -> list[str]:
    """`"a, b  c"` -> `["a", "b", "c"]`: a workflow_dispatch input is one string; None or blank -> `[]`."""
    if text is None:
        return []
    parts = [text] if isinstance(text, str) else list(text)
    return [item for part in parts for item in re.split(r"[\s,]+", part) if item]


def cold_cell(cells: Iterable[str], day: datetime.date) -> str | None:
    """The cell that runs cold on `day`: the day's ordinal modulo the number of `cells`, sorted by name (each cell
    in turn, one a night); None without cells."""
    names = sorted(set(cells))
    return names[day.toordinal() % len(names)] if names else None


def job_matrix(
    matrix: Matrix,
    cells: str | Iterable[str] | None = None,
    cases: str | Iterable[str] | None = None,
    cold_day: datetime.date | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """The `strategy.matrix` of the nightly's `cell` job: one `include` entry per selected cell, in matrix order.

    `cells`: cell names or shell-style globs (`torchrec-1.9.*`); None or empty selects every cell, and a name or
    glob that selects nothing is an error (a typo in a manual dispatch must not silently run nothing).
    `cases`: case-id substrings, passed through as the string field `cases` (space-separated), so that each job
    runs only the cases whose id contains one of them (`bugmatrix run SUBSTRING... --cell CELL`).
    Both also take one string of names separated by commas or spaces (see `split_list`).
    `cold_day`: the night's date; the selected CPU cell `cold_cell` picks for it gets a second, cold entry.
    """
    wanted = split_list(cells)
    substrings = split_list(cases)
    for substring in substrings:
        if not _CASE.match(substring):
            raise ValueError(f"cases: {substring!r} is not a case-id substring (letters, digits, '.', '_', '-')")
    names = [c.name for c in matrix.cells]
    if wanted:
        for pattern in wanted:
            if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
                raise MatrixError(f"{matrix.path}: no cell named {pattern!r} (have: {', '.join(names) or 'none'})")
        selected = [c for c in matrix.cells if any(fnmatch.fnmatchcase(c.name, p) for p in wanted)]
    else:
        selected = list(matrix.cells)
    if not selected:
        raise MatrixError(f"{matrix.path}: the matrix has no cells")
    cold = cold_cell([c.name for c in selected if c.device == "cpu"], cold_day) if cold_day else None
    if len(selected) + (cold is not None) > MAX_JOBS:
        raise MatrixError(
            f"{matrix.path}: {len(selected) + (cold is not None)} jobs, but GitHub Actions runs at most {MAX_JOBS} "
            "jobs from one matrix: pick cells with --cells"
        )
    include: list[dict[str, Any]] = []
    runners: dict[str, str | list[str]] = dict(matrix.spec.runners.items())  # keyed by a cell's device, as text
    for cell in selected:
        label = runners.get(cell.device)
        if not label:
            raise MatrixError(
                f"{matrix.path}: runners: no runner label for device {cell.device!r} (needed by cell {cell.name})"
            )
        entry: dict[str, Any] = {
            "cell": cell.name,
            "device": cell.device,
            "runs-on": label if isinstance(label, str) else list(label),
            "slug": _UNSAFE.sub("_", cell.name),
            "launch": "",
        }
        if substrings:
            entry["cases"] = " ".join(substrings)
        include.append(entry)
        if cell.name == cold:
            include.append(entry | {"slug": entry["slug"] + COLD, "launch": "cold"})
    _unique_slugs(matrix, include)
    return {"include": include}


def _unique_slugs(matrix: Matrix, include: list[dict[str, Any]]) -> None:
    """A `MatrixError` naming two entries that give the same artifact name (slug)."""
    slugs: dict[str, str] = {}
    for entry in include:
        slug = entry["slug"]
        if slug in slugs:
            raise MatrixError(
                f"{matrix.path}: cells {slugs[slug]!r} and {entry['cell']!r} both give the artifact "
                f"name {slug!r}: rename one"
            )
        slugs[slug] = entry["cell"]
