"""The line protocol of ``nexus observe``: what it writes (a hello, snapshots, changes,
heartbeats) and what it reads (control lines), one JSON object per line, and the bounded reader
both ends use.

The observer writes, on stdout (terminal-safe JSON, ``json_line``)::

    {"type":"hello","protocol":1,"nexus":"0.1.0"}            first, once
    {"type":"snapshot","project":0,"snapshot":{...}}          each project's full snapshot, once
    {"type":"change","project":0,"runs":[...],"snapshot":{...}}   then one per change: the run ids
                                                              in order, only the changed runs' views
    {"type":"rescanned","project":0,"token":"..."}            a requested fresh read is done
    {"type":"heartbeat","at":"2026-01-01T00:00:00.000Z"}      every HEARTBEAT_SECONDS
    {"type":"error","error":"..."}                            last, when it cannot go on

and reads, on stdin, control lines::

    {"focus":"RUN","project":0}                    keep RUN's full inspection (the detail pane)
    {"rescan":true,"project":0,"runs":["RUN"],"token":"..."}   re-read now (RUN in full), then
                                                   answer "rescanned" with the token

A reader refuses a hello whose protocol it does not speak, naming both versions. No line may be
longer than MAX_LINE_BYTES: a longer one ends the stream with an error, and the reader never
holds more than that in memory.
"""

from __future__ import annotations

import json
import os
import select
import time
from typing import Any

PROTOCOL = 1
# One line holds one project's snapshot (or one changed run's full inspection: a run file is at
# most 16 MiB, store.STATE_LIMIT). Anything longer is refused, never buffered.
MAX_LINE_BYTES = 32 * 1024 * 1024
HEARTBEAT_SECONDS = 2.0
READ_CHUNK_BYTES = 1 << 16


class ProtocolError(Exception):
    """The other end does not speak this protocol (the message says how, terminal-safe)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LineTooLong(ProtocolError):
    pass


def encode(message: dict[str, Any]) -> str:
    """One line of the protocol: our commands' terminal-safe JSON (wait's events use it too)."""
    from .supervise.events import json_line

    return json_line(message)


def hello(version: str) -> dict[str, Any]:
    return {"type": "hello", "protocol": PROTOCOL, "nexus": version}


def preview(line: bytes, limit: int = 120) -> str:
    """The start of an unexpected line, for an error message (terminal-safe, one line)."""
    from .terminal import terminal_safe

    text = line[:limit].decode("utf-8", "replace")
    return terminal_safe(text + ("…" if len(line) > limit else ""), one_line=True)


def decode(line: bytes) -> dict[str, Any]:
    """A protocol line as an object; ProtocolError when it is not a JSON object."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        raise ProtocolError(f"not a JSON line: '{preview(line)}'") from None
    if not isinstance(value, dict):
        raise ProtocolError(f"not a JSON object: '{preview(line)}'")
    return value


def check_hello(line: bytes) -> str:
    """The observer's nexus version from its first line; ProtocolError unless it is a hello of
    this protocol (naming both versions when they differ)."""
    try:
        message = decode(line)
    except ProtocolError:
        raise ProtocolError(f"the remote command is not a nexus observer (its first line: '{preview(line)}')") from None
    if message.get("type") != "hello":
        raise ProtocolError(f"the remote command is not a nexus observer (its first line: '{preview(line)}')")
    version = message.get("nexus")
    theirs = message.get("protocol")
    if theirs != PROTOCOL:
        from .terminal import terminal_safe

        raise ProtocolError(
            f"the remote nexus {terminal_safe(version, one_line=True)} speaks observe protocol "
            f"{terminal_safe(json.dumps(theirs), one_line=True)}; this dashboard speaks protocol {PROTOCOL}"
        )
    return str(version)


def focus(run_id: str | None, project: int = 0) -> dict[str, Any]:
    return {"focus": run_id, "project": project}


def rescan(project: int = 0, runs: tuple[str, ...] = (), token: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"rescan": True, "project": project, "runs": list(runs)}
    if token is not None:
        message["token"] = token
    return message


class LineReader:
    """Lines from a file descriptor, each at most ``limit`` bytes (without its newline).

    ``readline`` returns the next line, None at the end of the stream, and raises
    :class:`LineTooLong` as soon as a line passes the limit (what was read of it is dropped) and
    TimeoutError when nothing arrives for ``timeout`` seconds. Memory: at most ``limit`` plus
    one chunk."""

    def __init__(self, fd: int, limit: int = MAX_LINE_BYTES) -> None:
        self.fd = fd
        self.limit = limit
        self._buffer = bytearray()
        self._searched = 0  # the buffer's prefix known to hold no newline
        self._ended = False

    def readline(self, timeout: float | None = None) -> bytes | None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            newline = self._buffer.find(b"\n", self._searched)
            if newline >= 0:
                if newline > self.limit:
                    raise self._too_long()
                line = bytes(self._buffer[:newline])
                del self._buffer[: newline + 1]
                self._searched = 0
                return line
            if len(self._buffer) > self.limit:
                raise self._too_long()
            self._searched = len(self._buffer)
            if self._ended:
                if self._buffer:  # a last line without its newline
                    line = bytes(self._buffer)
                    self._buffer.clear()
                    self._searched = 0
                    return line
                return None
            if deadline is not None:
                left = deadline - time.monotonic()
                ready, _, _ = select.select([self.fd], [], [], max(0.0, left))
                if not ready:
                    raise TimeoutError(f"nothing received for {timeout:g} s")
            chunk = os.read(self.fd, READ_CHUNK_BYTES)
            if not chunk:
                self._ended = True
            else:
                self._buffer += chunk

    def _too_long(self) -> LineTooLong:
        self._buffer = bytearray()  # free it now: the stream is given up
        self._searched = 0
        return LineTooLong(f"a line longer than {self.limit // (1024 * 1024)} MiB (the protocol's limit)")
