"""Text made safe for a terminal: the one place that decides what untrusted text may print.

Workers are semi-trusted: identities, summaries, check output and file names they control can
carry escape sequences (``ESC ] 52`` writes the operator's clipboard, ``ESC [ 2 J`` clears the
screen, C1 ``U+009B`` is a one-byte CSI on some terminals). Every human-facing output (CLI
summaries and errors, ``wait`` and ``loop`` lines, every dashboard widget) passes text through
``terminal_safe``; JSON output does not need it (JSON escapes every control character already).

Printable text, newlines and tabs are returned unchanged, so ordinary output is byte-identical.
Everything that could act on a terminal is shown visibly instead: C0 controls and DEL as
``\\xNN``; C1 controls, lone surrogates, every Unicode bidirectional control (the marks U+061C,
U+200E, U+200F, the embeddings and overrides U+202A-U+202E, the isolates U+2066-U+2069) and the
line and paragraph separators U+2028 and U+2029 (Unicode's only Zl and Zp characters) as
``\\uNNNN``. The bidi controls reorder what the operator reads ("Trojan Source"); the separators
end a line for many readers (a log viewer, JavaScript) though not for the terminal.

The JSON that our own commands print (``wait``'s and the scheduler's events, ``schedule ...
--json``) goes through ``terminal_safe_json``: JSON escapes C0 controls but not the rest, which
it writes as ``\\u`` escapes, the same JSON value in bytes that cannot act on a terminal. The
reference's twelve actions keep the reference's bytes (byte compatibility).
"""

from __future__ import annotations

import re

# What is shown visibly beyond C0, DEL and C1: lone surrogates, every bidi control (marks,
# embeddings and overrides, isolates) and the line and paragraph separators (categories Zl, Zp).
_INVISIBLE = "\ud800-\udfff\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029"
_UNSAFE_MULTILINE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")
# The single-line form also escapes \t and \n: a newline in an identity would forge a line.
_UNSAFE_ONE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}]")
# What JSON text still carries raw (JSON escapes C0 itself). Only ever inside strings (JSON's own
# syntax is ASCII), where a \\uNNNN escape in its place is the same value.
_UNSAFE_IN_JSON = re.compile(f"[\x7f-\x9f{_INVISIBLE}]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x80 else f"\\u{code:04x}"


def terminal_safe(value: object, *, one_line: bool = False) -> str:
    """``value`` as text that cannot act on a terminal (``None`` becomes the empty string).

    ``one_line=True`` also shows newlines and tabs as ``\\x0a``/``\\x09``: use it for fields that
    must stay on one line (identities, file names, ids, single-line messages).
    """
    text = "" if value is None else value if isinstance(value, str) else str(value)
    pattern = _UNSAFE_ONE_LINE if one_line else _UNSAFE_MULTILINE
    if pattern.search(text) is None:
        return text
    return pattern.sub(_visible, text)


def terminal_safe_json(text: str) -> str:
    """JSON text with DEL, C1 controls, lone surrogates, bidi controls and line/paragraph
    separators written as ``\\uNNNN`` escapes: the same JSON value, bytes that cannot act on a
    terminal. Every JSON output of our own commands (wait, the scheduler, schedule ...) goes
    through it; the reference's actions keep the reference's bytes."""
    if _UNSAFE_IN_JSON.search(text) is None:
        return text
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def is_terminal_safe(text: str, *, one_line: bool = False) -> bool:
    """True when ``terminal_safe`` would return ``text`` unchanged."""
    pattern = _UNSAFE_ONE_LINE if one_line else _UNSAFE_MULTILINE
    return pattern.search(text) is None
