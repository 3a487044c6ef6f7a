"""Text from outside as widget content: never parsed as markup, never raw on the terminal.

Directory names, run and task ids, identities, paths, summaries, schedule titles, error
messages: anyone's text. Textual parses a ``str`` as markup in most places (``Static``,
``Label``, tab labels, ``border_title``, tooltips, palette entries, ``notify`` unless
``markup=False``): ``x[b="]y`` raises ``MarkupError`` (the app dies) and
``[@click=app.screenshot(...)]`` makes a click run an action. Every such string goes in through
one of these, in the form the widget takes; each first makes it terminal-safe
(:func:`nexus_core.terminal.terminal_safe`: no escape sequence, C1, bidi control or separator
reaches the terminal raw).

- :func:`plain`: a Rich ``Text`` (``Static``/``Label`` contents, ``DataTable`` cells, ``Tree``
  labels, ``OptionList`` options);
- :func:`plain_content`: a Textual ``Content`` (``TabPane`` titles, ``border_title``, button
  labels, tooltips: the APIs typed for Textual's own content);
- :func:`markup_literal`: markup that reads as the text itself, for the APIs that accept only a
  markup ``str`` (a ``SystemCommand``'s title and help, a palette ``Hit``'s help).
"""

from __future__ import annotations

from rich.text import Text
from textual.content import Content

from nexus_core.terminal import terminal_safe


def plain(value: object, style: str = "", *, one_line: bool = False) -> Text:
    """Untrusted text as Rich ``Text``; ``one_line`` also shows newlines and tabs (ids, names)."""
    return Text(terminal_safe(value, one_line=one_line), style=style, no_wrap=False)


def plain_content(value: object, *, one_line: bool = True) -> Content:
    """Untrusted text as Textual ``Content`` (a ``Content`` is never parsed as markup)."""
    return Content(terminal_safe(value, one_line=one_line))


def markup_literal(value: object, *, one_line: bool = True) -> str:
    """Markup whose rendering is exactly the terminal-safe text: every ``[`` escaped (a
    backslash before it is then literal too). Textual's own ``escape`` leaves some tags alone
    (``[$accent]``, ``[B]``, ``[ b]``)."""
    return terminal_safe(value, one_line=one_line).replace("[", "\\[")
