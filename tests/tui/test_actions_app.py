"""The dashboard's actions, end to end in the real app: keys -> dialog -> core -> state on
disk; Cancel changes nothing; the --read-only gate leaves no mutating action reachable by
key, palette or mouse; a state changed under the dialog is refused; core errors become error
notifications with the exact message; guided recovery leads to the safe next step."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dashboard_kit import caught_up, eventually, loaded, quiet_app, select, showing, tree_fingerprint
from textual.widgets import Checkbox, Input
from textual.widgets._footer import FooterKey
from tui_actions_support import (
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
from nexus_tui import actions
from nexus_tui.app import NexusApp
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.progress import ProgressScreen
from nexus_tui.screens.recovery import RecoveryListScreen, RecoveryScreen

SIZE = (130, 40)
# The main screen's mutating entries (the schedules panel's are tested in test_schedule_panel).
MUTATING = [entry for entry in actions.REGISTRY if entry.mutating and entry.screen == actions.MAIN]
READ_ONLY_WORDS = actions.refused_words(actions.READ_ONLY_REFUSAL)


def _errors(app: NexusApp) -> list[str]:
    return [n.message for n in app._notifications if n.severity == "error"]


async def _done(app: NexusApp, pilot: Any, ended: int) -> None:
    """Wait for the action's core call to end (its notification given: ``ended`` counted before
    the confirm), then for the rescan it asked for to be applied."""
    await eventually(pilot, lambda: app.flow.ended > ended)
    await caught_up(pilot)


async def _open(app: NexusApp, pilot: Any, key: str) -> ActionDialog:
    await pilot.press(key)
    await eventually(pilot, lambda: showing(app, ActionDialog))  # the preview is read in a worker
    await pilot.pause()
    assert isinstance(app.screen, ActionDialog), f"{key} opened {app.screen}"
    assert app.focused is not None and app.focused.id == "cancel"
    return app.screen


def _fill(app: NexusApp, **values: Any) -> None:
    for key, value in values.items():
        widget = app.screen.query_one(f"#{key}")
        if isinstance(widget, Checkbox | Input):
            widget.value = value


async def _confirm(app: NexusApp, pilot: Any) -> None:
    ended = app.flow.ended
    await pilot.click("#confirm")
    await _done(app, pilot, ended)


async def _long(app: NexusApp, pilot: Any) -> ProgressScreen:
    await pilot.click("#confirm")
    await eventually(pilot, lambda: showing(app, ProgressScreen))
    screen = app.screen
    assert isinstance(screen, ProgressScreen)
    await eventually(pilot, lambda: screen.job.reported, timeout=30)  # ended, and the app heard of it
    await pilot.pause()  # the end's layout (Stop hidden, Close moves) is done before the click lands
    await pilot.click("#close")
    await eventually(pilot, lambda: app.screen is not screen)
    await caught_up(pilot)  # the job's end rescans the project
    return screen


async def test_a_host_task_from_start_to_accepted_by_keys(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        await _open(app, pilot, "b")
        await _confirm(app, pilot)
        assert latest(root, "a")["execution"] == "running"
        write_result(root, "a")
        await _open(app, pilot, "O")
        _fill(app, summary="wrote the result")
        await _confirm(app, pilot)
        assert latest(root, "a")["execution"] == "completed"
        await _open(app, pilot, "v")
        progress = await _long(app, pilot)
        assert any("exit code 0" in line for line in progress.events)
        assert latest(root, "a")["verification"]["status"] == "passed"
        await _open(app, pilot, "A")
        await _confirm(app, pilot)
        assert task_of(root, "a")["integration"] == "accepted"
        # The log panel appeared and lists the four calls.
        log_panel = app.query_one("#action-log")
        assert log_panel.display and [e.action for e in app.flow.log.entries] == ["start", "record", "verify", "accept"]
    assert _errors(app) == []


async def test_cancel_reconcile_retry_by_keys(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("b", idempotent=False, maxAttempts=3)])
    first = start(root, "b")
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "b")
        await _open(app, pilot, "x")
        _fill(app, reason="wrong input", typed="b")
        await _confirm(app, pilot)
        assert latest(root, "b")["cancellation"]["status"] == "requested"
        await _open(app, pilot, "e")
        _fill(app, summary="worker stopped", owner_stopped=True, retry_safe=True)
        await pilot.click("#outcome-cancelled")
        await _confirm(app, pilot)
        assert latest(root, "b")["execution"] == "cancelled"
        await _open(app, pilot, "B")
        await _confirm(app, pilot)
    attempts = task_of(root, "b")["attempts"]
    assert len(attempts) == 2 and attempts[1]["parentAttemptId"] == first
    assert _errors(app) == []


async def test_a_process_task_launch_collect_verify_accept_by_keys(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "p")
        await _open(app, pilot, "l")
        progress = await _long(app, pilot)
        assert any(line.startswith("spawned pid") for line in progress.events)
        await _open(app, pilot, "C")
        await _confirm(app, pilot)
        assert latest(root, "p")["execution"] == "completed"
        await _open(app, pilot, "v")
        await _long(app, pilot)
        await _open(app, pilot, "A")
        await _confirm(app, pilot)
    assert task_of(root, "p")["integration"] == "accepted"
    assert _errors(app) == []


async def test_the_dead_lock_is_cleared_from_the_recovery_guide(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    lock_hash = write_dead_writer_lock(root)
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await pilot.press("R")
        await eventually(pilot, lambda: showing(app, RecoveryListScreen | RecoveryScreen))
        assert isinstance(app.screen, RecoveryListScreen)
        await pilot.press("enter")
        await eventually(pilot, lambda: showing(app, RecoveryScreen))
        assert isinstance(app.screen, RecoveryScreen) and app.screen.situation.kind == "writer-lock-dead"
        await pilot.click("#next-action")
        await eventually(pilot, lambda: showing(app, ActionDialog))  # the preview is read in a worker
        assert isinstance(app.screen, ActionDialog) and app.screen.preview.action == "recover-lock"
        _fill(app, note="pid 4194304 is gone", owner_stopped=True, typed=lock_hash[:8])
        await _confirm(app, pilot)
    assert not (root / ".bmad-plus/nexus/writer.lock").exists()
    assert len(list((root / ".bmad-plus/nexus/lock-recovery").glob("*.json"))) == 1


async def test_cancel_in_every_dialog_changes_nothing(tmp_path: Path) -> None:
    # Every dialog's Cancel is also covered by test_dialogs; here through the app's keys.
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "b")
    write_dead_writer_lock(root)
    before = tree_fingerprint(str(root))
    app = quiet_app([str(root)])
    opened = []
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        for task, keys in (("a", "b"), ("b", "eL")):
            await select(pilot, "demo", task)
            for key in keys:
                dialog = await _open(app, pilot, key)
                opened.append(dialog.preview.action)
                await pilot.press("enter" if key in "bv" else "escape")  # Enter on the focused Cancel
                await pilot.pause()
                assert not isinstance(app.screen, ActionDialog)
    assert opened == ["start", "reconcile", "recover-lock"]
    assert tree_fingerprint(str(root)) == before
    assert app.flow.log.entries == []


async def test_read_only_leaves_no_mutating_action_reachable(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "b")
    write_dead_writer_lock(root)
    before = tree_fingerprint(str(root))
    app = quiet_app([str(root)], read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        assert all(app.check_action(entry.id, ()) is None for entry in MUTATING)
        for task in ("b",):  # an attempt that most actions could act on
            await select(pilot, "demo", task)
            # By key: every binding of every mutating action is refused by the gate.
            for entry in MUTATING:
                assert app.check_action(entry.id, ()) is None, entry.id
                for key in entry.keys.split(","):
                    await pilot.press(key)
                    await pilot.pause()
                    assert app.screen is app.screen_stack[0], (entry.id, key)
            # By palette: no mutating action is offered (listed); a search finds each one
            # saying why it is unavailable, and choosing it only says so again.
            commands = list(app.get_system_commands(app.screen))
            offered = {command.title for command in commands if command.discover}
            assert not offered & {entry.label for entry in MUTATING}
            refused = {command.title for command in commands if command.help == READ_ONLY_WORDS}
            assert {entry.label for entry in MUTATING} <= refused
            # By mouse: footer keys of mutating actions are disabled and clicking does nothing.
            for footer_key in app.query(FooterKey):
                if actions.spec(footer_key.action) in MUTATING:
                    assert footer_key.disabled or footer_key.has_class("-disabled")
                    await pilot.click(footer_key)
                    await pilot.pause()
                    assert app.screen is app.screen_stack[0]
            # run_action (what the palette and the footer call) is gated too: refused, no dialog.
            assert await app.run_action("act('recover-lock')") is False
            await pilot.pause()
            assert app.screen is app.screen_stack[0]
        # Guided recovery stays readable, its next step is disabled.
        await pilot.press("R")
        await eventually(pilot, lambda: showing(app, RecoveryListScreen | RecoveryScreen))
        await pilot.press("enter")
        await eventually(pilot, lambda: showing(app, RecoveryScreen))
        assert isinstance(app.screen, RecoveryScreen)
        assert app.screen.query_one("#next-action").disabled
    assert tree_fingerprint(str(root)) == before


def _offered(app: NexusApp) -> set[str]:
    """The palette's list (what it shows before a search)."""
    return {command.title for command in app.get_system_commands(app.screen) if command.discover}


