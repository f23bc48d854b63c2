"""The live progress display of long commands, as an observer of the run (harness/session/pipeline.py)."""

from __future__ import annotations

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Column
from rich.text import Text

from harness.model.job import Job
from harness.model.result import Result
from harness.session.observer import Observer


def progress_bar(label: str, console: Console, transient: bool = False, disable: bool = False) -> Progress:
    """The live progress display every long command shows: label, bar, done/total, elapsed, then what runs (as
    plain text, cut to the line: `[cpu-1]` is no markup)."""
    return Progress(
        TextColumn(f"[bold]{label}", table_column=Column(no_wrap=True)),
        BarColumn(bar_width=20),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        _Description(),
        console=console,
        transient=transient,
        disable=disable,
    )


class _Description(ProgressColumn):
    """The task's description as plain text on one line, cut with an ellipsis: the column the others leave room
    for (the only one rich narrows first, being the widest that may wrap)."""

    def __init__(self) -> None:
        super().__init__(table_column=Column(no_wrap=False))

    def render(self, task: Task) -> Text:
        return Text(task.description, no_wrap=True, overflow="ellipsis")


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


class Running(Observer):
    """What a run has taken up and what has finished, job by job: what the progress display names and what an
    interrupted run reports (`interrupted_text`)."""

    def __init__(self) -> None:
        self.planned = 0
        self.running: dict[int, Job] = {}  # by id(job), in the order taken up
        self.finished: list[tuple[Job, Result, bool]] = []

    def run_started(self, jobs: list[Job]) -> None:
        self.planned += len(jobs)

    def job_started(self, job: Job) -> None:
        self.running[id(job)] = job

    def result_ready(self, job: Job, result: Result, reused: bool) -> None:
        self.running.pop(id(job), None)
        self.finished.append((job, result, reused))


def job_name(job: Job) -> str:
    """`case::variant[cpu-2]`, with `@cell` for a matrix cell."""
    return job.id + (f" @{job.cell_name}" if job.cell is not None else "")


def _some(names: list[str], most: int = 3) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


class ProgressDisplay(Running):
    """Advances `progress` by one for every result, reused ones included; names the jobs running now (the last
    finished one, with its outcome, while none is)."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress
        self.task: TaskID | None = None
        self.last = ""

    def run_started(self, jobs: list[Job]) -> None:
        super().run_started(jobs)
        cells = {job.cell_name for job in jobs if job.cell is not None}
        self.task = self.progress.add_task(f"{len(cells)} cells" if cells else "", total=len(jobs))

    def job_started(self, job: Job) -> None:
        super().job_started(job)
        self._show(0)

    def result_ready(self, job: Job, result: Result, reused: bool) -> None:
        super().result_ready(job, result, reused)
        self.last = f"{job_name(job)}: {'recorded' if reused else result.outcome.value}"
        self._show(1)

    def _show(self, advance: int) -> None:
        if self.task is None:
            return
        names = [job_name(job) for job in self.running.values()]
        self.progress.update(
            self.task, advance=advance, description=f"{len(names)} running: {_some(names)}" if names else self.last
        )


def interrupted_text(running: Running, run_id: str, resume: str) -> str:
    """What an interrupted run says: what finished (and is recorded), what was killed in flight, what never
    started, the run's id and the command that resumes it (recorded results are reused, not launched again)."""
    done = [f"{job_name(job)} {result.outcome.value}" for job, result, _ in running.finished]
    killed = [job_name(job) for job in running.running.values()]
    waiting = running.planned - len(done) - len(killed)
    lines = [
        f"stopped: {len(done)} of {running.planned} job(s) finished" + (f": {_some(done, 5)}" if done else ""),
        f"killed in flight: {_some(killed, 5)}" if killed else "no launch was in flight",
        f"not started: {waiting}",
    ]
    if run_id:
        lines.append(f"run {run_id} is marked interrupted; what finished is recorded in it")
    lines.append(f"resume with: {resume}   (what finished is reused, not launched again)")
    return "\n".join(lines)
