"""Slim a CUDA wheel (fbgemm-gpu) to one GPU architecture, for a machine reached only through small transfers.

fbgemm_gpu-1.6.0-cp312-cp312-manylinux_2_28_x86_64.whl is 465 MB (2.4 GB unpacked): each shared object carries
device code for sm_80, sm_90 and sm_100 in its `.nv_fatbin` section. `slim` keeps one architecture's entries,
zero-fills the payloads of the others (headers, sizes and offsets untouched, so the ELF file and the fat binary's
index stay valid; the zeros compress to nothing) and packs the unpacked wheel as one tar.xz, which `unpack` turns
back into an importable folder (the package and its .dist-info, so importlib.metadata sees the version):

    # here:
    uv run python tools/slim_cuda_wheel.py fbgemm_gpu-1.6.0-...whl --sm 90 -o fbgemm-sm90.tar.xz
    # there (standard library only), then put SITE on PYTHONPATH:
    python3 tools/slim_cuda_wheel.py --unpack fbgemm-sm90.tar.xz SITE

Measured on the real wheel: 2026-11-24 (the first version of this script), 465 MB -> 82.5 MB of tar.xz, and on an
H100 (torch 2.11.0+cu130) `import fbgemm_gpu` and a CUDA op worked and the torchrec cases ran; 2026-11-25 (this one,
the .so files edited in place through mmap), 745 MiB of sm_90 code kept, 1416 MiB zeroed, 75.5 MiB of tar.xz, 5 min
of CPU. The result only runs on a GPU of the kept
architecture: on another, the kernels of the zeroed ones fail to load. `tools/gpu_kit.py prepare` calls this.
"""

from __future__ import annotations

import argparse
import io
import lzma
import mmap
import struct
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50  # each fat-binary container in .nv_fatbin starts with it
ELF_MAGIC = b"\x7fELF"
SAFE = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}  # Python >= 3.11.4 / 3.12


@dataclass
class Slimmed:
    """What `slim` kept and zeroed, in bytes of device code, and the packed tar.xz."""

    kept: int
    zeroed: int
    packed: bytes


