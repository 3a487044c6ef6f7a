"""The one error type of the engine.

The reference distinguishes engine errors (their text starts with ``Nexus: ``), path-safety
errors and CLI errors (no prefix). The message is kept exactly as the reference prints it, so the
CLI can prefix ``Nexus: `` once more, as the reference does.
"""

from __future__ import annotations

ENGINE_PREFIX = "Nexus: "


class NexusError(Exception):
    """Raised for every refusal; ``str(error)`` is the exact interface text."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def fail(text: str) -> NexusError:
    """An engine error: the message carries the ``Nexus: `` prefix, like the reference."""
    return NexusError(ENGINE_PREFIX + text)


def message_of(error: BaseException) -> str:
    """The one text of an error, for people and for stored receipts alike: a NexusError's exact
    interface text (or any error's ``message`` string, e.g. the dashboard's refusals), an
    OSError's reason and file, else ``str(error)``."""
    message = getattr(error, "message", None)
    if isinstance(message, str):
        return message
    if isinstance(error, OSError) and error.filename:
        return f"{error.strerror}: {error.filename}"
    return str(error)
