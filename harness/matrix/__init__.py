"""`matrix.yaml`: its schema, cells from groups and couplings, exact versions and time travel, releases and
upload times from the index, git sources, and one uv environment per resolved cell (built once per run, within a
disk budget).
"""
