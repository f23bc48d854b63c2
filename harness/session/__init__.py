"""A run: which jobs (`Selection`, the one object that filters), the pipeline every entry point drives (device ->
resume -> environment -> run -> observers; the store, progress and JSON are observers), cores, the SQLite results
store and its do-nothing twin, and the committed record under `record/` with the local store layered over it.
"""
