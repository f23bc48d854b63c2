"""Reading results, never launching: where outcomes change along a version axis (`transitions`), what changed
between runs (`compare`), what lies between two versions (`precision`), why a version could not say (`undecided`),
expect rules derived from boundaries (`expect`), the compatibility table's verdicts (`compat`), audits and OSV
advisories (`audit`, `osv`) and the commands that reproduce a result (`reproduce`), and the case linter, a case
folder read against cases/README.md (`caselint`). Nothing here imports what launches (tests/test_layout.py)."""
