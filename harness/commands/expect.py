"""`bugmatrix expect [CASES]`: derive each variant's expect rules from the store's boundaries and show the diff
against case.yaml (`--write`: rewrite the expect blocks; see harness/analysis/expect.py).

Exit codes: 0 every variant with results was derived, 1 one was refused (each says why) or, with --check, a case
file would change, 2 bad input (an explicit --db that does not exist, an invalid matrix), 5 no result for the cases.
"""

from __future__ import annotations

import argparse

from harness.commands.context import Context, add_format
from harness.model.exitcode import ExitCode


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `expect` and its options."""
    p = sub.add_parser(
        "expect",
        help="derive each variant's expect rules from the store's boundaries and "
        "show the diff against case.yaml (--write: rewrite the expect blocks)",
        parents=[parents[f] for f in ("--db", "--matrix", "--record")],
    )
    add_format(p, ("text", "json"))
    p.add_argument("cases", nargs="*", help="case ids (substrings); default: every case with results")
    p.add_argument("--variant", action="append", help="only these variants (repeatable)")
    p.add_argument("--run", action="append", help="only the results of this run (repeatable; default: all)")
    p.add_argument(
        "--write",
        action="store_true",
        help="rewrite the changed expect blocks (comments, order "
        "and the rest of the file kept) and record what they rest on in the record's rules.jsonl",
    )
    p.add_argument("--check", action="store_true", help="exit 1 when a case.yaml would change")


def run(args: argparse.Namespace) -> ExitCode:
    """Derive expect rules from the store (see harness/analysis/expect.py): print each variant's rules and the diff
    against case.yaml, or write it; 0 when every variant with results was derived, 1 when one was refused (each
    says why) or, with --check, a file would change; 5 when the store holds no result for the cases."""
    import datetime

    from harness.analysis.expect import derive_all, measurements, rewrite, write_case
    from harness.analysis.precision import between_on_index
    from harness.output.payloads import expect_json

    ctx = Context(args)
    if args.write:  # the case files and the record's rules.jsonl
        for option in ("--cases-dir", "--record"):
            ctx.writable(option)
    printer = ctx.printer
    cases = ctx.cases(args.cases)[0]
    store = ctx.reader()  # before the matrix: its chronology dates the matrix's versions
    between = between_on_index(ctx.matrix, {c.id: c for c in cases}) if ctx.optional_matrix() is not None else None
    derivations = derive_all(cases, measurements(store, args.run), between, args.variant or ())
    if not derivations:
        printer.say(f"no results in {args.record} or {args.db} for the selected cases and variants", soft_wrap=True)
        return ExitCode.NOTHING_RAN
    today = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    edits, written = [], []
    for case in cases:
        edit = rewrite(case, [d for d in derivations if d.case.id == case.id], today)
        if edit is not None:
            edits.append(edit)
            if args.write:
                write_case(edit)
                written.append(str(edit.path))
    if args.write and edits:  # what the new rules rest on: in the record, not in the hand-written case file
        from harness.session.record import load, write

        record = load(args.record)
        for d in derivations:
            if d.changed and d.new is not None:
                record.set_rules(d.provenance(today))
        written += [str(args.record / name) for name in write(args.record, record)]
    refused = [d for d in derivations if d.new is None]
    if args.format == "json":
        printer.answer(expect_json(derivations, {str(e.path): e.diff for e in edits}, written))
    else:
        for d in derivations:
            printer.answer(d.summary())
            for note in d.notes:
                printer.answer(f"  note: {note}")
        for edit in edits:
            printer.answer(edit.diff, end="")
        for path in written:
            printer.say(f"wrote {path}", soft_wrap=True, highlight=False, markup=False)
        if edits and not args.write:
            printer.say(
                f"{len(edits)} case file(s) would change: `bugmatrix expect --write` rewrites them",
                soft_wrap=True,
                highlight=False,
                markup=False,
            )
    return ExitCode.FAILED if refused or (args.check and edits and not args.write) else ExitCode.OK
