"""tools/slim_cuda_wheel.py: one architecture's device code kept, the others' zeroed, the wheel importable again."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.fakewheel import cuda_wheel, elf, fatbin

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import slim_cuda_wheel  # noqa: E402

SM80, SM90, SM100 = b"\x80" * 3000, b"\x90" * 2000, b"\xa0" * 1000


def test_the_fatbin_section_is_found_from_the_section_headers() -> None:
    data = elf({".text": b"\0" * 40, ".nv_fatbin": fatbin({90: SM90})})
    offset, size = slim_cuda_wheel.fatbin_section(data)
    assert data[offset : offset + size] == fatbin({90: SM90})
    assert slim_cuda_wheel.fatbin_section(elf({".text": b"\0" * 8})) is None  # host code only
    assert slim_cuda_wheel.fatbin_section(b"#!/bin/sh\n" + bytes(100)) is None  # not an ELF file


def test_only_the_kept_architecture_keeps_its_payload(tmp_path: Path) -> None:
    wheel = cuda_wheel(tmp_path, {80: SM80, 90: SM90, 100: SM100})
    slimmed = slim_cuda_wheel.slim(wheel, 90)
    assert (slimmed.kept, slimmed.zeroed) == (len(SM90), len(SM80) + len(SM100))
    packed = tmp_path / "fbgemm.tar.xz"
    packed.write_bytes(slimmed.packed)
    site = tmp_path / "site"
    assert slim_cuda_wheel.unpack(packed, site) == ["fbgemm_gpu", "fbgemm_gpu-1.6.0.dist-info"]
    lib = (site / "fbgemm_gpu" / "lib.so").read_bytes()
    original = elf({".text": b"\x90" * 32, ".nv_fatbin": fatbin({80: SM80, 90: SM90, 100: SM100})})
    assert len(lib) == len(original)  # sizes and offsets untouched: the ELF file and the fat binary stay valid
    assert SM90 in lib and SM80 not in lib and SM100 not in lib
    assert lib == original.replace(SM80, bytes(len(SM80))).replace(SM100, bytes(len(SM100)))
    # parts in order come back as the same folder
    half = len(slimmed.packed) // 2
    (tmp_path / "a").write_bytes(slimmed.packed[:half])
    (tmp_path / "b").write_bytes(slimmed.packed[half:])
    slim_cuda_wheel.unpack([tmp_path / "a", tmp_path / "b"], tmp_path / "again")
    assert (tmp_path / "again" / "fbgemm_gpu" / "lib.so").read_bytes() == lib


def test_a_missing_wheel_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    assert slim_cuda_wheel.main([str(tmp_path / "nope.whl")]) == 2
    assert capsys.readouterr().err.strip() == f"{tmp_path / 'nope.whl'}: no such file"
