"""The dashboard on every reference-written state: the screen agrees with `inspect`.

Each fixture is relocated to tmp_path (fixture_tools.relocate), opened without watchers, and
every task of every run is selected in turn: its table cells and its detail pane must show
what nexus_core.observe.inspect_run says (the same function as `nexus inspect --json`).
"""

from __future__ import annotations

import pytest
from dashboard_kit import cell, detail_text, eventually, loaded, quiet_app, row_keys, select, status_text
from fixture_tools import FIXTURE_NAMES, relocate

from nexus_core.observe import inspect_run
from nexus_tui.logic.model import NOT_STARTED

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("name", FIXTURE_NAMES)
async def test_every_task_of_a_fixture_matches_inspect(tmp_path, name: str) -> None:
    """One fixture per test (one app each): xdist spreads them, no single test is long."""
    root = str(relocate(name, tmp_path))
    app = quiet_app([root])
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(app, pilot)
        await _check_project(app, pilot, root)


async def test_several_projects_side_by_side(tmp_path) -> None:
    """Three fixtures in three tabs: each tab shows its own project's runs and locks."""
    names = FIXTURE_NAMES[:3]
    roots = [str(relocate(name, tmp_path)) for name in names]
    app = quiet_app(roots)
    async with app.run_test(size=(140, 45)) as pilot:
        await loaded(app, pilot)
        for index, root in enumerate(roots):
            if index:
                await pilot.press("right_square_bracket")
                await eventually(pilot, lambda index=index: app.pane.index == index, timeout=10)
            inventory = inspect_run(root)
            assert app.pane.index == index
            assert row_keys(app.pane.runs) == inventory["runIds"]
            writer = inventory["lock"]
            assert (f"writer.lock HELD {writer['hash'][:12]}" if writer else "writer.lock free") in status_text(app)


async def _check_project(app, pilot, root: str) -> None:
    inventory = inspect_run(root)
    if True:
        pane = app.pane
        assert row_keys(pane.runs) == inventory["runIds"]
        status = status_text(app)
        for lock_key, name_text in (("lock", "writer.lock"), ("recoveryLock", "recovery.lock")):
            lock = inventory[lock_key]
            if lock is None:
                assert f"{name_text} free" in status
            else:
                assert f"{name_text} HELD {lock['hash'][:12]}" in status
                assert f"pid {lock['owner']['pid']}@{lock['owner']['hostname']}" in status
        for run_id in inventory["runIds"]:
            result = inspect_run(root, run_id)
            observations = {o["taskId"]: o for o in result["observations"]}
            await select(pilot, run_id)
            assert row_keys(pane.tasks) == [t["id"] for t in result["tasks"]]
            for task in result["tasks"]:
                task_id = task["id"]
                attempt = task["attempts"][-1] if task["attempts"] else None
                observation = observations[task_id]
                assert cell(pane.tasks, task_id, "execution") == (attempt["execution"] if attempt else NOT_STARTED)
                assert cell(pane.tasks, task_id, "verification") == (
                    attempt["verification"]["status"] if attempt else "pending"
                )
                assert cell(pane.tasks, task_id, "acceptance") == task["integration"]
                assert cell(pane.tasks, task_id, "stale") == ("STALE" if observation["stale"] else "—")
                assert cell(pane.tasks, task_id, "overdue") == ("OVERDUE" if observation["overdue"] else "—")
                assert cell(pane.tasks, task_id, "attempts").startswith(f"{len(task['attempts'])}/")

                await select(pilot, task_id=task_id)
                text = detail_text(app)
                flat = " ".join(text.split())
                assert task_id in text
                # The core's hint and stale reason, word for word (wrapping aside).
                assert " ".join(observation["hint"].split()) in flat
                if observation["stale"]:
                    assert "STALE" in text
                if attempt:
                    assert attempt["id"] in text
                    for receipt in attempt["verification"].get("checks") or []:
                        assert f"{receipt['id']}  exit {receipt.get('exitCode')}" in text
                        if receipt.get("timedOut"):
                            assert "TIMED OUT" in text
                    if attempt["cancellation"]["status"] != "none":
                        assert f"cancellation {attempt['cancellation']['status']}" in text
                    for reconciliation in attempt["reconciliations"]:
                        assert " ".join(reconciliation["summary"].split())[:40] in flat
                if "process" in observation:
                    assert f"process {attempt['process']['status']}" in text
                    if observation["process"]["heartbeatStale"] and observation["process"]["status"] != "finished":
                        assert "heartbeat" in text and "STALE" in text
