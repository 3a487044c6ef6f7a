"""update_changed: a Static shown again only when its text changed; a changed text is laid out
again, so the widget takes the room its new text needs."""

from __future__ import annotations

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from nexus_tui.widgets.shown import update_changed

pytestmark = pytest.mark.asyncio


class OneStatic(App[None]):
    CSS = "Static { width: 20; height: auto; }"

    def compose(self) -> ComposeResult:
        yield Static(Text("updated 5m42s ago"), id="shown")


async def test_the_same_text_is_not_shown_again_and_a_wider_text_is_laid_out_again() -> None:
    app = OneStatic()
    async with app.run_test(size=(40, 10)) as pilot:
        widget = app.query_one("#shown", Static)
        await pilot.pause()
        assert widget.size.height == 1
        assert not update_changed(widget, Text("updated 5m42s ago"))
        # A changed text is shown.
        assert update_changed(widget, Text("updated 5m43s ago"))
        await pilot.pause()
        assert "5m43s" in str(widget.render())
        # A style alone is a change too (Rich's equality ignores the base style).
        assert update_changed(widget, Text("updated 5m43s ago", style="bold"))
        # Longer: it wraps to two lines at this width, so the layout follows.
        assert update_changed(widget, Text("a" * 19 + " " + "b" * 19))
        await pilot.pause()
        assert widget.size.height == 2
        # Just as long, spaces elsewhere: it wraps to three lines.
        assert update_changed(widget, Text("a " + "b" * 20 + " " + "c" * 16))
        await pilot.pause()
        assert widget.size.height == 3


async def test_the_same_text_is_shown_again_while_the_widget_is_not_as_tall_as_it_needs() -> None:
    app = OneStatic()
    async with app.run_test(size=(40, 10)) as pilot:
        widget = app.query_one("#shown", Static)
        two_lines = Text("a" * 19 + " " + "b" * 19)
        assert update_changed(widget, two_lines)
        await pilot.pause()
        assert widget.size.height == 2
        assert not update_changed(widget, two_lines.copy())
        # Held one line tall (as Textual sometimes left the status bar): the same text is laid
        # out again each time it is shown, until the height is the one it needs.
        widget.styles.max_height = 1
        await pilot.pause()
        assert widget.size.height == 1
        assert update_changed(widget, two_lines.copy())
        widget.styles.max_height = None
        await pilot.pause()
        assert widget.size.height == 2
        assert not update_changed(widget, two_lines.copy())
