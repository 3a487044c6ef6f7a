"""The 1 s tick redraws an age only when its text changes (a table shows seconds only in an
age's first minute) and only while its row is in view: ages still move on screen, rows
scrolled into view show the current age, and a tick that changes no shown text redraws no
cell."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, cast

import pytest
from dashboard_kit import HOST, cell, eventually, loaded, quiet_app

from nexus_core import engine, timeutil
from nexus_core.state.store import load_run
from nexus_tui.widgets.keyed_table import KeyedTable

pytestmark = pytest.mark.asyncio


def count_cell_updates(table: KeyedTable, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The row keys of every cell the table is told to redraw from now on."""
    updated: list[str] = []
    original = table.update_cell

    def counting(row_key: Any, column_key: Any, value: Any, **options: Any) -> None:
        updated.append(str(row_key))
        original(row_key, column_key, value, **options)

    monkeypatch.setattr(table, "update_cell", counting)
    return updated


def running_project(directory: Path, tasks: int) -> str:
    """A real run `live` made by the engine with every task started (each shows an age)."""
    directory.mkdir(parents=True)
    ids = [f"t{index}" for index in range(1, tasks + 1)]
    plan = {
        "id": "live",
        "maxParallel": tasks,
        "config": {},
        "tasks": [
            {
                "id": task,
                "objective": f"Write out/{task}/r.txt.",
                "scope": [f"out/{task}"],
                "artifacts": [f"out/{task}/r.txt"],
                "checks": [{"id": "ok", "command": "python", "args": ["-c", "pass"]}],
            }
            for task in ids
        ],
    }
    root = str(directory.resolve())
    engine.create_run(root, plan)
    for task in ids:
        engine.start_task(root, "live", task, {"backend": HOST})
    return root


def first_task_observed_ms(app: Any) -> int:
    """When the core last observed the first task of the run on screen (ms since the epoch)."""
    view = app.pane.current_view()
    assert view is not None
    observed = timeutil.parse_iso_ms(view.rows[0].last_observed)
    assert observed is not None
    return observed


async def test_ages_move_in_view_only_and_catch_up_when_scrolled_into_view(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = running_project(tmp_path / "p", tasks=32)
    clock = [time.time()]
    timeutil.set_clock(lambda: clock[0])
    app = quiet_app([root], tick=True)
    async with app.run_test(size=(170, 24)) as pilot:
        await loaded(app, pilot)
        table = app.pane.tasks
        last = "t32"
        assert not table.shows_row(last)
        before = {key: cell(table, key, "observed") for key in ("t1", "t2", last)}
        updated = count_cell_updates(table, monkeypatch)
        clock[0] += 5
        await eventually(pilot, lambda: cell(table, "t2", "observed") != before["t2"])
        await eventually(pilot, lambda: cell(table, "t1", "observed") != before["t1"])
        assert last not in updated  # out of view: not redrawn
        assert cell(table, last, "observed") == before[last]
        table.scroll_end(animate=False)
        await eventually(pilot, lambda: cell(table, last, "observed") == cell(table, "t2", "observed"))


async def test_a_tick_that_changes_no_shown_age_redraws_no_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = running_project(tmp_path / "p", tasks=3)
    clock = [time.time()]
    timeutil.set_clock(lambda: clock[0])
    app = quiet_app([root], tick=True)
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        table = app.pane.tasks
        observed = first_task_observed_ms(app)
        # Three hours on, ages read in minutes (and the tasks turn overdue: redrawn once).
        clock[0] = (observed + 3 * 3_600_000 + 1000) / 1000
        await eventually(pilot, lambda: cell(table, "t1", "observed") == "3h00m")
        await eventually(pilot, lambda: cell(table, "t1", "overdue") == "OVERDUE")
        updated = count_cell_updates(table, monkeypatch)
        clock[0] += 30  # the same minute: every age still reads 3h00m
        ticks = app.ticks
        await eventually(pilot, lambda: app.ticks >= ticks + 2)
        assert updated == []
        clock[0] += 30
        await eventually(pilot, lambda: cell(table, "t1", "observed") == "3h01m")
        assert set(updated) == {"t1", "t2", "t3"}


async def test_a_table_age_past_its_first_minute_moves_once_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table shows an age's seconds only in its first minute ("42s", then "1m", "2m"): past
    it, the tick redraws a row once a minute, not every visible row every second."""
    root = running_project(tmp_path / "p", tasks=3)
    clock = [time.time()]
    timeutil.set_clock(lambda: clock[0])
    app = quiet_app([root], tick=True)
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        table = app.pane.tasks
        observed = first_task_observed_ms(app)
        clock[0] = (observed + 30_000) / 1000
        await eventually(pilot, lambda: cell(table, "t1", "observed") == "30s")
        clock[0] = (observed + 90_000) / 1000
        await eventually(pilot, lambda: cell(table, "t1", "observed") == "1m")
        updated = count_cell_updates(table, monkeypatch)
        clock[0] += 20  # 1m50s: still "1m"
        ticks = app.ticks
        await eventually(pilot, lambda: app.ticks >= ticks + 2)
        assert updated == []
        clock[0] += 15  # 2m05s
        await eventually(pilot, lambda: cell(table, "t1", "observed") == "2m")
        assert set(updated) == {"t1", "t2", "t3"}


def idle_project(directory: Path) -> str:
    """A real run whose only task was never started: nothing in it moves with the clock."""
    directory.mkdir(parents=True)
    root = str(directory.resolve())
    plan = {
        "id": "idle",
        "maxParallel": 1,
        "config": {},
        "tasks": [
            {
                "id": "t1",
                "objective": "Write out/t1/r.txt.",
                "scope": ["out/t1"],
                "artifacts": ["out/t1/r.txt"],
                "checks": [{"id": "ok", "command": "python", "args": ["-c", "pass"]}],
            }
        ],
    }
    engine.create_run(root, plan)
    return root


async def test_the_tick_looks_again_only_when_the_clock_changes_something(tmp_path: Path) -> None:
    """The 1 s tick looks at a project again only once the clock has changed something in it:
    the running task's deadline passed (its row then reads overdue). Before that, and in an
    idle project at any time, only files can change what is shown, and the watcher follows
    those (asking every project each second kept a core busy with an idle fleet)."""
    clock = [time.time()]
    timeutil.set_clock(lambda: clock[0])
    live = running_project(tmp_path / "live", 1)
    idle = idle_project(tmp_path / "idle")
    deadline = timeutil.parse_iso_ms(load_run(live, "live")["tasks"][0]["attempts"][-1]["deadline"])
    assert deadline is not None
    app = quiet_app([live, idle], tick=True)
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(app, pilot)
        live_session, idle_session = app.sessions

        def scanned(session: Any) -> int:
            return int(session.snapshot.scanned_at_ms)

        def due(session: Any) -> int | None:
            return cast(int | None, session.snapshot.next_look_ms)

        def overdue() -> bool:
            view = live_session.snapshot.run("live") if live_session.snapshot else None
            return bool(view and view.rows[0].overdue)

        assert (due(live_session), due(idle_session)) == (deadline + 1, None)
        seen = (scanned(live_session), scanned(idle_session))
        ticks = app.ticks
        await eventually(pilot, lambda: app.ticks >= ticks + 2)  # the clock has changed nothing yet
        assert (scanned(live_session), scanned(idle_session)) == seen and not overdue()
        clock[0] = (deadline + 1000) / 1000
        await eventually(pilot, overdue, timeout=20, what="the deadline passed, seen by a tick")
        assert scanned(idle_session) == seen[1] and due(live_session) is None
