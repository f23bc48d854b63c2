"""The schema of `cases/<id>/case.yaml`, and loading one file into a validated `CaseSpec`.

Any problem with a file becomes a `CaseError` whose message is one line: `<file>: <field>: <problem>`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import Field, field_validator, model_validator

from harness.model.common import DEVICES, Device, Strict, check_specifier
from harness.model.errors import BugmatrixError
from harness.model.names import VARIANT
from harness.model.outcome import Outcome
from harness.model.yamlfile import load_model

EXPECTABLE = (Outcome.REPRODUCED, Outcome.FIXED, Outcome.SKIP, Outcome.ERROR)
NPROC, DEVICE = "nproc", "device"
RESERVED_KEYS = (NPROC, DEVICE)  # the `when` keys that name no package


class CaseError(BugmatrixError):
    """A case folder or its metadata is invalid; the message names the file and the field."""


class GitCondition(Strict):
    """True when the package is installed from one of these commits (SHA prefixes, at least 7 hex digits)."""

    git: list[Annotated[str, Field(pattern=r"^[0-9a-f]{7,40}$")]] = Field(min_length=1)


SKIP_KINDS = ("absent", "untestable")  # why a `skip` rule skips (see `Rule.because`)
# What kind of bug a case is (`class:` in case.yaml; cases/README.md says which to choose): what a user asks the
# catalogue about. It describes the bug and is not in the run digest: setting or changing it supersedes nothing.
CaseClass = Literal["silent-wrong-value", "error", "crash", "hang", "flaky", "two-node", "performance"]
CASE_CLASSES: tuple[str, ...] = get_args(CaseClass)


class Rule(Strict):
    """`outcome` is expected when every condition in `when` holds (an empty `when` always holds). A `skip` rule
    says why in `because`: `absent`, the code the bug lives in does not exist in those versions (no FSDP2 before
    torch 2.4), so the bug cannot apply there; `untestable`, the code exists but the case cannot test it there
    (gloo has no AVG on CPU). `bugmatrix audit` answers `not_affected` and `cannot_say` for them;
    `bugmatrix check-case` requires it on every skip rule."""

    when: dict[str, str | GitCondition | list[int]] = Field(default_factory=dict)
    outcome: Outcome
    because: Literal["absent", "untestable"] | None = None

    @field_validator("outcome")
    @classmethod
    def _expectable(cls, value: Outcome) -> Outcome:
        if value not in EXPECTABLE:
            raise ValueError(f"must be one of {', '.join(o.value for o in EXPECTABLE)}")
        return value

    @field_validator("when")
    @classmethod
    def _conditions(cls, when: dict[str, Any]) -> dict[str, Any]:
        for key, cond in when.items():
            if key == NPROC:
                if not isinstance(cond, list) or not all(isinstance(n, int) and n > 0 for n in cond):
                    raise ValueError("nproc: must be a list of positive world sizes")
            elif key == DEVICE:
                if cond not in DEVICES:
                    raise ValueError("device: must be 'cpu' or 'cuda'")
            elif isinstance(cond, str):
                check_specifier(key, cond)
            elif not isinstance(cond, GitCondition):
                raise ValueError(f"{key}: must be a version specifier or {{git: [sha, ...]}}")
        return when

    @model_validator(mode="after")
    def _because_on_skip(self) -> Rule:
        if self.because is not None and self.outcome is not Outcome.SKIP:
            raise ValueError("because: only a `skip` rule says why it skips (absent | untestable)")
        return self


class Variant(Strict):
    """One way of running the script: the bug path or a workaround, as extra arguments."""

    description: str = ""
    args: list[str] = Field(default_factory=list)
    workaround: bool = False
    signature: str | None = None
    cold: Annotated[str, Field(min_length=1)] | None = None  # why it must launch cold (torchrun): see cases/README.md
    expect: list[Rule] = Field(min_length=1)

    @field_validator("signature")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        return _check_regex(value) if value is not None else None

    @model_validator(mode="after")
    def _catch_all_last(self) -> Variant:
        if self.expect[-1].when:
            raise ValueError("expect: the last rule must have no `when` (it is the default)")
        return self

    def packages_named(self, device: str | None = None, outcome: Outcome | None = None) -> list[str]:
        """The packages this variant's rules name (`when` keys other than world size and device), in rule order;
        with `device`, only the rules that apply on it; with `outcome`, only the rules that expect it."""
        return list(
            dict.fromkeys(
                key
                for rule in self.expect
                if (device is None or rule.when.get(DEVICE, device) == device)
                and (outcome is None or rule.outcome is outcome)
                for key in rule.when
                if key not in RESERVED_KEYS
            )
        )


class CaseSpec(Strict):
    """Everything `case.yaml` declares about one upstream bug."""

    title: str = Field(min_length=1)
    bug_class: CaseClass | None = Field(default=None, alias="class")  # what kind of bug (`CASE_CLASSES`)
    upstream: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(min_length=1)
    fixed_by: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(default_factory=list)
    packages: list[Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")]] = Field(min_length=1)
    sources: dict[str, str] = Field(default_factory=dict)
    supports: dict[str, str] = Field(default_factory=dict)  # package -> versions the script can run on
    script: str = "repro.py"
    nproc: list[Annotated[int, Field(gt=0, le=64)]] = Field(default_factory=lambda: [1])  # ranks per node
    # torchrun agents on this machine, each one node of `nproc` ranks (docs/cases.md "Two nodes on one machine");
    # 1, the default, is in no digest, id or row: a one-node case is what it was before the field existed
    nnodes: int = Field(default=1, ge=1, le=8)
    devices: list[Device] = Field(default_factory=lambda: list[Device](["cpu"]))
    timeout: float = Field(default=300, gt=0)
    signature: str
    variants: dict[Annotated[str, Field(pattern=VARIANT)], Variant] = Field(min_length=1)
    cold: Annotated[str, Field(min_length=1)] | None = None  # why it must launch cold (torchrun): see cases/README.md
    evidence: str = ""

    @field_validator("signature")
    @classmethod
    def _regex(cls, value: str) -> str:
        return _check_regex(value)

    @field_validator("supports")
    @classmethod
    def _specifiers(cls, value: dict[str, str]) -> dict[str, str]:
        for package, spec in value.items():
            check_specifier(package, spec)
        return value

    def signature_of(self, variant: str) -> str:
        """The failure-signature regex that applies to `variant`."""
        return self.variants[variant].signature or self.signature

    def cold_of(self, variant: str) -> str | None:
        """Why `variant` must launch cold, under torchrun (its own `cold:`, else the case's), or None: it may be
        forked from a warm parent."""
        return self.variants[variant].cold or self.cold

    @property
    def recorded_packages(self) -> list[str]:
        """`packages`, then every other package a rule's `when` names (a coupling case's second package, e.g.
        transformers for litgpt-2156): a result records the versions of all of them, so that reading it back
        (`report`, `expect`) evaluates the rules on what the run saw, not on `packages` alone."""
        named = [key for variant in self.variants.values() for key in variant.packages_named()]
        return list(dict.fromkeys([*self.packages, *named]))


def _check_regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return value


def load_spec(path: Path) -> CaseSpec:
    """Read and validate one `case.yaml`, raising `CaseError("<path>: <field>: <problem>")` on any problem."""
    return load_model(path, CaseSpec, CaseError)
