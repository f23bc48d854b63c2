"""Makes `pytest` run the bugmatrix cases: each cases/<id>/case.yaml becomes items (see harness/pytest_plugin.py)."""

pytest_plugins = ["harness.pytest_plugin"]
