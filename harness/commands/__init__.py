"""The commands of `bugmatrix`, one module each, above every other layer: each registers its options
(`add_parser`) and carries them out (`cmd_*`), driving the layers below; `harness/cli.py` dispatches to them."""

from __future__ import annotations


class UsageError(Exception):
    """A command line that cannot be carried out as asked; one line, exit 2."""
