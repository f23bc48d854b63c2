"""The pages' generated tables: the cases table and the compatibility tables, made from the committed record
alone (never a local store), between markers a page keeps: `<!-- NAME: ... -->` ... `<!-- /NAME -->`.

`bugmatrix record tables` writes them, `--check` and tests/test_record.py fail when a page differs, and the
nightly's record pull request regenerates them with the record it carries.
"""

from __future__ import annotations

import re
from pathlib import Path

REGION = re.compile(r"(<!-- (?P<name>cases-table|compat-tables)[^>]*-->\n)(?P<body>.*?)(<!-- /(?P=name) -->)",
                    re.DOTALL)


def generated_tables(record_root: Path, cases_dir: Path, matrix_path: Path) -> dict[str, str]:
    """The page regions the record generates: `cases-table` (`report --format cases`) and `compat-tables`
    (`compat --no-probe --format markdown`), from the record alone (never a local store)."""
    from harness.analysis import compat
    from harness.matrix.expand import load_matrix
    from harness.model.case import discover
    from harness.output import compat as view
    from harness.output import reports
    from harness.session.readers import open_reader

    cases = discover(cases_dir)[0]
    store = open_reader(None, False, cases, record_root)
    matrix = load_matrix(matrix_path) if matrix_path.is_file() else None
    report = reports.report_for(store.latest(), cases_dir, [c.name for c in matrix.cells] if matrix else [], matrix)
    return {"cases-table": reports.to_cases_markdown(report),
            "compat-tables": view.to_markdown(compat.measured(store), None)}


def regenerate(page: str, tables: dict[str, str]) -> str:
    """`page` with each generated region's body replaced by its table."""
    return REGION.sub(lambda m: m.group(1) + tables[m.group("name")] + m.group(4), page)


def regenerate_page(page: Path, record_root: Path, cases_dir: Path, matrix_path: Path) -> bool:
    """Rewrite the generated regions of `page` from the record; True when the page changed (False also when the
    page has no generated region)."""
    text = page.read_text(encoding="utf-8")
    if not REGION.search(text):
        return False
    new = regenerate(text, generated_tables(record_root, cases_dir, matrix_path))
    if new == text:
        return False
    page.write_text(new, encoding="utf-8")
    return True
