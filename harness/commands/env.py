"""`bugmatrix env list|build|prune`: show, build (with progress) or delete the cells' environments.

Exit codes: 0 done, 1 a cell's environment could not be built, 2 an invalid matrix or cell name.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

from harness.commands.context import Context
from harness.matrix.basics import MatrixError
from harness.model.exitcode import ExitCode

if TYPE_CHECKING:
    from harness.matrix.envcache import EnvCache
    from harness.matrix.expand import Matrix
    from harness.model.cell import Cell
    from harness.output.printer import Printer


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `env` and its options."""
    p = sub.add_parser("env", help="manage the cells' environments", parents=[parents["--matrix"], parents["--envs"]])
    p.add_argument("action", choices=["list", "build", "prune"])
    p.add_argument("cells", nargs="*", help="cells to build (default: all); prune keeps these (default: none)")
    p.add_argument("--cache", action="store_true", help="prune: also clean torch stacks from uv's cache")


@dataclass(frozen=True)
class EnvRequest:
    """What `env` is asked: the action (list, build, prune), the cells it builds or prune keeps (none: all for a
    build, none kept for a prune), and whether a prune also cleans uv's cache."""

    action: str
    cells: tuple[str, ...]
    cache: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> EnvRequest:
        """The request `args` make."""
        return cls(args.action, tuple(args.cells), args.cache)


def run(args: argparse.Namespace) -> ExitCode:
    """`env list|build|prune`: show, build (with progress) or delete the cells' environments."""
    return execute(EnvRequest.from_args(args), Context(args))


def execute(request: EnvRequest, ctx: Context) -> ExitCode:
    """Carry out the request's action on the environments under --envs."""
    from harness.matrix.envcache import EnvCache

    cache = EnvCache(ctx.args.envs)
    if request.action == "list":
        return _list(ctx, cache)
    matrix = ctx.matrix  # an invalid matrix or cell name: MatrixError, one line on stderr, exit 2
    cells = [matrix.cell(n) for n in request.cells] if request.cells else matrix.cells
    if request.action == "prune":
        return _prune(request, ctx.printer, cache, matrix, cells)
    return _build(ctx.printer, cache, matrix, cells)


def _list(ctx: Context, cache: EnvCache) -> ExitCode:
    """The table of the environments in the cache: key, cell, versions, date, size."""
    from rich.table import Table

    from harness.matrix.envcache import disk_usage
    from harness.output.tables import whole_columns

    table = Table(title=f"environments in {ctx.args.envs}")
    for column in ("key", "cell", "versions", "as of", "size"):
        table.add_column(column, overflow="fold")
    rows = [
        [
            str(env["key"]),
            str(env["cell"]),
            " ".join(f"{k}=={v}" for k, v in sorted(env["versions"].items())),
            str(env["as_of"] or "-"),
            f"{disk_usage(cache.path(str(env['key']))) / (1 << 30):.2f} GiB",
        ]
        for env in cache.list()
    ]
    ctx.printer.show(whole_columns(table, rows, {"key", "cell"}))
    return ExitCode.OK


def _prune(request: EnvRequest, printer: Printer, cache: EnvCache, matrix: Matrix, cells: list[Cell]) -> ExitCode:
    """Delete every environment but those of the cells named (those another process holds are kept and counted)."""
    from harness.matrix.envcache import clean_cache
    from harness.matrix.resolve import resolve_cell

    keep = {resolve_cell(matrix, c).key for c in cells} if request.cells else set()
    removed = cache.prune(keep)
    held = [f.name for f in cache.root.iterdir() if f.is_dir() and not f.name.startswith(".") and f.name not in keep]
    printer.show(
        f"removed {len(removed)} environment(s)"
        + (f"; kept {len(held)} in use by another bugmatrix process" if held else "")
    )
    if request.cache:
        printer.show(clean_cache() or "uv cache: nothing to clean")
    return ExitCode.OK


def _build(printer: Printer, cache: EnvCache, matrix: Matrix, cells: list[Cell]) -> ExitCode:
    """Build (or reuse) each cell's environment, with progress; 1 when one could not be built."""
    from harness.matrix.resolve import resolve_cell
    from harness.output.progress import progress_bar

    failed = 0
    with progress_bar("building", printer.out) as progress:
        task = progress.add_task("", total=len(cells))
        for cell in cells:
            progress.update(task, description=cell.name)
            try:
                status = cache.build(resolve_cell(matrix, cell))
            except MatrixError as exc:
                status = None
                progress.console.print(f"[yellow]infra[/] {cell.name}: {exc}", soft_wrap=True)
            if status is not None:
                line = "reused" if status.reused else f"built in {status.seconds:.1f}s"
                if status.ok:
                    progress.console.print(f"[green]ok[/] {cell.name}: {line} ({status.key})")
                else:
                    progress.console.print(f"[yellow]infra[/] {cell.name}: {status.error}", soft_wrap=True)
            failed += status is None or not status.ok
            progress.advance(task)
    return ExitCode.FAILED if failed else ExitCode.OK
