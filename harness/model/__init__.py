"""The data every layer above speaks, with no behaviour that reaches outside the process: a case and its schema
(case.yaml), a cell and its pins, a job and its fingerprint, an outcome and a result, the requirement pins an audit
reads, the scaffold of a new case, what an interpreter has installed (`environment`) and the expect rules evaluated
against it (`expectations`), the one error a command ends with (`errors`) and `ExitCode`. The lowest layer: it
imports no other."""
