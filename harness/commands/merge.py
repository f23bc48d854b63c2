"""`bugmatrix merge SOURCES...`: fold results stores (e.g. nightly shards) into --db, without duplicates.

Exit codes: 0 merged, 2 a source that is not a results store.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from harness.commands.context import Context
from harness.model.exitcode import ExitCode


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `merge`."""
    p = sub.add_parser(
        "merge",
        help="fold results stores (e.g. nightly shards) into one, without duplicates",
        parents=[parents["--db"]],
    )
    p.add_argument("sources", nargs="+", type=Path)


def run(args: argparse.Namespace) -> ExitCode:
    """Fold other stores into --db; prints how many results were new."""
    from harness.session.store import ResultStore

    ctx = Context(args)
    added = ResultStore(args.db).merge(args.sources)  # a source that is not a store: StoreError, one line, exit 2
    ctx.printer.show(f"merged {len(args.sources)} store(s) into {args.db}: {added} new result(s)")
    return ExitCode.OK
