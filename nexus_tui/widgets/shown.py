"""Updating a ``Static`` only as far as what it shows changes.

``Static.update`` lays the whole screen out again, and the full repaint that brings renders
every visible line. The 1 s tick re-syncs the pane's titles, the task detail and the status
bar: most with the very text they show, the rest with an age that moved ("5m42s ago" ->
"5m43s ago"). With a 200-task run open and nothing changing, those layouts were most of the
idle dashboard's CPU. So: the same text is not shown again, and a text that takes exactly the
room the old one took (same characters per line, spaces at the same places: it wraps the same at
any width) is repainted without a layout. Any other change takes ``update``'s own way."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static


def update_changed(widget: Static, content: VisualType) -> bool:
    """Show ``content`` in ``widget`` unless it shows exactly that already; whether it did."""
    old = widget.content
    if isinstance(old, Text) and isinstance(content, Text) and _same_layout(old, content):
        if old == content and old.style == content.style:  # Text equality ignores the base style
            return False
        widget.update(content, layout=False)
        return True
    if type(old) is str and type(content) is str and old == content:
        return False
    widget.update(content)
    return True


def _same_layout(old: Text, new: Text) -> bool:
    """Whether ``new`` wraps exactly as ``old`` at every width: the same options, the same
    number of single-cell characters, whitespace (where Rich breaks lines) at the same places."""
    before, after = old.plain, new.plain
    if len(before) != len(after) or (old.justify, old.overflow, old.no_wrap, old.end, old.tab_size) != (
        new.justify,
        new.overflow,
        new.no_wrap,
        new.end,
        new.tab_size,
    ):
        return False
    for plain in (before, after):
        characters = plain.replace("\n", "")  # a line break takes no cell
        if "\t" in characters or cell_len(characters) != len(characters):
            return False
    return all(a == b or (not a.isspace() and not b.isspace()) for a, b in zip(before, after, strict=True))
