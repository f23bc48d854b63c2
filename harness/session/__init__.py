"""A run: which jobs (`plan`), the one pipeline every entry point drives and its observers (`pipeline`,
`observer`, `scheduler`), and where results go and are read from: one results contract and the current-result rule
(`contract`), the SQLite store and its null twin (`store`), the committed record and the readers layered over it
(`record`, `readers`, `folding`)."""
