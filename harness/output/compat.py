"""The compatibility table (harness/analysis/compat.py) shown: terminal, Markdown, an HTML heatmap, JSON; and the
"upgrade A -> B" view.

Each lane is one grid: torch down, the lane's package across (fbgemm-gpu, torchrec, lightning, litgpt); each cell
is one verdict mark (✓ works, R resolver refuses, I fails to import, U fails when used, C hangs or crashes,
? not established, blank: not probed), with its reason (in a footnote in Markdown, a tooltip in HTML).
"""

from __future__ import annotations

import html
import json

from rich.table import Table

from harness.analysis.compat import LANES, Finding, Kind, Probe, Upgrade
from harness.model.version import parse_release

TITLES = {
    "fbgemm": "torch × fbgemm-gpu-cpu (an fbgemm operator called directly)",
    "torchrec": "torch × torchrec (with the fbgemm-gpu-cpu of its minor; a sharded EmbeddingBagCollection lookup)",
    "lightning": "torch × lightning (a one-step Trainer.fit)",
    "litgpt": "torch × litgpt (a tiny GPT forward)",
}
COLOURS = {
    Kind.WORKS: "#4caf50",
    Kind.REFUSED: "#9e9e9e",
    Kind.NO_IMPORT: "#e53935",
    Kind.FAILS_USED: "#fb8c00",
    Kind.CRASH: "#8e24aa",
    Kind.UNKNOWN: "#fdd835",
}
LEGEND = ", ".join(f"{k.mark} {k.value}" for k in Kind) + ", blank: not probed"


def grids(table: list[Probe]) -> dict[str, tuple[list[str], list[str], dict[tuple[str, str], Probe]]]:
    """Per lane with measurements: (torch versions, partner versions, (torch, partner) -> probe)."""
    out = {}
    for lane in LANES:
        probes = [p for p in table if p.lane == lane]
        if not probes:
            continue
        torches = sorted({p.torch for p in probes}, key=parse_release)
        partners = sorted({p.partner for p in probes}, key=parse_release)
        out[lane] = (torches, partners, {(p.torch, p.partner): p for p in probes})
    return out


def to_table(table: list[Probe]) -> list[Table]:
    """One rich table per lane."""
    colour = {
        Kind.WORKS: "green",
        Kind.REFUSED: "dim",
        Kind.NO_IMPORT: "red",
        Kind.FAILS_USED: "yellow",
        Kind.CRASH: "magenta",
        Kind.UNKNOWN: "yellow",
    }
    out = []
    for lane, (torches, partners, cells) in grids(table).items():
        t = Table(title=TITLES[lane], caption=LEGEND if lane == list(grids(table))[-1] else None, min_width=60)
        t.add_column("torch")
        for partner in partners:
            t.add_column(partner, justify="center")
        for torch in torches:
            row = [torch]
            for partner in partners:
                p = cells.get((torch, partner))
                row.append(f"[{colour[p.kind]}]{p.kind.mark}[/]" if p else "")
            t.add_row(*row)
        out.append(t)
    return out


def to_markdown(table: list[Probe], findings: list[Finding] | None = None) -> str:
    """The grids as Markdown tables, each non-working cell numbered with its reason below the grid."""
    parts = []
    for lane, (torches, partners, cells) in grids(table).items():
        notes: dict[str, int] = {}
        lines = [
            f"**{TITLES[lane]}**",
            "",
            "| torch | " + " | ".join(partners) + " |",
            "|---|" + "---|" * len(partners),
        ]
        for torch in torches:
            row = []
            for partner in partners:
                p = cells.get((torch, partner))
                if p is None:
                    row.append("")
                elif p.kind is Kind.WORKS:
                    row.append(p.kind.mark)
                else:
                    n = notes.setdefault(f"{p.kind.value}: {p.reason}", len(notes) + 1)
                    row.append(f"{p.kind.mark}<sup>{n}</sup>")
            lines.append(f"| {torch} | " + " | ".join(row) + " |")
        lines += ["", LEGEND + "."]
        if notes:
            lines.append("")
            lines += [f"{n}. {_md(text)}" for text, n in notes.items()]
        parts.append("\n".join(lines))
    if findings is not None:
        parts.append(findings_text(findings))
    return "\n\n".join(parts) + "\n"


def to_docs(table: list[Probe]) -> str:
    """The grids for the documentation (docs/compat.md): coloured HTML tables (each verdict a CSS class,
    `compat-works` ..., styled by docs/stylesheets/extra.css), the reason of each cell in its tooltip and numbered
    below the grid, as in Markdown; the marks and numbers read the same where the colours are not shown (GitHub)."""
    parts = []
    for lane, (torches, partners, cells) in grids(table).items():
        notes: dict[str, int] = {}
        rows = []
        for torch in torches:
            tds = []
            for partner in partners:
                p = cells.get((torch, partner))
                if p is None:
                    tds.append("<td></td>")
                    continue
                note = "" if p.kind is Kind.WORKS else f"{p.kind.value}: {p.reason}"
                n = notes.setdefault(note, len(notes) + 1) if note else 0
                tip = html.escape(f"torch {torch} + {partner}: {note or p.kind.value}")
                tds.append(
                    f'<td class="{_css(p.kind)}" title="{tip}">{p.kind.mark}'
                    + (f"<sup>{n}</sup>" if n else "")
                    + "</td>"
                )
            rows.append(f"<tr><th>{html.escape(torch)}</th>{''.join(tds)}</tr>")
        head = "".join(f"<th>{html.escape(p)}</th>" for p in partners)
        lines = [
            f"**{TITLES[lane]}**",
            "",
            f'<table class="compat-grid"><tr><th>torch</th>{head}</tr>',
            *rows,
            "</table>",
            "",
            " ".join(f'<span class="compat-key {_css(k)}">{k.mark}</span> {k.value}' for k in Kind)
            + ", blank: not probed.",
        ]
        if notes:
            lines.append("")
            lines += [f"{n}. {_md(text)}" for text, n in notes.items()]
        parts.append("\n".join(lines))
    return "\n\n".join(parts) + "\n"


