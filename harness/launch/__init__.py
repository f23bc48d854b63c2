"""One job, launched and judged: the interpreter an environment provides (`interpreter`), the torchrun launch with
its rank wrapper, time bounds and stack dumps (`torchrun`, `rank_wrapper`, `execute`), and what the ranks' logs and
exit codes say (`logscan`, `classify`), against the case's expect rules (harness/model/expectations.py); killing a
process tree and running a command under a bound that does (`processes`: launches no job, as `interpreter`, which
`analysis` reads). Above `model` only."""
