"""Where jobs run: matrix.yaml and its expansion into cells (`spec`, `expand`, `axes`), the package index and git
sources the cells are resolved against (`index`, `git`, `resolve`), and the uv environments built for them, cached
and evicted under a disk budget (`envcache`, `cellenvs`). Builds environments; launches no case."""
