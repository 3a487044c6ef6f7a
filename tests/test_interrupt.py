"""Ctrl+C during `nexus verify`: the check stops and the verification ends ambiguous.

The reference dies with its check and leaves the verification `running` under a dead owner
(it then needs a reconcile); a check killed by the terminal's SIGINT would otherwise read as a
failed check. Here the interrupt is recorded for what it is.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from project_kit import Project, plan, task_def

from nexus_core import observe
from nexus_core.engine import INTERRUPTED_CHECK


def test_ctrl_c_during_verify_ends_ambiguous_and_stops_the_check(tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    marker = tmp_path / "check-pid"
    (project.root / "checks" / "slow.sh").write_text(f'echo $$ > "{marker}"\nexec sleep 60\n')
    slow = task_def(
        "a",
        resources=["checks/check.sh", "checks/slow.sh"],
        checks=[
            {"id": "slow", "command": "/bin/sh", "args": ["checks/slow.sh"], "cwd": ".", "timeoutMs": 120000},
            {"id": "never", "command": "/bin/sh", "args": ["checks/check.sh", "a"], "cwd": ".", "timeoutMs": 30000},
        ],
    )
    project.create(plan("r1", slow))
    project.completed("r1", "a")
    # A terminal sends SIGINT to its whole foreground process group: do the same.
    verify = subprocess.Popen(
        [sys.executable, "-m", "nexus_core.cli", "verify", "r1", "a", "-d", project.dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not marker.exists() or not marker.read_text().strip():
        assert time.monotonic() < deadline, "the check never started"
        time.sleep(0.05)
    check_pid = int(marker.read_text())
    os.killpg(verify.pid, signal.SIGINT)
    out, err = verify.communicate(timeout=30)
    assert verify.returncode == 1, err
    assert "verification=ambiguous" in out
    run = observe.inspect_run(project.dir, "r1")
    task = run["tasks"][0]
    verification = task["attempts"][0]["verification"]
    assert verification["status"] == "ambiguous"
    assert [c["id"] for c in verification["checks"]] == ["slow"]
    assert verification["checks"][0]["error"] == (
        f"{INTERRUPTED_CHECK}: the check's process group {check_pid} got SIGTERM."
    )
    assert task["integration"] == "rejected"
    assert run["lock"] is None
    try:
        os.kill(check_pid, 0)
        alive = True
    except ProcessLookupError:
        alive = False
    assert not alive
    # The way forward is the ordinary one: reconcile (the ambiguous verification moves to the
    # history), then verify again.
    project.reconcile("r1", "a", task["attempts"][0]["id"], "completed")
    reconciled = observe.inspect_run(project.dir, "r1")["tasks"][0]["attempts"][0]
    assert reconciled["verification"] == {"status": "pending", "checks": []}
    assert reconciled["verificationHistory"][-1]["status"] == "ambiguous"
