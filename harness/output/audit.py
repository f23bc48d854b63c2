"""`bugmatrix audit` shown: the bugs that apply to one environment (plain text, Markdown, JSON), and the upgrade
view A -> B as one table (the bugs it fixes, brings in and keeps, and whether the new pairings work at all)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from harness.analysis.audit import ABSENT, KINDS, Answer, Change, Uncovered

if TYPE_CHECKING:  # the compatibility grid is imported only by the upgrade view
    from harness.analysis.compat import Upgrade


def to_json(kinds: dict[str, list[Answer]], not_covered: list[Uncovered]) -> str:
    """`{"affected": [...], "not_affected": [...], "cannot_say": [...], "not_covered": [...]}`: the bug variants by
    `Answer.kind` (`Answer.to_json`; `not_affected` and `cannot_say` say `why`), then what the record cannot answer."""
    payload: dict[str, list] = {kind: [a.to_json() for a in kinds[kind]] for kind in KINDS}
    payload["not_covered"] = [u.to_json() for u in not_covered]
    return json.dumps(payload, indent=2, sort_keys=False)


def _not_covered_text(not_covered: list[Uncovered]) -> list[str]:
    if not not_covered:
        return []
    by_why: dict[str, list[str]] = {}
    for item in not_covered:
        by_why.setdefault(item.why, []).append(f"{item.package} {item.version}".strip())
    return [
        "",
        f"not covered ({len(not_covered)}):",
        *(f"  {why}: {', '.join(names)}" for why, names in sorted(by_why.items())),
    ]


def _grouped(answers: list[Answer]) -> list[tuple[str, str]]:
    """(`case (variant, variant)`, why) per case and reason, in case order: one line each."""
    groups: dict[tuple[str, str], list[str]] = {}
    for a in answers:
        groups.setdefault((a.case, a.why), []).append(a.variant)
    return [(f"{case} ({', '.join(variants)})", why) for (case, why), variants in groups.items()]


def _not_affected_line(answers: list[Answer]) -> str:
    """`not affected: 30 (27 fixed; 3 absent here ...: case (variant), ...)`."""
    absent = [a for a in answers if a.why == ABSENT]
    said = f"{len(answers) - len(absent)} fixed"
    if absent:
        said += f"; {len(absent)} absent here, the bug's code does not exist in these versions: " + ", ".join(
            item for item, _ in _grouped(absent)
        )
    return f"not affected: {len(answers)} ({said})"


def to_text(
    kinds: dict[str, list[Answer]], not_covered: list[Uncovered], label: str, device: str, answered: int
) -> str:
    """Plain text: each bug that applies with its precision, upgrade target, workarounds and reproduce command;
    then how many do not apply (fixed, absent) and, one line each, those the record cannot say."""
    affected = kinds["affected"]
    lines = []
    for a in affected:
        lines += [
            f"AFFECTED  {a.case} ({a.variant}): {a.title}",
            f"  {a.upstream}",
            f"  {a.status}: {a.precision}",
            f"  fixed in: {a.fixed_in or 'no release measured fixed after it'}"
            + (f"; workarounds measured fixed here: {', '.join(a.workarounds)}" if a.workarounds else ""),
            f"  reproduce: {a.reproduce}",
            "",
        ]
    lines.append(f"{len(affected)} bug(s) apply to {label} on {device} ({answered} case x variant answer(s))")
    lines.append(_not_affected_line(kinds["not_affected"]))
    if kinds["cannot_say"]:
        lines += [
            "",
            f"cannot say ({len(kinds['cannot_say'])}, not counted as affected):",
            *(f"  {item}: {why}" for item, why in _grouped(kinds["cannot_say"])),
        ]
    lines += _not_covered_text(not_covered)
    return "\n".join(lines) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def to_markdown(kinds: dict[str, list[Answer]], not_covered: list[Uncovered], label: str, device: str) -> str:
    """A Markdown table of the bugs that apply; how many do not, those the record cannot say, what is not covered."""
    affected = kinds["affected"]
    lines = [f"**{len(affected)} bug(s) apply** to {_md(label)} on {device}.", ""]
    if affected:
        lines += [
            "| case | variant | outcome | precision | fixed in | workarounds | reproduce |",
            "|---|---|---|---|---|---|---|",
            *(
                f"| [{a.case}]({a.upstream}) | {a.variant} | {a.status} | {_md(a.precision)} | "
                f"{a.fixed_in or '—'} | {', '.join(a.workarounds) or '—'} | `{_md(a.reproduce)}` |"
                for a in affected
            ),
            "",
        ]
    lines.append(f"{_md(_not_affected_line(kinds['not_affected']))}.")
    if kinds["cannot_say"]:
        lines += ["", f"Cannot say ({len(kinds['cannot_say'])}, not counted as affected):", ""]
        lines += [f"- {_md(item)}: {_md(why)}" for item, why in _grouped(kinds["cannot_say"])]
    if not_covered:
        lines += ["", "Not covered:", ""]
        lines += [f"- `{_md(u.package)}` {_md(u.version)}: {u.why}" for u in not_covered]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------- upgrade


CHANGE_TEXT = {"fixes": "fixed by the upgrade", "brings": "BROUGHT IN by the upgrade", "keeps": "kept"}


def _side(answer: Answer | None) -> str:
    if answer is None:
        return "not applicable"
    return f"{'absent' if answer.why == ABSENT else answer.status} ({answer.basis})"


def upgrade_rows(changes: list[Change], pairings: Upgrade | None) -> list[list[str]]:
    """The one table's rows: [item, before, after, change]; bugs first, then the pairings."""
    rows = [[f"{c.item[0]} ({c.item[1]})", _side(c.before), _side(c.after), CHANGE_TEXT[c.kind]] for c in changes]
    if pairings is None:
        return rows
    torch_a, torch_b = pairings.before.get("torch", "-"), pairings.after.get("torch", "-")
    for lane, a, b, partner_a, partner_b in pairings.pairings:
        before = f"{a.kind.value}" if a else "not measured"
        after = f"{b.kind.value}" if b else "not measured"
        verdict = (
            "the new pairing works"
            if b and b.kind.value == "works"
            else "the new pairing is not measured"
            if b is None
            else f"the new pairing {b.kind.value}"
        )
        rows.append(
            [f"pairing torch × {lane}: {torch_a} + {partner_a} -> {torch_b} + {partner_b}", before, after, verdict]
        )
    return rows


def upgrade_text(rows: list[list[str]], markdown: bool = False) -> str:
    """The upgrade table as aligned plain text or Markdown."""
    header = ["item", "before", "after", "change"]
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|---|---|---|---|"]
        lines += ["| " + " | ".join(_md(c) for c in row) + " |" for row in rows]
        return "\n".join(lines) + "\n"
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    return (
        "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows])
        + "\n"
    )


def upgrade_json(changes: list[Change], rows: list[list[str]], not_covered: dict[str, list[Uncovered]]) -> str:
    """`{"fixes": [...], "brings": [...], "keeps": [...], "pairings": [...], "not_covered": {"from", "to"}}`."""
    payload: dict = {kind: [c.to_json() for c in changes if c.kind == kind] for kind in ("fixes", "brings", "keeps")}
    payload["pairings"] = [
        dict(zip(("pairing", "before", "after", "verdict"), r, strict=True))
        for r in rows
        if r[0].startswith("pairing ")
    ]
    payload["not_covered"] = {side: [u.to_json() for u in items] for side, items in not_covered.items()}
    return json.dumps(payload, indent=2)
