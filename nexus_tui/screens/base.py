"""The frame every dashboard dialog shares: :class:`NexusDialog`, a centred modal with a title,
a scrolling body, an error line and a button row. Its style lives here once and applies to every
subclass (Textual type selectors match subclasses); colours are theme variables."""

from __future__ import annotations

from typing import ClassVar, TypeVar

from textual.screen import ModalScreen

Result = TypeVar("Result")


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
    NexusDialog #dialog-body { height: auto; max-height: 65vh; }
    NexusDialog .section { text-style: bold; margin-top: 1; }
    NexusDialog .statement { padding-left: 1; }
    NexusDialog .caution { color: $warning; padding-left: 1; }
    NexusDialog .unavailable { color: $error; padding-left: 1; }
    NexusDialog .field-label { margin-top: 1; }
    NexusDialog .field-error { color: $error; height: auto; }
    NexusDialog #dialog-error { color: $error; height: auto; }
    NexusDialog #dialog-buttons { height: auto; align-horizontal: right; padding-top: 1; }
    NexusDialog #dialog-buttons Button { margin-left: 2; }
    NexusDialog RadioSet { width: 100%; }
    """