async def test_the_palette_offers_only_actions_valid_for_the_selection(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "b")
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        offered = _offered(app)
        assert "Start" in offered and not {"Record", "Verify", "Accept", "Reconcile"} & offered
        await select(pilot, "demo", "b")
        offered = _offered(app)
        assert {"Record", "Reconcile", "Cancel attempt"} <= offered and not {"Start", "Accept"} & offered


async def test_a_state_changed_under_the_dialog_is_refused_in_the_app(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        await _open(app, pilot, "O")
        _fill(app, summary="late report")
        record(root, "a", outcome="failed")  # another client, meanwhile
        before = tree_fingerprint(str(root))
        await _confirm(app, pilot)
        assert len(_errors(app)) == 1 and "changed while the dialog was open" in _errors(app)[0]
        assert app.is_running
    assert tree_fingerprint(str(root)) == before


async def test_a_core_error_is_an_error_notification_and_the_app_keeps_running(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    engine.verify_task(str(root), "demo", "a")
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        await _open(app, pilot, "A")
        write_result(root, "a", "ok, edited under the dialog\n")
        before = tree_digest(root)  # file contents: the refused accept took and released writer.lock
        await _confirm(app, pilot)
        assert _errors(app) == ["Nexus: Stale evidence: checked artifacts or write scope changed."]
        assert app.is_running
    assert tree_digest(root) == before


async def test_the_demo_is_finished_from_the_dashboard(tmp_path: Path) -> None:
    """The issue's "done when": from the demo, clear the dead lock and bring every task to
    accepted or explicitly failed with keys and dialogs only."""
    from nexus_core.state.store import load_run
    from nexus_tui.logic import recovery
    from nexus_tui.logic.demo import build_demo

    root = build_demo(str(tmp_path / "demo")).directory
    app = quiet_app([root])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        # 1. The dead writer.lock blocks every mutation: the recovery guide lists it first.
        await pilot.press("R")
        await eventually(pilot, lambda: showing(app, RecoveryListScreen | RecoveryScreen))
        await pilot.press("enter")
        await eventually(pilot, lambda: showing(app, RecoveryScreen))
        assert isinstance(app.screen, RecoveryScreen) and app.screen.situation.kind == "writer-lock-dead"
        fingerprint = app.screen.situation.lock_hash or ""
        await pilot.click("#next-action")
        await eventually(pilot, lambda: showing(app, ActionDialog))  # the preview is read in a worker
        _fill(app, note="pid 4194304 does not exist on this host", owner_stopped=True, typed=fingerprint[:8])
        await _confirm(app, pilot)
        assert not os.path.exists(os.path.join(root, ".bmad-plus/nexus/writer.lock"))
        # 2. Each task, with the key of its safe next step.
        steps = [
            ("release", "migrate", "A", {}),
            ("release", "perf-notes", "v", None),
            ("release", "perf-notes", "A", {}),
            ("release", "bench", "A", {}),
            ("release", "cleanup", "e", {"summary": "stopped before dropping", "outcome": "cancelled"}),
            ("release", "backfill", "e", {"summary": "worker gone, nothing written", "outcome": "failed"}),
            ("hotfix", "patch", "e", {"summary": "no timezone table: abandoned", "outcome": "failed"}),
        ]
        for run_id, task_id, key, values in steps:
            await select(pilot, run_id, task_id)
            await _open(app, pilot, key)
            if values is None:
                await _long(app, pilot)
                continue
            if "outcome" in values:
                await pilot.click(f"#outcome-{values['outcome']}")
                _fill(app, summary=values["summary"], owner_stopped=True)
            await _confirm(app, pilot)
    assert _errors(app) == []
    unfinished = []
    for run_id in ("docs-site", "hotfix", "release"):
        for task in load_run(root, run_id)["tasks"]:
            attempt = task["attempts"][-1] if task["attempts"] else None
            explicit = attempt is not None and attempt["execution"] in ("failed", "cancelled")
            if task["integration"] != "accepted" and not explicit:
                unfinished.append(f"{run_id}/{task['id']}")
    assert unfinished == []
    # Guided recovery still lists the explicit failures (a retry stays possible) and the stale
    # accepted leaf (accepted is permanent): the guide says so, says nothing is blocked by it,
    # and its fresh-run way out passes create.
    left = {(s.kind, s.task_id): s for s in recovery.classify_project(root)}
    assert sorted(left) == [
        ("accepted-stale", "release-notes"),
        ("retry-ready", "backfill"),
        ("retry-ready", "cleanup"),
        ("retry-ready", "patch"),
    ]
    stale = left[("accepted-stale", "release-notes")]
    assert "Nexus cannot un-accept" in " ".join(stale.known)
    assert "No task depends on it: nothing else is blocked." in stale.known
    assert stale.fresh_run is not None and stale.fresh_run.create_problem is None
