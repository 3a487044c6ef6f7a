"""The demo project holds every situation the README promises, made by the real core; and the
`nexus-tui` entry point refuses bad arguments without a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from nexus_core.hostinfo import pid_alive
from nexus_core.observe import inspect_run
from nexus_tui.logic import recovery
from nexus_tui.logic.demo import DEAD_PID, DemoInfo


def test_the_demo_shows_every_promised_situation(frozen_demo: DemoInfo) -> None:
    root = frozen_demo.directory
    inventory = inspect_run(root)
    assert inventory["runIds"] == ["docs-site", "hotfix", "release"]
    lock = inventory["lock"]
    assert lock["owner"]["pid"] == DEAD_PID and not pid_alive(DEAD_PID)
    release = inspect_run(root, "release")
    tasks = {t["id"]: t for t in release["tasks"]}
    observations = {o["taskId"]: o for o in release["observations"]}
    # A dependency chain of accepted tasks; the last one, a leaf, stale after an edit (a stale
    # dependency would block its dependants for good: accepted is permanent).
    for task_id in ("schema", "api", "client", "release-notes"):
        assert tasks[task_id]["integration"] == "accepted"
    assert [t["id"] for t in release["plan"]["tasks"] if "release-notes" in t["dependsOn"]] == []
    assert observations["release-notes"]["stale"]
    assert [t for t, o in observations.items() if o["stale"]] == ["release-notes"]
    # A failed verification, then a retry that passed.
    first, second = tasks["migrate"]["attempts"]
    assert first["verification"]["status"] == "failed"
    assert second["parentAttemptId"] == first["id"] and second["verification"]["status"] == "passed"
    # An overdue running attempt; a cancelled attempt awaiting reconciliation.
    assert tasks["backfill"]["attempts"][-1]["execution"] == "running" and observations["backfill"]["overdue"]
    cleanup = tasks["cleanup"]["attempts"][-1]
    assert cleanup["cancellation"]["status"] == "requested" and cleanup["execution"] == "ambiguous"
    assert tasks["perf-notes"]["attempts"][-1]["verification"]["status"] == "pending"
    hotfix = inspect_run(root, "hotfix")
    assert hotfix["tasks"][0]["attempts"][-1]["execution"] == "blocked"
    assert all(t["integration"] == "accepted" for t in inspect_run(root, "docs-site")["tasks"])


def test_a_fresh_run_of_every_demo_plan_is_accepted_by_create(frozen_demo: DemoInfo) -> None:
    """Guided recovery's way out (a fresh run from the same plan) works on the demo: its checks
    name task ids, not the artifacts that now exist (create would require those protected)."""
    root = frozen_demo.directory
    for run_id in frozen_demo.runs:
        advice = recovery.fresh_run(root, run_id)
        assert advice.plan is not None and advice.plan_problem is None
        assert advice.create_problem is None, (run_id, advice.create_problem)


def test_entry_point_refuses_a_missing_directory_cleanly(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    result = subprocess.run(
        [sys.executable, "-m", "nexus_tui", "-d", str(missing)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr == f"Nexus: not a directory: {missing}\n"
    assert not missing.exists()
    help_text = subprocess.run(
        [sys.executable, "-m", "nexus_tui", "--help"], capture_output=True, text=True, timeout=60
    ).stdout
    for option in ("--directory", "--poll", "--read-only", "--demo"):
        assert option in help_text
