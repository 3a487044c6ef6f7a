"""The action log panel: every core call made from this session, with its input summary and
its result (or the core's exact error). Entries arrive from ``operations.ActionLog``; a
worker thread's append reaches the panel as a message, never by touching the widget.

A table row is one line (a long result is cut at the column's edge): the line under the table
shows the selected entry's whole result, wrapped, so a refusal reads in full at 80 columns."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from ..logic.operations import ActionLog, LogEntry
from .plain import plain
from .styles import Styles, styles_of

COLUMNS = ("time", "action", "target", "input", "result")


def result_text(entry: LogEntry, styles: Styles) -> Text:
    """The result as the log shows it, "ok: ..." or "refused: ...", in the core's own words (plain)."""
    result = plain(entry.result, "" if entry.ok else styles.themed("bold $error"))
    if entry.ok:
        return Text("ok: ", style=styles.themed("$success")).append_text(result)
    return Text("refused: ").append_text(result)


class ActionLogPanel(Vertical):
    """A table of log entries, newest last, and the selected entry's result in full. Cells are
    plain Text (never markup)."""

    class EntryAdded(Message):
        def __init__(self, entry: LogEntry) -> None:
            super().__init__()
            self.entry = entry

    def __init__(self, log: ActionLog, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.action_log = log
        self.shown = 0

    def compose(self) -> ComposeResult:
        self.border_title = "Action log (this session)"
        table: DataTable[Any] = DataTable(cursor_type="row", zebra_stripes=True)
        table.add_columns(*COLUMNS)
        yield table
        yield Static("", classes="log-result")

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
        styles = styles_of(self.app)
        for index, entry in enumerate(entries[self.shown :], start=self.shown):
            table.add_row(
                plain(entry.at[11:19]),
                plain(entry.action),
                plain(entry.target, one_line=True),
                plain(entry.inputs, one_line=True),
                result_text(entry, styles),
                key=str(index),
            )
        self.shown = len(entries)
        if entries:
            table.move_cursor(row=len(entries) - 1)
            self.show_result(len(entries) - 1)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None:
            self.show_result(int(event.row_key.value))

    def show_result(self, index: int) -> None:
        entries = self.action_log.entries
        if 0 <= index < len(entries):
            entry = entries[index]
            line = Text.assemble((f"{entry.at[11:19]} {entry.action} ", "bold")).append_text(
                result_text(entry, styles_of(self.app))
            )
            self.query_one(".log-result", Static).update(line)
