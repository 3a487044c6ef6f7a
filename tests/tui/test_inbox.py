"""The inbox (i), the jump to the oldest need (o), the counts on the tabs, the title and the
overview, and health in the rows: all read the core's classifier. Real projects, real changes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from dashboard_kit import cell, detail_text, eventually, loaded, quiet_app, select, showing
from textual.pilot import Pilot
from textual.widgets import Button, OptionList, TabbedContent
from tui_actions_support import (
    make_project,
    process_task_plan,
    record,
    start,
    task_plan,
    write_dead_writer_lock,
)

from nexus_core import engine
from nexus_core.needs import SUPERVISOR_GONE
from nexus_core.state.store import load_run
from nexus_tui.app import NexusApp
from nexus_tui.discover_app import DiscoverApp
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.inbox import InboxScreen
from nexus_tui.screens.recovery import RecoveryScreen

SIZE = (160, 45)


def _two_projects(tmp_path: Path) -> tuple[Path, Path]:
    web = make_project(tmp_path / "web", [task_plan("login"), task_plan("signup")])
    api = make_project(tmp_path / "api", [task_plan("users")])
    start(web, "login")
    record(web, "login", outcome="blocked")
    time.sleep(0.01)  # a later time in the state: the next need is younger
    start(api, "users")
    engine.cancel_task(str(api), "demo", "users", {"reason": "stop"})
    return web, api


def cell_child(root: Path) -> int:
    """The launched child's pid, as the supervisor recorded it."""
    process = load_run(str(root), "demo")["tasks"][0]["attempts"][-1].get("process") or {}
    return int(process["childPid"])


def _tab_label(app: NexusApp, index: int) -> str:
    return app.query_one("#projects", TabbedContent).get_tab(f"tab-{index}").label.plain


async def _rescan(app: NexusApp, pilot: Pilot[None], count: int) -> None:
    before = app.scans_applied
    app.request_scan(everything=True)
    await eventually(pilot, lambda: app.scans_applied > before and len(app.inbox_entries()) == count)


