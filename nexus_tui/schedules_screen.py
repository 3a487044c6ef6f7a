"""The schedules panel of one project (``w``): what ``nexus schedule list`` shows, live, and
pause / resume / run now / delete through confirmation dialogs behind the read-only gate.

Watching reads the database with a read-only connection (``mode=ro``: no journal, no write
of any kind); only a confirmed action opens it for writing, through the core's own functions.
Database work runs in a thread worker, which posts its result; only the screen touches widgets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Label, Static

from nexus_core.errors import NexusError
from nexus_core.schedule import core
from nexus_core.terminal import terminal_safe
from nexus_core.timeutil import now_ms

from .action_flow import READ_ONLY_REFUSAL

REFRESH_SECONDS = 2.0
COLUMNS = ("Title", "Rule", "Zone", "Next", "Last outcome", "Paused")


@dataclass(frozen=True)
class ScheduleAction:
    """One operator action on a schedule: its words, and whether it destroys history."""

    id: str
    label: str
    statement: str
    destructive: bool = False


ACTIONS = {
    "pause": ScheduleAction("pause", "Pause", "Schedule {id} stops firing until it is resumed."),
    "resume": ScheduleAction("resume", "Resume", "Schedule {id} fires again, counting from now."),
    "run": ScheduleAction(
        "run", "Run now", "An occurrence of schedule {id} is requested; a running nexus scheduler fires it."
    ),
    "delete": ScheduleAction(
        "delete", "Delete", "Schedule {id} and its whole history are deleted. This cannot be undone.", True
    ),
}


def row_cells(schedule: dict[str, Any]) -> tuple[str, ...]:
    last = schedule["lastOutcome"]
    outcome = "-" if last is None else f"{last['status']}: {last['reason'] or ''}".rstrip(": ")
    return tuple(
        terminal_safe(value, one_line=True)
        for value in (
            schedule["title"] or "",
            schedule["description"],
            schedule["zone"],
            schedule["next"] or ("-" if schedule["paused"] else "none left"),
            outcome,
            "yes" if schedule["paused"] else "no",
        )
    )


def perform(directory: str, action: str, schedule_id: str) -> str:
    """Carry out one confirmed action through the core; the words for the notification."""
    if action in ("pause", "resume"):
        core.set_paused(directory, schedule_id, action == "pause", now_ms())
        return f"Schedule {schedule_id} {'paused' if action == 'pause' else 'resumed'}."
    if action == "run":
        occurrence = core.request_run(directory, schedule_id, now_ms())
        return f"Occurrence {occurrence['id']} of schedule {schedule_id} requested."
    core.delete_schedule(directory, schedule_id)
    return f"Schedule {schedule_id} deleted."


class ConfirmSchedule(ModalScreen[bool]):
    """States what will change; the focus starts on Cancel."""

    DEFAULT_CSS = """
    ConfirmSchedule { align: center middle; }
    ConfirmSchedule > #dialog { width: 80; max-width: 96%; height: auto; border: thick $primary;
        background: $surface; padding: 0 1; }
    ConfirmSchedule.destructive > #dialog { border: thick $error; }
    ConfirmSchedule #dialog-title { text-style: bold; padding: 0 0 1 0; }
    ConfirmSchedule #dialog-buttons { height: auto; align-horizontal: right; padding-top: 1; }
    ConfirmSchedule #dialog-buttons Button { margin-left: 2; }
    """
    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, action: ScheduleAction, schedule_id: str) -> None:
        super().__init__(classes="destructive" if action.destructive else "")
        self.action_spec = action
        self.schedule_id = schedule_id

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(Text(f"{self.action_spec.label} schedule {self.schedule_id}"), id="dialog-title")
            yield Static(Text(self.action_spec.statement.format(id=self.schedule_id)), id="dialog-statement")
            with Horizontal(id="dialog-buttons"):
                yield Button("Cancel", id="cancel")
                yield Button(
                    self.action_spec.label, id="confirm", variant="error" if self.action_spec.destructive else "primary"
                )

    def on_mount(self) -> None:
        self.query_one("#cancel", Button).focus()

    @on(Button.Pressed, "#confirm")
    def _confirm(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(False)


class SchedulesLoaded(Message):
    def __init__(self, schedules: list[dict[str, Any]] | None, error: str | None) -> None:
        super().__init__()
        self.schedules = schedules
        self.error = error


class ActionDone(Message):
    def __init__(self, words: str, error: bool) -> None:
        super().__init__()
        self.words = words
        self.error = error


class SchedulesScreen(ModalScreen[None]):
    """The schedules of one project; refreshed every ``REFRESH_SECONDS`` while open."""

    DEFAULT_CSS = """
    SchedulesScreen { align: center middle; }
    SchedulesScreen > #panel { width: 96%; height: 80%; border: thick $primary; background: $surface; }
    SchedulesScreen #panel-title { text-style: bold; padding: 0 1; }
    SchedulesScreen #panel-status { color: $text-muted; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape,w,q", "dismiss_panel", "Close"),
        Binding("p", "schedule('pause')", "Pause"),
        Binding("r", "schedule('resume')", "Resume"),
        Binding("n", "schedule('run')", "Run now"),
        Binding("d", "schedule('delete')", "Delete"),
    ]

    def __init__(self, directory: str, label: str, read_only: bool) -> None:
        super().__init__()
        self.directory = directory
        self.label = label
        self.read_only = read_only
        self.schedules: list[dict[str, Any]] = []
        self.loads = 0  # results applied (tests wait on it)

    def compose(self) -> ComposeResult:
        with Vertical(id="panel"):
            yield Label(Text(f"Schedules of {terminal_safe(self.label, one_line=True)}"), id="panel-title")
            yield DataTable(id="schedules", cursor_type="row", zebra_stripes=True)
            yield Static("", id="panel-status")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#schedules", DataTable)
        table.add_columns(*COLUMNS)
        self.reload()
        self.set_interval(REFRESH_SECONDS, self.reload)

    @work(thread=True, exclusive=True, group="schedules-read")
    def reload(self) -> None:
        try:
            found = core.list_schedules(self.directory, read_only=True)
        except NexusError as error:
            self.post_message(SchedulesLoaded(None, error.message))
            return
        except Exception as error:  # sqlite3 or OS trouble: shown, never a crash
            self.post_message(SchedulesLoaded(None, f"{type(error).__name__}: {error}"))
            return
        self.post_message(SchedulesLoaded(found, None))

    @on(SchedulesLoaded)
    def _loaded(self, message: SchedulesLoaded) -> None:
        table = self.query_one("#schedules", DataTable)
        status = self.query_one("#panel-status", Static)
        self.loads += 1
        if message.schedules is None:
            status.update(Text(terminal_safe(message.error or "", one_line=True)))
            return
        selected = self.selected_id()
        self.schedules = message.schedules
        table.clear()
        for schedule in message.schedules:
            table.add_row(*(Text(cell) for cell in row_cells(schedule)), key=schedule["id"])
        ids = [s["id"] for s in message.schedules]
        if selected in ids:
            table.move_cursor(row=ids.index(selected))
        gate = " (read-only: no action)" if self.read_only else ""
        count = len(message.schedules)
        status.update(
            Text(f"{count} schedule{'s' if count != 1 else ''}{gate}. p pause, r resume, n run now, d delete.")
        )

    def selected_id(self) -> str | None:
        table = self.query_one("#schedules", DataTable)
        if not self.schedules or table.cursor_row < 0 or table.cursor_row >= len(self.schedules):
            return None
        return str(self.schedules[table.cursor_row]["id"])

    def action_dismiss_panel(self) -> None:
        self.dismiss(None)

    def action_schedule(self, action: str) -> None:
        if self.read_only:
            self.notify(READ_ONLY_REFUSAL, severity="warning")
            return
        schedule_id = self.selected_id()
        if schedule_id is None:
            self.notify("No schedule selected.", severity="warning")
            return
        spec = ACTIONS[action]

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._perform(action, schedule_id)

        self.app.push_screen(ConfirmSchedule(spec, schedule_id), confirmed)

    @work(thread=True, group="schedules-write")
    def _perform(self, action: str, schedule_id: str) -> None:
        try:
            words = perform(self.directory, action, schedule_id)
        except NexusError as error:
            self.post_message(ActionDone(error.message, True))
            return
        except Exception as error:
            self.post_message(ActionDone(f"{type(error).__name__}: {error}", True))
            return
        self.post_message(ActionDone(words, False))

    @on(ActionDone)
    def _done(self, message: ActionDone) -> None:
        self.notify(terminal_safe(message.words, one_line=True), severity="error" if message.error else "information")
        self.reload()
