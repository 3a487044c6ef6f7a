"""What a new operator tripped on in the guide and the dialogs (issue 13 items 2, 4, 5, 7), in
the real app with Pilot; every refusal is checked on disk (nothing changed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from dashboard_kit import eventually, loaded, quiet_app, select, tree_fingerprint
from textual.widgets import Checkbox, Input, RadioButton, Static
from tui_actions_support import make_project, start, task_plan

from nexus_core import engine
from nexus_core.state import store
from nexus_tui.app import NexusApp
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.recovery import RecoveryListScreen, RecoveryScreen

pytestmark = pytest.mark.asyncio
SIZE = (130, 40)


async def _dialog(app: NexusApp, pilot: Any) -> ActionDialog:
    await eventually(pilot, lambda: isinstance(app.screen, ActionDialog))  # the preview is read in a worker
    await pilot.pause()
    assert isinstance(app.screen, ActionDialog)
    return app.screen


def _pressed(dialog: ActionDialog) -> list[str]:
    return [str(button.id) for button in dialog.query(RadioButton) if button.value]


async def _confirm_refused(app: NexusApp, pilot: Any, dialog: ActionDialog) -> str:
    """Press confirm; the dialog stays open and says why."""
    await pilot.click("#confirm")
    await pilot.pause()
    assert app.screen is dialog
    return str(dialog.query_one("#dialog-error", Static).render())


async def test_no_reconcile_outcome_is_preselected_from_the_guide_or_the_key(tmp_path: Path) -> None:
    """Issue 13 item 2: the operator picks the outcome; confirm without one is refused in words."""
    root = make_project(tmp_path)
    start(root, "a")
    engine.cancel_task(str(root), "demo", "a", {"reason": "operator stop"})
    before = tree_fingerprint(str(root))
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        # From the guide: its "Reconcile…" button.
        await pilot.press("R")
        await eventually(pilot, lambda: isinstance(app.screen, RecoveryListScreen))
        listing = app.screen
        assert isinstance(listing, RecoveryListScreen) and len(listing.situations) == 1
        listing.dismiss(listing.situations[0])
        await eventually(pilot, lambda: isinstance(app.screen, RecoveryScreen))
        guide = app.screen
        assert isinstance(guide, RecoveryScreen) and guide.situation.kind == "attempt-interrupted"
        assert "completed, failed or cancelled" in guide.situation.next_step  # the guide names no default
        await pilot.click("#next-action")
        dialog = await _dialog(app, pilot)
        assert dialog.preview.action == "reconcile" and _pressed(dialog) == []
        dialog.query_one("#summary", Input).value = "worker gone"
        dialog.query_one("#owner_stopped", Checkbox).value = True
        assert "Choose what actually happened" in await _confirm_refused(app, pilot, dialog)
        await pilot.press("escape")
        await pilot.pause()
        # From the key.
        await pilot.press("e")
        dialog = await _dialog(app, pilot)
        assert dialog.preview.action == "reconcile" and _pressed(dialog) == []
        await pilot.press("escape")
        await pilot.pause()
    assert tree_fingerprint(str(root)) == before
    assert callable(task_plan)  # the kit's plan helper is shared by the tests below


async def test_cancel_is_offered_only_while_the_attempt_runs(tmp_path: Path) -> None:
    """Issue 13 item 5: a finished (here verified) attempt offers no cancel, the gate says why;
    a running one does."""
    from tui_actions_support import record, write_result

    from nexus_tui.logic import operations
    from nexus_tui.logic.operations import Target

    root = make_project(tmp_path, [task_plan("done"), task_plan("busy")])
    start(root, "done")
    write_result(root, "done")
    record(root, "done")
    engine.verify_task(str(root), "demo", "done")
    start(root, "busy")
    run = store.load_run(str(root), "demo")
    reason = operations.OPERATIONS["cancel"].unavailable(Target(str(root), run, "done", None))
    assert reason is not None and "has ended" in reason and "nothing to cancel" in reason
    assert "reconcile" in reason
    assert operations.OPERATIONS["cancel"].unavailable(Target(str(root), run, "busy", None)) is None
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "done")
        assert not app.check_action("act", ("cancel",))
        # The palette lists an unavailable action only for a search, with the gate's reason as its help.
        assert _palette_help(app, "Cancel attempt").startswith("Unavailable: The attempt has ended")
        await select(pilot, "demo", "busy")
        assert app.check_action("act", ("cancel",)) is True
        assert not _palette_help(app, "Cancel attempt").startswith("Unavailable")


def _palette_help(app: Any, title: str) -> str:
    return str(next(command.help for command in app.get_system_commands(app.screen) if command.title == title))


async def test_a_cancellation_from_the_cli_under_an_open_accept_is_named_not_refused(tmp_path: Path) -> None:
    """Issue 13 item 4: open accept, cancel the attempt with `nexus cancel` from another process,
    confirm: the dialog's "changed while the dialog was open" message names the cancellation
    (not the core's refusal), and nothing more is written."""
    import json
    import subprocess
    import sys

    from tui_actions_support import record, write_result

    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    engine.verify_task(str(root), "demo", "a")
    reason = tmp_path / "cancel.json"
    reason.write_text(json.dumps({"reason": "stop it"}))
    app = quiet_app([str(root)])
    async with app.run_test(size=SIZE) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        await pilot.press("A")
        dialog = await _dialog(app, pilot)
        assert dialog.preview.action == "accept"
        cancelled = subprocess.run(
            [sys.executable, "-m", "nexus_core.cli", "cancel", "demo", "a", "--input", str(reason), "-d", str(root)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert cancelled.returncode == 0, cancelled.stderr
        before = tree_fingerprint(str(root))
        await pilot.click("#confirm")
        await eventually(pilot, lambda: bool(app.flow.log.entries))
        entry = app.flow.log.entries[-1]
        assert not entry.ok and "changed while the dialog was open" in entry.result, entry.result
        assert "cancellation: none -> requested" in entry.result
        assert not entry.result.startswith("Nexus:")
    assert tree_fingerprint(str(root)) == before


async def test_the_status_bar_says_what_the_guide_says_about_a_dead_recovery_lock(tmp_path: Path) -> None:
    """Issue 13 item 7: for a recovery.lock of a dead pid the status bar advises what the guide
    does: inspect first, then the exact command that removes it by hand (never recover-lock,
    which refuses while it exists)."""
    import shlex

    from dashboard_kit import status_text
    from tui_actions_support import write_dead_recovery_lock

    from nexus_tui.logic import recovery

    root = make_project(tmp_path)
    write_dead_recovery_lock(root)
    command = f"rm -- {shlex.quote(str(root / '.bmad-plus/nexus/recovery.lock'))}"
    guide = next(s for s in recovery.classify_project(str(root)) if s.kind == "recovery-lock-left")
    assert guide.command == command
    app = quiet_app([str(root)])
    async with app.run_test(size=(200, 40)) as pilot:
        await loaded(app, pilot)
        status = status_text(app)
        advice = status.split("recovery.lock", 1)[1]
        assert "DEAD on this host: recover-lock" not in advice
        assert "nexus inspect" in advice and command in advice, advice
        assert advice.index("nexus inspect") < advice.index(command)  # inspect first, then remove