def _css(kind: Kind) -> str:
    return "compat-" + kind.name.lower().replace("_", "-")


def findings_text(findings: list[Finding]) -> str:
    """`--check`'s verdict: the rows agree with the measurement, or each disagreement on a line."""
    if not findings:
        return "matrix.yaml's pairing rows agree with the measured table."
    return "\n".join(f"- {f.kind}: {f.text}" for f in findings)


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "&lt;")


def to_html(table: list[Probe]) -> str:
    """A self-contained page: one heatmap per lane, the reason of each cell in its tooltip and below the grid."""
    body = []
    for lane, (torches, partners, cells) in grids(table).items():
        head = "".join(f"<th>{html.escape(p)}</th>" for p in partners)
        rows = []
        reasons = []
        for torch in torches:
            tds = []
            for partner in partners:
                p = cells.get((torch, partner))
                if p is None:
                    tds.append("<td></td>")
                    continue
                tip = html.escape(f"torch {torch} + {partner}: {p.kind.value}: {p.reason}")
                tds.append(f'<td style="background:{COLOURS[p.kind]}" title="{tip}">{p.kind.mark}</td>')
                if p.kind is not Kind.WORKS:
                    reasons.append(
                        f"<li>torch {html.escape(torch)} + {html.escape(partner)}: "
                        f"<b>{html.escape(p.kind.value)}</b>: {html.escape(p.reason)}</li>"
                    )
            rows.append(f"<tr><th>{html.escape(torch)}</th>{''.join(tds)}</tr>")
        body.append(
            f"<h2>{html.escape(TITLES[lane])}</h2><table><tr><th>torch</th>{head}</tr>{''.join(rows)}"
            f"</table><details><summary>reasons</summary><ul>{''.join(reasons)}</ul></details>"
        )
    legend = " ".join(
        f'<span style="background:{COLOURS[k]};padding:0 .4em">{k.mark} {html.escape(k.value)}</span>' for k in Kind
    )
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>bugmatrix compatibility table</title><style>"
        "body{font-family:sans-serif}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
        "padding:.2em .5em;text-align:center}</style></head><body><h1>Measured compatibility</h1>"
        f"<p>{legend}</p>{''.join(body)}</body></html>\n"
    )


def to_json(table: list[Probe], findings: list[Finding] | None = None) -> str:
    """Every probe (lane, pins, verdict, reason, cell) and, when checked, the findings."""
    payload: dict[str, object] = {
        "probes": [
            {
                "lane": p.lane,
                "pins": p.pins,
                "verdict": p.kind.value,
                "reason": p.reason,
                "cell": p.cell,
                "repeats": p.repeats,
            }
            for p in table
        ]
    }
    if findings is not None:
        payload["findings"] = [{"kind": f.kind, "text": f.text} for f in findings]
    return json.dumps(payload, indent=2) + "\n"


def rows_yaml(rows: dict[str, list[dict[str, str]]]) -> str:
    """Generated pairing rows, as the `couplings` entries of matrix.yaml."""
    lines = []
    for name, entries in rows.items():
        lines.append(f"  - name: {name}\n    rows:")
        lines += ["      - {" + ", ".join(f'{p}: "{s}"' for p, s in row.items()) + "}" for row in entries]
    return "couplings:\n" + "\n".join(lines) + "\n"


def upgrade_text(up: Upgrade, markdown: bool = False) -> str:
    """The upgrade view: each pairing before and after, then the catalogue cases whose outcome changes."""

    def side(p: Probe | None) -> str:
        return "not measured" if p is None else p.kind.value + ("" if p.kind is Kind.WORKS else f" ({p.reason})")

    pins = (", ".join(f"{k} {v}" for k, v in up.before.items()), ", ".join(f"{k} {v}" for k, v in up.after.items()))
    lines = [f"upgrade {pins[0]} -> {pins[1]}", ""]
    if markdown:
        lines += ["| pairing | before | after |", "|---|---|---|"]
    for lane, a, b, pa, pb in up.pairings:
        name = LANES[lane].packages[-1]
        what = (f"torch {up.before.get('torch')} + {name} {pa}", f"torch {up.after.get('torch')} + {name} {pb}")
        if markdown:
            lines.append(f"| {lane} | {_md(what[0])}: {_md(side(a))} | {_md(what[1])}: {_md(side(b))} |")
        else:
            lines.append(f"{lane:9} {what[0]}: {side(a)}  ->  {what[1]}: {side(b)}")
    lines.append("")
    cells_a, cells_b = up.cells
    lines.append(
        f"catalogue cells matching before: {', '.join(cells_a) or 'none'}; after: {', '.join(cells_b) or 'none'}"
    )
    if not up.changes:
        lines.append(
            "no catalogue case changes outcome between them"
            if cells_a and cells_b
            else "no case comparison: the store has no results in cells matching both sets"
        )
    for c in up.changes:
        lines.append(f"{'- ' if markdown else '  '}{c.item}: {c.before} -> {c.after}")
    return "\n".join(lines) + "\n"
