"""`bugmatrix osv`: the record as OSV advisories, written to a folder or served as the OSV API.

    bugmatrix osv export DIR                              # one x_BUGMATRIX-<case>[.<variant>].json per advisory
    bugmatrix osv export --zip ROOT                       # osv.dev's layout: ROOT/PyPI/all.zip, modified_id.csv
    bugmatrix osv serve [--port 8080] [--host 127.0.0.1] [--timeout 10]  # POST /v1/query, /v1/querybatch;
                                                                          # GET /v1/vulns/{id}

    pip-audit -s osv --osv-url http://127.0.0.1:8080/v1/query -r requirements.txt
    uv audit --service-url http://127.0.0.1:8080
    OSV_SCANNER_LOCAL_DB_CACHE_DIRECTORY=DIR osv-scanner --offline-vulnerabilities ...   # --zip DIR/osv-scanner

Served on the loopback interface unless `--host` says otherwise (any other address: a one-line warning on stderr).
See harness/analysis/osv.py for how the ranges are made (and what OSV cannot express) and harness/output/osv.py for
the endpoints and the server's limits. Exit codes: 0 done, 2 input that cannot be read, a port outside 0-65535, a
timeout that is not positive, an address that cannot be listened on.
"""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

from harness.commands.context import Context
from harness.model.errors import UsageError
from harness.model.exitcode import ExitCode


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `osv export` and `osv serve`."""
    p = sub.add_parser("osv", help="the record as OSV advisories: export them, or serve them as the OSV API")
    steps = p.add_subparsers(dest="step", required=True)
    export = steps.add_parser(
        "export",
        help="write one OSV JSON per advisory into DIR, and/or osv.dev's layout "
        "(PyPI/all.zip and its index) under --zip ROOT",
        parents=[parents["--db"], parents["--record"]],
    )
    export.add_argument("folder", type=Path, metavar="DIR", nargs="?", default=None)
    export.add_argument(
        "--zip",
        type=Path,
        metavar="ROOT",
        default=None,
        help="also write ROOT/PyPI/all.zip (one JSON per advisory), ROOT/PyPI/<id>.json and "
        "modified_id.csv, as osv.dev publishes them: an offline scanner's database",
    )
    serve = steps.add_parser(
        "serve",
        help="serve the advisories as the OSV API (query, querybatch, vulns)",
        parents=[parents["--db"], parents["--record"]],
    )
    serve.add_argument("--host", default="127.0.0.1", help="the address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8080, help="the port (0: any free port; default 8080)")
    serve.add_argument(
        "--timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="drop a connection that sends nothing for this long (default 10: READ_TIMEOUT)",
    )


def advisories(args: argparse.Namespace) -> dict[str, dict]:
    """Every case's advisory from the record (with the local store layered), by id."""
    from harness.analysis.osv import documents
    from harness.model.case import every_case
    from harness.session.readers import open_reader
    from harness.session.record import load

    if not args.cases_dir.is_dir():
        raise UsageError(f"--cases-dir {args.cases_dir}: no such folder")
    cases = every_case(args.cases_dir)
    store = open_reader(args.db, args.db_given, cases, args.record)
    return documents(store.latest(), cases, load(args.record).releases)


def run(args: argparse.Namespace) -> ExitCode:
    """Carry out `osv export` or `osv serve`."""
    return export(args) if args.step == "export" else serve(args)


def export(args: argparse.Namespace) -> ExitCode:
    """Write the advisories into the folder."""
    from harness.output.osv import write_documents, write_feed

    if args.folder is None and args.zip is None:
        raise UsageError("osv export: give DIR, --zip ROOT, or both")
    for folder in (args.folder, args.zip):
        if folder is not None and folder.exists() and not folder.is_dir():
            raise UsageError(f"{folder}: not a folder")
    docs = advisories(args)
    ctx = Context(args)
    if args.folder is not None:
        paths = write_documents(docs, args.folder)
        ctx.printer.note(f"{args.folder}: {len(paths)} advisory file(s) from {ctx.sources()}")
    if args.zip is not None:
        zipped, *_ = write_feed(docs, args.zip)
        ctx.printer.note(f"{zipped}: {len(docs)} advisories, with modified_id.csv, from {ctx.sources()}")
    return ExitCode.OK


def serve(args: argparse.Namespace) -> ExitCode:
    """Serve the advisories until interrupted."""
    from harness.analysis.osv import OSVIndex
    from harness.output.osv import READ_TIMEOUT, make_server

    timeout = READ_TIMEOUT if args.timeout is None else args.timeout
    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: not a port (0 to 65535)")
    if not 0 < timeout < float("inf"):
        raise UsageError(f"--timeout {args.timeout}: not a positive number of seconds")
    index = OSVIndex(advisories(args))
    try:
        server = make_server(index, args.host, args.port, timeout)
    except OSError as exc:
        raise UsageError(f"{args.host}:{args.port}: cannot listen ({exc.strerror})") from None
    host, port = str(server.server_address[0]), server.server_address[1]
    printer = Context(args).printer
    if not ipaddress.ip_address(host).is_loopback:
        printer.note(
            f"warning: --host {args.host} is not a loopback address: any machine that can reach this one on port "
            f"{port} can query it (no authentication, no TLS)"
        )
    printer.note(f"serving {len(index.docs)} advisories on http://{host}:{port}/v1/query")
    try:
        server.serve_forever()
    finally:
        server.server_close()
    return ExitCode.OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit("run as `bugmatrix osv ...`")
