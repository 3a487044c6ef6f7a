"""The dashboard on every reference-written state: the screen agrees with `inspect`.

Each fixture is relocated to tmp_path (fixture_tools.relocate), opened without watchers, and
every task of every run is selected in turn: its table cells and its detail pane must show
what `nexus inspect RUN --json` says (the real CLI), word for word where it is text.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, cast

import pytest
from dashboard_kit import cell, detail_text, eventually, loaded, quiet_app, row_keys, select, status_text
from fixture_tools import FIXTURE_NAMES, relocate
from reliability_support import run_cli_json
from textual.pilot import Pilot

from nexus_core import needs, timeutil
from nexus_core.observe import inspect_run
from nexus_core.shapes import Run
from nexus_core.words import json_word
from nexus_tui.app import NexusApp
from nexus_tui.logic.model import NOT_STARTED

pytestmark = pytest.mark.asyncio


@pytest.mark.parametrize("name", FIXTURE_NAMES)
async def test_every_task_of_a_fixture_matches_inspect(tmp_path: Path, name: str) -> None:
    """One fixture per test (one app each): xdist spreads them, no single test is long."""
    root = str(relocate(name, tmp_path))
    frozen = time.time()  # the ages in the table and the detail are taken at one instant
    timeutil.set_clock(lambda: frozen)
    app = quiet_app([root])
    async with app.run_test(size=(170, 45)) as pilot:
        await loaded(app, pilot)
        await _check_project(app, pilot, root)


async def test_several_projects_side_by_side(tmp_path: Path) -> None:
    """Three fixtures in three tabs: each tab shows its own project's runs and locks."""
    names = FIXTURE_NAMES[:3]
    roots = [str(relocate(name, tmp_path)) for name in names]
    app = quiet_app(roots)
    async with app.run_test(size=(170, 45)) as pilot:
        await loaded(app, pilot)
        for index, root in enumerate(roots):
            if index:
                await pilot.press("right_square_bracket")

                def on_tab(index: int = index) -> bool:
                    return app.pane.index == index

                await eventually(pilot, on_tab, timeout=10)
            inventory = inspect_run(root)
            assert app.pane.index == index
            assert row_keys(app.pane.runs) == inventory["runIds"]
            writer = inventory["lock"]
            assert (f"writer.lock HELD {writer['hash'][:12]}" if writer else "writer.lock free") in status_text(app)


def _inspect_json(root: str, run_id: str) -> dict[str, Any]:
    """What `nexus inspect RUN --json` prints for the fixture (the real CLI)."""
    code, result, stderr = run_cli_json(Path(root), "inspect", run_id)
    assert code == 0, stderr
    return result  # type: ignore[no-any-return]


async def _check_project(app: NexusApp, pilot: Pilot[None], root: str) -> None:
    inventory = inspect_run(root)
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
        result = _inspect_json(root, run_id)
        observations = {o["taskId"]: o for o in result["observations"]}
        definitions = {d["id"]: d for d in result["plan"]["tasks"]}
        # Where each task stands, from the core's classifier: work whose owner is gone reads so.
        standings = needs.stand_run(cast(Run, result), observations, timeutil.now_ms())  # the CLI's JSON
        await select(pilot, run_id)
        assert row_keys(pane.tasks) == [t["id"] for t in result["tasks"]]
        for task in result["tasks"]:
            task_id = task["id"]
            definition = definitions[task_id]
            attempt = task["attempts"][-1] if task["attempts"] else None
            observation = observations[task_id]
            depends_on = ", ".join(definition["dependsOn"]) or "—"
            assert cell(pane.tasks, task_id, "depends") == depends_on
            gone = standings[task_id].kind
            assert cell(pane.tasks, task_id, "execution") == (
                "† gone" if gone == needs.SUPERVISOR_GONE else attempt["execution"] if attempt else NOT_STARTED
            )
            assert cell(pane.tasks, task_id, "verification") == (
                "† gone" if gone == needs.VERIFIER_GONE else attempt["verification"]["status"] if attempt else "pending"
            )
            assert cell(pane.tasks, task_id, "acceptance") == task["integration"]
            assert cell(pane.tasks, task_id, "stale") == ("STALE" if observation["stale"] else "—")
            assert cell(pane.tasks, task_id, "overdue") == ("OVERDUE" if observation["overdue"] else "—")
            assert cell(pane.tasks, task_id, "attempts") == f"{len(task['attempts'])}/{definition['maxAttempts']}"

            await select(pilot, task_id=task_id)
            text = detail_text(app)
            flat = " ".join(text.split())
            assert task_id in text
            assert f"depends on {depends_on}" in flat
            # The core's hint and stale reason, word for word (wrapping aside).
            assert f"hint {' '.join(observation['hint'].split())}" in flat
            if observation["stale"]:
                assert f"STALE {' '.join(observation['staleReason'].split())}" in flat
            else:
                assert not re.search(r"^STALE ", text, re.MULTILINE)
            # Observed: the attempt's observedAt, word for word, and the table shows its age
            # (the clock is frozen, so both are rendered at the same instant).
            observed_at = attempt.get("observedAt") if attempt else None
            if observed_at:
                shown = re.search(rf"observedAt {re.escape(observed_at)} \((.+?) ago\)", flat)
                assert shown, (task_id, observed_at)
                assert cell(pane.tasks, task_id, "observed") == shown.group(1)
            else:
                assert cell(pane.tasks, task_id, "observed") == "—"
            if attempt:
                assert attempt["id"] in text
                for receipt in attempt["verification"].get("checks") or []:
                    # JSON's words: a check that never ran reads "exit none", not Python's None.
                    assert f"{receipt['id']}  exit {json_word(receipt.get('exitCode'))}" in text
                    if receipt.get("timedOut"):
                        assert "TIMED OUT" in text
                if attempt["cancellation"]["status"] != "none":
                    assert f"cancellation {attempt['cancellation']['status']}" in text
                for reconciliation in attempt["reconciliations"]:
                    assert " ".join(reconciliation["summary"].split())[:40] in flat
            if "process" in observation:
                assert attempt is not None
                assert f"process {attempt['process']['status']}" in text
                if observation["process"]["heartbeatStale"] and observation["process"]["status"] != "finished":
                    assert "heartbeat" in text and "STALE" in text
