"""`bugmatrix record`: fold measurements into the committed record, take it back into a store, and generate the
pages' tables from it.

    bugmatrix record fold [STORE.db | RUN.json ...]      # default: .bugmatrix/results.db
    bugmatrix record import --db PATH                    # the record as a results store (round trip, local tools)
    bugmatrix record tables [--check] [--page PAGE ...]  # the cases and compatibility tables, from the record only
    bugmatrix record coverage [--device D] [--missing]   # which jobs of `run --all-cells` the record holds

A fold writes every changed file at once: killed at any moment, it leaves the record as before or as after, and the
next fold (or any command that writes the record) finishes or undoes it first, saying so
(harness/session/journal.py).

Exit codes: 0 done (for `tables --check`: the page is what the record generates; for `coverage`: every planned job
has a row for its current script), 1 `tables --check` found a page that differs, or `coverage` found jobs missing, 2
input that cannot be read (one line naming the file; nothing written).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.commands.context import Context, add_format
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode

if TYPE_CHECKING:
    from harness.output.printer import Printer


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `record` and its steps, with their options."""
    p = sub.add_parser(
        "record",
        help="the committed record of every measurement: fold a store into it, import it, "
        "generate the pages' tables from it",
    )
    steps = p.add_subparsers(dest="step", required=True)
    fold = steps.add_parser(
        "fold",
        help="fold results stores or `run --json` files into the record (idempotent)",
        parents=[parents["--record"], parents["--matrix"]],
    )
    fold.add_argument(
        "sources",
        nargs="*",
        type=Path,
        help="store files (.db) or `bugmatrix run --json` output (.json); default: .bugmatrix/results.db",
    )
    fold.add_argument(
        "--cell",
        help="the cell to record results of the `local` cell under (for .json sources: every "
        "result), a name that says the machine and its pins, e.g. h100-torch-2.11.0+cu130",
    )
    fold.add_argument(
        "--pin",
        action="append",
        default=[],
        metavar="PKG=VERSION",
        help="the exact version a result ran with where the file lost it (e.g. torch=2.11.0+cu130: "
        "an image's torch whose installed metadata lacks the build tag); for stores, the results "
        "recorded under --cell; repeatable",
    )
    fold.add_argument(
        "--machine",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="for .json sources: the machine they ran on (cpu=..., cores=..., gpu=..., driver=..., "
        "cuda=..., nccl=...); repeatable",
    )
    fold.add_argument("--offline", action="store_true", help="look nothing up: keep the record's version dates")
    imp = steps.add_parser("import", help="write the record into a results store", parents=[parents["--record"]])
    imp.add_argument("--db", type=Path, required=True, help="the store to write (created when missing)")
    tables = steps.add_parser(
        "tables",
        help="regenerate the cases and compatibility tables of a page from the record alone",
        parents=[parents["--record"], parents["--matrix"]],
    )
    tables.add_argument(
        "--page",
        type=Path,
        action="append",
        help="a page holding the tables (repeatable; default: "
        "README.md and every page under docs/ that holds one: docs/cases.md, docs/compat.md)",
    )
    tables.add_argument("--check", action="store_true", help="write nothing; exit 1 when the page differs")
    cov = steps.add_parser(
        "coverage",
        help="which jobs of `run --all-cells` the record holds a row for (measured "
        "with the committed script); exit 1 while any is missing",
        parents=[parents["--record"], parents["--matrix"]],
    )
    add_format(cov, ("table", "json"))
    cov.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="the jobs of this device (default cpu)")
    cov.add_argument("--missing", action="store_true", help="list every missing job, not only the count per cell")


def _pairs(items: list[str], flag: str) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name or not value:
            raise UsageError(f"{flag} {item!r}: expected NAME=VALUE")
        out[name] = value
    return out


def run(args: argparse.Namespace) -> ExitCode:
    """Carry out `record fold`, `record import`, `record tables` or `record coverage`."""
    return {"fold": fold, "import": import_, "tables": tables, "coverage": coverage}[args.step](args)


