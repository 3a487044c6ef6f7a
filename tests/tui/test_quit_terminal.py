"""Issue 13 item 1 end to end in a real terminal (tmux): ``nexus-tui`` quits during a launch
through the quit dialog's stop, the process exits and leaves no orphan child."""

from __future__ import annotations

import contextlib
import os
import re
import signal
from collections.abc import Callable
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
        assert pid_alive(child)
        # The state writer records the pid just after the spawn event that the screen shows.
        terminal.wait_for(lambda _: latest(root, "p")["process"]["childPid"] == child, "the pid on disk", timeout=30)
        app_pid = int(terminal.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())
        terminal.keys("C-q")
        terminal.wait_for(lambda s: "Quit: work is still running" in s and f"pid {child}" in s, "the quit dialog")
        terminal.keys("s")

        def exit_status() -> str:  # "0", "1"... or "signal N" once tmux has reaped the pane's process, else ""
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

        def exited() -> bool:
            # tmux sometimes leaves the exited app a zombie for a long while (seen under load with
            # tmux 3.3a): a zombie has exited, whatever tmux reports.
            return exit_status() != "" or _state(app_pid) in ("Z", None)

        try:
            terminal.wait_for(lambda _: exited(), "nexus-tui to exit")
        except AssertionError:
            threads = _dump_threads(terminal, app_pid, exit_status)
            raise AssertionError(
                f"nexus-tui did not exit after the quit dialog's stop; its threads:\n{threads}"
            ) from None
        status = exit_status()
    finally:
        terminal.close()
    assert status in ("0", ""), status  # "" : a zombie tmux had not reaped (its exit code unknown)
    assert not pid_alive(child), "the launched child outlived the dashboard"
    assert _state(app_pid) in ("Z", None)  # exited (a zombie until its parent reaps it)
    assert latest(root, "p")["process"]["receipt"]["reason"] == "supervisor-interrupted"


def _state(pid: int) -> str | None:
    """The process's state letter (R, S, Z...), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _dump_threads(terminal: Terminal, pid: int, exit_status: Callable[[], str]) -> str:
    """SIGABRT the hung app (PYTHONFAULTHANDLER dumps every thread on the pane) and return the pane."""
    os.kill(pid, signal.SIGABRT)
    with contextlib.suppress(AssertionError):
        terminal.wait_for(lambda _: exit_status() != "", "the dump of the hung nexus-tui", timeout=10)
    return terminal.tmux("capture-pane", "-p", "-J", "-S", "-300", "-t", "t")
