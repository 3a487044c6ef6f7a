"""Navigation operators already know (issue 24 item 5): j/k, g/G and Home/End in the tables, the
jump prompt (:), the search of every run (/) and n/N to the next task that needs attention (the
core's classifier, the inbox's needs). Real projects made by the engine, driven by Pilot."""

from __future__ import annotations

from pathlib import Path

import pytest
from dashboard_kit import eventually, focused, loaded, quiet_app, row_keys
from textual.widgets import Input
from tui_actions_support import make_project, record, start, task_plan

from nexus_core import engine
from nexus_tui import actions
from nexus_tui.app import NexusApp
from nexus_tui.screens.jump import JumpScreen

SIZE = (160, 45)


def _project(tmp_path: Path) -> Path:
    """Runs demo (a, b, c, d), api (users, login) and web (login, pages): needs on demo/b
    (blocked), web/pages (blocked) and api/users (cancelled, to reconcile)."""
    root = make_project(tmp_path, [task_plan(name) for name in ("a", "b", "c", "d")])
    for run_id, tasks in (("api", ("users", "login")), ("web", ("login", "pages"))):
        for task in tasks:
            (root / "out" / task).mkdir(parents=True, exist_ok=True)
        engine.create_run(str(root), {"id": run_id, "maxParallel": 4, "tasks": [task_plan(t) for t in tasks]})
    start(root, "b")
    record(root, "b", outcome="blocked")
    start(root, "pages", run_id="web")
    record(root, "pages", outcome="blocked", run_id="web")
    start(root, "users", run_id="api")
    engine.cancel_task(str(root), "api", "users", {"reason": "stop"})
    return root


async def _on_tasks(app: NexusApp, run_id: str) -> None:
    pane = app.pane
    pane.select(run_id, None)
    pane.tasks.focus()


@pytest.mark.asyncio
async def test_j_k_g_G_home_end_move_the_focused_tables_cursor(tmp_path: Path) -> None:
    root = _project(tmp_path)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        runs = row_keys(pane.runs)
        assert app.focused is pane.runs
        await pilot.press("j")
        await eventually(pilot, lambda: pane.run_id == runs[1])
        await pilot.press("G")
        await eventually(pilot, lambda: pane.run_id == runs[-1])
        await pilot.press("k")
        await eventually(pilot, lambda: pane.run_id == runs[-2])
        await pilot.press("g")
        await eventually(pilot, lambda: pane.run_id == runs[0])
        await pilot.press("end")
        await eventually(pilot, lambda: pane.run_id == runs[-1])
        await pilot.press("home")
        await eventually(pilot, lambda: pane.run_id == runs[0])
        # The task table: the same keys; Home/End go to the first and last row, not sideways.
        await _on_tasks(app, "demo")
        await eventually(pilot, lambda: row_keys(pane.tasks) == ["a", "b", "c", "d"])
        await pilot.press("end")
        await eventually(pilot, lambda: pane.task_id == "d")
        assert pane.tasks.scroll_x == 0
        await pilot.press("home")
        await eventually(pilot, lambda: pane.task_id == "a")
        await pilot.press("j", "j")
        await eventually(pilot, lambda: pane.task_id == "c")
        await pilot.press("k")
        await eventually(pilot, lambda: pane.task_id == "b")
        await pilot.press("G")
        await eventually(pilot, lambda: pane.task_id == "d")
        await pilot.press("g")
        await eventually(pilot, lambda: pane.task_id == "a")


@pytest.mark.asyncio
async def test_n_lands_on_the_task_whose_need_the_inbox_lists_and_N_goes_back(tmp_path: Path) -> None:
    root = _project(tmp_path)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        needs = {(need.run, need.task) for _, _, need in app.inbox_entries()}
        assert needs == {("demo", "b"), ("web", "pages"), ("api", "users")}
        runs = row_keys(pane.runs)
        assert runs == ["api", "demo", "web"]
        pane.select("demo", "a")
        pane.tasks.focus()
        await eventually(pilot, lambda: (pane.run_id, pane.task_id) == ("demo", "a"))
        # From demo/a: demo/b, then web/pages, then round to api/users (runs in the list's order).
        expected = [("demo", "b"), ("web", "pages"), ("api", "users")]
        seen: list[tuple[str | None, str | None]] = []
        for place in expected:
            await pilot.press("n")
            await eventually(pilot, lambda place=place: (pane.run_id, pane.task_id) == place)  # type: ignore[misc]
            seen.append((pane.run_id, pane.task_id))
        assert seen == expected
        await pilot.press("n")  # round again
        await eventually(pilot, lambda: (pane.run_id, pane.task_id) == ("demo", "b"))
        await pilot.press("N")  # and back
        await eventually(pilot, lambda: (pane.run_id, pane.task_id) == ("api", "users"))
        await pilot.press("N")
        await eventually(pilot, lambda: (pane.run_id, pane.task_id) == ("web", "pages"))
        assert app.focused is pane.tasks


