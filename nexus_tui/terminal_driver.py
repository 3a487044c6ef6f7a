"""The real terminal's driver: Textual's LinuxDriver, whose output survives the terminal going away.

Textual writes the screen from a thread that takes text from a queue of 30. A write to a
terminal that hung up (an SSH session dropped, tmux killed: EIO) kills that thread; the app's
next writes then fill the queue and wait forever, the last one in ``LinuxDriver.close``. The
dashboard never exited (and ``--demo`` never removed its project). Here the output stream drops
every write once one has failed: the thread lives on, the app ends as for any SIGHUP.
"""

from __future__ import annotations

from typing import Any, TextIO, cast

from textual.drivers.linux_driver import LinuxDriver


class HangupSafeOutput:
    """A text stream for Textual's writer thread: once a write or a flush fails (the terminal
    is gone), every later one is dropped instead of raised."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):  # EIO, EPIPE; ValueError: the stream was closed
                self.gone = True
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self.gone = True

    def fileno(self) -> int:
        return self._stream.fileno()

    def isatty(self) -> bool:
        return self._stream.isatty()


class TerminalDriver(LinuxDriver):
    """LinuxDriver writing through :class:`HangupSafeOutput`."""

    def __init__(self, app: Any, **options: Any) -> None:
        super().__init__(app, **options)
        if self._file is not None:
            self._file = cast(Any, HangupSafeOutput(self._file))  # the writer thread takes any stream
