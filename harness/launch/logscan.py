"""Reading a rank's log in bounded memory, however much the rank printed.

A log is read in `CHUNK_BYTES` blocks. What is kept: the whole log when it is at most `HEAD_BYTES + TAIL_BYTES`,
else its first `HEAD_BYTES` and last `TAIL_BYTES` (and its size); and the first line in which the signature regex
matches, found while streaming. Lines are split exactly as `str.splitlines` splits the whole decoded text, so a
line that straddles a chunk boundary is searched whole. A line longer than `MAX_LINE_BYTES` (a rank that prints
hundreds of MB without a newline) is searched in windows of that size overlapping by `WINDOW_OVERLAP_BYTES`, so
memory stays bounded there too: a match shorter than the overlap is never missed, but `^`/`$` may then also match
at a window's edge.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

CHUNK_BYTES = 1 << 20
HEAD_BYTES = 8 << 10
TAIL_BYTES = 32 << 10
MAX_LINE_BYTES = 1 << 20
WINDOW_OVERLAP_BYTES = 4 << 10
LINE_CHARS = 300  # a signature line is reported stripped, cut to this length


@dataclass
class LogScan:
    """What is kept of one log: `text` (whole, or head + an omission line + tail), its size, the signature line."""

    text: str = ""
    size: int = 0
    truncated: bool = False
    seen: str | None = None  # the first line the signature matched, stripped; None when it never matched
    signature: str | None = None  # the signature that was searched for (None: no search)


def signature_line(text: str, signature: str | re.Pattern[str]) -> str | None:
    """The first line of `text` in which the `signature` regex matches, stripped; None when it does not."""
    pattern = re.compile(signature) if isinstance(signature, str) else signature
    for line in text.splitlines():
        if pattern.search(line):
            return line.strip()[:LINE_CHARS]
    return None


def human_size(size: int) -> str:
    """1536 -> '1.5 KiB'."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # unreachable


def scan_log(
    path: Path,
    signature: str | None = None,
    *,
    chunk: int = CHUNK_BYTES,
    head: int = HEAD_BYTES,
    tail: int = TAIL_BYTES,
    max_line: int = MAX_LINE_BYTES,
    overlap: int = WINDOW_OVERLAP_BYTES,
) -> LogScan:
    """Stream `path` once: keep its head and tail, count its size, find the first signature line (see module doc).

    A missing or unreadable file is an empty log."""
    pattern = re.compile(signature) if signature else None
    first, last, carry = bytearray(), bytearray(), bytearray()
    size, seen = 0, None
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below, also on error
    except OSError:
        return LogScan(signature=signature)
    with fh:
        while True:
            try:
                block = fh.read(chunk)
            except OSError:
                break
            if not block:
                break
            size += len(block)
            if len(first) < head:
                first += block[: head - len(first)]
            last += block
            if len(last) > tail:
                del last[: len(last) - tail]
            if pattern is None or seen is not None:
                continue
            carry += block
            cut = carry.rfind(b"\n")
            if cut >= 0:
                seen = signature_line(bytes(carry[: cut + 1]).decode("utf-8", "replace"), pattern)
                del carry[: cut + 1]
            if seen is None and len(carry) > max_line:  # an overlong line: search it window by window
                seen = signature_line(bytes(carry).decode("utf-8", "replace"), pattern)
                del carry[: len(carry) - overlap]
        if pattern is not None and seen is None and carry:
            seen = signature_line(bytes(carry).decode("utf-8", "replace"), pattern)
    if size <= head + tail:
        whole = bytes(first[:size] if size <= head else first + last[len(last) - (size - head) :])
        return LogScan(text=whole.decode("utf-8", "replace"), size=size, seen=seen, signature=signature)
    omitted = size - len(first) - len(last)
    text = (
        bytes(first).decode("utf-8", "replace")
        + f"\n[... {human_size(omitted)} omitted: the output was {human_size(size)} ({size} bytes);"
        f" its first {human_size(len(first))} and last {human_size(len(last))} are kept ...]\n"
        + bytes(last).decode("utf-8", "replace")
    )
    return LogScan(text=text, size=size, truncated=True, seen=seen, signature=signature)
