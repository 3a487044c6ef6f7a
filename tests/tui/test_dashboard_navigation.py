"""Navigation, filter, sort, copy, help, palette, the read-only gate and plain-text rendering."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_kit import (
    HOST,
    caught_up,
    cell,
    detail_text,
    eventually,
    finish,
    focused,
    loaded,
    quiet_app,
    row_keys,
    select,
    small_project,
)
from fixture_tools import relocate

from nexus_core import engine
from nexus_core.state.store import load_run
from nexus_core.timeutil import now_ms
from nexus_tui import actions
from nexus_tui.app import NexusApp
from nexus_tui.screens.help import HelpScreen

pytestmark = pytest.mark.asyncio


async def test_keys_move_between_runs_and_tasks_and_the_detail_follows(tmp_path: Path) -> None:
    root = str(relocate("inventory", tmp_path))
    app = quiet_app([root])
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        assert app.focused is pane.runs
        assert row_keys(pane.runs) == ["alpha", "alpha-2", "zeta"]
        assert pane.run_id == "alpha"
        await pilot.press("down", "down")
        assert pane.run_id == "zeta"
        assert row_keys(pane.tasks) == ["z-shared", "z-docs"]
        await pilot.press("tab")
        assert app.focused is pane.tasks
        await pilot.press("down")
        assert pane.task_id == "z-docs"
        assert "z-docs" in detail_text(app)
        await pilot.press("shift+tab", "up")
        assert pane.run_id == "alpha-2"
        assert row_keys(pane.tasks) == ["a2-shared"]
        assert "a2-shared" in detail_text(app)
        # Mouse: clicking a run row selects it.
        await pilot.click(pane.runs, offset=(2, 1))
        await pilot.pause()
        assert pane.run_id == "alpha"


async def test_filter_by_state_task_and_free_text(tmp_path: Path) -> None:
    root = str(relocate("lifecycle-mix", tmp_path))
    app = quiet_app([root])
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        every = row_keys(pane.tasks)
        assert len(every) == 8
        await pilot.press("slash", *"state:overdue")
        assert row_keys(pane.tasks) == ["t-running"]
        await pilot.press("enter")
        assert app.focused is pane.tasks
        assert pane.filter_input.display
        await pilot.press("slash")
        assert focused(app) is pane.filter_input
        for text, expected in (
            ("state:accepted", ["t-retried", "t-accepted", "t-dependent"]),
            ("task:dep", ["t-dependent"]),
            ("rejected", ["t-problem"]),
            ("state:to-verify", ["t-completed"]),
            ("state:attention", ["t-running", "t-problem"]),
            ("state:attention completed", ["t-problem"]),
        ):
            pane.filter_input.value = text  # as if typed: the Changed message (bubbling up) applies it

            def filtered(expected: list[str] = expected) -> bool:
                return row_keys(pane.tasks) == expected

            await eventually(pilot, filtered, what=text)
        await pilot.press("escape")
        assert row_keys(pane.tasks) == every
        assert not pane.filter_input.display


async def test_sort_cycles_columns_reverses_and_keeps_the_cursor_row(tmp_path: Path) -> None:
    root = str(relocate("lifecycle-mix", tmp_path))
    app = quiet_app([root])
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        plan_order = row_keys(pane.tasks)
        await select(pilot, "mix", "t-problem")
        await pilot.press("s")  # sort the focused task table by its first column: task id
        assert row_keys(pane.tasks) == sorted(plan_order)
        assert pane.task_id == "t-problem"
        assert pane.tasks.cursor_row == row_keys(pane.tasks).index("t-problem")
        await pilot.press("S")
        assert row_keys(pane.tasks) == sorted(plan_order, reverse=True)
        await pilot.press("s")  # next column: depends on (tasks with dependencies last)
        assert set(row_keys(pane.tasks)[-2:]) == {"t-idle", "t-dependent"}
        # Clicking a header sorts by it: overdue first.
        pane.sort_by(pane.tasks, "overdue")
        await pilot.pause()
        assert row_keys(pane.tasks)[0] == "t-running"


async def test_copy_help_palette_and_the_read_only_gate(tmp_path: Path) -> None:
    root = str(relocate("locks", tmp_path))
    app = quiet_app([root], read_only=True)
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        await pilot.press("c")
        assert app.clipboard == "guarded"
        await select(pilot, "guarded", "g-one")
        await pilot.press("c")
        attempt_id = load_run(root, "guarded")["tasks"][0]["attempts"][-1]["id"]
        assert app.clipboard == attempt_id
        await app.run_action("copy_lock_fingerprint")
        assert pane.snapshot is not None and app.clipboard == pane.snapshot.writer_lock.fingerprint
        assert len(app.clipboard) == 64
        await app.run_action("copy_state_path")
        assert app.clipboard == f"{root}/.bmad-plus/nexus/runs/guarded.json"

        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")

        titles = {command.title for command in app.get_system_commands(app.screen)}
        assert {"Copy run id", "Copy attempt id", "Copy writer.lock fingerprint", "Filter", "Sort"} <= titles

        # One gate: a mutating action is refused in read-only mode, everywhere at once.
        mutating = actions.ActionSpec("demo_mutation", "", "Demo mutation", "Changes state.", mutating=True)
        actions.register(mutating)
        try:
            assert app.check_action("demo_mutation", ()) is None
            assert "Demo mutation" not in {c.title for c in app.get_system_commands(app.screen) if c.discover}
            app.read_only = False
            assert app.check_action("demo_mutation", ()) is True
            assert "Demo mutation" in {c.title for c in app.get_system_commands(app.screen) if c.discover}
        finally:
            actions.REGISTRY.remove(mutating)


async def test_pause_freezes_the_view_until_resumed(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")
    app = quiet_app([root])
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        await pilot.press("f")
        assert not app.following
        engine.start_task(root, "live", "t2", {"backend": HOST})
        app.request_scan(everything=True)
        await caught_up(pilot)  # the scan ran and its result arrived: held, not shown
        assert cell(pane.tasks, "t2", "execution") == "not started"
        assert pane.session.pending is not None
        await pilot.press("f")
        assert cell(pane.tasks, "t2", "execution") == "running"


async def test_untrusted_text_is_shown_literally_never_as_markup(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")
    summary = "[bold red]boom[/] [link=http://x]click[/link] \x1b[31m"
    finish(root, "live", "t1", summary=summary, accept=False)
    app = quiet_app([root])
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        await select(pilot, "live", "t1")
        text = detail_text(app)
        assert "[bold red]boom[/] [link=http://x]click[/link] \\x1b[31m" in text
        assert isinstance(app, NexusApp)


async def test_a_sorted_table_sorts_by_model_values_across_partial_updates(tmp_path: Path) -> None:
    # Sorting maps the table's cell objects to row keys: after a scan updates some cells of a
    # row and keeps the others, the next sort still finds every row (it once raised KeyError).
    root = small_project(tmp_path / "p", tasks=4)
    app = quiet_app([root])
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        await select(pilot, "live", "t1")
        pane = app.pane
        pane.sort_by(pane.tasks, "execution")
        finish(root, "live", "t1")
        scans = app.scans_applied
        app.request_scan(everything=True)
        await eventually(
            pilot, lambda: app.scans_applied > scans and cell(pane.tasks, "t1", "acceptance") == "accepted"
        )
        pane.refresh_times(now_ms() + 5_000)  # the tick: age cells change, task cells do not
        pane.sort_by(pane.tasks, "acceptance", reverse=False)
        await pilot.pause()
        assert row_keys(pane.tasks)[0] == "t1"  # "accepted" sorts before "pending"
        assert sorted(row_keys(pane.tasks)) == ["t1", "t2", "t3", "t4"]
