"""The OSV advisories written to a folder, and served as the OSV API (the subset clients use), standard library only.

    write_documents(docs, Path("osv/"))                      # one <id>.json per case, deterministic
    server = make_server(OSVIndex(docs), "127.0.0.1", 0)     # ThreadingHTTPServer; server.server_address[1]
    server.serve_forever()

Endpoints: `POST /v1/query` (`{"package": {"name", "ecosystem"}, "version"}` -> `{"vulns": [...]}`),
`POST /v1/querybatch` (`{"queries": [...]}` -> `{"results": [{"vulns": [{"id", "modified"}]}]}`) and
`GET /v1/vulns/{id}`. A request body over `MAX_BODY` is 413; a body that is not JSON, or lacks a field, is 400 with
`{"code", "message"}`; an unknown path or id is 404; every answer is JSON.
"""

from __future__ import annotations

import json
import os
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from harness.analysis.osv import ECOSYSTEM, OSVIndex

MAX_BODY = 1 << 20  # 1 MiB
MAX_BATCH = 1000


def render(doc: dict) -> str:
    """One advisory as the file holds it (sorted keys, two-space indent, a final newline)."""
    return json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_documents(docs: dict[str, dict], folder: Path) -> list[Path]:
    """Write each advisory to `folder/<id>.json` (atomically; unchanged files are left alone); return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for vuln_id, doc in sorted(docs.items()):
        path = folder / f"{vuln_id}.json"
        text = render(doc)
        if not (path.is_file() and path.read_text(encoding="utf-8") == text):
            temporary = path.with_name(f".{path.name}.tmp")
            temporary.write_text(text, encoding="utf-8")
            os.replace(temporary, path)
        written.append(path)
    return written


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


def make_handler(index: OSVIndex) -> type[BaseHTTPRequestHandler]:
    """A request handler class answering from `index`."""

    class Handler(BaseHTTPRequestHandler):
        """The OSV API's query, querybatch and vulns endpoints."""

        server_version = "bugmatrix-osv"

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
            pass

        def _send(self, status: HTTPStatus, payload: object) -> None:
            body = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _error(self, status: HTTPStatus, message: str) -> None:
            self._send(status, {"code": int(status), "message": message})

        def _body(self) -> object:
            length = self.headers.get("Content-Length")
            if length is None or not length.isdigit():
                raise BadRequest(HTTPStatus.LENGTH_REQUIRED, "Content-Length: missing")
            if int(length) > MAX_BODY:
                raise BadRequest(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, f"the body is over {MAX_BODY} bytes")
            raw = self.rfile.read(int(length))
            try:
                return json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                raise BadRequest(HTTPStatus.BAD_REQUEST, f"the body is not JSON ({exc})") from None

        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            """`/v1/query` and `/v1/querybatch`."""
            path = self.path.split("?", 1)[0]
            try:
                if path not in ("/v1/query", "/v1/querybatch"):
                    self.close_connection = True
                    raise BadRequest(HTTPStatus.NOT_FOUND, f"{path}: no such endpoint")
                body = self._body()
                if path == "/v1/query":
                    self._send(HTTPStatus.OK, {"vulns": _query(index, body)})
                    return
                queries = body.get("queries") if isinstance(body, dict) else None
                if not isinstance(queries, list):
                    raise BadRequest(HTTPStatus.BAD_REQUEST, "queries: missing")
                if len(queries) > MAX_BATCH:
                    raise BadRequest(HTTPStatus.BAD_REQUEST, f"queries: more than {MAX_BATCH}")
                results = [{"vulns": [{"id": d["id"], "modified": d["modified"]} for d in _query(index, q)]}
                           for q in queries]
                self._send(HTTPStatus.OK, {"results": results})
            except BadRequest as exc:
                if exc.status == HTTPStatus.REQUEST_ENTITY_TOO_LARGE:
                    self.close_connection = True  # the body is not read
                self._error(exc.status, str(exc))

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            """`/v1/vulns/{id}`."""
            path = self.path.split("?", 1)[0]
            prefix = "/v1/vulns/"
            if not path.startswith(prefix):
                self._error(HTTPStatus.NOT_FOUND, f"{path}: no such endpoint")
                return
            doc = index.get(path[len(prefix):])
            if doc is None:
                self._error(HTTPStatus.NOT_FOUND, f"{path[len(prefix):]}: no such advisory")
            else:
                self._send(HTTPStatus.OK, doc)

    return Handler


def make_server(index: OSVIndex, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """A threading HTTP server answering the OSV API from `index` (port 0: a free port, see `server_address`)."""
    server = ThreadingHTTPServer((host, port), make_handler(index))
    server.daemon_threads = True
    return server
