"""The OSV advisories written to a folder, and served as the OSV API (the subset clients use), standard library only.

    write_documents(docs, Path("osv/"))                      # one <id>.json per advisory, deterministic
    write_feed(docs, Path("feed/"))                          # osv.dev's layout: feed/PyPI/all.zip, an index
    server = make_server(OSVIndex(docs), "127.0.0.1", 0)     # an OSVServer; server.server_address[1]
    server.serve_forever()

Endpoints: `POST /v1/query` (`{"package": {"name", "ecosystem"}, "version"}` -> `{"vulns": [...]}`),
`POST /v1/querybatch` (`{"queries": [...]}` -> `{"results": [{"vulns": [{"id", "modified"}]}]}`) and
`GET /v1/vulns/{id}`. Every answer is JSON, every error `{"code", "message"}` (and the connection closed): a body
that is not JSON, is nested deeper than the interpreter's recursion limit, lacks a field, or a Content-Length that
is not ASCII digits is 400; a missing Content-Length 411; a body over `MAX_BODY` 413; an unknown path or id 404;
http.server's own refusals too (an unknown method 501, a request line over 64 KiB 414, a header line over 64 KiB or
over 100 headers 431); anything unforeseen 500.

Limits, so that a slow or hostile client cannot hold the server: the kernel queues `BACKLOG` connections not yet
accepted (socketserver's default is 5: a burst of 200 clients timed out); a connection whose client sends nothing
for `timeout` seconds (default `READ_TIMEOUT`) is dropped, an idle keep-alive one too; at most `max_connections`
(default `MAX_CONNECTIONS`) are answered at once, a thread each, and one more is answered 503 and closed. A client
that trickles a byte before each timeout is not dropped (the timeout is per read, not per request).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import threading
import zipfile
from collections.abc import Callable
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from harness.analysis.osv import ECOSYSTEM, OSVIndex

MAX_BODY = 1 << 20  # 1 MiB
MAX_BATCH = 1000
READ_TIMEOUT = 10.0  # seconds a connection may send nothing (mid-request or between requests) before it is dropped
BACKLOG = 1024  # connections the kernel queues before they are accepted
MAX_CONNECTIONS = 1000  # connections answered at once, a thread each


def render(doc: dict) -> str:
    """One advisory as the file holds it (sorted keys, two-space indent, a final newline)."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _replace(path: Path, data: bytes) -> None:
    """Write `path` atomically (a temporary file beside it, then a rename); an unchanged file is left alone."""
    if path.is_file() and path.read_bytes() == data:
        return
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_bytes(data)
    os.replace(temporary, path)


def write_documents(docs: dict[str, dict], folder: Path) -> list[Path]:
    """Write each advisory to `folder/<id>.json` (atomically; unchanged files are left alone); return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for vuln_id, doc in sorted(docs.items()):
        path = folder / f"{vuln_id}.json"
        _replace(path, render(doc).encode())
        written.append(path)
    return written


ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # every member's time: the same advisories make the same bytes
INDEX = "modified_id.csv"


def zipped(docs: dict[str, dict]) -> bytes:
    """Every advisory as `<id>.json` in one zip, in id order, with fixed member times (deterministic bytes)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for vuln_id, doc in sorted(docs.items()):
            member = zipfile.ZipInfo(f"{vuln_id}.json", date_time=ZIP_TIME)
            member.compress_type = zipfile.ZIP_DEFLATED
            member.external_attr = 0o644 << 16
            archive.writestr(member, render(doc))
    return buffer.getvalue()


def index(docs: dict[str, dict], prefix: str = "") -> str:
    """osv.dev's `modified_id.csv`: one `<modified>,<prefix><id>` line per advisory, the newest first."""
    rows = sorted(
        ((doc["modified"], vuln_id) for vuln_id, doc in docs.items()), key=lambda r: (r[0], r[1]), reverse=True
    )
    return "".join(f"{modified},{prefix}{vuln_id}\n" for modified, vuln_id in rows)


