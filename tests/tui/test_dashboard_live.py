"""Live behaviour: watcher and polling updates, staleness from scope edits, broken run files,
keyed updates that keep the cursor, and the read-only proof."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from dashboard_kit import (
    HOST,
    cell,
    detail_text,
    eventually,
    finish,
    loaded,
    quiet_app,
    row_keys,
    select,
    small_project,
    status_text,
    tree_fingerprint,
)
from fixture_tools import relocate
from tui_actions_support import make_project, task_plan

from nexus_core import engine, timeutil
from nexus_core.schedule import core
from nexus_core.timeutil import now_ms as time_ms
from nexus_tui import watching
from nexus_tui.logic.demo import DemoInfo
from nexus_tui.screens.schedules import SchedulesScreen

pytestmark = pytest.mark.asyncio


async def test_watcher_shows_a_rewritten_run_file_and_keeps_the_cursor(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")
    app = quiet_app([root], watch=True)
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        await select(pilot, "live", "t2")
        table_before = pane.tasks
        assert cell(pane.tasks, "t1", "execution") == "running"
        # Another process (here: the engine in this test) rewrites the state file.
        finish(root, "live", "t1", summary="finished by a worker", accept=False)
        await eventually(pilot, lambda: cell(pane.tasks, "t1", "verification") == "passed")
        assert cell(pane.tasks, "t1", "execution") == "completed"
        # Same table, same rows, cursor still on t2.
        assert pane.tasks is table_before
        assert row_keys(pane.tasks) == ["t1", "t2", "t3"]
        assert pane.task_id == "t2"
        assert pane.tasks.cursor_row == 1
        engine.start_task(root, "live", "t3", {"backend": HOST})
        await eventually(pilot, lambda: cell(pane.tasks, "t3", "execution") == "running")
        assert pane.task_id == "t2"


async def test_poll_mode_alone_picks_up_changes(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")
    app = quiet_app([root], poll=True, watch=False, rescan_seconds=0.2)
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        engine.start_task(root, "live", "t2", {"backend": HOST})
        await eventually(pilot, lambda: cell(app.pane.tasks, "t2", "execution") == "running")


async def test_editing_an_accepted_artifact_turns_the_task_stale(tmp_path: Path) -> None:
    root = str(relocate("walkthrough", tmp_path))
    app = quiet_app([root], watch=True)
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        await select(pilot, "example", "result")
        assert cell(pane.tasks, "result", "stale") == "—"
        # Wait until the scan that adds the scope to the watched set is applied: the watcher
        # then restarts on it, and an edit made before the restarted watcher is armed is still
        # seen by the rescan it runs once armed (no periodic rescan, no tick in this app).
        await eventually(pilot, lambda: any(p.endswith("/work") for p in pane.session.scope_paths))
        Path(root, "work", "result.txt").write_text("done, then edited\n")
        await eventually(pilot, lambda: cell(pane.tasks, "result", "stale") == "STALE")
        assert "Stale evidence" in detail_text(app)
        assert cell(pane.runs, "example", "stale") == "1"


@pytest.mark.parametrize("backend", ["inotify", "watchfiles"])
async def test_a_file_with_a_non_utf8_name_is_seen_by_the_watcher_like_any_other(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inotify watcher reports such a name as any other path (its bytes escaped), which
    the scopes' prefix lookup finds. watchfiles (where inotify cannot be had) stops with an
    error on a path it cannot decode: the dashboard treats that as a change in the watched
    scopes (rescan, watch again at once), never as a failure to back off from (which left
    STALE to the restart 2 s later, or to the periodic rescan)."""
    if backend == "inotify" and watching.backend() != "inotify":
        pytest.skip("no inotify here")
    monkeypatch.setattr(watching, "backend", lambda: backend)
    root = str(relocate("walkthrough", tmp_path))
    app = quiet_app([root], watch=True)  # no tick, no periodic rescan: only the watcher scans
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        await select(pilot, "example", "result")
        await eventually(pilot, lambda: any(p.endswith("/work") for p in pane.session.scope_paths))
        bad = os.path.join(os.fsencode(root), b"work", b"bad-\xff.txt")
        with open(bad, "wb") as handle:
            handle.write(b"not in the evidence\n")
        await eventually(pilot, lambda: cell(pane.tasks, "result", "stale") == "STALE")
        os.unlink(bad)
        await eventually(pilot, lambda: cell(pane.tasks, "result", "stale") == "—")
        assert app.watch_backoffs == 0  # no watcher failure, no wait before watching again


