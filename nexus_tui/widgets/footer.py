"""The footer: the key hints that fit the width, each whole; what does not fit is left to the
command palette (Ctrl+P, always shown at the right), never cut mid-word."""

from __future__ import annotations

from textual import events
from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

PALETTE_WIDTH = 14  # "^p palette" with its padding and its separator


def key_width(key: FooterKey) -> int:
    """A key hint's cells in the footer's default (non-compact) style: " k " then "label "."""
    width = len(key.key_display) + 2
    return width + len(key.description) + 1 if key.description else width


class FittingFooter(Footer):
    composed_width = 0  # the width the shown hints were chosen for

    def compose(self) -> ComposeResult:
        self.composed_width = self.size.width
        room = self.size.width - (PALETTE_WIDTH if self.show_command_palette else 0)
        used = 0
        for widget in super().compose():
            if isinstance(widget, FooterKey) and not widget.has_class("-command-palette"):
                used += key_width(widget)
                if self.size.width and used > room:
                    continue  # the palette offers it
            yield widget

    def on_resize(self, event: events.Resize) -> None:
        if event.size.width != self.composed_width:
            self.call_after_refresh(self.recompose)