def write_feed(docs: dict[str, dict], root: Path) -> list[Path]:
    """osv.dev's bucket layout under `root` (what its exporter publishes, and what osv-scanner's offline mode
    reads as `<cache>/osv-scanner/PyPI/all.zip`, or `<cache>/osv-scalibr/PyPI/all.zip` from osv-scanner 2.1):
    `PyPI/all.zip` (one `<id>.json` per advisory), `PyPI/<id>.json`, `PyPI/modified_id.csv` and `modified_id.csv`
    (`PyPI/<id>`); return the paths of the zip and the two indexes."""
    folder = root / ECOSYSTEM
    write_documents(docs, folder)
    stale = {p for p in folder.glob("*.json")} - {folder / f"{vuln_id}.json" for vuln_id in docs}
    for path in stale:  # an advisory gone from the record is gone from the feed
        path.unlink()
    _replace(folder / "all.zip", zipped(docs))
    _replace(folder / INDEX, index(docs).encode())
    _replace(root / INDEX, index(docs, f"{ECOSYSTEM}/").encode())
    return [folder / "all.zip", folder / INDEX, root / INDEX]


class BadRequest(Exception):
    """A request the API refuses: the HTTP status and a one-line message."""

    def __init__(self, status: HTTPStatus, message: str) -> None:
        super().__init__(message)
        self.status = status


def _query(index: OSVIndex, query: object) -> list[dict]:
    if not isinstance(query, dict):
        raise BadRequest(HTTPStatus.BAD_REQUEST, "a query must be a JSON object")
    package = query.get("package")
    if not isinstance(package, dict) or not isinstance(package.get("name"), str):
        raise BadRequest(HTTPStatus.BAD_REQUEST, "package.name: missing")
    ecosystem = package.get("ecosystem", ECOSYSTEM)
    version = query.get("version")
    if not isinstance(version, str) or not version:
        raise BadRequest(HTTPStatus.BAD_REQUEST, "version: missing (commit queries are not supported)")
    if not isinstance(ecosystem, str):
        raise BadRequest(HTTPStatus.BAD_REQUEST, "package.ecosystem: not a string")
    return index.query(package["name"], ecosystem, version)


def error_body(status: HTTPStatus, message: str) -> bytes:
    """The JSON body of every error answer: `{"code", "message"}`."""
    return json.dumps({"code": int(status), "message": message}).encode()