def fatbin_section(data: bytes | bytearray | mmap.mmap) -> tuple[int, int] | None:
    """File offset and size of the `.nv_fatbin` section of a 64-bit little-endian ELF file (None: not such a file,
    or no device code), read from the section headers."""
    if data[:4] != ELF_MAGIC or data[4] != 2 or data[5] != 1:  # ELFCLASS64, ELFDATA2LSB
        return None
    shoff = struct.unpack_from("<Q", data, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if not shoff or shstrndx >= shnum:
        return None

    def header(i: int) -> tuple[int, int, int]:  # name offset, file offset, size
        base = shoff + i * shentsize
        return struct.unpack_from("<I", data, base)[0], *struct.unpack_from("<QQ", data, base + 0x18)

    _, names_at, _ = header(shstrndx)
    for i in range(shnum):
        name_at, offset, size = header(i)
        start = names_at + name_at
        if bytes(data[start : data.find(b"\0", start)]) == b".nv_fatbin":
            return offset, size
    return None


def keep_arch(buf: bytearray | mmap.mmap, offset: int, size: int, sm: int) -> tuple[int, int]:
    """Zero, in place, the payload of every fat-binary entry in `buf[offset:offset+size]` not built for `sm`;
    returns (bytes kept, bytes zeroed)."""
    kept = zeroed = 0
    pos, end = offset, offset + size
    while pos + 16 <= end:
        magic, _version, header_size, fat_size = struct.unpack_from("<IHHQ", buf, pos)
        if magic != FATBIN_MAGIC:  # alignment padding between containers
            pos += 8
            continue
        entry, entries_end = pos + header_size, pos + header_size + fat_size
        while entry < entries_end:
            _kind, _v, entry_header, payload = struct.unpack_from("<HHIQ", buf, entry)
            arch = struct.unpack_from("<I", buf, entry + 28)[0]
            start = entry + entry_header
            if arch == sm:
                kept += payload
            else:
                buf[start : start + payload] = bytes(payload)
                zeroed += payload
            entry = start + payload
        pos = entries_end
    return kept, zeroed


def slim(wheel: Path, sm: int, preset: int = 6) -> Slimmed:
    """The wheel unpacked, every shared object slimmed to `sm`, packed as tar.xz (members sorted)."""
    packed = io.BytesIO()
    kept = zeroed = 0
    with tempfile.TemporaryDirectory(prefix="slim-wheel-") as tmp, zipfile.ZipFile(wheel) as archive:
        archive.extractall(tmp)
        for so in sorted(Path(tmp).rglob("*.so*")):
            if so.stat().st_size == 0:
                continue
            with open(so, "r+b") as fh, mmap.mmap(fh.fileno(), 0) as buf:  # in place: one .so is 1.1 GB
                section = fatbin_section(buf)
                if section:
                    k, z = keep_arch(buf, *section, sm)
                    kept, zeroed = kept + k, zeroed + z
        with lzma.open(packed, "wb", preset=preset) as xz, tarfile.open(fileobj=xz, mode="w|") as tar:
            for item in sorted(Path(tmp).iterdir()):
                tar.add(item, arcname=item.name)
    return Slimmed(kept=kept, zeroed=zeroed, packed=packed.getvalue())


def unpack(packed: Path | list[Path], site: Path) -> list[str]:
    """Extract a slimmed wheel's tar.xz (one file, or its parts in order) into `site`; the top-level names."""
    parts = [packed] if isinstance(packed, Path) else packed
    site.mkdir(parents=True, exist_ok=True)
    data = b"".join(p.read_bytes() for p in parts)
    with lzma.open(io.BytesIO(data)) as xz, tarfile.open(fileobj=xz, mode="r|") as tar:
        names = set()
        for member in tar:
            if member.name.startswith(("/", "..")) or "/../" in member.name:
                raise ValueError(f"{parts[0]}: unsafe member {member.name!r}")
            tar.extract(member, site, **SAFE)
            names.add(member.name.split("/", 1)[0])
    return sorted(names)


def main(argv: list[str] | None = None) -> int:
    """Slim a wheel (or, with --unpack, extract a slimmed one)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path, help="the CUDA wheel (with --unpack: the slimmed tar.xz)")
    parser.add_argument("site", type=Path, nargs="?", help="with --unpack: the folder to extract into")
    parser.add_argument("--sm", type=int, default=90, help="the architecture to keep (90: H100/H200)")
    parser.add_argument("-o", "--output", type=Path, help="the tar.xz to write (default: WHEEL's name + -smNN.tar.xz)")
    parser.add_argument("--unpack", action="store_true", help="extract a slimmed tar.xz into SITE")
    args = parser.parse_args(argv)
    if not args.wheel.is_file():
        print(f"{args.wheel}: no such file", file=sys.stderr)
        return 2
    if args.unpack:
        if args.site is None:
            print("--unpack needs SITE, the folder to extract into", file=sys.stderr)
            return 2
        print(f"{args.site}: {', '.join(unpack(args.wheel, args.site))}")
        return 0
    try:
        result = slim(args.wheel, args.sm)
    except zipfile.BadZipFile as exc:
        print(f"{args.wheel}: not a wheel ({exc})", file=sys.stderr)
        return 2
    out = args.output or args.wheel.with_name(args.wheel.name.removesuffix(".whl") + f"-sm{args.sm}.tar.xz")
    out.write_bytes(result.packed)
    print(
        f"sm_{args.sm}: kept {result.kept / 2**20:.0f} MiB of device code, zeroed {result.zeroed / 2**20:.0f} MiB; "
        f"{len(result.packed) / 2**20:.1f} MiB of tar.xz: {out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
