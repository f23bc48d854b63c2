"""The live progress display of long commands, as an observer of the run (harness/session/pipeline.py)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from harness.model.job import Job
from harness.model.result import Result
from harness.session.observer import Observer


def progress_bar(label: str, console: Console, transient: bool = False, disable: bool = False) -> Progress:
    """The live progress display every long command shows: label, bar, done/total, elapsed, current item."""
    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.description}"),
        console=console,
        transient=transient,
        disable=disable,
    )


class LaunchLines(Observer):
    """One line per finished job on `console` (stderr), for logs and pipes where a live bar shows nothing:
    `[3/40] case::variant[cpu-2] cell=local reproduced (expected reproduced) 12.3s`."""

    def __init__(self, console: Console) -> None:
        self.console, self.done, self.total = console, 0, 0

    def run_started(self, jobs: list[Job]) -> None:
        self.total += len(jobs)  # a walk runs one batch per torch through the same observer: counted across them

    def result_ready(self, job: Job, result: Result, reused: bool) -> None:
        self.done += 1
        took = "recorded earlier" if reused else f"{result.duration_s:.1f}s" if result.launched else "not launched"
        expected = f" (expected {result.expected.value})" if result.expected else ""
        self.console.print(
            f"[{self.done}/{self.total}] {result.item_id} cell={job.cell_name} {result.outcome.value}{expected} {took}",
            soft_wrap=True,
            markup=False,
            highlight=False,
        )


class ProgressDisplay(Observer):
    """Advances `progress` by one for every result, reused ones included, naming the item and its outcome."""

    def __init__(self, progress: Progress) -> None:
        self.progress = progress
        self.task: TaskID | None = None

    def run_started(self, jobs: list[Job]) -> None:
        cells = {job.cell_name for job in jobs if job.cell is not None}
        self.task = self.progress.add_task(f"{len(cells)} cells" if cells else "", total=len(jobs))

    def result_ready(self, job: Job, result: Result, reused: bool) -> None:
        if self.task is None:
            return
        where = f"{job.cell_name}: " if job.cell is not None else ""
        self.progress.update(
            self.task,
            advance=1,
            description=f"{where}{result.item_id}: {'recorded' if reused else result.outcome.value}",
        )
