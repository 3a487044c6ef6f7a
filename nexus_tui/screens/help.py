"""The help screen, generated from the action registry: one line per action in three columns
(keys, label, description), the description wrapped inside its own column at the screen's
width (stacked under the label when the screen is too narrow for three columns)."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from .. import actions
from ..logic.selection import FILTER_STATES
from ..widgets.styles import GLYPH, OWNER_GONE_GLYPH, OWNER_GONE_STYLE, VALUE_GLYPH, Styles, styles_of

KEY_WIDTH = 15  # "↑ ↓ PgUp PgDn" and a gap
LABEL_WIDTH = max(len(entry.label) for entry in actions.REGISTRY) + 2
MIN_DESCRIPTION = 30  # narrower than this, the description goes under the label
ALSO = (
    ("Ctrl+P", "command palette: every action valid for the selection, themes, copy"),
    ("↑ ↓ PgUp PgDn", "move in the focused table; the detail follows the task cursor"),
    ("mouse", "click rows, headers (sort), tabs and tree nodes; scroll the detail"),
)


def _row(
    text: Text, keys: str, label: str, description: str, width: int, styles: Styles, label_style: str = ""
) -> None:
    """One entry: keys, label and description in columns; a description wraps in its column."""
    key_style = styles.themed("bold $primary-lighten-2")
    text.append(f"  {keys:<{KEY_WIDTH}}", style=key_style if keys != "palette" else "dim")
    room = width - 2 - KEY_WIDTH - LABEL_WIDTH
    indent = " " * (2 + KEY_WIDTH + LABEL_WIDTH)
    if not label:
        indent, room = " " * (2 + KEY_WIDTH), width - 2 - KEY_WIDTH
    elif room < MIN_DESCRIPTION:
        # Too narrow for three columns: the label on the key's line, the description below it.
        text.append(label, style=label_style)
        indent = " " * (2 + KEY_WIDTH)
        room = width - 2 - KEY_WIDTH
        text.append("\n" + indent)
    else:
        text.append(f"{label:<{LABEL_WIDTH}}", style=label_style)
    lines = textwrap.wrap(description, max(MIN_DESCRIPTION // 2, room)) or [""]
    text.append(f"\n{indent}".join(lines), style="dim")
    text.append("\n")


def help_text(width: int, keymap: Mapping[str, str] | None, styles: Styles) -> Text:
    text = Text()
    text.append("nexus-tui: a live, read-only view of nexus runs\n", style="bold")
    text.append("Labels in this colour change state (each asks first).\n\n", style="dim")
    text.stylize(styles.themed("$warning"), text.plain.index("this colour"), text.plain.index(" change"))
    groups: dict[str, list[actions.ActionSpec]] = {}
    for entry in actions.REGISTRY:
        groups.setdefault(entry.group, []).append(entry)
    for group, entries in groups.items():
        text.append(f"{group}\n", style="bold underline")
        for entry in entries:
            keys = actions.key_label(actions.effective_keys(entry, keymap or {})) or "palette"
            _row(
                text, keys, entry.label, entry.help, width, styles, styles.themed("$warning") if entry.mutating else ""
            )
        text.append("\n")
    text.append("Also\n", style="bold underline")
    for keys, what in ALSO:
        _row(text, keys, "", what, width, styles)
    text.append("\nFilter syntax\n", style="bold underline")
    text.append(f"  state:WORD, WORD one of: {', '.join(FILTER_STATES)}\n")
    text.append("  task:NAME (part of the task id)   anything else: free text over id, objective, states\n\n")
    text.append("Task states\n", style="bold underline")
    for state, glyph in GLYPH.items():
        text.append(f"  {glyph} ", style=styles.state(state, ""))
        text.append(f"{state}\n")
    text.append(f"  {OWNER_GONE_GLYPH} ", style=styles.themed(OWNER_GONE_STYLE))
    guide = actions.spec("recovery_guide")
    guide_keys = actions.key_label(actions.effective_keys(guide, keymap or {})) if guide else ""
    text.append(
        f"owner gone: a verifier or launch supervisor died mid-work (the guide, {guide_keys}, says what to do)\n"
    )
    text.append("\nCompact columns (Exe, Ver, Acc, on a narrow screen)\n", style="bold underline")
    by_glyph: dict[str, list[str]] = {}
    for value, glyph in VALUE_GLYPH.items():
        by_glyph.setdefault(glyph, []).append(value)
    for glyph, values in by_glyph.items():
        text.append(f"  {glyph} ", style=styles.value(values[0], ""))
        text.append(f"{'/'.join(values)}\n")
    text.append(
        "\nEverything shown comes from the same core functions as `nexus inspect --json`.\n"
        "Watching writes nothing: no lock, no temporary file.\n",
        style="dim",
    )
    return text


class HelpText(Static):
    """The help's text, laid out again for its width whenever that changes."""

    def __init__(self, text: Text, keymap: Mapping[str, str]) -> None:
        super().__init__(text)
        self.keymap = keymap

    def on_resize(self, event: events.Resize) -> None:
        self.update(help_text(event.size.width, self.keymap, styles_of(self.app)))


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", show=True),
    ]

    def __init__(self, keymap: Mapping[str, str] | None = None) -> None:
        super().__init__()
        self.keymap = dict(keymap or {})  # the settings' key overrides: the help shows the effective keys

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-body"):
            yield HelpText(help_text(self.app.size.width, self.keymap, styles_of(self.app)), self.keymap)

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)
