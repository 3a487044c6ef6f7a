"""Updating a ``Static`` only as far as what it shows changes.

``Static.update`` lays the whole screen out again, and the full repaint that brings renders
every visible line. The 1 s tick re-syncs the pane's titles, the task detail and the status bar,
most of them with the very text they show (that text is not shown again), the rest with an age
that moved ("updated 4 s ago" -> "updated 5 s ago"): that text is repainted, and laid out again
only when the widget is then not the height its text needs at its width.

That check is also what keeps an identical text from being skipped while the height is wrong: in
loaded test runs Textual 8.2.8 sometimes left the status bar at the height of its first text
("loading…", one line) after it had been given three lines (a layout of the whole screen each
second used to heal it, unseen); laid out again whenever its height is not its text's, it heals
at its next update. A widget whose width follows its text (``width: auto``) is always laid out."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static

if TYPE_CHECKING:
    from textual.css.styles import RulesMap


def update_changed(widget: Static, content: VisualType) -> bool:
    """Show ``content`` in ``widget`` unless it shows exactly that already, at the height it
    needs; whether it did. Laid out again only when its height is not then its text's."""
    if _same(widget.content, content) and _fits(widget):
        return False
    widget.update(content, layout=False)
    if not _fits(widget):
        widget.refresh(layout=True)
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


def _fits(widget: Static) -> bool:
    """Whether ``widget`` has the room its text needs: its width does not follow the text (no
    ``width: auto``) and its height either does not either or is the text's at its present width."""
    height, width = widget.styles.height, widget.styles.width
    if width is not None and width.is_auto:
        return False
    if height is None or not height.is_auto:
        return True
    size = widget.content_region.size
    if not widget.is_mounted or not widget.display or size.width <= 0:
        return False  # not laid out yet: let update's layout do it
    # As Widget.get_content_height asks it (its cache is what this check must not trust).
    rules = cast("RulesMap", widget.styles)
    return widget.visual.get_height(rules, size.width) == size.height
