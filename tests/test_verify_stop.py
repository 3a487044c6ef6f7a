"""A stop asked through ``should_stop`` (the dashboard's Stop and its quit dialog) during
``verify``: the running check's process group gets SIGTERM at once (it does not run to its end), the
verification ends ambiguous and no further check starts; the check's pid is reported."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from process_support import pid_alive
from project_kit import Project, plan, task_def

from nexus_core import engine, observe
from nexus_core.engine import STOPPED_CHECK

BOUND_SECONDS = 30  # the check sleeps 600 s (timeout 300 s): returning within this bound proves it was stopped


def test_should_stop_terminates_the_running_check(tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    slow = task_def(
        "a",
        checks=[
            {"id": "slow", "command": "/bin/sleep", "args": ["600"], "cwd": ".", "timeoutMs": 300000},
            {"id": "never", "command": "/bin/sh", "args": ["checks/check.sh", "a"], "cwd": ".", "timeoutMs": 30000},
        ],
    )
    project.create(plan("r1", slow))
    project.completed("r1", "a")
    events: list[dict[str, Any]] = []
    stop = threading.Event()
    outcome: list[BaseException | None] = []

    def progress(event: dict[str, Any]) -> None:
        events.append(dict(event))
        if event["event"] == "check-spawned":
            stop.set()

    def verify() -> None:
        try:
            engine.verify_task(project.dir, "r1", "a", progress=progress, should_stop=stop.is_set)
        except BaseException as error:  # reported to the test thread
            outcome.append(error)
        else:
            outcome.append(None)

    worker = threading.Thread(target=verify, daemon=True)
    worker.start()
    worker.join(BOUND_SECONDS)
    assert not worker.is_alive(), "verify still waits for the running check"
    assert outcome == [None]
    spawned = [e for e in events if e["event"] == "check-spawned"]
    assert [(e["check"], e["index"], e["total"]) for e in spawned] == [("slow", 0, 2)]
    assert not pid_alive(spawned[0]["pid"])
    verification = observe.inspect_run(project.dir, "r1")["tasks"][0]["attempts"][0]["verification"]
    assert verification["status"] == "ambiguous"
    assert [c["id"] for c in verification["checks"]] == ["slow"]
    pid = spawned[0]["pid"]
    assert verification["checks"][0]["error"] == f"{STOPPED_CHECK}: the check's process group {pid} got SIGTERM."
    assert verification["checks"][0]["signal"] == "SIGTERM"
