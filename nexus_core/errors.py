"""A refusal: the reference's exact message, and apart from it our guidance (the hint).

The reference distinguishes engine errors (their text starts with ``Nexus: ``), path-safety
errors and CLI errors (no prefix). The message is kept exactly as the reference prints it, so the
CLI can prefix ``Nexus: `` once more, as the reference does. What we add (where in the plan, the
way out, the other forms of the command) is the ``hint``: never inside the message, so scripts
written for the reference match our refusals byte for byte. How a refusal is printed is
``nexus_core.cli.refusal``'s concern.
"""

from __future__ import annotations

ENGINE_PREFIX = "Nexus: "


class NexusError(Exception):
    """Raised for every refusal; ``str(error)`` is the exact interface text, ``hint`` our
    guidance (None when there is none)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


def fail(text: str, hint: str | None = None) -> NexusError:
    """An engine error: the message carries the ``Nexus: `` prefix, like the reference."""
    return NexusError(ENGINE_PREFIX + text, hint)


def message_of(error: BaseException) -> str:
    """The one exact text of an error, for the ``error`` of a JSON envelope and for stored
    receipts alike: a NexusError's interface text (or any error's ``message`` string, e.g. the
    dashboard's refusals), an OSError's reason and file, else ``str(error)``. Never the hint."""
    message = getattr(error, "message", None)
    if isinstance(message, str):
        return message
    if isinstance(error, OSError) and error.filename:
        return f"{error.strerror}: {error.filename}"
    return str(error)


def hint_of(error: BaseException) -> str | None:
    """Our guidance for ``error``, or None."""
    hint = getattr(error, "hint", None)
    return hint if isinstance(hint, str) and hint else None


def explained(error: BaseException) -> str:
    """The message and then the hint, on one line, as a person reads a refusal where there is
    one line for it (a notification, the dashboard's detail, the action log)."""
    message, hint = message_of(error), hint_of(error)
    if hint is None:
        return message
    # A message that ends on a value (a path, an id) gets "; " so the value stays whole.
    return f"{message}{' ' if message.endswith('.') else '; '}{hint}"
