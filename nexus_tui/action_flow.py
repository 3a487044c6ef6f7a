"""The flow of one dashboard action: preview -> confirmation dialog -> core call in a worker
-> notification and rescan; a long one (verify, launch) becomes a job (``job_flow.py``) shown in
its progress dialog, which can send it to the background; its end is notified. And of guided
recovery: situations -> recovery screen -> the next step's dialog. The app owns one
``ActionFlow``; tests drive the same object.

Workers never touch widgets: they hand results back with ``call_from_thread``. Every error
(the core's NexusError, a refusal of the dashboard, an OSError, anything unexpected) ends as
an error notification with the exact message; the app never crashes on it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual.app import App
from textual.notifications import SeverityLevel

from nexus_core.errors import explained
from nexus_core.terminal import terminal_safe

from .actions import READ_ONLY_REFUSAL
from .job_flow import start_job
from .logic import operations, recovery
from .logic.jobs import Job, Jobs
from .logic.operations import ActionLog, Place, Preview
from .logic.recovery import Situation
from .screens.dialogs import Display, dialog_for
from .screens.jobs import JobsScreen
from .screens.progress import ProgressScreen
from .screens.recovery import RecoveryListScreen, RecoveryScreen


class ActionFlow:
    def __init__(
        self,
        app: App[Any],
        *,
        read_only: Callable[[], bool] = lambda: False,
        on_done: Callable[[], None] = lambda: None,
        display: Display | None = None,
        jobs: Jobs | None = None,
    ) -> None:
        self.app = app
        self.read_only = read_only
        self.on_done = on_done
        self.display = display
        self.jobs = jobs if jobs is not None else Jobs()
        self.log = ActionLog()
        self.last_result: dict[str, Any] | None = None
        self.last_error: str | None = None
        self.ended = 0  # core calls that have ended, done or refused, with their notification (tests wait on it)

    # -- actions
    def open(self, action: str, directory: str | Place, run_id: str | None = None, task_id: str | None = None) -> None:
        """Open the confirmation dialog of ``action`` for this target (from the core's state, of a
        project directory or of a place: a remote project)."""
        if self.read_only():
            # The registry's gate already hides every mutating action; this is the backstop.
            self.app.notify(READ_ONLY_REFUSAL, severity="error", markup=False)
            return
        # Reading and validating the run file is file I/O: a worker thread does it, never the UI.
        self.app.run_worker(
            lambda: self._prepare(action, directory, run_id, task_id),
            thread=True,
            group="nexus-preview",
            name=f"preview-{action}",
        )

    def _prepare(self, action: str, directory: str | Place, run_id: str | None, task_id: str | None) -> None:
        try:
            preview = operations.preview(directory, action, run_id, task_id)
        except Exception as error:
            self.app.call_from_thread(self._failed, action, explained(error))
            return
        self.app.call_from_thread(self._show_dialog, preview)

    def _show_dialog(self, preview: Preview) -> None:
        self.app.push_screen(dialog_for(preview, self.display), callback=lambda values: self.confirmed(preview, values))

    def confirmed(self, preview: Preview, values: dict[str, Any] | None) -> None:
        if values is None:
            return  # Cancel: nothing was called, nothing changed.
        if self.read_only():
            self.app.notify(READ_ONLY_REFUSAL, severity="error", markup=False)
            return
        if preview.action in operations.LONG_ACTIONS:
            job = start_job(self.app, self.jobs, preview, values, self.log)
            self.app.push_screen(ProgressScreen(job, display=self.display))
            return
        self.app.run_worker(
            lambda: self._execute(preview, values), thread=True, group="nexus-actions", name=preview.action
        )

    def _execute(self, preview: Preview, values: dict[str, Any]) -> None:
        # A worker thread: only core calls here; the UI is updated through call_from_thread.
        try:
            result = operations.execute(preview, values, self.log)
        except Exception as error:
            self.app.call_from_thread(self._failed, preview.action, explained(error))
        else:
            words = self.log.entries[-1].result if self.log.entries else "done"
            self.app.call_from_thread(self._succeeded, preview.action, result, words)
        finally:
            self.app.call_from_thread(self._ended)

    def _ended(self) -> None:
        self.ended += 1
        self.on_done()

    def _succeeded(self, action: str, result: dict[str, Any], words: str) -> None:
        self.last_result, self.last_error = result, None
        self.app.notify(terminal_safe(words), title=f"{action} done", markup=False)

    def _failed(self, action: str, message: str) -> None:
        self.last_error = message
        self.app.notify(terminal_safe(message), title=f"{action} refused", severity="error", markup=False)

    def job_changed(self, job: Job) -> None:
        """On the UI thread (the app's ``JobChanged``): the job's views catch up; once it has
        ended, its end is notified (unless its dialog is the screen shown) and the project rescanned."""
        job.heard()
        for screen in self.app.screen_stack:
            if isinstance(screen, ProgressScreen | JobsScreen):
                screen.job_changed(job)
        if not job.report_once():
            return
        self.last_result, self.last_error = job.result, job.error
        watched = isinstance(self.app.screen, ProgressScreen) and self.app.screen.job is job
        if not watched:
            severity: SeverityLevel = (
                "information" if job.succeeded else "error" if job.error is not None else "warning"
            )
            self.app.notify(
                terminal_safe(f"{job.label}: {job.state()}. {job.words}"),
                title=f"{job.action} finished",
                severity=severity,
                markup=False,
            )
        self.on_done()

    def open_fresh_run(self, directory: str, advice: recovery.FreshRun) -> None:
        """Confirm, then create a fresh run from the old run's recovered plan."""
        if self.read_only():
            self.app.notify(READ_ONLY_REFUSAL, severity="error", markup=False)
            return
        if advice.plan is None:
            self._failed("create", f"The plan cannot be recovered: {advice.plan_problem}.")
            return
        preview = operations.preview_fresh_run(
            directory, advice.old_run_id, advice.new_run_id, advice.plan, advice.create_problem
        )
        self._show_dialog(preview)

    # -- guided recovery
    def open_recovery(self, directory: str, run_id: str | None = None, task_id: str | None = None) -> None:
        """The situations of the project (or of one run/task) in a list, or the only one directly.

        Classifying hashes scopes and resources, so it runs in a worker thread."""
        self.app.run_worker(
            lambda: self._classify(directory, run_id, task_id), thread=True, group="nexus-recovery", name="recovery"
        )

    def _classify(self, directory: str, run_id: str | None, task_id: str | None) -> None:
        try:
            if run_id is None:
                situations = recovery.classify_project(directory)
            else:
                situations = recovery.situations_for(directory, run_id, task_id)
        except Exception as error:
            self.app.call_from_thread(self._failed, "recovery", explained(error))
            return
        self.app.call_from_thread(self._show_situations, directory, situations, task_id)

    def _show_situations(self, directory: str, situations: list[Situation], task_id: str | None) -> None:
        own = [situation for situation in situations if task_id is not None and situation.task_id == task_id]
        if len(own) == 1:
            # Asked for one task (the inbox's jump): its situation directly, not the list with the
            # project's lock situations around it.
            self.open_situation(directory, own[0])
            return
        self.app.push_screen(
            RecoveryListScreen(situations, self.display),
            callback=lambda chosen: self.open_situation(directory, chosen) if chosen is not None else None,
        )

    def open_situation(self, directory: str, situation: Situation) -> None:
        def next_step(action: str | None) -> None:
            if action == "create" and situation.fresh_run is not None:
                self.open_fresh_run(directory, situation.fresh_run)
            elif action is not None:
                self.open(action, directory, situation.run_id, situation.task_id)

        self.app.push_screen(
            RecoveryScreen(situation, read_only=self.read_only(), display=self.display), callback=next_step
        )
