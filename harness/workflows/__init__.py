"""What launches and writes on the user's behalf, above the reading-only analysis and the renderers: the bisection
(`bisect`, `datebisect`, `search`), the narrowing of every interval boundary (`narrow`), the compatibility walk
(`compat`) and the nightly's steps (`nightly`). Each drives the session pipeline (harness/session/pipeline.py)
through one `Probing` (harness/workflows/probing.py) and records every probe in the store; nothing below this layer
imports it (tests/test_layout.py)."""
