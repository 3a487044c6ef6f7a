"""``show``: put content in a ``Static`` only when what it shows changes, and lay the screen
out again only when its size may change.

``Static.update`` always asks for a layout of the whole screen (``refresh(layout=True)``): the
1 s tick and every scan re-showing the same titles, header and status line re-arranged and
re-rendered the screen each second, most of an idle dashboard's CPU with one large run open.
An age ticking in the detail's header ("3m07s" to "3m08s") changes no word's width: the text
wraps the same, so it is repainted in place.
"""

from __future__ import annotations

import re
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.content import Content
from textual.widgets import Static

_WORDS = re.compile(r"(\s+)")
_UNKNOWN = object()  # content this cannot compare: shown every time, as Static.update would


def show(widget: Static, content: Text | Content | str) -> None:
    """``widget.update(content)`` unless ``widget`` already shows exactly that (text, spans
    and styles: Rich's and Textual's equality compare the text only)."""
    key = _shown_key(content)
    previous: Any = getattr(widget, "_nexus_shown", _UNKNOWN)
    if key is not _UNKNOWN and previous == key:
        return
    # A str is markup to Static: its shape is not its text's (never repainted in place).
    same_shape = (
        key is not _UNKNOWN and previous is not _UNKNOWN and key[0] != "str" and _shape(previous) == _shape(key)
    )
    widget.update(content, layout=not same_shape)
    widget._nexus_shown = key  # type: ignore[attr-defined]


def _shape(key: tuple[Any, ...]) -> tuple[Any, ...]:
    """What the size of shown text depends on: its kind and wrapping options, its whitespace as
    it is, and each word's width in cells (not its letters)."""
    words = tuple(part if part.isspace() else cell_len(part) for part in _WORDS.split(key[1]) if part)
    return (key[0], *key[4:], words)


def _shown_key(content: Text | Content | str) -> Any:
    if isinstance(content, str):
        return ("str", content)
    if isinstance(content, Text):
        return (
            "text",
            content.plain,
            tuple(content.spans),
            str(content.style),
            content.justify,
            content.overflow,
            content.no_wrap,
            content.end,
        )
    if isinstance(content, Content):
        return ("content", content.plain, tuple(content.spans), "")
    return _UNKNOWN