def fold(args: argparse.Namespace) -> ExitCode:
    """Fold each source into the record and write what changed."""
    from harness.matrix.expand import load_matrix
    from harness.model.case import PROBES_DIR, discover
    from harness.session.basics import default_db
    from harness.session.folding import fold_payload, fold_store, refresh_versions
    from harness.session.journal import recover
    from harness.session.record import RecordError, load, write
    from harness.session.store import ResultStore

    ctx = Context(args)
    ctx.writable("--record")
    sources = args.sources or [default_db()]
    cases = discover(args.cases_dir)[0] + discover(PROBES_DIR)[0]
    printer = ctx.printer
    recovered = recover(args.record)  # a fold killed before: finished if it had committed, else undone
    if recovered:
        printer.say(f"{args.record}: {recovered}", soft_wrap=True, highlight=False)
    record = load(args.record)  # a record file that does not parse stops here: nothing more is written
    pins, machine = _pairs(args.pin, "--pin"), _pairs(args.machine, "--machine")
    if "cores" in machine and machine["cores"].isdigit():
        machine["cores"] = int(machine["cores"])  # type: ignore[assignment]
    for source in sources:
        if not source.is_file():
            raise UsageError(f"{source}: no such file")
        if source.suffix == ".json":
            try:
                payload = json.loads(source.read_text())
                payload["results"], payload["run_id"]  # noqa: B018 - the two fields a run's JSON must have
            except (OSError, ValueError, KeyError, TypeError) as exc:
                raise UsageError(f"{source}: not the output of `bugmatrix run --json` ({exc})") from None
            if not machine:
                raise UsageError(f"{source}: say which machine ran it (--machine gpu=... --machine cpu=...)")
        try:  # a name that breaks the grammar (harness/model/names.py) stops the fold: nothing is written
            if source.suffix == ".json":
                added, replaced = fold_payload(
                    record, payload, cases, args.cell, machine, pins, f"bugmatrix run --json > {source.name}"
                )
            else:
                added, replaced = fold_store(record, ResultStore(source, readonly=True), cases, args.cell, pins)
        except RecordError as exc:
            raise UsageError(f"{source}: {exc}") from None
        printer.say(f"{source}: {added} row(s) added, {replaced} replaced", soft_wrap=True, highlight=False)
    if not args.offline:
        matrix = load_matrix(args.matrix) if args.matrix.is_file() else None
        for problem in refresh_versions(record, matrix):
            printer.say(f"[yellow]version dates kept from the record:[/] {problem}", soft_wrap=True, highlight=False)
    written = write(args.record, record)
    printer.say(
        f"{args.record}: {len(record.rows)} row(s); {len(written)} file(s) written"
        + (f" ({', '.join(written)})" if written else ""),
        soft_wrap=True,
        highlight=False,
    )
    return ExitCode.OK


def import_(args: argparse.Namespace) -> ExitCode:
    """Write every row of the record into `--db`."""
    from harness.session.folding import import_record
    from harness.session.record import load
    from harness.session.store import ResultStore

    record = load(args.record)
    count = import_record(record, ResultStore(args.db))
    Context(args).printer.say(f"{args.db}: {count} result(s) imported from {args.record}", highlight=False)
    return ExitCode.OK


