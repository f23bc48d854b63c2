"""A small stand-in for a CUDA wheel: an ELF shared object whose `.nv_fatbin` section holds one fat-binary
container with an entry per GPU architecture, packed as a wheel with its .dist-info (tests of tools/slim_cuda_wheel.py
and tools/gpu_kit.py; the real fbgemm-gpu wheel is 465 MB)."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
ENTRY_HEADER = 64  # bytes before each entry's payload; the architecture is the u32 at +28


def fatbin(payloads: dict[int, bytes]) -> bytes:
    """One fat-binary container: an entry per architecture (sm number -> payload)."""
    entries = b""
    for sm, payload in payloads.items():
        header = bytearray(ENTRY_HEADER)
        struct.pack_into("<HHIQ", header, 0, 2, 0x101, ENTRY_HEADER, len(payload))
        struct.pack_into("<I", header, 28, sm)
        entries += bytes(header) + payload
    return struct.pack("<IHHQ", FATBIN_MAGIC, 1, 16, len(entries)) + entries


def elf(sections: dict[str, bytes]) -> bytes:
    """A minimal 64-bit little-endian ELF file with these sections (plus the null one and .shstrtab)."""
    names = b"\0" + b"".join(n.encode() + b"\0" for n in [*sections, ".shstrtab"])
    body, offsets, at = b"", [], 64
    for data in sections.values():
        offsets.append(at + len(body))
        body += data + bytes(-len(data) % 8)
    names_at = at + len(body)
    body += names + bytes(-len(names) % 8)
    shoff, count = at + len(body), len(sections) + 2
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", header, 0x28, shoff)
    struct.pack_into("<HHH", header, 0x3A, 64, count, count - 1)
    table = bytes(64)  # the null section
    name_at = 1
    for (name, data), offset in zip(sections.items(), offsets, strict=True):
        table += _section(name_at, offset, len(data))
        name_at += len(name) + 1
    table += _section(name_at, names_at, len(names))
    return bytes(header) + body + table


def _section(name: int, offset: int, size: int) -> bytes:
    entry = bytearray(64)
    struct.pack_into("<II", entry, 0, name, 1)
    struct.pack_into("<QQ", entry, 0x18, offset, size)
    return bytes(entry)


def cuda_wheel(folder: Path, payloads: dict[int, bytes], version: str = "1.6.0") -> Path:
    """fbgemm_gpu-VERSION-...whl in `folder`: the package with a lib.so carrying `payloads`, and its dist-info."""
    path = folder / f"fbgemm_gpu-{version}-cp312-cp312-manylinux_2_28_x86_64.whl"
    dist = f"fbgemm_gpu-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("fbgemm_gpu/__init__.py", "STAND_IN = True\n")
        wheel.writestr("fbgemm_gpu/lib.so", elf({".text": b"\x90" * 32, ".nv_fatbin": fatbin(payloads)}))
        wheel.writestr(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: fbgemm_gpu\nVersion: {version}\n")
        wheel.writestr(f"{dist}/RECORD", "")
    return path
