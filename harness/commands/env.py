"""`bugmatrix env list|build|prune`: show, build (with progress) or delete the cells' environments.

Exit codes: 0 done, 1 a cell's environment could not be built, 2 an invalid matrix or cell name.
"""

from __future__ import annotations

import argparse

from harness.commands.context import Context
from harness.matrix.basics import MatrixError
from harness.model.exitcode import ExitCode


def add_parser(sub: argparse._SubParsersAction, parents: dict[str, argparse.ArgumentParser]) -> None:
    """Register `env` and its options."""
    p = sub.add_parser("env", help="manage the cells' environments", parents=[parents["--matrix"], parents["--envs"]])
    p.add_argument("action", choices=["list", "build", "prune"])
    p.add_argument("cells", nargs="*", help="cells to build (default: all); prune keeps these (default: none)")
    p.add_argument("--cache", action="store_true", help="prune: also clean torch stacks from uv's cache")


def run(args: argparse.Namespace) -> ExitCode:
    """`env list|build|prune`: show, build (with progress) or delete the cells' environments."""
    from rich.table import Table

    from harness.matrix.envcache import EnvCache, clean_cache, disk_usage
    from harness.matrix.resolve import resolve_cell
    from harness.output.progress import progress_bar
    from harness.output.tables import whole_columns

    ctx = Context(args)
    cache = EnvCache(args.envs)
    printer = ctx.printer
    if args.action == "list":
        table = Table(title=f"environments in {args.envs}")
        for column in ("key", "cell", "versions", "as of", "size"):
            table.add_column(column, overflow="fold")
        rows = [
            [
                str(env["key"]),
                str(env["cell"]),
                " ".join(f"{k}=={v}" for k, v in sorted(env["versions"].items())),  # type: ignore[union-attr]
                str(env["as_of"] or "-"),
                f"{disk_usage(cache.path(str(env['key']))) / (1 << 30):.2f} GiB",
            ]
            for env in cache.list()
        ]
        printer.show(whole_columns(table, rows, {"key", "cell"}))
        return ExitCode.OK
    matrix = ctx.matrix  # an invalid matrix or cell name: MatrixError, one line on stderr, exit 2
    cells = [matrix.cell(n) for n in args.cells] if args.cells else matrix.cells
    if args.action == "prune":
        keep = {resolve_cell(matrix, c).key for c in cells} if args.cells else set()
        removed = cache.prune(keep)
        held = [
            f.name for f in cache.root.iterdir() if f.is_dir() and not f.name.startswith(".") and f.name not in keep
        ]
        printer.show(
            f"removed {len(removed)} environment(s)"
            + (f"; kept {len(held)} in use by another bugmatrix process" if held else "")
        )
        if args.cache:
            printer.show(clean_cache() or "uv cache: nothing to clean")
        return ExitCode.OK
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
