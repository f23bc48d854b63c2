"""One job in one interpreter: what the interpreter has installed, the torchrun launch with per-rank records,
timeouts and the tree kill, per-rank statuses, the `expect` rules, and launch -> classify -> expected outcome
(with repeats).
"""
