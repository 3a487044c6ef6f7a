"""Stopping a child with everything it started. Each check and each launched process leads its
own session (``start_new_session``), so its process group holds its descendants (a shell's
``sleep``, ``npm test``'s node, pytest's workers); a stop sends SIGTERM to the whole group, then
SIGKILL to whatever of it is left once STOP_GRACE_SECONDS have passed.

Beyond the reference (SPEC 5.12a, 6.4), which signals its direct child only: there, a check
run by ``/bin/sh -c "sleep 25; ..."`` ignores a stop until it ends by itself, and a stopped
launch leaves a child that traps SIGTERM running. In its own session a check no longer sees a
terminal's Ctrl+C either: the owner (verify, launch) stops it on purpose and records why.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

STOP_GRACE_SECONDS = 1.0  # between SIGTERM to a group and SIGKILL to what is left of it
KILLED_PIPES_SECONDS = 1.0  # after SIGKILL: how long pipes held outside the group are read


def group_alive(pgid: int) -> bool:
    """Whether any process of the group is left (a zombie not yet reaped counts)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists (a member changed its user): the safe answer
    return True


class GroupStop:
    """The stop of one process group, driven by its owner's loop (never from a signal handler):
    :meth:`step` sends SIGTERM first and SIGKILL once the grace has passed; :meth:`kill` sends
    SIGKILL at once (a timeout, a forced exit). ``sent`` lists the signals the group received."""

    def __init__(self, pgid: int, grace: float = STOP_GRACE_SECONDS) -> None:
        self.pgid = pgid
        self.grace = grace
        self.sent: list[str] = []
        self.term_at: float | None = None
        self.killed_at: float | None = None

    def step(self, now: float | None = None) -> None:
        """Go on stopping: SIGTERM the first time, SIGKILL once the grace has passed and some of
        the group is still there."""
        moment = time.monotonic() if now is None else now
        if self.term_at is None:
            self.term_at = moment
            self._send(signal.SIGTERM)
        elif self.killed_at is None and moment - self.term_at >= self.grace and group_alive(self.pgid):
            self.kill(moment)

    def kill(self, now: float | None = None) -> None:
        if self.killed_at is None:
            self.killed_at = time.monotonic() if now is None else now
            self._send(signal.SIGKILL)

    @property
    def started(self) -> bool:
        return self.term_at is not None or self.killed_at is not None

    def pipes_abandoned(self, now: float) -> bool:
        """Killed long enough ago that pipes still open are held by a process outside the group."""
        return self.killed_at is not None and now - self.killed_at >= KILLED_PIPES_SECONDS

    def finish(self, poll_seconds: float = 0.05) -> None:
        """Once the group's leader has been reaped: stop what is left of the group the same way
        (a descendant that trapped SIGTERM and closed its pipes), SIGKILL after the grace."""
        if not self.started:
            return
        while group_alive(self.pgid) and self.killed_at is None:
            self.step()
            time.sleep(poll_seconds)

    def _send(self, number: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, number)
            self.sent.append(number.name)

    def words(self) -> str:
        """What the group received, in words: 'SIGTERM', 'SIGTERM, then SIGKILL after 1 s'."""
        if not self.sent:
            return "no signal (it had already ended)"
        if self.sent == ["SIGTERM", "SIGKILL"]:
            return f"SIGTERM, then SIGKILL after {self.grace:g} s"
        return ", ".join(self.sent)
