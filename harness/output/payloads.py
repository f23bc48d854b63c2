"""The JSON answers of the commands that probe (`bisect`, `narrow`) and derive (`expect`): plain data, built from
what those commands found, for machines and for the nightly's steps."""

from __future__ import annotations

from typing import Any

from harness.output.tables import to_json


def bisect_json(run_id: str, summary: str, levels: list[tuple[str, Any]]) -> str:
    """`bisect --json`: each level's boundary, the candidates in doubt and every probe's outcome."""
    return to_json(
        {
            "run_id": run_id,
            "summary": summary,
            "levels": [
                {
                    "level": level,
                    "old": r.old.value,
                    "new": r.new.value,
                    "last_old": str(r.last_old),
                    "first_new": str(r.first_new),
                    "ambiguous": [str(a) for a in r.ambiguous],
                    "first_new_subject": getattr(r.first_new, "subject", None),
                    "probes": [{"candidate": str(c), "outcome": o.value} for c, o in r.probes],
                    **(_flaky(r) if r.verdict is not None else {}),
                }
                for level, r in levels
            ],
        }
    )


def _flaky(r: Any) -> dict[str, Any]:
    """A flaky search's part of a level (`bisect --repeat auto`): its verdict, the confidence stated, whether it
    decided, the launches (reused ones apart) and each version's tally."""
    v = r.verdict
    return {
        "verdict": v.kind,
        "decided": v.decided,
        "confidence": v.confidence,
        "launches": r.launches,
        "reused": r.reused,
        "tallies": {c: {"reproduced": t.reproduced, "fixed": t.fixed, "other": t.other} for c, t in r.tallies.items()},
    }


def narrow_json(run_id: str, comments: list[str], done: list[Any]) -> str:
    """`narrow --json`: each boundary before and after (on a coupled slice, the version it holds: `held`), the level
    it reached, its probes, whether its sides are now adjacent and why not further."""
    return to_json(
        {
            "run_id": run_id,
            "comments": comments,
            "narrowed": [
                {
                    "case": d.target.axis.case,
                    "variant": d.target.axis.variant,
                    "device": d.target.axis.device,
                    "package": d.target.axis.package,
                    "held": dict([d.target.axis.within]) if d.target.axis.within else None,  # a coupled slice's pin
                    "before": d.target.boundary.text(),
                    "after": d.line(),
                    "level": d.level,
                    "probes": [{"candidate": c, "outcome": o.value} for c, o, _ in d.probes],
                    "adjacent": d.adjacent,
                    "why_not": d.why_not,
                }
                for d in done
            ],
        }
    )


def expect_json(derivations: list[Any], diffs: dict[str, str], written: list[str]) -> str:
    """`expect --json`: each variant's derived rules (or why refused), the diffs and the files written."""
    return to_json(
        {
            "derivations": [
                {
                    "case": d.case.id,
                    "variant": d.variant,
                    "package": d.package,
                    "refused": d.refused or None,
                    "changed": d.changed,
                    "rules": None if d.new is None else [r.model_dump(mode="json") for r in d.new],
                    "boundaries": d.boundaries,
                    "notes": d.notes,
                }
                for d in derivations
            ],
            "diffs": diffs,
            "written": written,
        }
    )