def _busy(limit: int) -> bytes:
    body = error_body(HTTPStatus.SERVICE_UNAVAILABLE, f"more than {limit} connections at once; try again")
    return (
        f"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body


def make_handler(index: OSVIndex, read_timeout: float = READ_TIMEOUT) -> type[BaseHTTPRequestHandler]:
    """A request handler class answering from `index`, dropping a connection silent for `read_timeout` seconds."""

    class Handler(BaseHTTPRequestHandler):
        """The OSV API's query, querybatch and vulns endpoints."""

        server_version = "bugmatrix-osv"
        timeout = read_timeout  # StreamRequestHandler sets it on the socket: every read and write
        # a request line it cannot read is answered as HTTP/1.0, with a status line and headers (http.server would
        # take it for HTTP/0.9 and send the bare body)
        default_request_version = "HTTP/1.0"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass

        def _send(self, status: HTTPStatus, body: bytes, close: bool = False) -> None:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if close:
                self.send_header("Connection", "close")
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """Every error as JSON, http.server's own (400, 414, 431, 501) included; the connection is closed (a
            request it refuses may have left its body unread)."""
            status = HTTPStatus(code)
            self._send(status, error_body(status, message or status.phrase), close=True)

        def _answer(self, answer: Callable[[], object]) -> None:
            try:
                payload = answer()
            except BadRequest as exc:
                self.send_error(exc.status, str(exc))
            except OSError:
                raise  # the connection failed or timed out: http.server drops it
            except Exception as exc:  # noqa: BLE001 - whatever it is, the client gets a JSON answer
                self.send_error(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}"[:200])
            else:
                self._send(HTTPStatus.OK, json.dumps(payload).encode())

        def _body(self) -> object:
            length = self.headers.get("Content-Length")
            if length is None:
                raise BadRequest(HTTPStatus.LENGTH_REQUIRED, "Content-Length: missing")
            if not (length.isascii() and length.isdecimal()):
                raise BadRequest(HTTPStatus.BAD_REQUEST, f"Content-Length: {length[:40]!r} is not a number of bytes")
            if len(length) > len(str(MAX_BODY)) or int(length) > MAX_BODY:
                raise BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body is over {MAX_BODY} bytes")
            raw = self.rfile.read(int(length))
            try:
                return json.loads(raw)
            except ValueError as exc:  # not JSON, or not UTF-8
                raise BadRequest(HTTPStatus.BAD_REQUEST, f"the body is not JSON ({exc})") from None
            except RecursionError:
                raise BadRequest(HTTPStatus.BAD_REQUEST, "the body is nested too deeply") from None

        def _post(self) -> object:
            path = self.path.split("?", 1)[0]
            if path not in ("/v1/query", "/v1/querybatch"):
                raise BadRequest(HTTPStatus.NOT_FOUND, f"{path}: no such endpoint")
            body = self._body()
            if path == "/v1/query":
                return {"vulns": _query(index, body)}
            queries = body.get("queries") if isinstance(body, dict) else None
            if not isinstance(queries, list):
                raise BadRequest(HTTPStatus.BAD_REQUEST, "queries: missing")
            if len(queries) > MAX_BATCH:
                raise BadRequest(HTTPStatus.BAD_REQUEST, f"queries: more than {MAX_BATCH}")
            return {
                "results": [
                    {"vulns": [{"id": d["id"], "modified": d["modified"]} for d in _query(index, q)]} for q in queries
                ]
            }

        def _get(self) -> object:
            path = self.path.split("?", 1)[0]
            prefix = "/v1/vulns/"
            if not path.startswith(prefix):
                raise BadRequest(HTTPStatus.NOT_FOUND, f"{path}: no such endpoint")
            doc = index.get(path[len(prefix) :])
            if doc is None:
                raise BadRequest(HTTPStatus.NOT_FOUND, f"{path[len(prefix) :]}: no such advisory")
            return doc

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            """`/v1/query` and `/v1/querybatch`."""
            self._answer(self._post)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            """`/v1/vulns/{id}`."""
            self._answer(self._get)

    return Handler


class OSVServer(ThreadingHTTPServer):
    """A threading HTTP server with a listen backlog of `BACKLOG` that answers at most `max_connections`
    connections at once (one more is told 503 and closed, by the accepting thread)."""

    request_queue_size = BACKLOG
    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], max_connections: int = MAX_CONNECTIONS
    ) -> None:
        self.slots = threading.BoundedSemaphore(max_connections)
        self.busy = _busy(max_connections)
        super().__init__(address, handler)

    # override: a TCP server's request is a socket (typeshed's BaseServer also allows a datagram server's tuple)
    def process_request(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        """Answer in a thread of its own when a slot is free; else 503 at once."""
        if not self.slots.acquire(blocking=False):
            with contextlib.suppress(OSError):
                request.settimeout(1.0)
                request.sendall(self.busy)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread could start: socketserver closes the connection
            self.slots.release()
            raise

    # override: as `process_request`, a socket
    def process_request_thread(self, request: socket.socket, client_address: tuple[str, int]) -> None:  # type: ignore[override]
        """Answer, then free the connection's slot."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


def make_server(
    index: OSVIndex,
    host: str = "127.0.0.1",
    port: int = 0,
    timeout: float = READ_TIMEOUT,
    max_connections: int = MAX_CONNECTIONS,
) -> OSVServer:
    """A threading HTTP server answering the OSV API from `index` (port 0: a free port, see `server_address`),
    dropping a connection silent for `timeout` seconds and answering at most `max_connections` at once."""
    return OSVServer((host, port), make_handler(index, timeout), max_connections)
