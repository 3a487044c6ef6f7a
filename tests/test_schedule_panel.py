"""The dashboard's schedules panel (`w`): the schedules of the active project, pause / resume /
run now / delete through confirmation dialogs behind the read-only gate; watching writes nothing,
the database included."""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "tui"))

from dashboard_kit import eventually, loaded, quiet_app, small_project, tree_fingerprint
from textual.widgets import DataTable

from nexus_core.schedule import core
from nexus_core.timeutil import now_ms
from nexus_tui.schedules_screen import ConfirmSchedule, SchedulesScreen


def _project_with_schedules(directory: Path) -> tuple[str, list[str]]:
    root = small_project(directory)
    ids = [
        core.add_schedule(root, core.NewSchedule("live", "daily", "09:00", "Europe/Paris", title="morning"), now_ms())[
            "id"
        ],
        core.add_schedule(root, core.NewSchedule("live", "every", "1h", "UTC"), now_ms())["id"],
    ]
    return root, ids


async def _panel(app: object, pilot: object) -> SchedulesScreen:
    await pilot.press("w")  # type: ignore[attr-defined]
    await eventually(pilot, lambda: isinstance(app.screen, SchedulesScreen) and app.screen.loads > 0)  # type: ignore[arg-type,attr-defined]
    return app.screen  # type: ignore[attr-defined,no-any-return]


async def test_the_panel_lists_each_schedule_and_watching_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ids = _project_with_schedules(tmp_path / "p")
    opened: list[str] = []
    real_connect = sqlite3.connect

    def recording_connect(database: str, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        opened.append(database)
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", recording_connect)
    before = tree_fingerprint(root)
    app = quiet_app([root], read_only=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await loaded(app, pilot)
        panel = await _panel(app, pilot)
        table = panel.query_one("#schedules", DataTable)
        rows = [[str(cell) for cell in table.get_row_at(index)] for index in range(table.row_count)]
        assert [row[0] for row in rows] == ["morning", ""]
        assert rows[0][1:3] == ["daily at 09:00 (Europe/Paris)", "Europe/Paris"]
        assert rows[0][4:] == ["-", "no"] and rows[1][1] == "every 1h"
        loads = panel.loads
        await eventually(pilot, lambda: panel.loads >= loads + 2, timeout=30)  # the periodic refresh ran
        for key in ("p", "r", "n", "d"):
            await pilot.press(key)  # refused: read-only
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmSchedule)
        await pilot.press("escape")
    assert tree_fingerprint(root) == before  # the database included
    assert len(opened) >= 3 and all(uri.endswith("schedules.sqlite3?mode=ro") for uri in opened), opened


async def test_pause_resume_run_now_and_delete_through_confirmations(tmp_path: Path) -> None:
    root, ids = _project_with_schedules(tmp_path / "p")
    app = quiet_app([root])
    async with app.run_test(size=(160, 40)) as pilot:
        await loaded(app, pilot)
        panel = await _panel(app, pilot)
        await pilot.press("p")
        await eventually(pilot, lambda: isinstance(app.screen, ConfirmSchedule))
        await pilot.press("enter")  # the focus starts on Cancel: nothing happens
        await eventually(pilot, lambda: app.screen is panel)
        assert core.list_schedules(root)[0]["paused"] is False
        for key, check in (
            ("p", lambda: core.list_schedules(root)[0]["paused"] is True),
            ("r", lambda: core.list_schedules(root)[0]["paused"] is False),
            ("n", lambda: [o["status"] for o in core.schedule_runs(root, ids[0])] == ["pending"]),
            ("d", lambda: [s["id"] for s in core.list_schedules(root)] == [ids[1]]),
        ):
            await pilot.press(key)
            await eventually(pilot, lambda: isinstance(app.screen, ConfirmSchedule))
            app.screen.query_one("#confirm").press()  # type: ignore[attr-defined]
            await eventually(pilot, check)
        await eventually(pilot, lambda: panel.query_one("#schedules", DataTable).row_count == 1)