async def test_the_inbox_lists_every_need_oldest_first_and_enter_lands_on_the_task(tmp_path: Path) -> None:
    web, api = _two_projects(tmp_path)
    app = quiet_app([str(web), str(api)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        assert (_tab_label(app, 0), _tab_label(app, 1)) == ("project (1)", "project (1)")
        assert app.title == "nexus (2 needs you)"
        await pilot.press("i")
        await eventually(pilot, lambda: isinstance(app.screen, InboxScreen))
        inbox = app.screen
        assert isinstance(inbox, InboxScreen)
        prompts = [str(option.prompt) for option in inbox.query_one(OptionList).options]
        assert "project › demo › login" in prompts[0] and "blocked → Record (O)" in prompts[0]
        assert "project › demo › users" in prompts[1] and "reconciled → Reconcile (e)" in prompts[1]
        await pilot.press("down", "enter")
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        dialog = app.screen
        assert isinstance(dialog, ActionDialog) and dialog.preview.action == "reconcile"
        assert dialog.preview.task_id == "users"
        await eventually(pilot, lambda: app.focused is not None and app.focused.id == "cancel")
        assert app.query_one("#projects", TabbedContent).active == "tab-1"
        assert (app.pane.run_id, app.pane.task_id) == ("demo", "users")
        await pilot.press("escape")
        # o: the oldest need, from anywhere: web's blocked login, its record dialog.
        await pilot.press("o")
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        assert app.screen.preview.action == "record"  # type: ignore[attr-defined]
        assert app.query_one("#projects", TabbedContent).active == "tab-0"
        assert (app.pane.run_id, app.pane.task_id) == ("demo", "login")
        await pilot.press("escape")
        # A need closes (the worker's report arrives): the counts follow the file.
        record(web, "login")
        await _rescan(app, pilot, 1)
        await eventually(pilot, lambda: _tab_label(app, 0) == "project")
        assert app.title == "nexus (1 need you)"


async def test_a_need_without_an_action_opens_its_guide_and_read_only_too(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "a")
    record(root, "a", outcome="blocked")
    (root / "checks" / "check.py").write_text("import sys\nsys.exit(0)\n")  # b's resource changed
    app = quiet_app([str(root)], read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        entries = app.inbox_entries()
        assert [(need.kind, need.task) for _, _, need in entries] == [
            ("resource-changed", "b"),
            ("attempt-blocked", "a"),
        ]
        await pilot.press("o")  # b's resource changed: no action, its guide opens
        await eventually(pilot, lambda: isinstance(app.screen, RecoveryScreen))
        assert app.screen.situation.kind == "resource-changed"  # type: ignore[attr-defined]
        await eventually(pilot, lambda: app.focused is not None and app.focused.id == "close")
        first = app.screen
        await pilot.press("escape")
        await eventually(pilot, lambda: app.screen is not first, what="the first guide closed")
        app.go_to_need(entries[1])  # read-only: the guide, whose next step is disabled
        await eventually(pilot, lambda: showing(app, RecoveryScreen), what="the second guide")
        assert app.screen.situation.kind == "attempt-blocked"  # type: ignore[attr-defined]
        assert app.screen.query_one("#next-action", Button).disabled


async def test_nothing_needs_a_person(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        assert app.title == "nexus" and _tab_label(app, 0) == "project"
        await pilot.press("o")
        await pilot.press("i")
        await eventually(pilot, lambda: isinstance(app.screen, InboxScreen))
        assert not app.screen.query(OptionList)
        await eventually(pilot, lambda: app.focused is not None and app.focused.id == "close")


async def test_the_overview_counts_each_projects_needs_and_opens_the_inbox(tmp_path: Path) -> None:
    _, api = _two_projects(tmp_path)
    write_dead_writer_lock(api)
    app = DiscoverApp(str(tmp_path), watch=False, rescan_seconds=0, tick=False, rediscover_seconds=60)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        table = app.overview.table
        await eventually(pilot, lambda: len(app.overview.summaries) == 2)
        counts = {cell(table, str(index), "project"): cell(table, str(index), "count") for index in (0, 1)}
        assert counts == {"api/project": "2", "web/project": "1"}
        await pilot.press("i")  # allowed on the overview
        await eventually(pilot, lambda: isinstance(app.screen, InboxScreen))
        await pilot.press("enter")  # the oldest: api's dead lock, recovered from its dialog
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
        assert app.screen.preview.action == "recover-lock"  # type: ignore[attr-defined]
        assert app.query_one("#projects", TabbedContent).active == f"tab-{app.directories.index(str(api))}"


async def test_a_dead_launch_supervisor_shows_in_its_row(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    (root / "hold-worker").write_text("")
    launch = f"from nexus_core.backend import process; process.launch_task({str(root)!r}, 'demo', 'p', {{}})"
    supervisor = subprocess.Popen([sys.executable, "-c", launch], start_new_session=True)
    app = quiet_app([str(root)], tick=True)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await loaded(app, pilot)
            await select(pilot, "demo", "p")
            pane = app.pane

            def running() -> bool:
                app.request_scan(everything=True)
                spawned = bool(
                    (load_run(str(root), "demo")["tasks"][0]["attempts"] or [{}])[-1].get("process", {}).get("childPid")
                )
                return spawned and cell(pane.tasks, "p", "execution") == "running"

            await eventually(pilot, running, 30)
            assert cell(pane.tasks, "p", "task").startswith("▶")
            child = cell_child(root)
            os.killpg(supervisor.pid, signal.SIGKILL)  # the supervisor dies; its child leads its own session
            supervisor.wait()
            os.kill(child, signal.SIGKILL)
            # Within a few ticks the heartbeat is stale: the row says the owner is gone.
            await eventually(pilot, lambda: cell(pane.tasks, "p", "execution") == "† gone", 30)
            row = next(r for r in pane.current_view().rows if r.task_id == "p")  # type: ignore[union-attr]
            assert row.need == SUPERVISOR_GONE and row.state == "running"
            assert cell(pane.tasks, "p", "task").startswith("†")
            assert "†1" in cell(pane.runs, "demo", "states")
            assert "running: supervisor gone" in detail_text(app) and "STALE: supervisor gone" in detail_text(app)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(supervisor.pid, signal.SIGKILL)
        (root / "hold-worker").unlink(missing_ok=True)  # a child left behind then finishes by itself
