"""The record kept for every run of case x variant x world size x device in an environment."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, Field, field_validator, model_validator

from harness.model.common import item_id
from harness.model.outcome import Outcome, RankStatus

LOG_EXCERPT_CHARS = 4000
# New result fields go through this one place: name -> its JSON type (str, int, float or bool). Each is optional: a
# result that does not set it is exactly what it was before the field existed -- the same record row, store row,
# `--json` payload and fingerprint (`job.fingerprint` takes the set ones; `run_digest` measures the case, not a
# result). A set one is held in `Result.extra`, written at the top level of a record row and a payload item, in the
# store's `extra` column, and read back from each; a record row's is checked against its type.
OPTIONAL_FIELDS: dict[str, type] = {
    # how the job was launched: "cold" (under torchrun) or "warm" (forked from a warm parent, harness/launch/warm.py);
    # unset on results recorded before launches said so (all of them cold) and on results that launched nothing
    "launch": str,
    # how many nodes (torchrun agents, each of `nproc` ranks) the job launched: set only above 1 (`Job.extra`)
    "nnodes": int,
}


class Result(BaseModel):
    """One observed outcome, what was expected, and the evidence: versions, ranks, timing, logs, stacks."""

    case: str
    variant: str
    nproc: int
    device: str
    outcome: Outcome
    expected: Outcome | None
    reason: str
    versions: dict[str, str] = Field(default_factory=dict)
    python: str = ""
    ranks: list[RankStatus] = Field(default_factory=list)
    duration_s: float = 0.0
    log_excerpt: str = ""
    stacks: str = ""
    started_at: float = 0.0
    launched: bool = True
    tallies: dict[str, int] = Field(default_factory=dict)  # outcome -> count, when the job was repeated
    # what the result depends on: script and run settings (`run_digest`), variant, world size, device, pins, repeats
    fingerprint: str = ""
    # `run_digest` of the script and run settings that produced it: a result whose digest the case no longer gives
    # (its script or settings were edited since) is superseded history, never a verdict
    digest: str = ""
    # the fingerprint less the number of repeats (`job.pool_of`): results with the same pool add their tallies up
    # across runs; "" on results recorded before it existed (left out of a dump and a record row, as they were)
    pool: str = ""
    # the `OPTIONAL_FIELDS` that are set (none: the result is as it was before they existed)
    extra: dict[str, Any] = Field(default_factory=dict, exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _gathered(cls, values: Any) -> Any:  # noqa: ANN401 - what pydantic was given
        """A payload item's optional fields, given at its top level, into `extra`."""
        if isinstance(values, dict) and any(name in values for name in OPTIONAL_FIELDS):
            found = {name: values[name] for name in OPTIONAL_FIELDS if name in values}
            values = {k: v for k, v in values.items() if k not in found}
            values["extra"] = {**values.get("extra", {}), **found}
        return values

    @field_validator("extra")
    @classmethod
    def _declared(cls, extra: dict[str, Any]) -> dict[str, Any]:
        """Only declared optional fields, each of its type."""
        for name, value in extra.items():
            check_optional(name, value)
        return extra

    def model_dump(self, **kwargs: Any) -> dict[str, Any]:  # noqa: ANN401 - pydantic's own keywords
        """pydantic's dump, with the set optional fields at the top level, as a record row holds them (none when
        none is set: the dump is what it was before they existed)."""
        data = super().model_dump(**kwargs)
        if self.extra:
            data.update(self.extra)
        if not self.pool:
            data.pop("pool", None)
        return data

    @property
    def repeats(self) -> int:
        """How many launches this result stands for."""
        return sum(self.tallies.values()) or 1

    @property
    def tally(self) -> str:
        """'reproduced 3/5, fixed 2/5' for a repeated job (most frequent first), else ''."""
        if not self.tallies:
            return ""
        n = self.repeats
        return ", ".join(f"{o} {c}/{n}" for o, c in sorted(self.tallies.items(), key=lambda kv: (-kv[1], kv[0])))

    @property
    def nnodes(self) -> int:
        """How many nodes the job launched (`nproc` ranks each): 1 unless the result says more."""
        return int(self.extra.get("nnodes", 1))

    @property
    def item_id(self) -> str:
        """`case::variant[device-nproc]` (see `harness.model.common.item_id`)."""
        return item_id(self.case, self.variant, self.device, self.nproc, self.nnodes)

    @property
    def ok(self) -> bool:
        """True when the observed outcome is the expected one."""
        return self.expected is not None and self.outcome == self.expected


# Every field set: one set serves every `trusted` Result (pydantic only adds a field's name to it, which it already
# holds, and copies it for `model_copy`); a set of its own per Result, made and freed, was half of this function's cost.
_EVERY_FIELD = set(Result.model_fields)


def trusted(values: dict[str, Any]) -> Result:
    """A `Result` of `values` that are already checked and give every field (as a record row that `load` read),
    built as `Result.model_construct` builds it, without its per-field alias and default handling: a record ten
    times today's makes tens of thousands. The caller guarantees the values; nothing is checked here."""
    result = object.__new__(Result)
    object.__setattr__(result, "__dict__", values)
    object.__setattr__(result, "__pydantic_fields_set__", _EVERY_FIELD)
    object.__setattr__(result, "__pydantic_extra__", None)
    object.__setattr__(result, "__pydantic_private__", None)
    return result


def check_optional(name: str, value: object) -> None:
    """Raise `ValueError` naming `name` unless it is a declared optional field (`OPTIONAL_FIELDS`) and `value` is
    of its type."""
    kind = OPTIONAL_FIELDS.get(name)
    if kind is None:
        raise ValueError(f"{name}: not a declared optional result field (harness/model/result.py OPTIONAL_FIELDS)")
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ValueError(f"{name}: {value!r} is not a {kind.__name__}")


def optional_of(row: Mapping[str, Any]) -> dict[str, Any]:
    """The optional fields a record row or payload item sets (see `OPTIONAL_FIELDS`)."""
    return {name: row[name] for name in OPTIONAL_FIELDS if name in row}


def launch_tallies(result: Result) -> dict[str, int]:
    """What `result`'s launches were, outcome -> count: its tallies when repeated, its outcome once when launched
    once, nothing when nothing was launched."""
    if result.tallies:
        return dict(result.tallies)
    return {result.outcome.value: 1} if result.launched else {}


def counts(result: Result) -> bool:
    """Whether `result` counts towards a run's verdict: it was launched, or its environment could not be made."""
    return result.launched or result.outcome is Outcome.INFRA


def misses(results: list[Result]) -> list[Result]:
    """The results that count (see `counts`) and whose outcome is not the expected one: what makes a run fail.

    Every entry point (CLI, matrix, nightly, pytest) counts with this one function."""
    return [r for r in results if counts(r) and not r.ok]


def excerpt(text: str, limit: int = LOG_EXCERPT_CHARS) -> str:
    """The last `limit` characters of `text`, cut at a line start."""
    if len(text) <= limit:
        return text
    tail = text[-limit:]
    return tail[tail.find("\n") + 1 :] if "\n" in tail else tail
