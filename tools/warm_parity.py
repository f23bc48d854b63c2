"""Warm launches checked against the record: every current result of a store, matched with the committed record's
current result of the same job in the same environment, compared by outcome.

    uv run python tools/warm_parity.py --db .bugmatrix/results.db
    uv run python tools/warm_parity.py --db warm.db --record record --cases-dir cases --format markdown

A job is matched on case, variant, world size, device, the script and settings it measured (digest) and the
versions installed, never on the cell's name (a local run's cell is `local`, the record's `default`): see
harness/analysis/compare.py `launch_parity`. The record is read as every reader reads it (harness/session/readers.py
`record_store`: results a committed case's script has since superseded are left out); the store's current results
are its `latest()`. Per cell of the store: its jobs, how many of its results were launched and how (`cold`, `warm`,
`unrecorded` for results that predate the `launch` field), how many equal the record's, differ, or have no match;
then every difference with both outcomes (a flaky one with its tally) and both reasons.

Exit codes: 0 no difference, 1 a difference (each one listed), 2 bad input (one line naming the file).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from harness.analysis.compare import launch_parity, parity_json
from harness.model.case import discover
from harness.model.exitcode import ExitCode
from harness.output.parity import only_line, parity_markdown, parity_tables
from harness.output.printer import Printer
from harness.session.contract import StoreError
from harness.session.readers import record_store
from harness.session.record import load
from harness.session.store import ResultStore

NAMES = ("record", "store")  # the reference, the other side


def main(argv: list[str] | None = None) -> int:
    """Compare, print, decide (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--db", type=Path, required=True, help="the store whose results are compared (a warm run's)")
    p.add_argument("--record", type=Path, default=Path("record"), help="the committed record (default: record)")
    p.add_argument("--cases-dir", type=Path, default=Path("cases"), help="the cases (default: cases)")
    p.add_argument("--format", choices=("table", "markdown", "json"), default="table", help="default: table")
    args = p.parse_args(argv)
    try:
        if not args.db.is_file():
            raise StoreError(f"{args.db}: no such results store (--db)")
        if not args.record.is_dir():
            raise StoreError(f"{args.record}: no such record folder (--record)")
        if not args.cases_dir.is_dir():
            raise StoreError(f"{args.cases_dir}: no such folder (--cases-dir)")
        store = ResultStore(args.db, readonly=True).latest()
        record = record_store(load(args.record), discover(args.cases_dir)[0], args.record, judge=False).latest()
    except StoreError as exc:
        print(f"warm_parity: {exc}", file=sys.stderr)
        return ExitCode.USAGE_ERROR
    parity = launch_parity(record, store)
    if args.format == "json":
        print(json.dumps(parity_json(parity, NAMES), indent=2))
    elif args.format == "markdown":
        print(parity_markdown(parity, NAMES), end="")
    else:
        printer = Printer()
        printer.show(*parity_tables(parity, NAMES))
        total = f"{parity.matched} job(s) matched, {parity.equal} equal, {len(parity.differences)} differ"
        printer.answer(total + (f"; {line}" if (line := only_line(parity, NAMES)) else ""))
    return ExitCode.FAILED if parity.differences else ExitCode.OK


if __name__ == "__main__":
    sys.exit(main())
