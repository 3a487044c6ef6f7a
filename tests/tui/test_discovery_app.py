"""``nexus-tui --discover ROOT``: the "All projects" tab, one tab per project, live discovery."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dashboard_kit import cell, eventually, finish, focused, loaded, row_keys, small_project
from textual.widgets import TabbedContent
from textual.widgets._tabbed_content import ContentTab

from nexus_core.hostinfo import hostname
from nexus_tui.discover_app import OVERVIEW_TAB, DiscoverApp
from nexus_tui.logic.demo import write_dead_writer_lock
from nexus_tui.widgets.overview import COLUMNS

pytestmark = pytest.mark.asyncio


def discover_app(root: Path, **options: Any) -> DiscoverApp:
    settings: dict[str, Any] = {"watch": False, "rescan_seconds": 0, "tick": False, "rediscover_seconds": 0.1}
    settings.update(options)
    return DiscoverApp(str(root), **settings)


def three_projects(root: Path) -> dict[str, str]:
    """quiet (nothing to do), locked (a dead writer.lock), broken (an unreadable run)."""
    projects = {name: small_project(root / "team" / name) for name in ("quiet", "locked", "broken")}
    write_dead_writer_lock(projects["locked"], hostname())
    state = Path(projects["broken"], ".bmad-plus/nexus/runs/live.json")
    state.write_bytes(state.read_bytes()[:40])
    return projects


def _rows_shown(app: DiscoverApp, count: int) -> Callable[[], bool]:
    return lambda: len(app.overview.summaries) == count


def active_tab(app: DiscoverApp) -> str:
    return str(app.query_one("#projects", TabbedContent).active)


def overview_labels(app: DiscoverApp) -> list[str]:
    table = app.overview.table
    return [cell(table, key, "project") for key in row_keys(table)]


async def test_overview_comes_first_sorted_by_urgency_and_enter_opens_a_project(tmp_path: Path) -> None:
    projects = three_projects(tmp_path)
    app = discover_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        assert active_tab(app) == OVERVIEW_TAB
        assert app.focused is app.overview.table
        await eventually(pilot, lambda: len(app.overview.summaries) == 3)
        assert overview_labels(app) == ["team/broken", "team/locked", "team/quiet"]
        table = app.overview.table
        keys = row_keys(table)
        assert "1 unreadable" in cell(table, keys[0], "needs")
        assert "1 dead lock" in cell(table, keys[1], "needs")
        assert cell(table, keys[2], "needs") == "nothing"
        assert cell(table, keys[2], "runs") == "1"
        assert table.cursor_row == 0  # nobody chose a row yet: the most urgent project
        # Enter on the second row opens the locked project's tab.
        await pilot.press("down", "enter")
        index = app.directories.index(projects["locked"])
        await eventually(pilot, lambda: active_tab(app) == f"tab-{index}")
        assert app.pane.session.directory == projects["locked"]
        assert focused(app) is app.pane.runs
        # [ and ] cycle through the projects, the overview first.
        for _ in range(index + 1):
            await pilot.press("left_square_bracket")
        await eventually(pilot, lambda: active_tab(app) == OVERVIEW_TAB)
        assert app.focused is app.overview.table
        for _ in range(len(projects) + 1):
            await pilot.press("right_square_bracket")
        await eventually(pilot, lambda: active_tab(app) == OVERVIEW_TAB)
        await pilot.press("right_square_bracket")
        await eventually(pilot, lambda: active_tab(app) == "tab-0")
        assert focused(app) is app.panes[0].runs


async def test_a_first_load_shared_with_worker_processes_shows_what_one_process_shows(tmp_path: Path) -> None:
    three_projects(tmp_path)
    shown = []
    for share_from_bytes in (None, 0):  # the default (these few kilobytes stay in process), always
        app = discover_app(tmp_path)
        if share_from_bytes is not None:
            app.share_first_look_from_bytes = share_from_bytes
        async with app.run_test(size=(140, 40)) as pilot:
            await loaded(app, pilot)
            await eventually(pilot, _rows_shown(app, 3))
            table = app.overview.table
            shown.append([[cell(table, key, column) for column, _ in COLUMNS] for key in row_keys(table)])
            assert app.first_looks_shared == (3 if share_from_bytes == 0 else 0)
            assert app.first_look_workers_failed == 0
    assert shown[0] == shown[1]
    assert any("1 unreadable" in text for text in shown[1][0])
    assert any("1 dead lock" in text for text in shown[1][1])


async def test_a_project_s_focus_run_is_inspected_once_its_tab_is_opened(tmp_path: Path) -> None:
    """Until a project's pane is composed no run of it is inspected for a detail pane (its
    overview row needs only the rows and needs); opened, its first run's detail is shown."""
    three_projects(tmp_path)
    app = discover_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        quiet = app.directories.index(str(tmp_path / "team" / "quiet"))
        snapshot = app.sessions[quiet].snapshot
        assert snapshot is not None and [view.inspection for view in snapshot.runs] == [None]
        assert app.overview.summaries[quiet].runs == 1
        await pilot.press("right_square_bracket")  # the first project's tab
        for _ in range(quiet):
            await pilot.press("right_square_bracket")
        await eventually(pilot, lambda: active_tab(app) == f"tab-{quiet}")

        def inspected() -> bool:
            latest = app.sessions[quiet].snapshot
            return latest is not None and latest.runs[0].inspection is not None

        await eventually(pilot, inspected, what="the opened project's focus run inspected")
        assert app.pane.session.directory == str(tmp_path / "team" / "quiet")


