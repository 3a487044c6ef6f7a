"""Stop a running verify or launch? The confirmation says what a stop costs in the core's terms
(``logic/jobs.stop_cost``: the signals, the verification's or receipt's end, the restart limit
or the attempt budget) and starts with the focus on **Keep running**: an Enter never stops."""

from __future__ import annotations

from typing import Any, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Static

from ..logic.jobs import Job, stop_cost
from ..widgets.plain import plain
from .base import DialogBody, ErrorLine, NexusDialog
from .dialogs import Display, bullet_lines


class ConfirmStop(NexusDialog[bool]):
    """Dismisses True only on **Stop it**; Esc and Keep running leave the work running."""

    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "keep", "Keep running", show=False)]

    def __init__(self, job: Job, *, display: Display | None = None) -> None:
        super().__init__(classes="destructive")
        self.job = job
        self.shown_text = display or (lambda text: text)

    def compose(self) -> ComposeResult:
        target = self.job.target
        with Vertical(id="dialog"):
            yield Static(
                plain(self.shown_text(f"Stop the {target.action} of {target.run_id}/{target.task_id}?")),
                id="dialog-title",
            )
            with DialogBody(id="dialog-body"):
                yield Static(bullet_lines(stop_cost(target), self.shown_text), classes="statement")
                yield Static(
                    plain("Keep running lets it end by itself; Background in its dialog hides it meanwhile."),
                    classes="caution",
                )
            yield ErrorLine("", id="dialog-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Keep running", id="cancel", variant="primary")
                yield Button("Stop it", id="confirm", variant="error")

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#confirm")
    def _stop(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def _keep(self, event: Button.Pressed) -> None:
        event.stop()
        self.action_keep()

    def action_keep(self) -> None:
        self.dismiss(False)
