"""Quit while a verify or a launch still runs (in its dialog or in the background): say what runs
(task, attempt, child pid, for how long) and let the operator choose: stop it (the core's own stop
path: the running check's or the launched process's group gets SIGTERM, then SIGKILL, and the
attempt ends as the core records it), wait for it with a visible elapsed line, or cancel the
quit. Either way the app quits only once the work ended, so it never sits on a blank screen
waiting for a child nobody sees."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from ..logic.jobs import Job, elapsed_text
from ..widgets.plain import plain
from .base import NexusDialog
from .dialogs import Display

TICK_SECONDS = 0.25
STOP_WORDS = (
    "Stop sends SIGTERM to the running check's or launched process's group through the core, then "
    "SIGKILL after the grace: a launch's receipt then says supervisor-interrupted, a verification ends "
    "ambiguous (never passed), its acceptance becomes 'rejected' and the round counts toward the "
    "restart limit."
)


class QuitScreen(NexusDialog[None]):
    """Shown by the app's quit (Ctrl+Q, q, the palette's Quit) while long work runs."""

    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape", "cancel_quit", "Cancel", show=False),
        Binding("s", "stop_then_quit", "Stop and quit", show=False),
        Binding("w", "wait_then_quit", "Wait and quit", show=False),
    ]

    def __init__(
        self, running: list[Job], *, clock: Callable[[], float] = time.monotonic, display: Display | None = None
    ) -> None:
        super().__init__(classes="destructive")
        self.running = running
        self.clock = clock
        self.shown_text = display or (lambda text: text)
        self.waiting_since: float | None = None  # set once stop or wait was chosen
        self.stopping = False

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(plain("Quit: work is still running"), id="dialog-title")
            yield Static(self._running_text(), id="quit-running", classes="statement")
            yield Static(plain(STOP_WORDS), id="quit-advice", classes="caution")
            yield Static("", id="quit-waiting")
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button("Wait, then quit (w)", id="wait", variant="primary")
                yield Button("Stop and quit (s)", id="stop", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()
        self.set_interval(TICK_SECONDS, self._tick)

    def _running_text(self) -> Any:
        return plain(self.shown_text("\n".join(f"• {job.running_words()}" for job in self.running)))

    def unfinished(self) -> list[Job]:
        return [job for job in self.running if not job.finished]

    def _tick(self) -> None:
        self.query_one("#quit-running", Static).update(self._running_text())
        if not self.unfinished():
            if self.waiting_since is not None:
                self.app.exit()
                return
            # It ended while the operator was reading: nothing left to stop or wait for.
            self.query_one("#dialog-title", Static).update(plain("Quit: the work has ended"))
            self.query_one("#wait", Button).display = False
            self.query_one("#stop", Button).label = "Quit (s)"
            return
        if self.waiting_since is None:
            return
        verb = "Stopping" if self.stopping else "Waiting for the work to end"
        waited = elapsed_text(self.clock() - self.waiting_since)
        self.query_one("#quit-waiting", Static).update(
            plain(f"{verb}: {waited} so far; the dashboard quits when it ends.")
        )

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "cancel":
            self.action_cancel_quit()
        elif event.button.id == "wait":
            self.action_wait_then_quit()
        elif event.button.id == "stop":
            self.action_stop_then_quit()

    def action_cancel_quit(self) -> None:
        self.dismiss(None)

    def action_wait_then_quit(self) -> None:
        if self.waiting_since is None:
            self.waiting_since = self.clock()
        self.query_one("#wait", Button).disabled = True
        self._tick()

    def action_stop_then_quit(self) -> None:
        self.stopping = True
        for job in self.unfinished():
            job.request_stop()
        for button in ("#wait", "#stop"):
            self.query_one(button, Button).disabled = True
        self.action_wait_then_quit()
