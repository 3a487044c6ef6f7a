"""``show``: a Static is updated only when what it shows changes, and laid out again only when
its size may change (Static.update always lays out the whole screen: each second, for ages)."""

from __future__ import annotations

from typing import Any

import pytest
from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import Static

from nexus_tui.widgets.shown import show


class OneStatic(App[None]):
    CSS = "#shown { width: 20; height: auto; }"

    def compose(self) -> ComposeResult:
        yield Static("", id="shown")


def screen_text(app: App[Any]) -> str:
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_a_same_shape_text_is_repainted_in_place_and_a_longer_one_laid_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    app = OneStatic()
    async with app.run_test(size=(40, 10)) as pilot:
        widget = app.query_one("#shown", Static)
        layouts: list[bool] = []
        original = widget.update

        def update(content: Any = "", *, layout: bool = True) -> None:
            layouts.append(layout)
            original(content, layout=layout)

        monkeypatch.setattr(widget, "update", update)
        show(widget, Text("seen 3m07s ago"))
        await pilot.pause()
        assert "seen 3m07s ago" in screen_text(app) and widget.size.height == 1
        show(widget, Text("seen 3m08s ago"))  # no word changes width: repainted in place
        await pilot.pause()
        assert "seen 3m08s ago" in screen_text(app) and "3m07s" not in screen_text(app)
        show(widget, Text("seen 13m08s ago by a worker named w1"))  # wraps: laid out again
        await pilot.pause()
        assert widget.size.height == 2 and "13m08s" in screen_text(app)
        show(widget, Text("seen 13m08s ago by a worker named w1"))  # the same: nothing to do
        show(widget, Text("seen 13m08s ago by a worker named w1", style="bold"))  # a style is shown
        assert layouts == [True, False, True, False]


async def test_markup_is_always_laid_out_again() -> None:
    """A str is markup to Static: its shown width is not its text's, so it is never assumed."""
    app = OneStatic()
    async with app.run_test(size=(40, 10)) as pilot:
        widget = app.query_one("#shown", Static)
        show(widget, "[b]" * 8 + "x")  # 25 characters of markup, one cell shown
        await pilot.pause()
        assert widget.size.height == 1
        show(widget, "y" * 25)  # 25 characters, 25 cells: two lines at 20 wide
        await pilot.pause()
        assert widget.size.height == 2
