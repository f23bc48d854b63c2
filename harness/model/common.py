"""Facts every layer shares, each written once: the strict model base, devices, specifiers, item ids, aliases.

- `Strict`: the pydantic base of every YAML schema (unknown fields are errors; models are frozen).
- `Device`: the devices a case or a cell can name.
- `check_specifier`: a PEP 440 specifier check with a one-line message.
- `item_id`: how one job is named everywhere (store, tables, compare, reports, pytest): `case::variant[device-n]`,
  `case::variant[device-NxN]` for a job of N nodes (`job_tag`).
- `DEVICE_PACKAGES` / `distributions` / `logical_name`: a logical package name and the distributions that provide
  it per device (`fbgemm-gpu` is `fbgemm-gpu-cpu` on CPU). matrix.yaml's `device_packages` may add more.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from pydantic import BaseModel, ConfigDict

Device = Literal["cpu", "cuda"]
DEVICES: tuple[str, ...] = ("cpu", "cuda")

# logical package -> device -> the distribution that provides it there (absent: the logical name itself)
DEVICE_PACKAGES: dict[str, dict[str, str]] = {"fbgemm-gpu": {"cpu": "fbgemm-gpu-cpu"}}


class Strict(BaseModel):
    """A schema model that rejects unknown fields and cannot be changed after validation."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_specifier(where: str, spec: str) -> None:
    """Raise `ValueError("<where>: '<spec>' is not a version specifier ...")` unless `spec` parses (PEP 440)."""
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        raise ValueError(f"{where}: {spec!r} is not a version specifier like '>=1.3,<1.6'") from None


def ranks_shown(nproc: int, nnodes: int = 1) -> str:
    """A job's ranks as its name and the tables show them: `2` on one node, `2x2` for `nnodes` > 1 nodes of `nproc`
    ranks each. One node adds nothing: what a one-node job shows is what it showed before jobs had nodes."""
    return f"{nnodes}x{nproc}" if nnodes > 1 else str(nproc)


def job_tag(where: str, nproc: int, nnodes: int = 1) -> str:
    """The bracketed part of a job's name: `cpu-2` (`where` is a device or a cell), `cpu-2x2` on two nodes."""
    return f"{where}-{ranks_shown(nproc, nnodes)}"


def item_id(case: str, variant: str, device: str, nproc: int, nnodes: int = 1) -> str:
    """The one name of a job: `case::variant[device-nproc]` (`case::variant[device-nnodesxnproc]` on several
    nodes, see `job_tag`)."""
    return f"{case}::{variant}[{job_tag(device, nproc, nnodes)}]"


def primary_package(packages: list[str]) -> str:
    """The package whose versions a case's axis follows (its summary, its derived rules): the first package that is
    not torch, torch if none."""
    return next((p for p in packages if p != "torch"), "torch")


@lru_cache(maxsize=4096)
def distributions(package: str) -> tuple[str, ...]:
    """Every distribution that provides logical `package` on some device, the logical name first."""
    name = canonicalize_name(package)
    return (name, *(canonicalize_name(d) for d in DEVICE_PACKAGES.get(name, {}).values()))


@lru_cache(maxsize=4096)
def logical_name(distribution: str) -> str:
    """The logical package a distribution provides (`fbgemm-gpu-cpu` -> `fbgemm-gpu`), canonicalised."""
    name = canonicalize_name(distribution)
    for logical, per_device in DEVICE_PACKAGES.items():
        if name in (canonicalize_name(d) for d in per_device.values()):
            return logical
    return name
