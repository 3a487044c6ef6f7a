"""Running one long action (verify, launch) as a :class:`~nexus_tui.logic.jobs.Job`: the core call
in a thread worker that feeds the job its progress events and its end, and a :class:`JobChanged`
message to the app whenever there is something new (at most one waiting per job), so the views
that show the job (its progress dialog, the jobs view, the task row) catch up on the UI thread.

The work belongs to the app, not to a screen: closing the progress dialog (Background, Esc)
leaves it running."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.message import Message

from nexus_core.errors import explained

from .logic import operations
from .logic.jobs import Job, Jobs, JobTarget
from .logic.operations import ActionLog, Preview


class JobChanged(Message):
    """``job`` has news (progress, output or its end): its views read it (``Job`` is locked)."""

    def __init__(self, job: Job) -> None:
        super().__init__()
        self.job = job


def target_of(preview: Preview) -> JobTarget:
    return JobTarget(
        action=preview.action,
        project=preview.root,
        run_id=preview.run_id or "",
        task_id=preview.task_id or "",
        title=preview.title,
        facts=dict(preview.seen.facts),
    )


def start_job(
    app: App[Any],
    jobs: Jobs,
    preview: Preview,
    values: dict[str, Any],
    log: ActionLog,
    changed: Callable[[Job], None] | None = None,
) -> Job:
    """Add a job for ``preview`` to ``jobs`` and run it in a thread worker of ``app``.

    ``changed`` is called (from the worker) after each change; by default it posts
    :class:`JobChanged` to the app when none is waiting for this job."""
    job = jobs.add(target_of(preview))
    tell = changed or (lambda j: app.post_message(JobChanged(j)) if j.announce() else None)

    def progress(event: dict[str, Any]) -> None:
        job.take(event)
        tell(job)

    def work() -> None:
        # Everything ends as the job's result or error; the app never crashes on it.
        try:
            result = operations.execute(preview, values, log, progress=progress, should_stop=job.stop_requested.is_set)
        except Exception as error:
            job.finish(None, explained(error), "")
        else:
            job.finish(result, None, operations.operation(preview.action).result_words(preview, result))
        tell(job)

    app.run_worker(work, thread=True, group="nexus-jobs", name=f"{preview.action}-job-{job.number}")
    return job
