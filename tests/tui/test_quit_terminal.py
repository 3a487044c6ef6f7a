"""Issue 13 item 1 end to end in a real terminal (tmux): ``nexus-tui`` quits during a launch
through the quit dialog's stop, the process exits and leaves no orphan child."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

from test_terminal_bytes import Terminal, dashboard_command
from tui_actions_support import latest, make_project, process_task_plan

from nexus_core.hostinfo import pid_alive


def test_quit_during_a_launch_stops_the_child_and_exits(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    (root / "hold-worker").write_text("")  # the worker runs until this file goes (never, here)
    terminal = Terminal(tmp_path)
    try:
        # faulthandler: a hung exit is dumped (SIGABRT below) instead of only timing out.
        terminal.start(["env", "PYTHONFAULTHANDLER=1", *dashboard_command(root)])
        terminal.wait_for(lambda s: "Runs (1)" in s, "the runs list")
        terminal.keys("Tab")  # the task table (task p selected)
        terminal.keys("l")
        terminal.wait_for(lambda s: "Launch" in s and "Cancel" in s, "the launch dialog")
        terminal.settle()
        terminal.keys("Tab", "Enter")  # from Cancel to the confirm button
        shown = terminal.wait_for(lambda s: re.search(r"Process running \(pid \d+\)", s) is not None, "the child")
        match = re.search(r"Process running \(pid (\d+)\)", shown)
        assert match is not None
        child = int(match.group(1))
        assert pid_alive(child) and latest(root, "p")["process"]["childPid"] == child
        app_pid = int(terminal.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())
        terminal.keys("C-q")
        terminal.wait_for(lambda s: "Quit: work is still running" in s and f"pid {child}" in s, "the quit dialog")
        terminal.keys("s")

        def exit_status() -> str:  # "0", "1"... or "signal N" once the pane's process is gone, else ""
            dead, status, signal_number = (
                terminal.tmux(
                    "display-message", "-p", "-t", "t", "#{pane_dead}:#{pane_dead_status}:#{pane_dead_signal}"
                )
                .strip()
                .split(":")
            )
            if dead != "1":
                return ""
            return status or (f"signal {signal_number}" if signal_number else "")

        try:
            terminal.wait_for(lambda _: exit_status() != "", "nexus-tui to exit")
        except AssertionError:
            os.kill(app_pid, signal.SIGABRT)
            terminal.wait_for(lambda _: exit_status() != "", "the dump of the hung nexus-tui", timeout=10)
            dump = terminal.tmux("capture-pane", "-p", "-J", "-S", "-300", "-t", "t")
            raise AssertionError(f"nexus-tui did not exit after the quit dialog's stop; its threads:\n{dump}") from None
        status = exit_status()
    finally:
        terminal.close()
    assert status == "0"
    assert not pid_alive(child), "the launched child outlived the dashboard"
    assert not os.path.exists(f"/proc/{app_pid}")
    assert latest(root, "p")["process"]["receipt"]["reason"] == "supervisor-interrupted"
