"""Updating a ``Static`` only when what it shows changes.

``Static.update`` lays the whole screen out again, and the full repaint that brings renders
every visible line. The 1 s tick re-syncs the pane's titles, the task detail and the status bar,
most of them with the very text they show: that text is not shown again. A changed text always
takes ``update``'s own way, layout included: repainting without a layout a text that takes the
same room was tried twice, and twice left the status bar one line tall instead of three in a
loaded test run (a layout then pending did not see the widget's new height)."""

from __future__ import annotations

from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static


def update_changed(widget: Static, content: VisualType) -> bool:
    """Show ``content`` in ``widget`` unless it shows exactly that already; whether it did."""
    if _same(widget.content, content):
        return False
    widget.update(content)
    return True


def _same(old: object, new: object) -> bool:
    if isinstance(old, Text) and isinstance(new, Text):
        # Rich's Text equality compares the characters and spans, not the base style or options.
        return (
            old == new
            and old.style == new.style
            and (old.justify, old.overflow, old.no_wrap, old.end, old.tab_size)
            == (new.justify, new.overflow, new.no_wrap, new.end, new.tab_size)
        )
    return type(old) is str and type(new) is str and old == new
