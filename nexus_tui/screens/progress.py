"""The progress dialog of one job (verify or launch, ``logic/jobs.py``): "check i of n", the
command, the elapsed time and the events, as the job's worker (the app's, ``job_flow.py``) feeds
them. The work does not belong to this dialog: **Background** (focused first, also Esc and ``b``)
closes it and the work goes on, followed in the task's row and the jobs view (``o`` opens it on
this job's live output). **Stop…** asks first (``screens/stop.py``: what a stop costs); ``q``
opens the quit dialog, as everywhere."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from nexus_core.terminal import terminal_safe

from ..logic.jobs import Job, elapsed_text
from ..widgets.plain import plain
from .base import NexusDialog
from .dialogs import Display
from .stop import ConfirmStop

TICK_SECONDS = 0.5
EVENTS_SHOWN = 14


class ProgressScreen(NexusDialog[None]):
    """Shows one job until the operator closes it; the job runs on either way."""

    DEFAULT_CSS = """
    ProgressScreen #progress-step { text-style: bold; }
    ProgressScreen #progress-command { color: $text-muted; }
    ProgressScreen #progress-events { height: auto; max-height: 16; margin-top: 1; }
    ProgressScreen #progress-result { margin-top: 1; height: auto; }
    ProgressScreen #progress-result.failed { color: $error; }
    ProgressScreen #progress-result.passed { color: $success; }
    ProgressScreen #progress-hint { color: $text-muted; margin-top: 1; }
    """
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape,b", "close", "Background", show=False),
        Binding("o", "output", "Output", show=False),
        Binding("s", "stop", "Stop…", show=False),
        Binding("q", "app.quit", "Quit", show=False),
    ]

    def __init__(self, job: Job, *, display: Display | None = None) -> None:
        super().__init__()
        self.job = job
        self.shown_text = display or (lambda text: text)
        self._shown_finished = False

    # -- what the tests and the app read (the job's)
    @property
    def finished(self) -> bool:
        return self.job.finished

    @property
    def child_pid(self) -> int | None:
        return self.job.child_pid

    @property
    def events(self) -> list[str]:
        return self.job.events()

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(plain(self.shown_text(self.job.target.title)), id="dialog-title")
            yield Static(plain(self.job.step), id="progress-step")
            yield Static("", id="progress-command")
            yield Static(plain(f"Elapsed {elapsed_text(0)}"), id="progress-elapsed")
            yield Static("", id="progress-events")
            yield Static("", id="progress-result")
            yield Static(
                plain("Background (Esc) closes this dialog; the work goes on. J lists it, o shows its output."),
                id="progress-hint",
            )
            with Horizontal(id="dialog-buttons"):
                yield Button("Background (b)", id="close", variant="primary")
                yield Button("Output (o)", id="output")
                yield Button("Stop… (s)", id="stop", variant="warning")

    def on_mount(self) -> None:
        self.query_one("#close", Button).focus()
        self.set_interval(TICK_SECONDS, self.sync)
        self.sync()

    def job_changed(self, job: Job) -> None:
        """The app's word that a job has news (``JobChanged``)."""
        if job is self.job:
            self.sync()

    def sync(self) -> None:
        job = self.job
        self.query_one("#progress-step", Static).update(plain(job.step))
        self.query_one("#progress-command", Static).update(plain(self.shown_text(job.command)))
        self.query_one("#progress-elapsed", Static).update(Text(f"Elapsed {elapsed_text(job.elapsed())}"))
        events = job.events(EVENTS_SHOWN)
        self.query_one("#progress-events", Static).update(plain(self.shown_text("\n".join(events))))
        stop = self.query_one("#stop", Button)
        if job.stop_requested.is_set() and not job.finished:
            stop.label, stop.disabled = "Stopping…", True
        if job.finished and not self._shown_finished:
            self._show_end()

    def _show_end(self) -> None:
        job = self.job
        self._shown_finished = True
        result = self.query_one("#progress-result", Static)
        result.update(plain(self.shown_text(job.words)))
        result.add_class("passed" if job.succeeded else "failed")
        if job.error is not None:
            self.app.notify(terminal_safe(job.error), title=f"{job.action} refused", severity="error", markup=False)
        # The work ended: Stop has nothing left to act on; Close is the harmless button.
        stop = self.query_one("#stop", Button)
        stop.display = False
        self.query_one("#progress-hint", Static).display = False
        close = self.query_one("#close", Button)
        close.label = "Close"
        if self.focused is None or self.focused is stop:
            close.focus()

    # -- buttons and keys
    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "stop":
            self.action_stop()
        elif event.button.id == "close":
            self.action_close()
        elif event.button.id == "output":
            self.action_output()

    def action_stop(self) -> None:
        """Ask first: the confirmation says what a stop costs; its focus starts on Keep running."""
        if self.job.finished or self.job.stop_requested.is_set():
            return

        def answered(stop: bool | None) -> None:
            if stop:
                self.request_stop()

        self.app.push_screen(ConfirmStop(self.job, display=self.shown_text), answered)

    def request_stop(self) -> None:
        if self.job.request_stop():
            self.sync()

    def action_close(self) -> None:
        self.dismiss(None)

    def action_output(self) -> None:
        self.dismiss(None)
        self.app.call_later(self.app.run_action, f"jobs({self.job.number})")