async def test_a_broken_run_file_keeps_its_last_good_view_flagged(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")
    state = Path(root, ".bmad-plus/nexus/runs/live.json")
    good = state.read_bytes()
    app = quiet_app([root], watch=True)
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        await select(pilot, "live", "t1")
        state.write_bytes(good[: len(good) // 2])  # a torn file, as a broken writer would leave
        await eventually(pilot, lambda: cell(pane.runs, "live", "load").startswith("⚠"))
        assert "Corrupt run state" in cell(pane.runs, "live", "load")
        # The last good rows stay, and the detail says why they may be old.
        assert row_keys(pane.tasks) == ["t1", "t2", "t3"]
        assert cell(pane.tasks, "t1", "execution") == "running"
        assert "failed to load" in detail_text(app)
        state.write_bytes(good)
        await eventually(pilot, lambda: cell(pane.runs, "live", "load") == "ok")
        assert "failed to load" not in detail_text(app)


async def test_watching_writes_nothing(tmp_path: Path, frozen_demo: DemoInfo) -> None:
    """The read-only proof: a whole session with watcher, tick and rescans, every view and
    navigation key, and the project trees (state, locks, scopes) are identical afterwards."""
    root = frozen_demo.directory
    second = small_project(tmp_path / "second")
    core.add_schedule(second, core.NewSchedule("live", "every", "1h", "UTC"), time_ms())  # watched too
    before = tree_fingerprint(root), tree_fingerprint(second)
    app = quiet_app([root, second], watch=True, tick=True, rescan_seconds=1.0)
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        for keys in (
            ["down", "tab", "down", "s", "S"],
            ["slash", "a", "enter", "escape"],
            ["c", "question_mark", "escape", "f", "f", "r"],
            ["right_square_bracket", "down", "left_square_bracket"],
        ):
            await pilot.press(*keys)
        await pilot.press("right_square_bracket", "w")  # the second project's schedules panel
        await eventually(pilot, lambda: isinstance(app.screen, SchedulesScreen) and app.screen.loads >= 2)
        await pilot.press("escape", "left_square_bracket")
        scans = app.scans_applied
        await eventually(pilot, lambda: app.scans_applied >= scans + 3)  # ticks and rescans, applied
        assert "writer.lock HELD" in status_text(app)
    after = tree_fingerprint(root), tree_fingerprint(second)
    assert after == before
    assert os.path.exists(os.path.join(root, ".bmad-plus/nexus/writer.lock"))


async def test_the_tick_turns_a_running_attempt_overdue_without_any_file_change(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")  # t1 running, default one-hour deadline
    clock = [time.time()]
    timeutil.set_clock(lambda: clock[0])
    app = quiet_app([root], tick=True)
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        pane = app.pane
        assert cell(pane.tasks, "t1", "overdue") == "—"
        before = tree_fingerprint(root)
        clock[0] += 2 * 3600
        await eventually(pilot, lambda: cell(pane.tasks, "t1", "overdue") == "OVERDUE")
        assert cell(pane.runs, "live", "overdue") == "1"
        assert tree_fingerprint(root) == before


async def test_the_first_run_seen_keeps_its_full_view_when_runs_sorting_before_it_appear(tmp_path: Path) -> None:
    """The pane picks the only run there is; runs created later sort before it. The picked run
    stays selected and its header and tasks are filled (the scanner inspects the run shown,
    not the inventory's first): before the fix it read "loading…" until the operator moved."""
    root = make_project(tmp_path, run_id="zeta")
    app = quiet_app([str(root)])
    async with app.run_test(size=(170, 40)) as pilot:
        await loaded(app, pilot)
        assert app.pane.session.run_id == "zeta"
        for run_id in ("alpha", "beta"):
            engine.create_run(str(root), {"id": run_id, "maxParallel": 4, "tasks": [task_plan("a")]})
        app.request_scan(everything=True)
        await eventually(pilot, lambda: app.pane.runs.row_count == 3)
        head = app.pane.query_one(f"#detail-head-{app.pane.index}")
        await eventually(pilot, lambda: "a  not started" in str(head.render()))
        assert app.pane.session.run_id == "zeta"
        assert app.pane.session.scanner.focus == "zeta"
        assert "loading" not in str(head.render())


async def test_the_attempt_tree_is_built_again_only_when_its_shape_changes(tmp_path: Path) -> None:
    """Every scan of the run makes a new inspection; the selected task's attempt tree is built
    again only when its shape changes (building it lays the whole screen out): another task
    starting leaves its nodes as they were, an age moving is set in the label in place, and the
    task's own news are shown."""
    root = small_project(tmp_path / "p")
    clock = [time.time() + 120]  # ages read in minutes; the clock moves only when told
    timeutil.set_clock(lambda: clock[0])
    app = quiet_app([root])
    async with app.run_test(size=(140, 40)) as pilot:
        await loaded(app, pilot)
        await select(pilot, "live", "t1")
        pane = app.pane
        tree = pane.attempts_tree
        await eventually(pilot, lambda: len(tree.root.children) == 1)

        def nodes() -> list[object]:
            found: list[object] = []
            todo = list(tree.root.children)
            while todo:
                node = todo.pop()
                found.append(node)
                todo.extend(node.children)
            return found

        def same_nodes(before: list[object]) -> bool:
            return len(nodes()) == len(before) and all(a is b for a, b in zip(nodes(), before, strict=True))

        before, text = nodes(), detail_text(app)
        engine.start_task(root, "live", "t2", {"backend": HOST})
        app.request_scan(0)
        await eventually(pilot, lambda: cell(pane.tasks, "t2", "attempts") == "1/2")  # tries / the plan's limit
        assert same_nodes(before) and detail_text(app) == text
        clock[0] += 600  # ten minutes later
        app.request_scan(0, retime=True)
        await eventually(pilot, lambda: detail_text(app) != text, what="the tree's ages moved")
        assert same_nodes(before)  # set in place
        text = detail_text(app)
        finish(root, "live", "t1", accept=False)
        app.request_scan(0)
        await eventually(pilot, lambda: detail_text(app) != text, what="the task's own change shown")