def tables(args: argparse.Namespace) -> ExitCode:
    """Regenerate (or, with --check, compare) the record's tables wherever the pages hold them (`bugmatrix docs`
    regenerates every generated part)."""
    from harness.output.pages import RECORD_REGIONS, generated_tables, page_files, regions_in, stale_pages

    pages = args.page or page_files(Path("."))
    found: set[str] = set()
    for page in pages:
        try:
            found |= set(regions_in(page.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"{page}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None
    missing = set(RECORD_REGIONS) - found
    if missing:
        raise UsageError(
            f"{', '.join(map(str, pages)) or 'no page'}: no generated region {', '.join(sorted(missing))} "
            "(<!-- NAME: ... --> ... <!-- /NAME -->)"
        )
    generated = generated_tables(args.record, args.cases_dir, args.matrix)
    stale = stale_pages(pages, generated, write=not args.check)
    printer = Context(args).printer
    if not stale:
        printer.say(f"the tables are what {args.record} generates", highlight=False)
        return ExitCode.OK
    names = ", ".join(map(str, stale))
    if args.check:
        printer.say(
            f"{names}: the tables differ from what {args.record} generates "
            "(`bugmatrix record tables` rewrites them; never edit them by hand)",
            highlight=False,
        )
        return ExitCode.FAILED
    printer.say(f"wrote {names}", highlight=False)
    return ExitCode.OK


@dataclass(frozen=True)
class CoverageRequest:
    """What `record coverage` is asked: the device's jobs of `run --all-cells`, the cases, matrix and record they
    come from, the format, and whether to list every missing job."""

    device: str
    cases_dir: Path
    matrix: Path
    record: Path
    format: str
    missing: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CoverageRequest:
        """The request `args` make."""
        return cls(args.device, args.cases_dir, args.matrix, args.record, args.format, args.missing)


def coverage(args: argparse.Namespace) -> ExitCode:
    """`record coverage`: `execute_coverage` of the request `args` make."""
    return execute_coverage(CoverageRequest.from_args(args), Context(args))


def execute_coverage(request: CoverageRequest, ctx: Context) -> ExitCode:
    """Tally every job `run --all-cells --device D` plans against the record's rows for the committed scripts:
    verdicts, non-verdicts (with their outcome) and missing, per cell; reads the record and the matrix only (no
    index, no store, nothing written). 1 when a job is missing, else 0."""
    from harness.analysis.coverage import coverage as tally
    from harness.matrix.expand import load_matrix
    from harness.model.case import discover
    from harness.session.plan import Selection, plan_cells
    from harness.session.record import load

    cases, errors = discover(request.cases_dir)
    if errors:
        raise UsageError(f"{errors[0]}")
    matrix = load_matrix(request.matrix)  # an invalid matrix: MatrixError, one line, exit 2
    jobs = plan_cells(cases, matrix, Selection(devices=(request.device,), all_cells=True))
    cells = tally(jobs, load(request.record).rows)
    if request.format == "json":
        ctx.printer.answer(json.dumps(_coverage_json(request.device, cells), indent=2))
    else:
        _coverage_table(request, ctx.printer, cells)
    return ExitCode.FAILED if any(c.missing for c in cells) else ExitCode.OK


def _coverage_json(device: str, cells: list) -> dict:
    """`record coverage --json`'s document: the totals, then each cell's."""
    from collections import Counter

    return {
        "device": device,
        "planned": sum(c.planned for c in cells),
        "verdicts": sum(c.verdicts for c in cells),
        "non_verdicts": dict(sum((c.non_verdicts for c in cells), Counter())),
        "missing": sum(len(c.missing) for c in cells),
        "cells": [
            {
                "cell": c.cell,
                "planned": c.planned,
                "verdicts": c.verdicts,
                "non_verdicts": dict(sorted(c.non_verdicts.items())),
                "missing": c.missing,
            }
            for c in cells
        ],
    }


def _coverage_table(request: CoverageRequest, printer: Printer, cells: list) -> None:
    """`record coverage`'s table of the cells with a job missing or without a verdict, then its summary line."""
    from rich.table import Table

    totals = _coverage_json(request.device, cells)
    shown = [c for c in cells if c.missing or c.non_verdicts]
    if shown:
        table = Table(title=f"{request.device} jobs of `run --all-cells` without a verdict in {request.record}")
        for column in ("cell", "planned", "verdicts", "non-verdicts", "missing"):
            table.add_column(column, overflow="fold")
        for c in shown:
            table.add_row(
                c.cell,
                str(c.planned),
                str(c.verdicts),
                ", ".join(f"{n} {o}" for o, n in sorted(c.non_verdicts.items())) or "-",
                str(len(c.missing)),
            )
        printer.show(table)
    if request.missing:
        for c in cells:
            for item in c.missing:
                printer.show(f"missing: {item} cell={c.cell}", soft_wrap=True, markup=False, highlight=False)
    planned, verdicts, missing = totals["planned"], totals["verdicts"], totals["missing"]
    said = ", ".join(f"{n} {o}" for o, n in sorted(totals["non_verdicts"].items()))
    printer.show(
        f"{planned} {request.device} job(s) planned in {len(cells)} cell(s): {verdicts} with a verdict, "
        f"{planned - verdicts - missing} with a non-verdict and its reason{f' ({said})' if said else ''}, "
        f"{missing} missing (no row for the committed script)",
        soft_wrap=True,
        highlight=False,
    )


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run as `bugmatrix record ...`")
