"""Dialogs, progress and recovery screens driven with Pilot in a small host app that uses the
same ActionFlow as the dashboard; every assertion is on the state on disk."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import Button, Checkbox, DataTable, Input, Static
from tui_actions_support import (
    HOST,
    latest,
    make_project,
    process_task_plan,
    record,
    start,
    task_of,
    task_plan,
    tree_digest,
    write_dead_writer_lock,
    write_result,
)

from nexus_core import engine
from nexus_core.plan import normalize_plan
from nexus_tui.action_flow import ActionFlow
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.progress import ProgressScreen
from nexus_tui.screens.recovery import RecoveryListScreen, RecoveryScreen
from nexus_tui.screens.stop import ConfirmStop
from nexus_tui.widgets.action_log import ActionLogPanel

SIZE = (110, 44)


class Host(App[None]):
    """A minimal app around ActionFlow and the action log panel, recording notifications."""

    def __init__(self, root: Path, read_only: bool = False) -> None:
        super().__init__()
        self.root = root
        self.read_only = read_only
        self.rescans = 0
        self.flow = ActionFlow(self, read_only=lambda: self.read_only, on_done=self._rescan)
        self.notes: list[tuple[str, str]] = []

    def compose(self) -> ComposeResult:
        yield ActionLogPanel(self.flow.log)

    def _rescan(self) -> None:
        self.rescans += 1

    def notify(self, message: str, *, severity: Any = "information", **kwargs: Any) -> None:
        self.notes.append((severity, message))
        super().notify(message, severity=severity, **kwargs)

    def errors(self) -> list[str]:
        return [message for severity, message in self.notes if severity == "error"]


async def _settle(app: Host, pilot: Any) -> None:
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


def _set(app: App[Any], **values: Any) -> None:
    for key, value in values.items():
        widget = app.screen.query_one(f"#{key}")
        widget.value = value  # type: ignore[attr-defined]


def _shown(app: App[Any], screen_type: Any) -> bool:
    """The screen shown is a ``screen_type`` and mounted (ready for a click)."""
    return isinstance(app.screen, screen_type) and app.screen.is_mounted


async def _wait_until(pilot: Any, predicate: Any, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        await pilot.pause(0.05)


async def _until_clickable(pilot: Any, selector: str) -> None:
    """A button ignores clicks during its press effect (the -active class, 0.2 s)."""
    button = pilot.app.screen.query_one(selector, Button)
    await _wait_until(pilot, lambda: not button.has_class("-active"))


async def test_every_dialog_focuses_cancel_and_cancel_changes_nothing(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "b")
    write_dead_writer_lock(root)
    before = tree_digest(root)
    app = Host(root)
    targets = [("start", "a"), ("record", "b"), ("reconcile", "b"), ("cancel", "b"), ("recover-lock", None)]
    async with app.run_test(size=SIZE) as pilot:
        for action, task in targets:
            app.flow.open(action, str(root), "demo" if task else None, task)
            await _settle(app, pilot)  # the preview is read in a worker thread
            assert isinstance(app.screen, ActionDialog), action
            assert app.focused is not None and app.focused.id == "cancel", action
            await pilot.press("enter")
            await _settle(app, pilot)
            assert not isinstance(app.screen, ActionDialog), action
        app.flow.open("reconcile", str(root), "demo", "b")
        await _settle(app, pilot)  # the preview is read in a worker thread
        await pilot.press("escape")
        await _settle(app, pilot)
    assert tree_digest(root) == before
    assert app.flow.log.entries == [] and app.errors() == []


async def test_reconcile_needs_the_operator_tick(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    engine.cancel_task(str(root), "demo", "a", {"reason": "stuck"})
    before = tree_digest(root)
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open("reconcile", str(root), "demo", "a")
        await _settle(app, pilot)  # the preview is read in a worker thread
        _set(app, summary="worker pid gone")
        await pilot.click("#outcome-cancelled")
        await pilot.click("#confirm")
        await pilot.pause()
        assert isinstance(app.screen, ActionDialog)  # not dismissed: the tick is missing
        assert "owner stopped" in str(app.screen.query_one("#dialog-error", Static).render())
        assert tree_digest(root) == before
        app.screen.query_one("#owner_stopped", Checkbox).value = True
        await _until_clickable(pilot, "#confirm")
        await pilot.click("#confirm")
        await _settle(app, pilot)
    attempt = latest(root, "a")
    assert attempt["execution"] == "cancelled"
    assert attempt["reconciliation"]["summary"] == "worker pid gone"
    assert attempt["reconciliation"]["retrySafe"] is False


async def test_cancel_needs_the_task_id_typed(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open("cancel", str(root), "demo", "a")
        await _settle(app, pilot)  # the preview is read in a worker thread
        _set(app, reason="wrong branch", typed="b")
        await pilot.click("#confirm")
        await pilot.pause()
        assert isinstance(app.screen, ActionDialog)
        assert latest(root, "a")["cancellation"]["status"] == "none"
        _set(app, typed="a")
        await _until_clickable(pilot, "#confirm")
        await pilot.click("#confirm")
        await _settle(app, pilot)
    assert latest(root, "a")["cancellation"]["reason"] == "wrong branch"


async def test_a_core_error_is_an_error_notification_with_the_exact_message(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    engine.verify_task(str(root), "demo", "a")
    write_result(root, "a", "ok edited\n")
    before = tree_digest(root)
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open("accept", str(root), "demo", "a")
        await _settle(app, pilot)  # the preview is read in a worker thread
        await pilot.click("#confirm")
        await _settle(app, pilot)
        assert app.errors() == ["Nexus: Stale evidence: checked artifacts or write scope changed."]
        assert app.is_running
        cell = app.query_one(ActionLogPanel).query_one(DataTable).get_row_at(0)[4]
        assert "Stale evidence" in cell.plain
    assert tree_digest(root) == before


async def test_a_state_changed_under_the_dialog_is_refused(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open("record", str(root), "demo", "a")
        await _settle(app, pilot)  # the preview is read in a worker thread
        _set(app, summary="late report")
        record(root, "a", outcome="failed")  # another client acts meanwhile
        before = tree_digest(root)
        await pilot.click("#confirm")
        await _settle(app, pilot)
        assert len(app.errors()) == 1 and "changed while the dialog was open" in app.errors()[0]
        assert "execution: running -> failed" in app.errors()[0]
    assert tree_digest(root) == before


async def test_verify_progress_shows_the_check_and_stop_ends_ambiguous(tmp_path: Path) -> None:
    checks = [{"id": f"c{i}", "command": "python", "args": ["checks/check.py", "a"]} for i in (1, 2)]
    root = make_project(tmp_path, [task_plan("a", checks=checks)])
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    (root / "hold").write_text("")
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open("verify", str(root), "demo", "a")
        await _settle(app, pilot)  # the preview is read in a worker thread
        await pilot.click("#confirm")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProgressScreen)
        step = screen.query_one("#progress-step", Static)
        await _wait_until(pilot, lambda: "Check 1 of 2: c1" in str(step.render()))
        assert "checks/check.py a" in str(screen.query_one("#progress-command", Static).render())
        await pilot.click("#stop")  # the app stays responsive while the check runs
        await _wait_until(pilot, lambda: isinstance(app.screen, ConfirmStop))
        await pilot.click("#confirm")  # Stop asks first
        (root / "hold").unlink()
        await _wait_until(pilot, lambda: screen.finished)
        await pilot.click("#close")
        await pilot.pause()
    verification = latest(root, "a")["verification"]
    assert verification["status"] == "ambiguous" and len(verification["checks"]) == 1


async def test_launch_progress_stop_then_collect(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    (root / "hold-worker").write_text("")
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open("launch", str(root), "demo", "p")
        await _settle(app, pilot)  # the preview is read in a worker thread
        await pilot.click("#confirm")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProgressScreen)
        await _wait_until(pilot, lambda: any(line.startswith("spawned pid") for line in screen.events))
        await pilot.click("#stop")
        await _wait_until(pilot, lambda: isinstance(app.screen, ConfirmStop))
        await pilot.click("#confirm")  # Stop asks first
        await _wait_until(pilot, lambda: screen.finished)
        await pilot.click("#close")
        await pilot.pause()
        receipt = latest(root, "p")["process"]["receipt"]
        assert receipt["reason"] == "supervisor-interrupted"
        app.flow.open("collect", str(root), "demo", "p")
        await _settle(app, pilot)  # the preview is read in a worker thread
        await pilot.click("#confirm")
        await _settle(app, pilot)
    attempt = latest(root, "p")
    assert attempt["process"]["collectedAt"] is not None and attempt["execution"] == "ambiguous"


async def test_recovery_screen_next_step_opens_the_dialog(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    first = start(root, "a")
    engine.cancel_task(str(root), "demo", "a", {"reason": "stuck"})
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open_recovery(str(root), "demo", "a")
        await _wait_until(pilot, lambda: isinstance(app.screen, RecoveryListScreen | RecoveryScreen))
        await pilot.pause()
        assert isinstance(app.screen, RecoveryScreen)
        assert app.focused is not None and app.focused.id == "close"
        await pilot.click("#next-action")
        await _wait_until(pilot, lambda: _shown(app, ActionDialog))  # the preview is read in a worker
        assert isinstance(app.screen, ActionDialog) and app.screen.preview.action == "reconcile"
        _set(app, summary="gone")
        app.screen.query_one("#owner_stopped", Checkbox).value = True
        await pilot.click("#outcome-failed")  # no outcome is preselected (issue 13 item 2)
        await pilot.click("#confirm")
        await _settle(app, pilot)
        assert latest(root, "a")["execution"] == "failed"
        # The next situation offers the retry.
        app.flow.open_recovery(str(root))
        await _wait_until(pilot, lambda: isinstance(app.screen, RecoveryListScreen | RecoveryScreen))
        await pilot.pause()
        assert isinstance(app.screen, RecoveryListScreen)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, RecoveryScreen) and app.screen.situation.next_action == "retry"
        await pilot.click("#next-action")
        await _wait_until(pilot, lambda: _shown(app, ActionDialog))  # the preview is read in a worker
        await pilot.click("#confirm")
        await _settle(app, pilot)
    attempts = task_of(root, "a")["attempts"]
    assert len(attempts) == 2 and attempts[1]["parentAttemptId"] == first


async def test_corrupt_run_screen_saves_the_plan_but_repairs_nothing(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    state = root / ".bmad-plus/nexus/runs/demo.json"
    stored_plan = json.loads(state.read_text())["run"]["plan"]
    os.chmod(state, 0o666)
    before = tree_digest(root)
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open_recovery(str(root))
        await _wait_until(pilot, lambda: isinstance(app.screen, RecoveryListScreen | RecoveryScreen))
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RecoveryScreen) and screen.situation.kind == "run-unreadable"
        assert not screen.query("#next-action")
        await pilot.click("#save-plan")
        await pilot.pause()
        saved = screen.saved_plan
        copied = app.clipboard
    assert saved == str(root / ".bmad-plus/nexus/fresh-plans/demo-demo-fresh.json")
    # The saved plan is the stored one under the new id: create would rebuild the same plan.
    saved_plan = json.loads(Path(saved).read_text())
    assert saved_plan["id"] == "demo-fresh"
    assert normalize_plan(str(root), saved_plan) == dict(stored_plan, id="demo-fresh")
    assert oct(os.stat(saved).st_mode & 0o777) == "0o600"
    assert copied.endswith(f"nexus create --plan {saved} -d {root}")  # the command names the file written
    os.unlink(saved)
    os.rmdir(Path(saved).parent)
    assert tree_digest(root) == before  # nothing else was written, nothing repaired


async def test_a_planted_plan_file_gets_a_clash_message_and_no_command(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    os.chmod(root / ".bmad-plus/nexus/runs/demo.json", 0o666)
    planted = root / ".bmad-plus/nexus/fresh-plans/demo-demo-fresh.json"
    planted.parent.mkdir()
    planted.write_text('{"id": "demo-fresh", "tasks": [{"checks": [{"command": "sh"}]}]}\n')
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open_recovery(str(root))
        await _wait_until(pilot, lambda: isinstance(app.screen, RecoveryListScreen | RecoveryScreen))
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RecoveryScreen)
        await pilot.click("#save-plan")
        await pilot.pause()
        assert screen.saved_plan is None
        error = str(screen.query_one("#dialog-error", Static).render())
        assert f"A file already exists at {planted}" in error and "Choose another name" in error
        assert "nexus create" not in str(screen.query_one("#recovery-command", Static).render())
        assert "nexus create" not in (app.clipboard or "")
        suggestion = screen.query_one("#plan-path", Input).value
        assert suggestion == str(planted.parent / "demo-demo-fresh-2.json")
        screen.query_one("#save-plan", Button).press()  # (the error toast covers the button now)
        await pilot.pause()
        assert screen.saved_plan == suggestion
        assert f"nexus create --plan {suggestion} " in str(screen.query_one("#recovery-command", Static).render())
    assert planted.read_text().startswith('{"id": "demo-fresh", "tasks": [{"checks"')  # untouched


async def test_create_a_fresh_run_from_the_recovery_screen(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    engine.verify_task(str(root), "demo", "a")
    engine.accept_task(str(root), "demo", "a")
    write_result(root, "a", "ok edited\n")
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open_recovery(str(root), "demo", "a")
        await _wait_until(pilot, lambda: isinstance(app.screen, RecoveryListScreen | RecoveryScreen))
        await pilot.pause()
        assert isinstance(app.screen, RecoveryScreen) and app.screen.situation.kind == "accepted-stale"
        await pilot.click("#fresh-run")
        await pilot.pause()
        assert isinstance(app.screen, ActionDialog) and app.screen.preview.action == "create"
        await pilot.click("#confirm")
        await _settle(app, pilot)
    assert task_of(root, "a", run_id="demo-fresh")["integration"] == "pending"
    assert app.flow.log.entries[-1].action == "create"


async def test_read_only_disables_the_recovery_buttons_and_the_flow(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    write_dead_writer_lock(root)
    before = tree_digest(root)
    app = Host(root, read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open_recovery(str(root))
        await _wait_until(pilot, lambda: isinstance(app.screen, RecoveryListScreen | RecoveryScreen))
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen.query_one("#next-action", Button).disabled
        await pilot.click("#next-action")
        await pilot.pause()
        assert isinstance(app.screen, RecoveryScreen)
        await pilot.press("escape")
        app.flow.open("recover-lock", str(root))
        await _settle(app, pilot)  # the preview is read in a worker thread
        assert not isinstance(app.screen, ActionDialog)
        assert app.errors()[-1].startswith("The dashboard is read-only")
    assert tree_digest(root) == before


async def test_untrusted_text_is_plain_in_the_log_and_dialogs(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    engine.start_task(str(root), "demo", "a", {"backend": {**HOST, "id": "[red]w[/red]"}})
    app = Host(root)
    async with app.run_test(size=SIZE) as pilot:
        app.flow.open("cancel", str(root), "demo", "a")
        await _settle(app, pilot)  # the preview is read in a worker thread
        _set(app, reason="[bold]stop[/bold] now", typed="a")
        await pilot.click("#confirm")
        await _settle(app, pilot)
        row = app.query_one(ActionLogPanel).query_one(DataTable).get_row_at(0)
        assert "reason=[bold]stop[/bold] now" in row[3].plain
        app.flow.open("reconcile", str(root), "demo", "a")
        await _settle(app, pilot)  # the preview is read in a worker thread
        assert app.screen.query_one("#backend_id", Input).value == "[red]w[/red]"
    await asyncio.sleep(0)


def _entry(number: int) -> Any:
    from nexus_tui.logic.operations import LogEntry

    return LogEntry("2026-12-01T00:00:00.000Z", "record", f"demo/t{number}", "(no input)", True, "done")


async def test_the_action_log_shows_entries_made_before_it_was_mounted(tmp_path: Path) -> None:
    app = Host(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await app.query_one(ActionLogPanel).remove()
        app.flow.log.append(_entry(1))  # the session's first action, before the panel exists
        await app.mount(ActionLogPanel(app.flow.log))
        await pilot.pause()
        assert app.query_one(ActionLogPanel).query_one(DataTable).row_count == 1


async def test_an_entry_appended_by_a_worker_thread_adds_exactly_one_row(tmp_path: Path) -> None:
    app = Host(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(ActionLogPanel).query_one(DataTable)
        touched_off_thread: list[bool] = []
        add_row = table.add_row

        def guarded_add_row(*cells: Any, **options: Any) -> Any:
            touched_off_thread.append(threading.current_thread() is not threading.main_thread())
            return add_row(*cells, **options)

        table.add_row = guarded_add_row  # type: ignore[method-assign]
        worker = threading.Thread(target=lambda: [app.flow.log.append(_entry(n)) for n in range(3)])
        worker.start()
        worker.join()
        await _wait_until(pilot, lambda: table.row_count >= 3)
        await pilot.pause()
        assert table.row_count == 3 and touched_off_thread == [False, False, False]
