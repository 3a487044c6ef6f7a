"""Snapshots of every dialog, the progress screen and the recovery screens, at a fixed size
with a frozen clock and deterministic ids (the state itself is written by the real core).
Machine-specific text (project path, interpreter, host name) is shown through the screens'
display mapping so the SVGs are the same on every machine."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from dialog_kit import (
    SNAPSHOT_HOST,
    ScreenHost,
    action_dialog,
    completed,
    display,
    finished_job,
    running,
)
from tui_actions_support import accepted, make_project, start, task_plan, write_dead_writer_lock, write_result

from nexus_core import engine
from nexus_tui.logic import recovery
from nexus_tui.screens.progress import ProgressScreen
from nexus_tui.screens.recovery import RecoveryListScreen, RecoveryScreen

SIZE = (100, 40)


pytestmark = pytest.mark.usefixtures("deterministic")  # conftest.py


@pytest.mark.parametrize(
    ("action", "state"),
    [
        ("start", "fresh"),
        ("record", "running"),
        ("reconcile", "running"),
        ("cancel", "running"),
        ("verify", "completed"),
        ("accept", "passed"),
    ],
)
def test_action_dialog(snap_compare: Any, tmp_path: Path, action: str, state: str) -> None:
    if state == "fresh":
        root = make_project(tmp_path)
    elif state == "running":
        root = running(tmp_path)
    else:
        root = completed(tmp_path)
        if state == "passed":
            engine.verify_task(str(root), "demo", "a")
    assert snap_compare(ScreenHost(action_dialog(root, action)), terminal_size=SIZE)


def test_recover_lock_dialog(snap_compare: Any, tmp_path: Path) -> None:
    root = make_project(tmp_path)
    write_dead_writer_lock(root, SNAPSHOT_HOST)
    assert snap_compare(ScreenHost(action_dialog(root, "recover-lock", None)), terminal_size=SIZE)


def test_reconcile_dialog_refuses_without_the_tick(snap_compare: Any, tmp_path: Path) -> None:
    root = running(tmp_path)

    async def confirm_untouched(pilot: Any) -> None:
        await pilot.click("#confirm")
        # Deterministic screen: the mouse leaves the button (no hover colours) and the button's
        # 0.2 s press effect is over before the snapshot.
        await pilot.hover("#dialog-error")
        confirm = pilot.app.screen.query_one("#confirm")
        deadline = time.monotonic() + 10
        while confirm.has_class("-active"):
            assert time.monotonic() < deadline, "the press effect never ended"
            await pilot.pause(0.05)
        await pilot.pause()

    assert snap_compare(ScreenHost(action_dialog(root, "reconcile")), terminal_size=SIZE, run_before=confirm_untouched)


def test_verify_progress_finished(snap_compare: Any, tmp_path: Path) -> None:
    root = completed(tmp_path)
    screen = ProgressScreen(finished_job(root), display=display(root))

    async def wait_until_done(pilot: Any) -> None:
        deadline = time.monotonic() + 30
        while not screen.finished:
            assert time.monotonic() < deadline
            await pilot.pause(0.05)
        await pilot.pause()

    assert snap_compare(ScreenHost(screen), terminal_size=SIZE, run_before=wait_until_done)


def _situation(root: Path, kind: str) -> recovery.Situation:
    return next(s for s in recovery.classify_project(str(root)) if s.kind == kind)


def test_recovery_interrupted_attempt(snap_compare: Any, tmp_path: Path) -> None:
    root = running(tmp_path)
    engine.cancel_task(str(root), "demo", "a", {"reason": "worker host rebooted"})
    screen = RecoveryScreen(_situation(root, "attempt-interrupted"), display=display(root))
    assert snap_compare(ScreenHost(screen), terminal_size=SIZE)


def test_recovery_dead_writer_lock(snap_compare: Any, tmp_path: Path) -> None:
    root = make_project(tmp_path)
    write_dead_writer_lock(root, SNAPSHOT_HOST)
    screen = RecoveryScreen(_situation(root, "writer-lock-dead"), display=display(root))
    assert snap_compare(ScreenHost(screen), terminal_size=SIZE)


def test_recovery_stale_after_acceptance(snap_compare: Any, tmp_path: Path) -> None:
    root = make_project(tmp_path)
    accepted(root, "a")
    write_result(root, "a", "ok, edited after acceptance\n")
    screen = RecoveryScreen(_situation(root, "accepted-stale"), display=display(root))
    assert snap_compare(ScreenHost(screen), terminal_size=SIZE)


def test_recovery_corrupt_run(snap_compare: Any, tmp_path: Path) -> None:
    root = make_project(tmp_path)
    state = root / ".bmad-plus/nexus/runs/demo.json"
    state.write_bytes(state.read_bytes()[:200])
    screen = RecoveryScreen(_situation(root, "run-unreadable"), display=display(root))
    assert snap_compare(ScreenHost(screen), terminal_size=SIZE)


def test_recovery_list(snap_compare: Any, tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "a")
    engine.cancel_task(str(root), "demo", "a", {"reason": "stop"})
    write_dead_writer_lock(root, SNAPSHOT_HOST)
    screen = RecoveryListScreen(recovery.classify_project(str(root)), display=display(root))
    assert snap_compare(ScreenHost(screen), terminal_size=SIZE)