async def test_the_row_the_operator_chose_stays_chosen_when_rows_move(tmp_path: Path) -> None:
    projects = {name: small_project(tmp_path / name) for name in ("a", "b", "c")}
    app = discover_app(tmp_path, watch=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        await eventually(pilot, lambda: len(app.overview.summaries) == 3)
        table = app.overview.table
        assert overview_labels(app) == ["a", "b", "c"]
        await pilot.press("down", "down")  # the operator picks c
        assert app.overview.highlighted() == app.directories.index(projects["c"])
        write_dead_writer_lock(projects["b"], hostname())  # b becomes the most urgent
        await eventually(pilot, lambda: overview_labels(app) == ["b", "a", "c"])
        assert app.overview.highlighted() == app.directories.index(projects["c"])
        assert table.cursor_row == 2


async def test_a_project_created_later_gets_a_tab_and_a_row(tmp_path: Path) -> None:
    app = discover_app(tmp_path)  # nothing there yet
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert app.directories == [] and overview_labels(app) == []
        late = small_project(tmp_path / "later" / "p")
        await eventually(pilot, lambda: overview_labels(app) == ["later/p"])
        await eventually(pilot, lambda: cell(app.overview.table, "0", "runs") == "1")
        assert app.panes[0].session.directory == late
        assert app.query_one("#tab-0") is not None
        second = small_project(tmp_path / "z")
        await eventually(pilot, lambda: len(app.directories) == 2)
        assert app.directories == [late, second]


async def test_a_large_fleet_gets_a_project_s_tab_when_the_project_is_first_opened(tmp_path: Path) -> None:
    """Past ``tabs_up_front`` projects the strip starts with the overview's tab alone: a project
    gets its tab (labelled with its needs) when it is opened, from its row or the inbox; ] and [
    move along the strip; a project found later gets a row and no tab."""
    projects = three_projects(tmp_path)
    app = discover_app(tmp_path)
    app.tabs_up_front = 2
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        await eventually(pilot, _rows_shown(app, 3))
        tabs = app.query_one("#projects", TabbedContent)

        def strip() -> list[str]:
            """The tabs' panes, along the strip."""
            return [ContentTab.sans_prefix(str(tab.id)) for tab in tabs.query(ContentTab)]

        assert strip() == [OVERVIEW_TAB]
        locked, broken, quiet = (app.directories.index(projects[name]) for name in ("locked", "broken", "quiet"))
        await pilot.press("down", "enter")  # the second row: team/locked
        await eventually(pilot, lambda: active_tab(app) == f"tab-{locked}")
        assert strip() == [OVERVIEW_TAB, f"tab-{locked}"]
        assert str(tabs.get_tab(f"tab-{locked}").label) == "team/locked (1)"
        assert app.pane.session.directory == projects["locked"] and focused(app) is app.pane.runs
        await pilot.press("right_square_bracket")  # along the strip: back to the overview
        await eventually(pilot, lambda: active_tab(app) == OVERVIEW_TAB)
        await pilot.press("left_square_bracket")
        await eventually(pilot, lambda: active_tab(app) == f"tab-{locked}")
        # A need of a project with no tab yet: its tab is made, then shown.
        [entry] = [entry for entry in app.inbox_entries() if entry[0] == broken]
        await app.go_to_need(entry)
        await eventually(pilot, lambda: active_tab(app) == f"tab-{broken}")
        assert strip() == [OVERVIEW_TAB, f"tab-{locked}", f"tab-{broken}"]
        # A count that changes on a project with no tab lays no tab out; its tab shows it once made.
        passes = app.label_passes
        write_dead_writer_lock(projects["quiet"], hostname())
        app.request_scan(quiet)
        await eventually(pilot, lambda: app.sessions[quiet].shown_label == "team/quiet (1)")
        await pilot.pause(0.6)
        assert app.label_passes == passes
        await app.compose_pane(quiet)
        assert str(tabs.get_tab(f"tab-{quiet}").label) == "team/quiet (1)"
        small_project(tmp_path / "later" / "p")
        await eventually(pilot, _rows_shown(app, 4))
        assert not app.has_tab(3) and len(strip()) == 4


async def test_a_project_found_later_is_listed_everywhere_at_once(tmp_path: Path) -> None:
    """While a found project's tab is being mounted nothing lists it yet: once it is in
    ``directories`` it has its session, its pane and its overview row (checked at every turn of
    the event loop while it is added)."""
    app = discover_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        disagreements: list[str] = []

        async def check() -> None:
            while True:
                listed = len(app.directories)
                if not (len(app.sessions) == len(app.panes) == listed == len(app.overview.labels)):
                    disagreements.append(f"{listed} directories, {len(app.overview.labels)} rows")
                await asyncio.sleep(0)

        checking = asyncio.ensure_future(check())
        try:
            small_project(tmp_path / "later" / "p")
            await eventually(pilot, lambda: len(app.directories) == 1 and app.has_tab(0))
            small_project(tmp_path / "z")
            await eventually(pilot, lambda: len(app.directories) == 2 and app.has_tab(1))
        finally:
            checking.cancel()
        assert disagreements == []


async def test_r_walks_the_tree_again_at_once(tmp_path: Path) -> None:
    """The walk's own pace is slow here (once a minute, as a large tree's walk is kept to a
    small share of a core); r does not wait for it."""
    first = small_project(tmp_path / "a")
    app = discover_app(tmp_path, rediscover_seconds=60)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        assert app.directories == [first]
        later = small_project(tmp_path / "b")
        await pilot.pause(0.5)
        assert app.directories == [first] and app.discovery_passes == 0
        await pilot.press("r")
        await eventually(pilot, lambda: app.directories == [first, later], timeout=5)
        assert app.discovery_passes == 1


async def test_rows_follow_changes_with_one_watcher_for_every_project(tmp_path: Path) -> None:
    projects = {name: small_project(tmp_path / name) for name in ("a", "b")}
    app = discover_app(tmp_path, watch=True)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        await eventually(pilot, lambda: len(app.overview.summaries) == 2)
        table = app.overview.table
        index = app.directories.index(projects["b"])
        assert cell(table, str(index), "accepted") == "0/3"
        finish(projects["b"], "live", "t1")
        await eventually(pilot, lambda: cell(table, str(index), "accepted") == "1/3")
        # Rediscovery keeps running (every 0.1 s here): a project found later joins the one
        # watcher (a new one over every path replaces it), and its changes reach its row.
        later = small_project(tmp_path / "c")
        await eventually(pilot, lambda: later in app.directories)
        later_index = app.directories.index(later)
        await eventually(pilot, lambda: cell(table, str(later_index), "runs") == "1")
        passes = app.discovery_passes
        await eventually(pilot, lambda: app.discovery_passes >= passes + 3)

        def live_watchers() -> int:
            return sum(1 for worker in app.workers if worker.group == "watch" and not worker.is_finished)

        await eventually(pilot, lambda: live_watchers() == 1)
        assert [session.index for session in app.sessions] == [0, 1, 2]
        finish(later, "live", "t1")
        await eventually(pilot, lambda: cell(table, str(later_index), "accepted") == "1/3")
        assert live_watchers() == 1


async def test_project_actions_are_off_on_the_overview(tmp_path: Path) -> None:
    small_project(tmp_path / "a")
    app = discover_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        assert active_tab(app) == OVERVIEW_TAB
        for action in ("filter", "sort", "copy_run_id", "start", "recovery_guide"):
            assert app.check_action(action, ()) is None, action
        for action in ("help", "refresh", "next_project", "quit"):
            assert app.check_action(action, ()) is True, action
        await pilot.press("slash")  # the filter key: nothing opens on the overview
        await pilot.pause()
        assert active_tab(app) == OVERVIEW_TAB
        # No filter input shown anywhere (the project's pane is not even composed yet).
        assert not any(widget.display for widget in app.query(".filter"))


async def test_tab_labels_show_each_project_s_needs_once_loaded(tmp_path: Path) -> None:
    """While --discover loads, tab labels wait for its end (each change lays the tab strip out
    again); once loaded, every tab names its project's count of needs."""
    projects = three_projects(tmp_path)
    app = discover_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        tabs = app.query_one("#projects", TabbedContent)

        def label(name: str) -> str:
            return str(tabs.get_tab(f"tab-{app.directories.index(projects[name])}").label)

        assert label("locked") == "team/locked (1)"
        assert label("broken") == "team/broken (1)"
        assert label("quiet") == "team/quiet"
        write_dead_writer_lock(projects["quiet"], hostname())
        app.request_scan(app.directories.index(projects["quiet"]))
        await eventually(pilot, lambda: label("quiet") == "team/quiet (1)")  # at once, after the load


async def test_a_burst_of_tab_label_changes_is_laid_out_at_most_twice(tmp_path: Path) -> None:
    """Label changes are shown at once, then at most every LABELS_AT_MOST_EVERY_SECONDS while
    they keep coming: five changes of a count in a row are two layouts of the tab strip, and the
    tab ends on the last count."""
    projects = three_projects(tmp_path)
    app = discover_app(tmp_path)
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        tabs = app.query_one("#projects", TabbedContent)
        quiet = app.sessions[app.directories.index(projects["quiet"])]
        locked = app.sessions[app.directories.index(projects["locked"])]
        assert quiet.snapshot is not None and locked.snapshot is not None
        before, need = app.label_passes, locked.snapshot.needs[0]
        for count in range(1, 6):
            quiet.snapshot = dataclasses.replace(quiet.snapshot, needs=(need,) * count)
            app.needs_changed(quiet)
        assert app.title == "nexus (7 needs you)"  # the title follows at once
        await eventually(pilot, lambda: str(tabs.get_tab(f"tab-{quiet.index}").label) == "team/quiet (5)")
        await pilot.pause(0.6)
        assert app.label_passes - before <= 2
