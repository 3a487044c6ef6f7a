"""The core's additive hints reach the dashboard in the core's own words: a verification left
running (observations[i].runningVerification.hint: who owned it, since when, which command
ends it) in the task detail and the recovery guide, and recovery.lock's way out
(recoveryLockHint) in the status bar instead of a hard-coded word."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from dashboard_kit import detail_text, eventually, loaded, quiet_app, select, showing, status_text
from tui_actions_support import latest, make_project, record, start, write_dead_recovery_lock, write_result

from nexus_core import observe
from nexus_tui.screens.recovery import RecoveryListScreen, RecoveryScreen

pytestmark = pytest.mark.asyncio


def _verification_left_running(root: Path) -> None:
    """A verify killed while its verification is stored as running (its owner then is gone)."""
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    (root / "hold").write_text("")  # the project's check waits while this file exists
    verifier = subprocess.Popen(
        [sys.executable, "-c", f"from nexus_core import engine; engine.verify_task({str(root)!r}, 'demo', 'a')"],
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while latest(root, "a")["verification"]["status"] != "running":
            assert time.monotonic() < deadline, "the verification never started"
            time.sleep(0.02)  # polling the file the child writes (a bounded wait, not a sync sleep)
    finally:
        os.killpg(verifier.pid, signal.SIGKILL)
        verifier.wait()
    (root / "hold").unlink()


async def test_the_cores_hints_in_the_detail_the_guide_and_the_status_bar(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    _verification_left_running(root)
    write_dead_recovery_lock(root)
    running = observe.inspect_run(str(root), "demo")["observations"][0]["runningVerification"]
    assert running["ownerAlive"] is False
    lock_hint = observe.inspect_inventory(str(root))["recoveryLockHint"]
    app = quiet_app([str(root)])
    async with app.run_test(size=(160, 46)) as pilot:
        await loaded(app, pilot)
        await select(pilot, "demo", "a")
        # The detail: the core's words, whole (owner, since when, the reconcile that ends it).
        detail = detail_text(app)
        assert running["hint"] in detail
        assert "verification left running" in detail
        # The status bar: recovery.lock's way out from the core, not "recover-lock" (which it refuses).
        status = status_text(app)
        assert lock_hint in status
        assert "DEAD on this host: recover-lock" not in status.split("recovery.lock", 1)[1]
        # The recovery guide's situation carries the same hint.
        await pilot.press("R")
        # Mounted, not only pushed: dismissed before its on_mount ran, the list would be gone.
        await eventually(pilot, lambda: showing(app, RecoveryListScreen | RecoveryScreen))
        listing = app.screen
        assert isinstance(listing, RecoveryListScreen)
        kinds = [situation.kind for situation in listing.situations]
        listing.dismiss(listing.situations[kinds.index("verification-orphaned")])
        await eventually(pilot, lambda: isinstance(app.screen, RecoveryScreen))
        known = app.screen.situation.known  # type: ignore[attr-defined]
        assert f"nexus inspect says: {running['hint']}" in known
        lock_situation = listing.situations[kinds.index("recovery-lock-left")]
        assert f"nexus inspect says: {lock_hint}" in lock_situation.known
