"""Adding to the record: fold a results store (a local run, nightly shards merged, a GPU machine's store) or a
`bugmatrix run --json` payload into `record/`, and take the record back into a store.

    record = load(root); fold_store(record, store, cases); refresh_versions(record, matrix); write(root, record)

Which results: every result that counts (launched, or `infra`: its environment could not be made); a `skip` that
was never launched (a device this machine does not have) is not a measurement and stays out. A result from an
older bugmatrix that recorded no digest is given the digest of the case as it is in `cases` (fold it with the
cases of the revision that ran it: `--cases-dir`). A run's machine is kept as a description without its host name;
an older store's `host (OS arch)` is completed with this machine's CPU when the host is this one.
"""

from __future__ import annotations

import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from harness.launch.interpreter import machine_info
from harness.matrix import git, index
from harness.matrix.basics import IndexLookupError
from harness.matrix.expand import Matrix
from harness.model.case import Case
from harness.model.cell import COMPAT_CELLS, LOCAL_CELL
from harness.model.common import distributions, logical_name
from harness.model.job import run_digest
from harness.model.result import Result, counts
from harness.model.version import AT_COMMIT, COMMIT, PinVersion
from harness.session.contract import Store
from harness.session.record import (
    Record,
    Row,
    fold,
    from_row,
    iso,
    machine_description,
    machine_id,
    timestamp,
    to_row,
)
from harness.session.store import ResultStore


def _describe(text: str) -> Row:
    description = machine_description(text, machine_info(), platform.node())
    return {k: v for k, v in description.items() if k != "host"}


def rows_of(entries: Iterable[tuple[str, str, Result]], cases: list[Case], machine_of: dict[str, str]) -> list[Row]:
    """Record rows for `(run id, cell, result)` entries, oldest first; `machine_of` maps a run id to its machine id."""
    by_id = {c.id: c for c in cases}
    rows = []
    for run_id, cell, result in sorted(entries, key=lambda e: (e[2].started_at, e[0])):
        if not counts(result):
            continue
        case = by_id.get(result.case)
        if not result.digest and case is not None and result.variant in case.spec.variants:
            result = result.model_copy(update={"digest": run_digest(case, result.variant)})
        signature = case.spec.signature_of(result.variant) if case and result.variant in case.spec.variants else None
        rows.append(to_row(run_id, cell, result, machine_of.get(run_id, ""), signature))
    return rows


def fold_store(
    record: Record, store: Store, cases: list[Case], cell: str | None = None, pins: dict[str, str] | None = None
) -> tuple[int, int]:
    """Fold every counted result of `store` (cases and compat probes) into `record`; (added, replaced). With
    `cell`, the results of the store's `local` cell (a run outside the matrix: a GPU machine's own interpreter) are
    recorded under that name instead, their versions under logical names with `pins` overriding them (a torch
    build's local version that the installed metadata lacks, e.g. torch=2.11.0+cu130)."""
    runs, machines, machine_of = {}, {}, {}
    for run in store.runs():
        description = _describe(run.machine)
        mid = machine_id(description)
        machines[mid] = description
        machine_of[run.run_id] = mid
        runs[run.run_id] = {"started": iso(run.started_at), "machine": mid, "command": run.command}
    entries = store.results() + store.results(kinds=COMPAT_CELLS)
    if cell:
        entries = [
            (run_id, cell, _pinned(result, pins or {})) if at == LOCAL_CELL else (run_id, at, result)
            for run_id, at, result in entries
        ]
    return fold(record, rows_of(entries, cases, machine_of), runs, machines)


def _pinned(result: Result, pins: dict[str, str]) -> Result:
    """`result` with its versions under logical names, `pins` (logical or distribution names) overriding them."""
    versions = {logical_name(name): version for name, version in result.versions.items()}
    versions.update({logical_name(n): v for n, v in pins.items() if logical_name(n) in versions})
    return result.model_copy(update={"versions": versions})


