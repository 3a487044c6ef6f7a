"""Snapshots of the main views on the deterministic demo: fixed size, frozen clock, no watcher,
no tick, no periodic rescan, no focused input (so no cursor blink).

The demo is built once per worker by the real core with a fixed start time, seed and recorded
identity (pid 4242 on `demo-host`); the machine-specific bits left (this host's name for the
lock liveness probe, the interpreter's file name) are pinned below. Review every SVG you
accept: `pytest tests/tui/test_dashboard_snapshots.py --snapshot-update`, then open them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from dashboard_kit import select, then
from textual.pilot import Pilot

SIZE = (170, 46)


def test_overview_with_a_stale_accepted_task(snap_compare: Any, demo_app: Callable[[], Any]) -> None:
    async def pick(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "release-notes")

    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=then(pick))


def test_failed_verification_then_retry(snap_compare: Any, demo_app: Callable[[], Any]) -> None:
    async def pick(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "migrate")

    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=then(pick))


def test_cancelled_attempt_awaiting_reconciliation(snap_compare: Any, demo_app: Callable[[], Any]) -> None:
    async def pick(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "cleanup")

    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=then(pick))


def test_filter_on_tasks_needing_attention(snap_compare: Any, demo_app: Callable[[], Any]) -> None:
    async def pick(pilot: Pilot[None]) -> None:
        await select(pilot, "release")
        await pilot.press("slash", *"state:attention", "enter")

    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=then(pick))


def test_help_screen(snap_compare: Any, demo_app: Callable[[], Any]) -> None:
    async def pick(pilot: Pilot[None]) -> None:
        # A task selected first, as in the other views: the detail pane behind the help screen is
        # then filled before the screenshot (with the default focus it could still be filling).
        await select(pilot, "release", "release-notes")
        await pilot.press("question_mark")

    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=then(pick))


def test_main_screen_in_a_light_theme(snap_compare: Any, demo_app: Callable[[], Any]) -> None:
    """The same view as the overview (a dark theme), in textual-light: every colour, the task
    states' included, comes from the theme."""

    async def pick(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "release-notes")
        pilot.app.theme = "textual-light"
        await pilot.pause()

    assert snap_compare(demo_app(), terminal_size=SIZE, run_before=then(pick))


async def test_the_theme_picker_recolours_the_task_states(demo_app: Callable[[], Any]) -> None:
    from textual.theme import BUILTIN_THEMES

    def success(theme: str) -> str:
        return BUILTIN_THEMES[theme].to_color_system().generate()["success"].lower()

    app = demo_app()
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(app.loaded.wait(), 60)
        await select(pilot, "release", "release-notes")

        def task_cell_styles() -> set[str]:
            return {str(app.pane.tasks.get_cell(key, "task").style).lower() for key in app.pane.tasks.rows}

        assert success("gruvbox") != success("textual-dark")
        assert f"bold {success('textual-dark')}" in task_cell_styles()  # accepted tasks
        app.theme = "gruvbox"
        await pilot.pause()
        assert f"bold {success('gruvbox')}" in task_cell_styles()
        assert not any(success("textual-dark") in style for style in task_cell_styles())
