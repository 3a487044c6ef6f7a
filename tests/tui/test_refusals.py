"""A key whose action the gate refuses says why (issue 13 item 11), where it used to do nothing
visible: the reason is the gate's (actions.refusal: --read-only, or the Operation's availability
rule, or what the selection lacks), in the same words as the palette's entry for that action. No
screen opens and nothing changes; check_action stays the cached lookup it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dashboard_kit import caught_up, loaded, quiet_app, select, tree_fingerprint
from textual.app import SystemCommand
from tui_actions_support import accepted, make_project, task_plan

from nexus_tui import actions
from nexus_tui.app import NexusApp
from nexus_tui.discover_app import OVERVIEW_REFUSAL, DiscoverApp

pytestmark = pytest.mark.asyncio
SIZE = (130, 40)


def _warnings(app: NexusApp) -> list[tuple[str, str]]:
    return [(n.title, n.message) for n in app._notifications if n.severity == "warning"]


def _palette_entry(app: NexusApp, title: str) -> SystemCommand:
    return next(command for command in app.get_system_commands(app.screen) if command.title == title)


async def _press(app: NexusApp, pilot: Any, key: str) -> None:
    await pilot.press(key)
    await pilot.pause()
    assert app.screen is app.screen_stack[0], key  # no dialog, no screen


async def test_verify_on_an_accepted_task_says_why_in_the_palettes_words(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    accepted(root, "a")
    before = tree_fingerprint(str(root))
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        await caught_up(pilot)  # a scan still on its way would make a new snapshot, hence a new answer
        computations = app.availability_computations
        await _press(app, pilot, "v")
        expected = "Unavailable: The task is accepted; nothing can change it."
        assert _warnings(app) == [("Verify", expected)]
        assert app.availability_computations == computations  # the key reused the gate's answer
        # The palette: found by a search (not listed among the valid ones), with the same words;
        # choosing it says them again.
        command = _palette_entry(app, "Verify")
        assert (command.help, command.discover) == (expected, False)
        await command.callback()
        await pilot.pause()
        assert _warnings(app) == [("Verify", expected)] * 2
        assert app.check_action("act", ("verify",)) is None  # still shown disabled in the footer
    assert tree_fingerprint(str(root)) == before


async def test_under_read_only_a_mutation_key_gives_the_read_only_reason(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a")])
    before = tree_fingerprint(str(root))
    app = quiet_app([str(root)], read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        await _press(app, pilot, "b")  # start: valid for this task, refused by --read-only alone
        expected = actions.refused_words(actions.READ_ONLY_REFUSAL)
        assert _warnings(app) == [("Start", expected)]
        assert _palette_entry(app, "Start").help == expected
    assert tree_fingerprint(str(root)) == before


async def test_a_mutation_key_with_nothing_selected_says_what_to_select(tmp_path: Path) -> None:
    app = quiet_app([str(tmp_path)])  # no run at all
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await _press(app, pilot, "b")
        assert _warnings(app) == [("Start", "Unavailable: Select a task first.")]


async def test_a_project_key_on_the_discover_overview_says_to_open_a_project(tmp_path: Path) -> None:
    make_project(tmp_path / "team", [task_plan("a")])
    app = DiscoverApp(str(tmp_path), watch=False, rescan_seconds=0, tick=False, rediscover_seconds=0)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await _press(app, pilot, "slash")
        assert _warnings(app) == [("Filter", actions.refused_words(OVERVIEW_REFUSAL))]
        assert _palette_entry(app, "Filter").help == actions.refused_words(OVERVIEW_REFUSAL)


async def test_a_schedule_key_on_the_read_only_panel_gives_the_read_only_reason(tmp_path: Path) -> None:
    from dashboard_kit import eventually, small_project

    from nexus_core.schedule import core
    from nexus_core.timeutil import now_ms
    from nexus_tui.screens.schedules import SchedulesScreen

    root = small_project(tmp_path / "p")
    core.add_schedule(root, core.NewSchedule("live", "every", "1h", "UTC"), now_ms())
    before = tree_fingerprint(root)
    app = quiet_app([root], read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await pilot.press("w")
        await eventually(pilot, lambda: isinstance(app.screen, SchedulesScreen) and app.screen.loads > 0)
        panel = app.screen
        await pilot.press("p")  # pause, on the panel
        await pilot.pause()
        assert app.screen is panel
        expected = actions.refused_words(actions.READ_ONLY_REFUSAL)
        assert _warnings(app) == [("Pause", expected)]
        refused = {c.title for c in app.get_system_commands(panel) if c.help == expected}
        assert {"Pause", "Resume", "Run now", "Delete"} <= refused  # the panel's palette entries
    assert tree_fingerprint(root) == before
