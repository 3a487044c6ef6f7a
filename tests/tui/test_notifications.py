"""Telling the operator: a new need while the terminal is in the background rings the bell and/or
sends a desktop notification (OSC 9 / OSC 777), once per need id, one for a burst; nothing while
the terminal is focused, nothing for the needs already there at start-up (unless asked).

The Pilot tests capture what the app hands its driver; the tmux test runs ``nexus-tui`` in a real
terminal, reports focus as a terminal does (``ESC [ O`` / ``ESC [ I``) and counts the raw bytes
the app wrote (``pipe-pane``). Every need comes from a real file change."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from dashboard_kit import eventually, loaded, quiet_app
from textual import events
from textual.pilot import Pilot
from tui_actions_support import make_project, record, start, task_plan, write_dead_writer_lock

from nexus_tui.app import NexusApp
from nexus_tui.logic.settings import Settings

if TYPE_CHECKING:
    from test_terminal_bytes import Terminal

SIZE = (160, 40)
OSC = re.compile(rb"\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")


def _captured(app: NexusApp) -> list[str]:
    written: list[str] = []
    app.write_to_terminal = written.append  # type: ignore[method-assign,assignment]  # the one path to the driver
    return written


async def _rescan(app: NexusApp, pilot: Pilot[None], count: int) -> None:
    before = app.scans_applied
    app.request_scan(everything=True)
    await eventually(pilot, lambda: app.scans_applied > before and len(app.inbox_entries()) == count)
    await pilot.pause()


async def _blur(app: NexusApp, pilot: Pilot[None], blurred: bool = True) -> None:
    app.post_message(events.AppBlur() if blurred else events.AppFocus())
    await eventually(pilot, lambda: app.notifier.background is blurred)


async def test_a_need_while_blurred_rings_once_none_while_focused(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b"), task_plan("c")])
    start(root, "a")
    record(root, "a", outcome="blocked")  # there at start-up: never told
    app = quiet_app([str(root)])
    written = _captured(app)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await _blur(app, pilot)
        start(root, "b")
        record(root, "b", outcome="blocked")
        await _rescan(app, pilot, 2)
        await eventually(pilot, lambda: bool(written))
        assert written == ["\x07"]
        assert app.notifier.sent == ["nexus needs you: project: b: the worker reported it is blocked"]
        await _rescan(app, pilot, 2)  # the same need again: told once per id
        await _blur(app, pilot, False)
        start(root, "c")
        record(root, "c", outcome="blocked")
        await _rescan(app, pilot, 3)
        await _blur(app, pilot)  # it appeared while the operator was looking: never told
        write_dead_writer_lock(root)
        await _rescan(app, pilot, 4)
        await eventually(pilot, lambda: len(written) == 2)
    assert written == ["\x07", "\x07"]
    assert app.notifier.sent[1] == "nexus needs you: project: writer.lock left by pid 4194304, which is gone"


async def test_a_burst_is_one_notification_saying_how_many(tmp_path: Path) -> None:
    tasks = [task_plan(f"t{n}") for n in range(10)]
    root = make_project(tmp_path, tasks)
    settings = Settings(notifications="both")
    app = quiet_app([str(root)], settings=settings)
    written = _captured(app)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await _blur(app, pilot)
        (root / "checks" / "check.py").write_text("import sys\nsys.exit(0)\n")  # every task's resource
        await _rescan(app, pilot, 10)
        await eventually(pilot, lambda: bool(written) and not app.notification_due)
    [data] = written
    text = app.notifier.sent[0]
    assert text.startswith("nexus: 10 new needs; oldest project: t")
    assert data == f"\x07\x1b]9;{text}\x1b\\"


async def test_a_hostile_project_name_is_shown_visibly_in_the_notification(tmp_path: Path) -> None:
    """The project's label is a directory name anyone could pick: in the desktop notification's
    bytes its escape sequences are visible text that cannot end the OSC or start another."""
    root = tmp_path / "evil\x1b]52;c;AAAA\x07\x1b\\x\x9b2J"
    make_project(tmp_path, [task_plan("a")]).rename(root)  # its run is unreadable there: a need at start
    app = quiet_app([str(root)], settings=Settings(notifications="desktop"))
    written = _captured(app)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await _blur(app, pilot)
        write_dead_writer_lock(root)
        await _rescan(app, pilot, 2)
        await eventually(pilot, lambda: bool(written))
    [data] = written
    text = app.notifier.sent[0]
    assert data == f"\x1b]9;{text}\x1b\\"
    assert text.startswith("nexus needs you: evil\\x1b]52;c;AAAA\\x07\\x1b\\x\\u009b2J: writer.lock")
    assert not any(character in text for character in "\x1b\x07\x9b")


async def test_settings_startup_off_and_always(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "a")
    record(root, "a", outcome="blocked")
    # startup = true: the needs already there are told once, as one notification, blurred or not...
    settings = Settings(startup=True, when="always", desktop="osc777", notifications="desktop")
    app = quiet_app([str(root)], settings=settings)
    written = _captured(app)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await eventually(pilot, lambda: bool(written))
        told = "nexus needs you: project: a: the worker reported it is blocked"
        assert written == [f"\x1b]777;notify;nexus;{told}\x1b\\"]
        # ...and with when = "always", a new need is told while focused too.
        start(root, "b")
        record(root, "b", outcome="blocked")
        await _rescan(app, pilot, 2)
        await eventually(pilot, lambda: len(written) == 2)
    # notifications = "off": nothing, blurred or not.
    app = quiet_app([str(root)], settings=Settings(notifications="off", startup=True, when="always"))
    written = _captured(app)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await _blur(app, pilot)
        write_dead_writer_lock(root)
        await _rescan(app, pilot, 3)
        await eventually(pilot, lambda: not app.notification_due)  # the window closed: it would be out
    assert written == []


# ----------------------------------------------------------------- in a real terminal

TMUX = shutil.which("tmux")
FOCUS_OUT = ("1b", "5b", "4f")  # ESC [ O: what a terminal with focus reporting sends on blur
FOCUS_IN = ("1b", "5b", "49")


def _standalone_bells(raw: bytes) -> int:
    """BEL bytes that are a bell (not the end of an OSC sequence)."""
    return OSC.sub(b"", raw).count(b"\x07")


def _osc9(raw: bytes) -> list[bytes]:
    return re.findall(rb"\x1b\]9;([^\x07\x1b]*)\x1b\\", raw)


def _focus(terminal: Terminal, report: tuple[str, ...]) -> None:
    """The terminal reports focus lost or gained, and the app has taken it in: the report is
    followed by f (pause, then follow again), whose marks on screen come only once every input
    before them was handled. A need seen before the report is taken in is not told (it was
    seen in the foreground): under load, the next need's scan could come first."""
    terminal.tmux("send-keys", "-t", "t", "-H", *report)
    terminal.tmux("send-keys", "-t", "t", "f")
    terminal.wait_for(lambda s: "❚❚ paused" in s, "the pause after the focus report")
    terminal.tmux("send-keys", "-t", "t", "f")
    terminal.wait_for(lambda s: "● following" in s, "following again")


