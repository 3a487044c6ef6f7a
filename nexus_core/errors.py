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