def fold_payload(
    record: Record,
    payload: dict[str, Any],
    cases: list[Case],
    cell: str | None,
    machine: Row,
    pins: dict[str, str],
    command: str,
) -> tuple[int, int]:
    """Fold a `bugmatrix run --json` payload (its `results`) into `record`: each result under `cell` (instead of
    the cell it names), its versions under logical names with `pins` overriding them (a torch build's local version
    that the payload lost, e.g. torch=2.11.0+cu130), measured on `machine`."""
    mid = machine_id(machine)
    run_id = payload["run_id"]
    entries = []
    for item in payload["results"]:
        result = Result.model_validate({k: v for k, v in item.items() if k != "cell"})
        entries.append((run_id, cell or item.get("cell", "local"), _pinned(result, pins)))
    started = min((r.started_at for _, _, r in entries), default=0.0)
    runs = {run_id: {"started": iso(started), "machine": mid, "command": command}}
    return fold(record, rows_of(entries, cases, {run_id: mid}), runs, {mid: machine})


def refresh_versions(record: Record, matrix: Matrix | None) -> list[str]:
    """Snapshot, for every package the rows name, its releases with their upload dates from the matrix's index, and
    for every git install its commit date and first-parent position (and the positions of that package's releases)
    from a local clone; what cannot be looked up now keeps what the record holds. Returns what could not be read."""
    problems = []
    packages = sorted({logical_name(name) for row in record.rows for name in row["versions"]})
    for package in packages:
        for distribution in distributions(package):
            try:
                listed = index.releases(distribution, matrix.index_url() if matrix else index.PYPI)
            except IndexLookupError as exc:
                if distribution == package:
                    problems.append(str(exc))
                continue
            record.releases[distribution] = {
                str(r.version): ({"date": iso(r.uploaded.timestamp())} if r.uploaded else {})
                | ({"yanked": True} if r.yanked else {})
                for r in listed
            }
    if matrix is None:
        return problems
    for package in packages:
        points = {
            row["versions"][name] for row in record.rows for name in row["versions"] if logical_name(name) == package
        }
        if not any(PinVersion.parse(p).kind == AT_COMMIT for p in points):
            continue
        source = matrix.source(package)
        if not source or ("://" in source and not source.startswith("file://")):
            problems.append(
                f"{package}: no local clone to date its commits (set BUGMATRIX_MIRROR_"
                f"{package.upper().replace('-', '_')})"
            )
            continue
        repo = Path(source.removeprefix("file://"))
        known = record.commits.setdefault(package, {})
        for point in sorted(points):
            at = PinVersion.parse(point)
            if at.kind == COMMIT:  # a pin never installed: the record dates the commits it installed
                continue
            ref = at.commit or at.release_text
            sha = at.commit or git.resolve_ref(repo, at.release_text)
            if sha is None:
                continue
            when = git.commit_date(str(repo), sha)
            position = git.first_parent_position(repo, sha)
            if position is None:
                continue
            known[ref] = {"position": position} | ({"date": iso(when.timestamp())} if when else {})
    return problems


def import_record(record: Record, store: ResultStore) -> int:
    """Write every row of `record` into `store` as results of their runs (the reverse of folding); return how many.
    A row's excerpt becomes the result's log excerpt; logs, stacks and rank output were never recorded."""
    import json

    machines = record.machines
    with store._connect() as db:  # noqa: SLF001 - the store's own transaction: one import, atomic
        for run_id, run in sorted(record.runs.items()):
            started = timestamp(run["started"]) if "started" in run else 0.0
            db.execute(
                "INSERT OR IGNORE INTO runs VALUES (?, ?, ?, 'complete', ?, ?)",
                (
                    run_id,
                    started,
                    started,
                    json.dumps(machines.get(run.get("machine", ""), {}), sort_keys=True),
                    run.get("command", ""),
                ),
            )
        for row in record.rows:
            if row["run"] not in record.runs:
                db.execute(
                    "INSERT OR IGNORE INTO runs VALUES (?, ?, ?, 'complete', ?, '')",
                    (
                        row["run"],
                        timestamp(row["date"]),
                        timestamp(row["date"]),
                        json.dumps(machines.get(row["machine"], {}), sort_keys=True),
                    ),
                )
    count = 0
    for row in record.rows:
        run_id, cell, result = from_row(row)
        store.save(run_id, result, cell)
        count += 1
    return count
