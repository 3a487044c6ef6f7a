"""The schedules panel of one project (``w``): what ``nexus schedule list`` shows, live, and
pause / resume / run now / delete through confirmation dialogs behind the read-only gate.

Watching reads the database with a read-only connection (``mode=ro``: no journal, no write
of any kind); only a confirmed action opens it for writing, through the core's own functions.
Database work runs in a thread worker, which posts its result; only the screen touches widgets.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Footer, Label, Static

from nexus_core.errors import NexusError, explained
from nexus_core.schedule import core
from nexus_core.terminal import terminal_safe
from nexus_core.timeutil import now_ms

from .. import actions
from ..logic.schedules import (
    COLUMNS,
    SCHEDULE_ACTIONS,
    ScheduleAction,
    perform,
    row_cells,
    scheduler_words,
    status_line,
)
from ..logic.selection import Selection
from ..widgets.plain import plain
from ..widgets.styles import styles_of
from .base import NexusDialog

REFRESH_SECONDS = 2.0


class ConfirmSchedule(NexusDialog[bool]):
    """States what will change; the focus starts on Cancel."""

    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, action: ScheduleAction, schedule_id: str) -> None:
        super().__init__(classes="destructive" if action.destructive else "")
        self.action_spec = action
        self.schedule_id = schedule_id

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            title = f"{self.action_spec.label} schedule {self.schedule_id}"
            yield Label(plain(title, one_line=True), id="dialog-title")
            yield Static(plain(self.action_spec.statement.format(id=self.schedule_id)), id="dialog-body")
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
    def __init__(
        self, schedules: list[dict[str, Any]] | None, error: str | None, scheduler: bool | None = None, now: int = 0
    ) -> None:
        super().__init__()
        self.schedules = schedules
        self.error = error
        self.scheduler = scheduler  # a nexus scheduler serves the project (core.scheduler_seen)
        self.now = now


class ActionDone(Message):
    def __init__(self, words: str, error: bool) -> None:
        super().__init__()
        self.words = words
        self.error = error


class SchedulesScreen(ModalScreen[None]):
    """The schedules of one project; refreshed every ``REFRESH_SECONDS`` while open."""

    # Its actions' keys, labels and gate come from the registry (actions.SCHEDULES entries).
    REGISTRY_SCREEN = actions.SCHEDULES
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape,w,q", "dismiss_panel", "Close"),
        *actions.bindings(screen=actions.SCHEDULES),
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
            yield Label(plain(f"Schedules of {self.label}", one_line=True), id="panel-title")
            yield DataTable(id="schedules", cursor_type="row", zebra_stripes=True)
            yield Static("", id="panel-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#schedules", DataTable).add_columns(*COLUMNS)
        self.reload()
        self.set_interval(REFRESH_SECONDS, self.reload)

    @work(thread=True, exclusive=True, group="schedules-read")
    def reload(self) -> None:
        try:
            now = now_ms()
            found = core.list_schedules(self.directory, read_only=True)
            scheduler = core.scheduler_seen(self.directory, now) if found else None
        except NexusError as error:
            self.post_message(SchedulesLoaded(None, explained(error)))
            return
        except Exception as error:  # sqlite3 or OS trouble: shown, never a crash
            self.post_message(SchedulesLoaded(None, f"{type(error).__name__}: {error}"))
            return
        self.post_message(SchedulesLoaded(found, None, scheduler, now))

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
        rows = [
            [Text(cell) for cell in row_cells(schedule, message.now, message.scheduler)]
            for schedule in message.schedules
        ]
        # Widths given with the columns: DataTable's own sizing runs on a later idle pass and can
        # leave the header drawn at the labels' widths over wider rows.
        table.clear(columns=True)
        for index, label in enumerate(COLUMNS):
            table.add_column(label, width=max([len(label), *(row[index].cell_len for row in rows)]))
        for schedule, cells in zip(message.schedules, rows, strict=True):
            table.add_row(*cells, key=schedule["id"])
        ids = [s["id"] for s in message.schedules]
        if selected in ids:
            table.move_cursor(row=ids.index(selected))
        words = status_line(len(message.schedules), self.read_only)
        warning = scheduler_words(message.schedules, message.now, message.scheduler)
        line = Text(words)
        if warning is not None:
            line = Text(warning + "\n", style=styles_of(self.app).themed("bold $warning")) + line
        status.update(line)

    def selected_id(self) -> str | None:
        table = self.query_one("#schedules", DataTable)
        if not self.schedules or table.cursor_row < 0 or table.cursor_row >= len(self.schedules):
            return None
        return str(self.schedules[table.cursor_row]["id"])

    def action_dismiss_panel(self) -> None:
        self.dismiss(None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The registry's gate: a schedule action is off (shown disabled) in --read-only."""
        if action != "schedule" or not parameters:
            return True
        entry = actions.spec(f"schedule_{parameters[0]}")
        return True if entry is not None and self.allows(entry) else None

    def allows(self, entry: actions.ActionSpec) -> bool:
        return self.refusal(entry) is None

    def refusal(self, entry: actions.ActionSpec) -> str | None:
        return actions.refusal(entry, self.read_only, Selection())

    def action_explain(self, action_id: str) -> None:
        """The key of an action the gate refuses (its hidden second binding): say why."""
        entry = actions.spec(action_id)
        if entry is not None:
            actions.notify_refusal(self, entry, self.refusal(entry))

    def action_schedule(self, action: str) -> None:
        if self.read_only:
            self.notify(actions.READ_ONLY_REFUSAL, severity="warning")
            return
        schedule_id = self.selected_id()
        if schedule_id is None:
            self.notify("No schedule selected.", severity="warning")
            return
        spec = SCHEDULE_ACTIONS[action]

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._perform(action, schedule_id)

        self.app.push_screen(ConfirmSchedule(spec, schedule_id), confirmed)

    @work(thread=True, group="schedules-write")
    def _perform(self, action: str, schedule_id: str) -> None:
        try:
            words = perform(self.directory, action, schedule_id)
        except NexusError as error:
            self.post_message(ActionDone(explained(error), True))
            return
        except Exception as error:
            self.post_message(ActionDone(f"{type(error).__name__}: {error}", True))
            return
        self.post_message(ActionDone(words, False))

    @on(ActionDone)
    def _done(self, message: ActionDone) -> None:
        self.notify(
            terminal_safe(message.words, one_line=True),
            severity="error" if message.error else "information",
            markup=False,  # the words quote a schedule id, an error names a path
        )
        self.reload()
