"""Issue 22 item 2: quitting the dashboard never waits on a reader. A thread blocked in a read
that never returns (here the scanner, reading through a FIFO nobody writes: what a hung network
filesystem does) must not keep ``nexus-tui`` alive once the operator pressed q or Ctrl+C.

A real terminal (tmux) and the real ``nexus-tui`` entry point; the only addition is a
wrapper that makes the scanner's read of the run file block first."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from test_quit_terminal import _state
from test_terminal_bytes import Terminal
from tui_actions_support import make_project

from nexus_tui.logic import model

# The dashboard as `nexus-tui -d ROOT` starts it, with the scanner's run-file read blocked on a
# FIFO that never gets a writer (the blocked thread is a worker of Textual's thread pool).
WRAPPER = """
import pathlib, sys
import nexus_tui.logic.model as model
fifo = sys.argv[1]
def blocked_read(root, run_id):
    pathlib.Path(fifo + ".blocking").write_text("the scanner is about to block")
    with open(fifo, "rb") as never:
        never.read()
    raise AssertionError("the FIFO never gets a writer")
model.read_state_bytes = blocked_read
from nexus_tui.cli import main
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("key", ["q", "C-c"])
def test_quit_ends_the_process_while_a_thread_is_blocked_in_a_read(tmp_path: Path, key: str) -> None:
    assert hasattr(model, "read_state_bytes")  # what the wrapper replaces
    root = make_project(tmp_path)
    fifo = tmp_path / "never-written.fifo"
    os.mkfifo(fifo)
    terminal = Terminal(tmp_path)
    try:
        terminal.start([sys.executable, "-c", WRAPPER, str(fifo), "-d", str(root)])
        terminal.wait_for(lambda s: "Runs" in s and "Tasks" in s, "the dashboard")
        blocking = Path(f"{fifo}.blocking")
        terminal.wait_for(lambda _: blocking.exists(), "the scanner to block on the FIFO")
        app_pid = int(terminal.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())
        terminal.keys(key)

        def exited() -> bool:
            dead = terminal.tmux("display-message", "-p", "-t", "t", "#{pane_dead}").strip() == "1"
            return dead or _state(app_pid) in ("Z", None)

        terminal.wait_for(lambda _: exited(), f"nexus-tui to exit after {key} (it waited on the blocked reader)")
        status = terminal.tmux("display-message", "-p", "-t", "t", "#{pane_dead_status}").strip()
    finally:
        terminal.close()
    assert status in ("0", ""), status  # "": a zombie tmux had not reaped yet
