"""The nouns, importing no other layer: a case and its `case.yaml` schema, a cell and its pins, a job and the
fingerprint a resumed run matches, outcomes and how ranks and repeats combine, a result; and the facts every layer
shares once (item ids, devices, the `fbgemm-gpu` / `fbgemm-gpu-cpu` aliases).
"""
