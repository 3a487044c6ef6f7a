"""How a JSON value reads in human text: its JSON spelling (``true``, ``false``, ``1``,
``{"a":1}``), ``none`` for null, strings as they are; all terminal-safe. Python's ``True``,
``None`` and ``{'a': 1}`` never reach an operator."""

from __future__ import annotations

from .state import canonical
from .terminal import terminal_safe


def json_word(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, str):
        return terminal_safe(value, one_line=True)
    try:
        return terminal_safe(canonical.compact(value), one_line=True)
    except (TypeError, ValueError):  # not a JSON value after all
        return terminal_safe(str(value), one_line=True)
