"""``nexus-tui --demo`` removes its temporary project when it ends (issue 24 item 6): on quit
(Ctrl+C, q), on SIGTERM (exit 143, also while the demo is still being built); ``--keep-demo``
keeps it and prints where. The real console script in a real terminal (tmux)."""

from __future__ import annotations

import os
import shlex
import signal
from pathlib import Path

import pytest
from test_terminal_bytes import Terminal, dashboard_command


def _command(tmp: Path, *options: str) -> list[str]:
    """nexus-tui --demo under a shell that writes its exit status beside ``tmp`` once it ends:
    tmux 3.3a with pipe-pane on sometimes leaves the ended pane process unreaped (a zombie, the
    pane never "dead"), so the status comes from the shell, not from tmux."""
    entry = dashboard_command(tmp)[0]
    command = shlex.join(["env", f"TMPDIR={tmp}", entry, "--demo", *options])
    return ["sh", "-c", f"{command}; echo $? > {shlex.quote(str(tmp.parent / 'exit-status'))}"]


def _exit_status(terminal: Terminal) -> str:
    """ "0", "143"... once nexus-tui has ended (the shell wrote its status), else ""."""
    status = Path(terminal.socket).with_name("exit-status")
    return status.read_text().strip() if status.exists() else ""


def _dashboard_pid(terminal: Terminal) -> int:
    """nexus-tui's pid: the one child of the pane's shell."""
    shell = int(terminal.tmux("display-message", "-p", "-t", "t", "#{pane_pid}").strip())
    (child,) = Path(f"/proc/{shell}/task/{shell}/children").read_text().split()
    return int(child)


def _demos(tmp: Path) -> list[str]:
    return sorted(name for name in os.listdir(tmp) if name.startswith("nexus-demo-"))


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    directory = tmp_path / "tmp"
    directory.mkdir()
    return directory


@pytest.mark.parametrize("key", ["C-c", "q"])
def test_quitting_removes_the_demo_project(tmp_path: Path, tmp: Path, key: str) -> None:
    terminal = Terminal(tmp_path)
    try:
        terminal.start(_command(tmp))
        terminal.wait_for(lambda s: "Runs (3)" in s, "the demo's runs", timeout=120)
        assert len(_demos(tmp)) == 1
        terminal.keys(key)
        terminal.wait_for(lambda _: _exit_status(terminal) != "", "nexus-tui to exit")
        assert _exit_status(terminal) == "0"
        assert "kept" not in terminal.screen()
    finally:
        terminal.close()
    assert _demos(tmp) == []


def test_keep_demo_keeps_it_and_says_where(tmp_path: Path, tmp: Path) -> None:
    terminal = Terminal(tmp_path)
    try:
        terminal.start(_command(tmp, "--keep-demo"))
        terminal.wait_for(lambda s: "Runs (3)" in s, "the demo's runs", timeout=120)
        terminal.keys("q")
        terminal.wait_for(lambda _: _exit_status(terminal) != "", "nexus-tui to exit")
        (demo,) = _demos(tmp)
        shown = terminal.tmux("capture-pane", "-p", "-J", "-S", "-100", "-t", "t")  # with the scrolled-off lines
    finally:
        terminal.close()
    path = os.path.realpath(tmp / demo)
    assert f"The demo project is kept in {path}" in shown
    assert Path(path, ".bmad-plus", "nexus", "runs").is_dir()


@pytest.mark.parametrize("when", ["while building", "once built"])
def test_sigterm_removes_the_demo_project_and_exits_143(tmp_path: Path, tmp: Path, when: str) -> None:
    terminal = Terminal(tmp_path)
    try:
        terminal.start(_command(tmp))
        if when == "while building":
            terminal.wait_for(lambda s: "Building the demo project" in s, "the first frame", timeout=120)
        else:
            terminal.wait_for(lambda s: "Runs (3)" in s, "the demo's runs", timeout=120)
        assert len(_demos(tmp)) == 1
        os.kill(_dashboard_pid(terminal), signal.SIGTERM)
        terminal.wait_for(lambda _: _exit_status(terminal) != "", "nexus-tui to exit")
        assert _exit_status(terminal) == "143"
    finally:
        terminal.close()
    assert _demos(tmp) == []


def test_keep_demo_alone_is_a_usage_error(tmp_path: Path) -> None:
    import subprocess

    done = subprocess.run(
        [dashboard_command(tmp_path)[0], "--keep-demo"], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert done.returncode == 1 and "--keep-demo goes with --demo." in done.stderr