@pytest.mark.asyncio
async def test_n_says_so_when_nothing_needs_attention(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a")])
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await pilot.press("n")
        await eventually(pilot, lambda: any("No task needs attention" in str(n.message) for n in app._notifications))
        assert app.pane.task_id in (None, "a")


@pytest.mark.asyncio
async def test_colon_jumps_to_a_run_or_a_task_with_completion(tmp_path: Path) -> None:
    root = _project(tmp_path)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        # A task id that one run only has: just TASK.
        await pilot.press("colon")
        await eventually(pilot, lambda: isinstance(app.screen, JumpScreen))
        await pilot.press(*"pag", "tab")
        jump = app.screen
        assert isinstance(jump, JumpScreen)
        assert jump.query_one(Input).value == "pages"  # what starts with the typed text comes first
        await pilot.press("enter")
        await eventually(pilot, lambda: (pane.run_id, pane.task_id) == ("web", "pages"))
        # RUN/TASK typed in full.
        await pilot.press("colon", *"api/login", "enter")
        await eventually(pilot, lambda: (pane.run_id, pane.task_id) == ("api", "login"))
        # A run.
        await pilot.press("colon", *"demo", "enter")
        await eventually(pilot, lambda: pane.run_id == "demo" and not isinstance(app.screen, JumpScreen))
        # An ambiguous task id (login is in api and web) says so and stays open.
        await pilot.press("colon", *"login")
        await eventually(pilot, lambda: isinstance(app.screen, JumpScreen))
        jump = app.screen
        assert isinstance(jump, JumpScreen)
        listed = [c.text for c in jump.shown]
        assert listed == ["api/login", "web/login"]
        jump.query_one(Input).value = "login"
        await jump.query_one(Input).action_submit()
        await pilot.pause()
        assert isinstance(app.screen, JumpScreen) and pane.run_id == "demo"
        assert "in 2 runs" in str(jump.query_one("#jump-problem").render())
        # ↓ picks the second candidate, Enter goes there.
        await pilot.press("down", "enter")
        await eventually(pilot, lambda: (pane.run_id, pane.task_id) == ("web", "login"))
        await pilot.press("colon", "escape")
        await eventually(pilot, lambda: not isinstance(app.screen, JumpScreen))


@pytest.mark.asyncio
async def test_slash_lists_the_other_runs_matches_and_enter_goes_there(tmp_path: Path) -> None:
    root = _project(tmp_path)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        pane.select("demo", None)
        await eventually(pilot, lambda: pane.run_id == "demo")
        await pilot.press("slash", *"state:blocked")
        # The selected run's table is filtered (the existing syntax) ...
        await eventually(pilot, lambda: row_keys(pane.tasks) == ["b"])
        # ... and the other runs' matching tasks are listed under it.
        search = pane.search_list
        await eventually(pilot, lambda: search.display and search.option_count == 1)
        assert "In other runs: 1 task in 1 run" in str(search.border_title)
        assert "web › pages" in str(search.get_option_at_index(0).prompt)
        await pilot.press("down")
        assert app.focused is search
        await pilot.press("enter")
        await eventually(pilot, lambda: (pane.run_id, pane.task_id) == ("web", "pages"))
        assert not search.display and focused(app) is pane.tasks
        assert pane.session.filter_text == "state:blocked"
        # Free text across runs: "login" is in api and web.
        await pilot.press("slash")
        pane.filter_input.value = "login"
        await eventually(pilot, lambda: pane.session.filter_text == "login" and search.display)
        # web's own login is in the table; api's is listed.
        assert [str(search.get_option_at_index(i).prompt) for i in range(search.option_count)] == [
            "· api › login  not started"
        ]
        await pilot.press("escape")
        await eventually(pilot, lambda: not search.display and not pane.session.filter_text)


def test_the_moved_keys_and_the_navigation_keys_are_the_registrys() -> None:
    keys = {entry.id: entry.keys for entry in actions.REGISTRY}
    assert {name: keys[name] for name in ("recovery_guide", "record", "start", "retry")} == {
        "recovery_guide": "R",
        "record": "O",
        "start": "b",
        "retry": "B",
    }
    assert {name: keys[name] for name in ("row_down", "row_up", "first_row", "last_row")} == {
        "row_down": "j",
        "row_up": "k",
        "first_row": "g,home",
        "last_row": "G,end",
    }
    assert (keys["jump"], keys["next_need"], keys["previous_need"], keys["filter"]) == ("colon", "n", "N", "slash")
    # The main screen's keys and the tables' are pressed in one place: no key twice.
    pressed = [
        key
        for entry in actions.REGISTRY
        if entry.screen in (actions.MAIN, actions.TABLE)
        for key in entry.keys.split(",")
        if key
    ]
    assert len(pressed) == len(set(pressed))


def test_a_key_override_onto_a_tables_key_is_a_clash() -> None:
    assert actions.keymap_clash({"refresh": "j"}) == ("refresh", "j", "'row_down'")
