"""Where and how a workflow's probes launch, as one object (`Probing`) instead of the ten-odd parameters every
probing function used to take: the matrix and the cells' environments the probes run in, the store and run that
record each of them, the cores, the repeats, whether a recorded probe is launched again, who watches, and where the
progress lines go."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.analysis.flaky import Policy
    from harness.matrix.cellenvs import CellEnvironments
    from harness.matrix.expand import Matrix
    from harness.session.contract import Store
    from harness.session.observer import Observer


def _silent(line: str) -> None:
    return None


@dataclass
class Probing:
    """Where probes launch (`matrix`, `envs`), where they are recorded (`store` under `run_id`), and how: `cores` to
    use, each probe launched `repeat` times (disagreement is `flaky`) or, with a flaky `policy` (`--repeat auto`),
    in batches until the boundary holds at its confidence (harness/workflows/search.py `Adaptive`), `redo` to
    launch again what the store holds,
    `launch_mode` (cold or warm), extra `observers` of each result, and `say` for progress lines."""

    matrix: Matrix
    envs: CellEnvironments
    store: Store
    run_id: str = ""
    cores: int = 1
    repeat: int = 1
    policy: Policy | None = None  # adaptive repeats for a flaky case (`--repeat auto`): harness/analysis/flaky.py
    redo: bool = False
    launch_mode: str | None = None  # cold | warm; None: $BUGMATRIX_LAUNCH_MODE, else the default
    observers: Sequence[Observer] = ()
    say: Callable[[str], None] = field(default=_silent)
