"""A terminal that hangs up (an SSH session dropped, tmux killed) ends the dashboard.

Textual's writer thread dies on the first write to a hung-up terminal (EIO); the app's next
writes then fill its queue of 30 and wait forever, the last in ``LinuxDriver.close``: a
``nexus-tui`` was found stuck so after a whole-suite run. ``TerminalDriver`` writes through
``HangupSafeOutput``, which drops writes once one has failed."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import threading
import time
from pathlib import Path

from test_terminal_bytes import dashboard_command
from textual.drivers._writer_thread import WriterThread
from tui_actions_support import make_project

from nexus_tui.terminal_driver import HangupSafeOutput


def test_the_writer_thread_outlives_a_terminal_that_hung_up() -> None:
    master, slave = os.openpty()
    os.close(master)  # the terminal hangs up: every write to the slave now fails (EIO)
    stream = os.fdopen(slave, "w", encoding="utf-8")
    output = HangupSafeOutput(stream)
    writer = WriterThread(output)  # type: ignore[arg-type]  # any stream with write and flush
    writer.start()
    stopped = threading.Event()

    def write_then_stop() -> None:
        for n in range(200):  # far more than the queue holds
            writer.write(f"frame {n}\n")
        writer.stop()
        stopped.set()

    threading.Thread(target=write_then_stop, daemon=True).start()
    assert stopped.wait(30), "the app's writes waited forever on the writer thread's queue"
    assert output.gone
    with contextlib.suppress(OSError):  # its buffer cannot be flushed to a hung-up terminal
        stream.close()


def test_a_hangup_ends_the_dashboard_with_status_129(tmp_path: Path) -> None:
    """The real ``nexus-tui`` in a pseudo-terminal of its own; the terminal goes away while it
    draws: it exits, as a shell reports SIGHUP, within a bound."""
    root = make_project(tmp_path)
    command = dashboard_command(root)
    pid, master = pty.fork()
    if pid == 0:  # the child: the pty's session leader, its controlling terminal the pty
        os.environ.pop("COLUMNS", None)
        os.environ.pop("LINES", None)
        os.execv(command[0], command)
    try:
        drawn = b""
        deadline = time.monotonic() + 60
        while b"Runs" not in drawn:  # the first frame is on the terminal
            assert time.monotonic() < deadline, f"never drawn: {drawn[-400:]!r}"
            if select.select([master], [], [], 0.5)[0]:
                drawn += os.read(master, 65536)
        os.close(master)  # the terminal hangs up: the kernel sends SIGHUP
        master = -1
        deadline = time.monotonic() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            assert time.monotonic() < deadline, "nexus-tui did not end after the hangup"
            time.sleep(0.05)
        assert os.waitstatus_to_exitcode(status) == 128 + signal.SIGHUP
    finally:
        if master >= 0:
            os.close(master)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
