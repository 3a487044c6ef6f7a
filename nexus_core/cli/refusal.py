"""How every ``nexus`` command prints a refusal (SPEC 8.4), and ours the same way.

With ``--json``: one compact line on stdout, the reference's envelope
``{"schemaVersion":1,"status":"error","error":<message>}``, and only when there is guidance a
trailing ``"hint"`` key. Without: ``Nexus: <message>`` as the first stderr line, exactly as the
reference prints it, then the hint on the lines after it. Terminal-safe: a message can quote a
worker's text.
"""

from __future__ import annotations

from typing import Any, NoReturn

from ..state import canonical
from .output import write

PREFIX = "Nexus: "


def envelope(message: str, hint: str | None) -> dict[str, Any]:
    """The reference's error object, and ours after its keys: the hint."""
    result: dict[str, Any] = {"schemaVersion": 1, "status": "error", "error": message}
    if hint:
        result["hint"] = hint
    return result


def json_line(message: str, hint: str | None, *, ours: bool = False) -> str:
    """The envelope as one line. ``ours``: a command of our own (not one of the reference's
    actions, whose bytes are kept): C1, bidi controls and separators written as ``\\u`` escapes,
    like all our JSON (``terminal_safe_json``)."""
    line = canonical.compact(envelope(message, hint))
    if ours:
        from ..terminal import terminal_safe_json

        line = terminal_safe_json(line)
    return line + "\n"


def human_text(message: str, hint: str | None, prefix: str = PREFIX) -> str:
    """``Nexus: <message>`` on its own line, then each line of the hint."""
    from ..terminal import terminal_safe  # its patterns cost some 0.5 ms: only when refusing

    lines = [prefix + terminal_safe(message, one_line=True)]
    lines += [terminal_safe(line, one_line=True) for line in (hint or "").splitlines()]
    return "\n".join(lines) + "\n"


def report(message: str, hint: str | None, as_json: bool, *, human_too: bool = False, ours: bool = False) -> None:
    """Print a refusal: the envelope on stdout with ``as_json`` (and, with ``human_too``, the
    human lines on stderr as well: ``nexus wait --json`` keeps its last stderr line), else
    the human lines on stderr."""
    import sys

    if as_json:
        write(sys.stdout, json_line(message, hint, ours=ours))
    if human_too or not as_json:
        write(sys.stderr, human_text(message, hint))


def refuse(error: BaseException, as_json: bool, *, human_too: bool = False, ours: bool = False) -> NoReturn:
    """Print ``error`` as a refusal (its exact message, its hint) and exit 1."""
    from ..errors import hint_of, message_of

    if isinstance(error, BrokenPipeError):
        raise error  # the output's reader has gone: output.broken_pipe's quiet end, not a refusal
    report(message_of(error), hint_of(error), as_json, human_too=human_too, ours=ours)
    raise SystemExit(1)
