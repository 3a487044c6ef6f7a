"""The help screen, generated from the action registry."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .. import actions
from ..logic.selection import FILTER_STATES
from ..widgets import render


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", show=True),
    ]

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("nexus-tui: a live, read-only view of nexus runs\n\n", style="bold")
        groups: dict[str, list[actions.ActionSpec]] = {}
        for entry in actions.REGISTRY:
            groups.setdefault(entry.group, []).append(entry)
        for group, entries in groups.items():
            text.append(f"{group}\n", style="bold underline")
            for entry in entries:
                keys = actions.key_label(entry.keys) or "palette"
                text.append(f"  {keys:<14}", style=render.themed("bold $primary-lighten-2"))
                text.append(f"{entry.label:<22}")
                text.append(entry.help, style="dim")
                if entry.mutating:
                    text.append("  (changes state)", style=render.themed("$warning"))
                text.append("\n")
            text.append("\n")
        text.append("Also\n", style="bold underline")
        for keys, what in (
            ("Ctrl+P", "command palette: every action valid for the selection, themes, copy"),
            ("Tab", "move focus: runs → tasks → detail"),
            ("↑ ↓ PgUp PgDn", "move in the focused table; the detail follows the task cursor"),
            ("mouse", "click rows, headers (sort), tabs and tree nodes; scroll the detail"),
        ):
            text.append(f"  {keys:<14}", style=render.themed("bold $primary-lighten-2"))
            text.append(f"{what}\n", style="dim")
        text.append("\nFilter syntax\n", style="bold underline")
        text.append(f"  state:WORD, WORD one of: {', '.join(FILTER_STATES)}\n")
        text.append("  task:NAME (part of the task id)   anything else: free text over id, objective, states\n\n")
        text.append("Task states\n", style="bold underline")
        for state, glyph in render.GLYPH.items():
            text.append(f"  {glyph} ", style=render.state_style(state, ""))
            text.append(f"{state}\n")
        text.append(
            "\nEverything shown comes from the same core functions as `nexus inspect --json`.\n"
            "Watching writes nothing: no lock, no temporary file.\n",
            style="dim",
        )
        with VerticalScroll(id="help-body"):
            yield Static(text)

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)
