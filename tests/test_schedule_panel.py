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
from textual.widgets import DataTable, Static

from nexus_core.schedule import core
from nexus_core.timeutil import now_ms
from nexus_tui.screens.schedules import ConfirmSchedule, SchedulesScreen


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
        connection: sqlite3.Connection = real_connect(database, *args, **kwargs)
        return connection

    monkeypatch.setattr(sqlite3, "connect", recording_connect)
    before = tree_fingerprint(root)
    app = quiet_app([root], read_only=True)
    async with app.run_test(size=(160, 40)) as pilot:
        await loaded(app, pilot)
        panel = await _panel(app, pilot)
        table = panel.query_one("#schedules", DataTable)
        rows = [[str(cell) for cell in table.get_row_at(index)] for index in range(table.row_count)]
        # Paused first (on screen at any width), then title, next, last outcome, rule, zone.
        assert [row[1] for row in rows] == ["morning", ""]
        assert rows[0][4:] == ["daily at 09:00 (Europe/Paris)", "Europe/Paris"]
        assert rows[0][0] == "no" and rows[0][3] == "-" and rows[1][4] == "every 1h"
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


async def test_the_panels_actions_come_from_the_registry(tmp_path: Path) -> None:
    """Keys, footer, palette, help and the read-only gate of the panel all read the registry's
    schedule entries (defined once in nexus_tui.logic.schedules)."""
    from textual.widgets import Static
    from textual.widgets._footer import FooterKey

    from nexus_tui import actions
    from nexus_tui.logic.schedules import SCHEDULE_ACTIONS
    from nexus_tui.screens.help import HelpScreen

    root, ids = _project_with_schedules(tmp_path / "p")
    entries = [entry for entry in actions.REGISTRY if entry.screen == actions.SCHEDULES]
    assert [(e.id, e.keys, e.label, e.destructive) for e in entries] == [
        (f"schedule_{a.id}", a.key, a.label, a.destructive) for a in SCHEDULE_ACTIONS.values()
    ]
    assert all(entry.mutating for entry in entries)
    app = quiet_app([root])
    async with app.run_test(size=(160, 40)) as pilot:
        await loaded(app, pilot)
        # Help lists the panel's key (w) and each of its actions.
        await pilot.press("question_mark")
        await eventually(pilot, lambda: isinstance(app.screen, HelpScreen))
        help_text = str(app.screen.query_one(Static).render())
        assert "Schedules panel (w)" in help_text and "The project's schedules" in help_text
        assert all(entry.help in help_text for entry in entries)
        await pilot.press("escape")
        panel = await _panel(app, pilot)

        # The panel's footer shows the registry's labels, enabled (composed after a refresh).
        def footer() -> dict[str, FooterKey]:
            return {key.description: key for key in panel.query(FooterKey)}

        await eventually(pilot, lambda: {entry.label for entry in entries} <= set(footer()))
        assert not any(footer()[entry.label].has_class("-disabled") for entry in entries)
        # The palette opened over the panel offers them, and runs them on the panel.
        # (each entry's help, then the effective key: "... Key: d.")
        commands = {command.help.split(" Key: ")[0]: command for command in app.get_system_commands(panel)}
        assert {entry.help for entry in entries} <= set(commands)
        await commands[SCHEDULE_ACTIONS["delete"].help].callback()
        await eventually(pilot, lambda: isinstance(app.screen, ConfirmSchedule))
        assert app.screen.has_class("destructive")
        await pilot.press("escape")
        await eventually(pilot, lambda: app.screen is panel)
        # Read-only: the gate turns every one of them off (footer dimmed, palette silent).
        panel.read_only = True
        panel.refresh_bindings()
        await pilot.pause()
        assert all(panel.check_action("schedule", (a.id,)) is None for a in SCHEDULE_ACTIONS.values())
        assert not {entry.help for entry in entries} & {c.help for c in app.get_system_commands(panel)}

        def dimmed() -> bool:
            keys = footer()
            return all(entry.label in keys and keys[entry.label].has_class("-disabled") for entry in entries)

        await eventually(pilot, dimmed)
    assert [s["id"] for s in core.list_schedules(root)] == ids  # nothing was confirmed


def _column_ends(table: DataTable[Any]) -> dict[str, int]:
    ends, x = {}, 0
    for column in table.ordered_columns:
        x += column.get_render_width(table)
        ends[str(column.label)] = x
    return ends


async def test_paused_is_visible_at_80_columns(tmp_path: Path) -> None:
    root, ids = _project_with_schedules(tmp_path / "p")
    core.set_paused(root, ids[1], True, now_ms())
    app = quiet_app([root])
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(app, pilot)
        panel = await _panel(app, pilot)
        table = panel.query_one("#schedules", DataTable)
        assert _column_ends(table)["Paused"] <= table.scrollable_content_region.width
        assert [str(table.get_row_at(index)[0]) for index in range(table.row_count)] == ["no", "yes"]


def _status(panel: SchedulesScreen) -> str:
    status = panel.query_one("#panel-status", Static)
    return str(getattr(status.content, "plain", status.content))


async def test_the_panel_says_when_no_scheduler_fires_a_past_due_schedule(tmp_path: Path) -> None:
    """Next in the past and nobody to fire it: the row and the status line say so; a running
    `nexus scheduler` (its runner row, its live pid) silences it; once it stopped, it says so again."""
    import subprocess

    from supervise_kit import nexus_command, until

    root = small_project(tmp_path / "p")
    three_hours_ago = now_ms() - 3 * 3_600_000
    core.add_schedule(root, core.NewSchedule("live", "every", "1h", "UTC", title="hourly"), three_hours_ago)
    app = quiet_app([root])
    async with app.run_test(size=(160, 40)) as pilot:
        await loaded(app, pilot)
        panel = await _panel(app, pilot)
        table = panel.query_one("#schedules", DataTable)
        assert "(past due, no scheduler)" in str(table.get_row_at(0)[2])
        assert "No nexus scheduler is running for this project" in _status(panel)
        assert "1 schedule past due, nobody fires them" in _status(panel)
        log = tmp_path / "events.jsonl"
        with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
            scheduler = subprocess.Popen(
                nexus_command("scheduler", "-d", root, "--event-log", str(log)), stdout=out, stderr=err
            )
        try:
            until(lambda: "scheduler-started" in (log.read_text() if log.exists() else ""), what="the scheduler")
            await eventually(pilot, lambda: "No nexus scheduler" not in _status(panel), timeout=30)
            assert "no scheduler" not in str(table.get_row_at(0)[2])
        finally:
            scheduler.terminate()
            scheduler.wait(60)
        # Its runner row is recent, but its process is gone: not running.
        await eventually(pilot, lambda: "No nexus scheduler is running" in _status(panel), timeout=30)