@pytest.mark.skipif(TMUX is None and os.environ.get("CI") != "true", reason="tmux is not installed")
def test_in_a_real_terminal_a_blurred_need_gives_one_bell_and_one_osc9(tmp_path: Path) -> None:
    from test_terminal_bytes import Terminal, dashboard_command

    tasks = [task_plan(f"t{n:02d}") for n in range(13)]
    root = make_project(tmp_path, tasks)
    start(root, "t00")
    record(root, "t00", outcome="blocked")  # there at start-up: never told
    config = tmp_path / "config.toml"
    config.write_text('[notifications]\nmode = "both"\n')
    terminal = Terminal(tmp_path)
    try:
        terminal.start([*dashboard_command(root), "--config", str(config)])
        terminal.wait_for(lambda s: "project (1)" in s and "Tasks of demo" in s, "the dashboard with 1 need")
        _focus(terminal, FOCUS_OUT)
        start(root, "t01")
        record(root, "t01", outcome="blocked")
        terminal.wait_for(lambda s: _standalone_bells(terminal.raw.read_bytes()) >= 1, "the bell")
        raw = terminal.raw.read_bytes()
        assert _standalone_bells(raw) == 1
        assert _osc9(raw) == [b"nexus needs you: project: t01: the worker reported it is blocked"]
        # Back in the foreground: a new need shows (the tab's count), nothing rings.
        _focus(terminal, FOCUS_IN)
        start(root, "t02")
        record(root, "t02", outcome="blocked")
        terminal.wait_for(lambda s: "project (3)" in s, "the third need on screen")
        # In the background again: ten needs at once (every task not started loses its
        # protected resource) are one bell and one notification that says ten.
        _focus(terminal, FOCUS_OUT)
        (root / "checks" / "check.py").write_text("import sys\nsys.exit(0)\n")
        terminal.wait_for(lambda s: _standalone_bells(terminal.raw.read_bytes()) >= 2, "the second bell", 90)
        terminal.wait_for(lambda s: "project (13)" in s, "every need on screen")
    finally:
        terminal.close()
    raw = terminal.raw.read_bytes()
    assert _standalone_bells(raw) == 2
    told = _osc9(raw)
    assert len(told) == 2 and told[1].startswith(b"nexus: 10 new needs; oldest project: t")
