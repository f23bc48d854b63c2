"""Showing what the layers below found, and only that: terminal tables and JSON payloads (`tables`, `payloads`),
the matrix report (`reports`), the compatibility table (`compat`), audits and OSV endpoints (`audit`, `osv`), the
progress display (`progress`), generated page regions (`pages`) and GitHub's job matrix (`github`). Nothing here
imports what launches (tests/test_layout.py)."""
