"""`bugmatrix osv serve` under a crowd, on loopback: a burst of concurrent queries, half-open connections, and its
memory over many requests. Whole process: the server is `python -m harness osv serve --port 0` over the committed
record and cases/, the clients are threads of this process.

    uv run python benchmarks/bench_osv_serve.py [--burst 200] [--half-open 400] [--requests 10000] [--timeout 10]
        [--against DIR]   # also measure another checkout in the same run, e.g. `git archive <ref> | tar -x -C DIR`

Measured, each loop bounded:
- burst: `--burst` clients released at once by a barrier, each one `POST /v1/query` on a fresh connection (client
  timeout 60 s): errors, and p50 / p99 / max of the answered ones' latency.
- half-open: `--half-open` connections each send a request's headers and half its body, then nothing; meanwhile 20
  other clients query one after another (their p50 / max). Then how long until the server has closed every half-open
  one (waited for at most `--timeout` + 15 s), and the server's thread count while they are held and after.
- memory: the server's RSS (/proc/PID/status VmRSS) after its first request and after `--requests` more (8 client
  threads; queries, batches of 10, advisories by id, and 404s and 400s, in turn).
Target: 0 errors in the burst; every half-open connection dropped within the timeout (<= 10 s) while the others are
answered; RSS grows by under 10 MiB.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import selectors
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUERY = json.dumps({"package": {"name": "torch", "ecosystem": "PyPI"}, "version": "2.1.2"}).encode()


def start(checkout: Path, timeout: float | None) -> tuple[subprocess.Popen, int]:
    """`osv serve --port 0` of `checkout` over its committed record; the process and its port."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env |= {"BUGMATRIX_DB": "/nonexistent/bench-osv-serve.db", "PYTHONPATH": str(checkout)}
    command = [sys.executable, "-m", "harness", "osv", "serve", "--port", "0"]
    command += ["--timeout", str(timeout)] if timeout is not None else []
    process = subprocess.Popen(command, cwd=checkout, env=env, stderr=subprocess.PIPE, text=True)
    for line in process.stderr:  # type: ignore[union-attr]
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if found:
            threading.Thread(target=process.stderr.read, daemon=True).start()  # type: ignore[union-attr]
            return process, int(found.group(1))
    sys.exit(f"{checkout}: osv serve did not start (exit {process.wait()})")


