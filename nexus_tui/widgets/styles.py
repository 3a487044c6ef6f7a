"""The theme's colours as a value, and the dashboard's legend (each state's glyph and style).

Styles are written with theme variables ("bold $success"); :class:`Styles` resolves them with
the variables of one theme. A widget asks :func:`styles_of` for its app's current theme and
passes the value to the functions that build its text, so the theme picker (T) recolours every
state and no module holds a palette that changes under it.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from textual.app import App
from textual.theme import BUILTIN_THEMES

from nexus_core import needs

from ..logic.model import NOT_STARTED
from .plain import plain


@dataclass(frozen=True)
class Styles:
    """Rich styles with their "$variable" colours taken from one theme's CSS variables."""

    variables: Mapping[str, str]
    _resolved: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def themed(self, spec: str) -> str:
        """``spec`` with each "$variable" word replaced by the theme's value for it."""
        if "$" not in spec:
            return spec
        resolved = self._resolved.get(spec)
        if resolved is None:
            words = (self.variables.get(word[1:], "") if word.startswith("$") else word for word in spec.split())
            resolved = self._resolved[spec] = " ".join(words)
        return resolved

    def state(self, state: str, default: str = "") -> str:
        """A task state's style (STATE_STYLE)."""
        return self.themed(STATE_STYLE.get(state, default))

    def value(self, value: str, default: str = "") -> str:
        """An execution, verification or acceptance value's style (VALUE_STYLE)."""
        return self.themed(VALUE_STYLE.get(value, default))


# Text built outside an app (tests, a renderer's default) reads the default dark theme.
DEFAULT_STYLES = Styles(BUILTIN_THEMES["textual-dark"].to_color_system().generate())

_BY_APP: weakref.WeakKeyDictionary[App[Any], tuple[str, Styles]] = weakref.WeakKeyDictionary()


def styles_of(app: App[Any]) -> Styles:
    """The styles of ``app``'s current theme (built once per theme the app shows)."""
    known = _BY_APP.get(app)
    if known is None or known[0] != app.theme:
        known = _BY_APP[app] = (app.theme, Styles(app.get_css_variables()))
    return known[1]


STATE_STYLE = {
    "accepted": "bold $success",
    "to accept": "$primary-lighten-2",
    "to verify": "$primary",
    "verifying": "$warning",
    "running": "$warning",
    "cancelling": "$accent",
    "blocked": "bold $error",
    "ambiguous": "bold $accent",
    "failed": "$error",
    "cancelled": "$error",
    "rejected": "bold $error",
    NOT_STARTED: "dim",
}
VALUE_STYLE = {
    "passed": "$success",
    "completed": "$success",
    "accepted": "bold $success",
    "failed": "$error",
    "rejected": "bold $error",
    "ambiguous": "$accent",
    "running": "$warning",
    "blocked": "bold $error",
    "cancelled": "$error",
    "pending": "dim",
    NOT_STARTED: "dim",
}
GLYPH = {
    "accepted": "✔",
    "to accept": "◆",
    "to verify": "◇",
    "verifying": "⟳",
    "running": "▶",
    "cancelling": "⊘",
    "blocked": "■",
    "ambiguous": "?",
    "failed": "✗",
    "cancelled": "⊗",
    "rejected": "✗",
    NOT_STARTED: "·",
}
# A value's glyph in the compact forms (the help's legend lists the task states' glyphs).
VALUE_GLYPH = {
    "completed": "✔",
    "passed": "✔",
    "accepted": "✔",
    "failed": "✗",
    "rejected": "✗",
    "running": "▶",
    "pending": "·",
    "ambiguous": "?",
    "cancelled": "⊗",
    "blocked": "■",
    NOT_STARTED: "·",
}
# A row whose running work lost its owner (a verifier, a launch supervisor that died): the
# classifier's need (nexus_core.needs), shown in the row itself, as k9s reddens a crashing pod.
OWNER_GONE_GLYPH = "†"
OWNER_GONE_STYLE = "bold $error"
OWNER_GONE_WORDS = {needs.VERIFIER_GONE: "verifier gone", needs.SUPERVISOR_GONE: "supervisor gone"}


def value_cell(value: str, styles: Styles) -> Text:
    """A value (untrusted: it comes from a run file) in its style."""
    return plain(value, styles.value(value, ""))
