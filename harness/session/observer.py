"""What watches a run: the `Observer` every entry point hands the session pipeline (the store's recorder, the
progress display, the collectors of JSON output). Apart from harness/session/pipeline.py on purpose: a display that
observes runs (harness/output/progress.py) imports this, never the pipeline that launches them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from harness.model.job import Job
    from harness.model.result import Result


class Observer:
    """Something that watches a run; every method does nothing unless overridden."""

    def run_started(self, jobs: list[Job]) -> None:
        """Called once with every planned job, before the first one runs."""

    def job_started(self, job: Job) -> None:
        """Called when a job is taken up (before its result is looked up, its environment made or it is launched)."""

    def result_ready(self, job: Job, result: Result, reused: bool) -> None:
        """Called once per job as soon as its result is known; `reused` when it came from an earlier run."""
