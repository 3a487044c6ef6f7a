"""The frame every dashboard dialog shares: :class:`NexusDialog`, a centred modal with a title,
a scrolling body (:class:`DialogBody`), an error line (:class:`ErrorLine`) and a button row.
Its style lives here once and applies to every subclass (Textual type selectors match
subclasses); colours are theme variables.

The buttons are docked at the bottom of the frame and the body gets the rows the title and the
error line leave (``NexusDialog.fit_body``), so on a small terminal (80x24) the body scrolls and
neither the buttons nor an error are ever clipped; on a tall one the frame is as tall as its
content."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual import events
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.visual import VisualType
from textual.widget import Widget
from textual.widgets import Static

Result = TypeVar("Result")
NARROW = 100  # columns: under it, the compact forms (buttons as wide as their labels)
FRAME_SHARE = 0.92  # of the screen's height: the most a dialog's frame takes


class DialogBody(VerticalScroll):
    """The dialog's scrolling body. A Tab stop only when it has something to scroll and no field
    of its own (focusing a field scrolls to it): otherwise it would be an invisible stop between
    the buttons and the first field. Focused, it shows (a tint and an accent scrollbar)."""

    def allow_focus(self) -> bool:
        if self.max_scroll_y <= 0:
            return False
        return not any(widget.can_focus for widget in self.walk_children(Widget))


class ErrorLine(Static):
    """The dialog's error line: hidden while empty; the body gives up the rows it grows into
    (the buttons stay visible)."""

    def on_mount(self) -> None:
        self.display = bool(self.visual_text())

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        super().update(content, layout=layout)
        self.display = bool(self.visual_text())

    def visual_text(self) -> str:
        return str(getattr(self.content, "plain", self.content))

    def on_resize(self, event: events.Resize) -> None:
        screen = self.screen
        if isinstance(screen, NexusDialog):
            screen.fit_body()


class NexusDialog(ModalScreen[Result]):
    # Not scoped: the rules name NexusDialog itself, so they reach every subclass's widgets.
    SCOPED_CSS: ClassVar[bool] = False
    DEFAULT_CSS = """
    NexusDialog { align: center middle; }
    NexusDialog > #dialog {
        width: 96; max-width: 96%; height: auto; max-height: 92%;
        border: thick $primary; background: $surface; padding: 0 1;
    }
    NexusDialog.destructive > #dialog { border: thick $error; }
    NexusDialog.guide > #dialog { border: thick $warning; }
    NexusDialog.listing > #dialog { max-height: 80%; }
    NexusDialog #dialog-title { text-style: bold; padding: 0 0 1 0; }
    NexusDialog #dialog-body { height: auto; }
    NexusDialog #dialog-body:focus { background-tint: $foreground 6%; scrollbar-color: $accent; }
    NexusDialog .section { text-style: bold; margin-top: 1; }
    NexusDialog .section:first-child { margin-top: 0; }
    NexusDialog .statement { padding-left: 1; }
    NexusDialog .caution { color: $warning; padding-left: 1; }
    NexusDialog .unavailable { color: $error; padding-left: 1; }
    NexusDialog .field-label { margin-top: 1; }
    NexusDialog .field-error { color: $error; height: auto; }
    NexusDialog #dialog-error { color: $error; height: auto; }
    NexusDialog #dialog-buttons { height: auto; align-horizontal: right; padding-top: 1; dock: bottom; }
    NexusDialog #dialog-buttons Button { margin-left: 2; }
    /* Under NARROW columns the buttons take their labels' width (a guide's four still fit). */
    NexusDialog.-narrow #dialog-buttons Button { min-width: 0; margin-left: 1; }
    /* The choices side by side: one row instead of one per choice (the record dialog fits). */
    NexusDialog RadioSet { width: 100%; layout: horizontal; }
    NexusDialog RadioSet > RadioButton { width: auto; margin-right: 2; }
    """

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < NARROW, "-narrow")
        self.call_after_refresh(self.fit_body)

    def fit_body(self) -> None:
        """Give the body the rows the frame has left once the title, the error line and the
        buttons have theirs (Textual cannot express "the rest of an auto-height frame")."""
        bodies = self.query("#dialog-body")
        frames = self.query("#dialog")
        if not bodies or not frames:
            return
        body, frame = bodies.first(), frames.first()
        others = sum(child.outer_size.height for child in frame.children if child is not body and child.display)
        share = FRAME_SHARE if not self.has_class("listing") else 0.8
        room = int(self.size.height * share) - frame.styles.gutter.height - others
        # At least a line of the body; an error line is never what gives way (the body scrolls).
        body.styles.max_height = max(1, room)