def request(port: int, method: str, path: str, body: bytes | None = None, timeout: float = 60) -> int:
    """One request on a fresh connection; its status."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def query(port: int, timeout: float = 60) -> float:
    """One valid query; its latency in seconds (an error raises)."""
    started = time.perf_counter()
    status = request(port, "POST", "/v1/query", QUERY, timeout)
    if status != 200:
        raise RuntimeError(f"status {status}")
    return time.perf_counter() - started


def status_of(pid: int, field: str) -> int:
    """A number from /proc/PID/status (VmRSS in KiB, Threads)."""
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(rf"^{field}:\s+(\d+)", text, re.MULTILINE).group(1))  # type: ignore[union-attr]


def quantiles(values: list[float]) -> str:
    """p50 / p99 / max in seconds."""
    if not values:
        return "none answered"
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return f"p50 {statistics.median(ordered):.3f} s, p99 {p99:.3f} s, max {ordered[-1]:.3f} s"


def in_threads(count: int, work: Callable[[int], None]) -> None:
    """Run `work(i)` in `count` threads released at once; wait for them all."""
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        barrier.wait()
        work(i)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(300)


def burst(port: int, clients: int) -> str:
    """`clients` concurrent queries: errors and latency."""
    latencies: list[float] = []
    errors: list[str] = []

    def ask(_: int) -> None:
        try:
            latencies.append(query(port))
        except (OSError, RuntimeError, http.client.HTTPException) as exc:
            errors.append(type(exc).__name__)

    in_threads(clients, ask)
    kinds = ", ".join(f"{errors.count(k)} {k}" for k in sorted(set(errors)))
    return f"{len(errors)} error(s){f' ({kinds})' if kinds else ''}; {quantiles(latencies)}"


def half_open(process: subprocess.Popen, port: int, count: int, timeout: float) -> str:
    """`count` connections that stop halfway through their body, while 20 others query; when they are dropped."""
    head = b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(QUERY)
    held = []
    started = time.monotonic()
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        sock.sendall(head + QUERY[: len(QUERY) // 2])
        held.append(sock)
    opened = time.monotonic() - started
    time.sleep(0.5)
    threads_held = status_of(process.pid, "Threads")
    others = []
    errors = 0
    for _ in range(20):
        try:
            others.append(query(port, timeout=30))
        except (OSError, RuntimeError, http.client.HTTPException):
            errors += 1
    selector = selectors.DefaultSelector()
    for sock in held:
        sock.setblocking(False)
        selector.register(sock, selectors.EVENT_READ)
    dropped: list[float] = []
    answered = 0
    deadline = started + timeout + 15
    while len(selector.get_map()) and time.monotonic() < deadline:
        for key, _ in selector.select(timeout=0.5):
            sock = key.fileobj
            try:
                data = sock.recv(4096)  # type: ignore[union-attr]
            except OSError:
                data = b""
            if data:
                answered += 1
            dropped.append(time.monotonic() - started)
            selector.unregister(sock)
    left = len(selector.get_map())
    for sock in held:
        sock.close()
    time.sleep(0.5)
    threads_after = status_of(process.pid, "Threads")
    drop = (
        f"all dropped by {max(dropped):.1f} s after the first was opened (opening took {opened:.1f} s)"
        if not left
        else f"{left} still open {timeout + 15:.0f} s after the first was opened"
    )
    return (
        f"{drop}{f', {answered} answered' if answered else ''}; 20 others meanwhile: {errors} error(s), "
        f"{quantiles(others)}; server threads {threads_held} while held, {threads_after} after"
    )


def memory(process: subprocess.Popen, port: int, requests: int) -> str:
    """RSS after the first request and after `requests` more of every kind."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("POST", "/v1/query", body=QUERY)
    vulns = json.loads(connection.getresponse().read())["vulns"]
    connection.close()
    first = status_of(process.pid, "VmRSS")
    batch = json.dumps({"queries": [json.loads(QUERY)] * 10}).encode()
    kinds = [
        ("POST", "/v1/query", QUERY),
        ("POST", "/v1/querybatch", batch),
        ("GET", "/v1/vulns/nope", None),
        ("POST", "/v1/query", b"{not json"),
    ]
    kinds += [("GET", f"/v1/vulns/{vulns[0]['id']}", None)] if vulns else []
    failures: list[str] = []

    def loop(worker: int) -> None:
        for i in range(worker, requests, 8):
            method, path, body = kinds[i % len(kinds)]
            try:
                request(port, method, path, body)
            except (OSError, http.client.HTTPException) as exc:
                failures.append(type(exc).__name__)

    started = time.perf_counter()
    in_threads(8, loop)
    wall = time.perf_counter() - started
    after = status_of(process.pid, "VmRSS")
    return (
        f"RSS {first / 1024:.1f} MiB after the first request, {after / 1024:.1f} MiB after {requests:,} more "
        f"(+{(after - first) / 1024:.1f} MiB; {requests / wall:.0f} requests/s, {len(failures)} failed)"
    )


def main() -> None:
    """Start the server(s) and measure."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--half-open", type=int, default=400)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--timeout", type=float, default=10.0, help="the server's --timeout")
    parser.add_argument(
        "--against",
        type=Path,
        help="another checkout of bugmatrix to measure in the same run "
        "(started without --timeout, which older checkouts lack)",
    )
    args = parser.parse_args()
    checkouts = {"": (ROOT, args.timeout)} | ({" [baseline]": (args.against.resolve(), None)} if args.against else {})
    load = os.getloadavg()
    print(
        f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; {os.cpu_count()} cores; server --timeout "
        f"{args.timeout:g}" + (f"; baseline {args.against}" if args.against else ""),
        flush=True,
    )
    for label, (checkout, timeout) in checkouts.items():
        for name, measure in (
            ("burst", lambda p, port: burst(port, args.burst)),
            ("half-open", lambda p, port: half_open(p, port, args.half_open, args.timeout)),
            ("memory", lambda p, port: memory(p, port, args.requests)),
        ):
            process, port = start(checkout, timeout)  # a fresh server for each measure
            try:
                print(f"{name + label:22} {measure(process, port)}", flush=True)
            finally:
                process.terminate()
                process.wait(30)
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
