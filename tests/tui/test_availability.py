"""check_action stays cheap: the gate's availability is computed once per selection and
snapshot (not per binding), and neither it nor opening a dialog reads a file on the UI thread."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from dashboard_kit import caught_up, eventually, loaded, quiet_app, select
from project_kit import host_situations
from tui_actions_support import make_project, process_task_plan, start, task_plan

from nexus_core import actions as commands
from nexus_core import observe
from nexus_core.backend import process
from nexus_core.backend.process import receipt_file_status
from nexus_core.state.store import load_run
from nexus_tui.logic.operations import OPERATIONS, Target
from nexus_tui.logic.operations import place as operations_place
from nexus_tui.logic.operations import process as process_operations
from nexus_tui.screens.dialogs import ActionDialog

SIZE = (160, 44)


def _on_ui_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


async def test_availability_is_computed_once_per_selection_and_never_reads_files_there(
    tmp_path: Path, monkeypatch: Any
) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b"), process_task_plan("p")])
    start(root, "a")
    process.launch_task(str(root), "demo", "p", {})  # a process attempt: collect's rule wants its receipt
    stats_on_ui_thread: list[str] = []
    real_status = receipt_file_status  # what the operation calls, replaced there below

    def watched_status(*args: Any) -> Any:
        if _on_ui_thread():
            stats_on_ui_thread.append("receipt_file_status")
        return real_status(*args)

    monkeypatch.setattr(process_operations, "receipt_file_status", watched_status)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        await caught_up(pilot)  # a scan landing during the moves would count as one more answer
        before = app.availability_computations
        for key in ("down", "down", "up", "up", "down", "down"):  # a, b, p, b, a, b, p
            await pilot.press(key)
            await pilot.pause()
        selections = 6
        assert app.availability_computations - before <= selections  # not one per binding
        assert app.pane.task_id == "p"
        assert app.check_action("act", ("collect",)) is True  # the receipt is ready to collect
        assert stats_on_ui_thread == []


async def test_opening_a_dialog_reads_the_run_file_in_a_worker(tmp_path: Path, monkeypatch: Any) -> None:
    root = make_project(tmp_path, [task_plan("a")])
    start(root, "a")
    reads: list[bool] = []
    real_load = load_run  # what the place calls, replaced there below

    def watched_load(*args: Any) -> Any:
        reads.append(_on_ui_thread())
        return real_load(*args)

    monkeypatch.setattr(operations_place, "load_run", watched_load)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        await pilot.press("O")
        await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))
    assert reads and not any(reads)  # read, and never on the UI thread


def test_the_gate_agrees_with_the_cores_state_checks_on_every_host_situation(tmp_path: Path) -> None:
    """Each per-task action's availability is the core's table asked (nexus_core.actions.refusal):
    offered exactly when its checks accept the task, refused in the words of the first one that
    does not (before: start was offered on a task whose dependency was not accepted, which the
    core refuses). tests/test_preconditions.py proves it over generated states."""
    project = host_situations(tmp_path / "p")
    run = observe.inspect_run(project.dir, "r1")
    for name in commands.per_task_actions():
        for task in run["tasks"]:
            target = Target(project.dir, run, task["id"], None)
            check = commands.refusal(name, run, task)
            assert OPERATIONS[name].core_refusal(target) == (None if check is None else check.words), (name, task)
            # What the dashboard withholds on top (cancel of an ended attempt) the core accepts.
            assert OPERATIONS[name].unavailable(target) is None or check is not None or name == "cancel", name
    refusal = OPERATIONS["start"].unavailable(Target(project.dir, run, "dependent", None))
    assert refusal == "A task it depends on is not accepted yet."
