"""Issue 13 item 1: quitting while a launch or a verify runs opens the quit dialog (what runs,
its child's pid, for how long) with stop / wait / cancel; the app never hangs on a blank screen."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from dashboard_kit import eventually, laid_out, loaded, press_ending_the_app, quiet_app
from process_support import pid_alive
from textual.command import CommandList, CommandPalette
from textual.widgets import Button, Static
from tui_actions_support import latest, make_project, process_task_plan, record, start, write_result

from nexus_tui.app import NexusApp
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.progress import ProgressScreen
from nexus_tui.screens.quit import QuitScreen

SIZE = (120, 40)
EXIT_BOUND_SECONDS = 20.0


async def _until_exited(app: NexusApp) -> None:
    """The app has exited (its loop is gone, so no Pilot pause: plain asyncio waits)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + EXIT_BOUND_SECONDS
    while app.is_running:
        assert loop.time() < deadline, "the app did not exit"
        await asyncio.sleep(0.05)


async def _running(app: NexusApp, pilot: Any, action: str, task_id: str) -> ProgressScreen:
    """Open ``action`` on the task through the dashboard's flow, confirm, and wait for its child."""
    app.flow.open(action, app.directories[0], "demo", task_id)
    await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
    await eventually(pilot, lambda: laid_out(app.screen, "#confirm"))
    await pilot.click("#confirm")
    await eventually(pilot, lambda: isinstance(app.screen, ProgressScreen))
    progress = app.screen
    assert isinstance(progress, ProgressScreen)
    await eventually(pilot, lambda: progress.child_pid is not None)
    return progress


def _palette_options(app: NexusApp) -> list[str]:
    options = app.screen.query_one(CommandList)
    return [str(options.get_option_at_index(i).prompt).split("\n")[0] for i in range(options.option_count)]


def _quit_text(app: NexusApp) -> str:
    return str(app.screen.query_one("#quit-running", Static).render())


async def test_quit_during_a_launch_cancel_then_stop(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    (root / "hold-worker").write_text("")  # the worker runs until this file goes
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        progress = await _running(app, pilot, "launch", "p")
        child = progress.child_pid
        assert child is not None and pid_alive(child)
        await eventually(pilot, lambda: latest(root, "p")["process"]["childPid"] == child)  # written after the event

        await pilot.press("ctrl+q")
        await eventually(pilot, lambda: isinstance(app.screen, QuitScreen))
        shown = _quit_text(app)
        attempt_id = latest(root, "p")["id"]
        assert f"pid {child}" in shown and "launch of task p" in shown and attempt_id in shown
        assert "running for" in shown

        await pilot.click("#cancel")  # cancel the quit: the app and the child keep running
        await eventually(pilot, lambda: app.screen is progress)
        assert app.is_running and pid_alive(child) and not progress.finished

        await pilot.press("ctrl+q")
        await eventually(pilot, lambda: isinstance(app.screen, QuitScreen))
        await press_ending_the_app(app, "s")  # stop and quit
    assert not pid_alive(child)
    # What the core writes for a child its supervisor stopped (SPEC 3.12a).
    process = latest(root, "p")["process"]
    assert process["status"] == "finished"
    receipt = process["receipt"]
    assert (receipt["reason"], receipt["directChildSignalled"], receipt["outcome"]) == (
        "supervisor-interrupted",
        True,
        "ambiguous",
    )


async def test_quit_during_a_verify_stops_the_running_check(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    (root / "hold").write_text("")  # the check runs until this file goes
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        progress = await _running(app, pilot, "verify", "a")
        check = progress.child_pid
        assert check is not None and pid_alive(check)
        await pilot.press("ctrl+q")
        await eventually(pilot, lambda: isinstance(app.screen, QuitScreen))
        shown = _quit_text(app)
        assert f"pid {check}" in shown and "check result-ok (1 of 1)" in shown
        assert latest(root, "a")["id"] in shown
        await pilot.click("#stop")
        await _until_exited(app)
    assert not pid_alive(check)
    verification = latest(root, "a")["verification"]
    assert verification["status"] == "ambiguous"
    assert verification["checks"][0]["signal"] == "SIGTERM"


async def test_quit_and_wait_quits_when_the_work_ends(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    hold = root / "hold"
    hold.write_text("")
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await _running(app, pilot, "verify", "a")
        # The palette's Quit (q is not bound over a modal dialog; Ctrl+Q and the palette are).
        await pilot.press("ctrl+p")
        await eventually(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"quit")
        await eventually(pilot, lambda: "Quit" in _palette_options(app))
        await pilot.press("enter")
        await eventually(pilot, lambda: isinstance(app.screen, QuitScreen))
        await pilot.press("w")
        waiting = app.screen.query_one("#quit-waiting", Static)
        await eventually(pilot, lambda: "so far" in str(waiting.render()))
        assert app.is_running  # waiting: nothing is stopped
        hold.unlink()  # the check ends by itself
        await _until_exited(app)
    assert latest(root, "a")["verification"]["status"] == "passed"


async def test_quit_with_nothing_running_exits_at_once(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await press_ending_the_app(app, "ctrl+q")


async def test_the_quit_dialog_follows_work_that_ends_while_it_is_open(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    hold = root / "hold"
    hold.write_text("")
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await _running(app, pilot, "verify", "a")
        await pilot.press("ctrl+q")
        await eventually(pilot, lambda: isinstance(app.screen, QuitScreen))
        hold.unlink()  # the check ends by itself, no choice made yet
        await eventually(pilot, lambda: "ended after" in _quit_text(app))
        assert app.is_running  # nothing was chosen: the dialog still asks
        await eventually(pilot, lambda: str(app.screen.query_one("#stop", Button).label) == "Quit (s)")
        await press_ending_the_app(app, "s")
    assert latest(root, "a")["verification"]["status"] == "passed"
