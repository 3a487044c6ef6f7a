"""The inbox (``i``): every need across every open project, oldest first: project, run, task,
what, since when and what to do. Enter dismisses with the chosen need; the app then goes to its
project, run and task and opens its guided action (whose dialog opens on Cancel)."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, OptionList, Static
from textual.widgets.option_list import Option

from nexus_core.needs import Need

from .. import actions
from ..logic.operations import OPERATIONS
from ..widgets.ages import table_age
from ..widgets.plain import plain
from ..widgets.styles import Styles, styles_of
from .base import NexusDialog

Entry = tuple[int, str, Need]  # (project index, project label, need)


def todo_words(need: Need, keys: dict[str, str]) -> str:
    """What to do, in the dashboard's words: the guided action's label and key, or the guide."""
    if need.action in OPERATIONS:
        operation = OPERATIONS[need.action]
        key = keys.get(need.action, operation.keys)
        return f"{operation.label} ({key})" if key else operation.label
    if need.kind == "schedule-failed":
        return f"schedules panel ({keys.get('schedules', 'w')})"
    return "see the guide (Enter)"


def entry_prompt(entry: Entry, now: int, keys: dict[str, str], styles: Styles) -> Text:
    """Two lines: since when and where (project › run › task); then what and what to do."""
    _, label, need = entry
    text = Text()
    age = table_age(need.since, now) if need.since else "?"
    text.append(f"{age:>7} ", style=styles.themed("bold $warning"))
    text.append(plain(label, "bold", one_line=True))
    for part in (need.run, need.task):
        if part:
            text.append(" › ", style="dim")
            text.append(plain(part, one_line=True))
    text.append("\n   ")  # what, and what to do: indented under the age, fits 80 columns
    text.append(plain(need.words, one_line=True))
    text.append(" → ", style="dim")
    text.append(plain(todo_words(need, keys), styles.themed("$primary-lighten-2"), one_line=True))
    return text


class InboxScreen(NexusDialog[Entry | None]):
    """Every need, oldest first. Dismisses with the chosen entry (Enter), or None."""

    DEFAULT_CSS = """
    InboxScreen OptionList { height: auto; max-height: 100%; }
    InboxScreen #inbox-empty { color: $text-muted; }
    """
    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "close", "Close", show=False)]

    def __init__(self, entries: list[Entry], now: int, keys: dict[str, str] | None = None) -> None:
        super().__init__(classes="listing")
        self.entries = entries
        self.now = now
        self.keys = keys if keys is not None else actions.keys_by_id({})
        self.chosen: Entry | None = None

    def compose(self) -> ComposeResult:
        count = len(self.entries)
        projects = len({index for index, _, _ in self.entries})
        title = (
            f"Needs you: {count} in {projects} project{'s' if projects != 1 else ''}, oldest first (Enter: go there)"
            if count
            else "Needs you: nothing"
        )
        styles = styles_of(self.app)
        with Vertical(id="dialog"):
            yield Static(plain(title), id="dialog-title")
            if self.entries:
                yield OptionList(
                    *[
                        Option(entry_prompt(entry, self.now, self.keys, styles), id=str(position))
                        for position, entry in enumerate(self.entries)
                    ],
                    id="dialog-body",
                )
            else:
                yield Static(
                    plain("No dead lock, no owner gone, no work awaiting a decision: nothing waits on a person."),
                    id="inbox-empty",
                )
            with Horizontal(id="dialog-buttons"):
                yield Button("Close", id="close")

    def on_mount(self) -> None:
        if self.entries:
            self.query_one(OptionList).focus()
        else:
            self.query_one("#close", Button).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.chosen = self.entries[int(event.option.id or 0)]
        self.dismiss(self.chosen)

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
