"""The action log panel: every core call made from this session, with its input summary and
its result (or the core's exact error). Entries arrive from ``operations.ActionLog``; a
worker thread's append reaches the panel as a message, never by touching the widget."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Label

from ..logic.operations import ActionLog, LogEntry
from .render import plain, themed

COLUMNS = ("time", "action", "target", "input", "result")


class ActionLogPanel(Vertical):
    """A table of log entries, newest last. Cells are plain Text (never markup)."""

    DEFAULT_CSS = """
    ActionLogPanel { height: 10; border-top: solid $primary-darken-2; }
    ActionLogPanel > Label { padding: 0 1; text-style: bold; }
    ActionLogPanel > DataTable { height: 1fr; }
    """

    class EntryAdded(Message):
        def __init__(self, entry: LogEntry) -> None:
            super().__init__()
            self.entry = entry

    def __init__(self, log: ActionLog, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.action_log = log
        self.shown = 0

    def compose(self) -> ComposeResult:
        yield Label("Action log (this session)")
        table: DataTable[Any] = DataTable(cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table

    def on_mount(self) -> None:
        self.action_log.listener = self._entry_added
        self.sync()  # the entries made before the panel was first shown (its first action's)

    def _entry_added(self, entry: LogEntry) -> None:
        # Called from whichever thread appends: only the (thread-safe) message, never the widget.
        self.post_message(self.EntryAdded(entry))

    def on_action_log_panel_entry_added(self, message: EntryAdded) -> None:
        message.stop()
        self.sync()

    def sync(self) -> None:
        table = self.query_one(DataTable)
        entries = self.action_log.entries
        for entry in entries[self.shown :]:
            result = plain(entry.result, "" if entry.ok else themed("bold $error"))
            table.add_row(
                plain(entry.at[11:19]),
                plain(entry.action),
                plain(entry.target, one_line=True),
                plain(entry.inputs, one_line=True),
                Text("ok: ", style=themed("$success")).append_text(result)
                if entry.ok
                else Text("refused: ").append_text(result),
            )
        self.shown = len(entries)
        if entries:
            table.move_cursor(row=len(entries) - 1)
