"""Telling the operator that something new needs them: which needs, when, and the bytes.

The app reports every need it sees (:meth:`Notifier.observe`) and whether the terminal is in the
background (Textual's AppBlur/AppFocus, from the terminal's focus reports). A need is told once
per id, and only when it appears while the terminal is in the background (or always, if the
settings say so: a terminal that does not report its focus); the needs already there when the
dashboard starts are not told unless the settings ask. Needs that appear close together are one
notification ("3 new needs ..."). The text is ours (kinds, task ids, the project's label), made
terminal-safe, never a worker's words. No widgets here: the app writes the bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from nexus_core.needs import Need
from nexus_core.terminal import terminal_safe

from .settings import Settings

COALESCE_SECONDS = 0.5  # needs appearing within this of the first are one notification
TEXT_LIMIT = 160
BELL = "\x07"
ST = "\x1b\\"  # String Terminator: ends an OSC without a BEL (a BEL is counted as the bell)


@dataclass
class Notifier:
    settings: Settings
    background: bool = False  # the terminal said it lost focus (and has not said it is back)
    started: bool = False
    seen: set[str] = field(default_factory=set)  # every need id observed (each is told once)
    pending: list[tuple[str, Need]] = field(default_factory=list)  # (project label, need) to tell
    sent: list[str] = field(default_factory=list)  # the notifications written (tests read them)

    @property
    def enabled(self) -> bool:
        return self.settings.notifications != "off"

    def start(self, current: Iterable[tuple[str, Need]]) -> None:
        """Everything is loaded: what is there now is "already there" (told only when the
        settings' ``startup`` asks, and then as one notification)."""
        self.started = True
        for label, need in current:
            if need.id in self.seen:
                continue
            self.seen.add(need.id)
            if self.settings.startup and self.enabled:
                self.pending.append((label, need))

    def observe(self, current: Iterable[tuple[str, Need]]) -> bool:
        """The needs open now (every project's). True when something waits to be told (the app
        then flushes after COALESCE_SECONDS, so that a burst is one notification)."""
        if not self.started:
            return False
        for label, need in current:
            if need.id in self.seen:
                continue
            self.seen.add(need.id)
            if self.enabled and self._telling():
                self.pending.append((label, need))
        return bool(self.pending)

    def _telling(self) -> bool:
        return self.background or self.settings.when == "always"

    def flush(self) -> str:
        """The bytes that tell the pending needs ("" when there is nothing to tell, or the
        operator came back meanwhile); the pending list is emptied either way."""
        pending, self.pending = self.pending, []
        if not pending or not self.enabled or not self._telling():
            return ""
        text = summary(pending)
        self.sent.append(text)
        data = ""
        if self.settings.notifications in ("bell", "both"):
            data += BELL
        if self.settings.notifications in ("desktop", "both"):
            if self.settings.desktop == "osc777":
                data += f"\x1b]777;notify;nexus;{text}{ST}"
            else:
                data += f"\x1b]9;{text}{ST}"
        return data


def summary(pending: list[tuple[str, Need]]) -> str:
    """One line for the pending needs: the one need, or how many and the oldest."""
    ordered = sorted(pending, key=lambda item: (item[1].since_ms is None, item[1].since_ms or 0))
    label, oldest = ordered[0]
    where = f"{label}: {oldest.text}"
    if len(pending) == 1:
        text = f"nexus needs you: {where}"
    else:
        text = f"nexus: {len(pending)} new needs; oldest {where}"
    # Our words and ids only, and nothing that could end or start a sequence: terminal_safe
    # shows every control character (ESC, BEL, C1) as visible text.
    return terminal_safe(text, one_line=True)[:TEXT_LIMIT]
