"""Snapshots of every dialog, the progress screen and the recovery screens, at a fixed size
with a frozen clock and deterministic ids (the state itself is written by the real core).
Machine-specific text (project path, interpreter, host name) is shown through the screens'
display mapping so the SVGs are the same on every machine."""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.screen import Screen
from tui_actions_support import (
    accepted,
    make_project,
    record,
    start,
    task_plan,
    write_dead_writer_lock,
    write_result,
)

from nexus_core import engine, hostinfo, timeutil
from nexus_core.hostinfo import hostname
from nexus_tui.logic import operations, recovery
from nexus_tui.logic.operations import base as operations_base
from nexus_tui.screens.dialogs import dialog_for
from nexus_tui.screens.progress import ProgressScreen
from nexus_tui.screens.recovery import RecoveryListScreen, RecoveryScreen

SIZE = (100, 40)
FROZEN = 1796083200.0  # 2026-12-01T00:00:00Z
SNAPSHOT_HOST = "snapshot-host"


@pytest.fixture(autouse=True)
def _deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = iter(range(1, 1_000_000))
    # Each id gets its own 8-digit prefix (5eed0001, 5eed0002, ...), so a screen showing the
    # wrong short id differs from its snapshot.
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=((0x5EED0000 + next(counter)) << 96) + 0x5EED))
    timeutil.set_clock(lambda: FROZEN)
    # Lock owners embed the host name in their bytes (and so in the fingerprint): the screens
    # compare owners with a fixed host name here so the fingerprint is the same everywhere.
    for module in (operations_base, recovery, hostinfo):  # hostinfo: owner_liveness compares hosts
        monkeypatch.setattr(module, "hostname", lambda: SNAPSHOT_HOST)


def _display(root: Path) -> Callable[[str], str]:
    interpreter = os.path.realpath(sys.executable)
    host = hostname()
    temp = tempfile.gettempdir()

    def show(text: str) -> str:
        text = text.replace(str(root), "/home/operator/project").replace(interpreter, "/usr/bin/python3")
        text = text.replace(temp + "/", "/tmp/")
        return text.replace(f" on {host}", " on host").replace(f"@{host}", "@host")

    return show


class ScreenHost(App[None]):
    def __init__(self, screen: Screen[Any]) -> None:
        super().__init__()
        self.shown = screen

    def on_mount(self) -> None:
        self.push_screen(self.shown)


def _dialog(root: Path, action: str, task: str | None = "a") -> ScreenHost:
    preview = operations.preview(str(root), action, "demo" if task else None, task)
    if preview.backend_editable and action in ("start", "retry"):
        preview.backend = {"kind": "host", "id": "operator", "sessionId": "nexus-tui-user@host"}
    return ScreenHost(dialog_for(preview, _display(root)))


def _running(tmp_path: Path) -> Path:
    root = make_project(tmp_path)
    start(root, "a")
    return root


def _completed(tmp_path: Path) -> Path:
    root = _running(tmp_path)
    write_result(root, "a")
    record(root, "a")
    return root


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
        root = _running(tmp_path)
    else:
        root = _completed(tmp_path)
        if state == "passed":
            engine.verify_task(str(root), "demo", "a")
    assert snap_compare(_dialog(root, action), terminal_size=SIZE)


def test_recover_lock_dialog(snap_compare: Any, tmp_path: Path) -> None:
    root = make_project(tmp_path)
    write_dead_writer_lock(root, SNAPSHOT_HOST)
    assert snap_compare(_dialog(root, "recover-lock", None), terminal_size=SIZE)


def test_reconcile_dialog_refuses_without_the_tick(snap_compare: Any, tmp_path: Path) -> None:
    root = _running(tmp_path)

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

    assert snap_compare(_dialog(root, "reconcile"), terminal_size=SIZE, run_before=confirm_untouched)


def test_verify_progress_finished(snap_compare: Any, tmp_path: Path) -> None:
    root = _completed(tmp_path)
    preview = operations.preview(str(root), "verify", "demo", "a")
    screen = ProgressScreen(preview, {}, operations.ActionLog(), clock=lambda: 0.0, display=_display(root))

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
    root = _running(tmp_path)
    engine.cancel_task(str(root), "demo", "a", {"reason": "worker host rebooted"})
    screen = RecoveryScreen(_situation(root, "attempt-interrupted"), display=_display(root))
    assert snap_compare(ScreenHost(screen), terminal_size=SIZE)


def test_recovery_dead_writer_lock(snap_compare: Any, tmp_path: Path) -> None:
    root = make_project(tmp_path)
    write_dead_writer_lock(root, SNAPSHOT_HOST)
    screen = RecoveryScreen(_situation(root, "writer-lock-dead"), display=_display(root))
    assert snap_compare(ScreenHost(screen), terminal_size=SIZE)


def test_recovery_stale_after_acceptance(snap_compare: Any, tmp_path: Path) -> None:
    root = make_project(tmp_path)
    accepted(root, "a")
    write_result(root, "a", "ok, edited after acceptance\n")
    screen = RecoveryScreen(_situation(root, "accepted-stale"), display=_display(root))
    assert snap_compare(ScreenHost(screen), terminal_size=SIZE)


def test_recovery_corrupt_run(snap_compare: Any, tmp_path: Path) -> None:
    root = make_project(tmp_path)
    state = root / ".bmad-plus/nexus/runs/demo.json"
    state.write_bytes(state.read_bytes()[:200])
    screen = RecoveryScreen(_situation(root, "run-unreadable"), display=_display(root))
    assert snap_compare(ScreenHost(screen), terminal_size=SIZE)


def test_recovery_list(snap_compare: Any, tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "a")
    engine.cancel_task(str(root), "demo", "a", {"reason": "stop"})
    write_dead_writer_lock(root, SNAPSHOT_HOST)
    screen = RecoveryListScreen(recovery.classify_project(str(root)), display=_display(root))
    assert snap_compare(ScreenHost(screen), terminal_size=SIZE)
