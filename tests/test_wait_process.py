"""`nexus wait` over a real process task: launch, collect, verify, accept, all seen as events."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from process_support import cli, command_task, create, identity, latest, make_project


def test_wait_reports_a_process_task_from_launch_to_acceptance(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    create(root, "proc", [command_task("p", "ok")])
    log = tmp_path / "events.jsonl"
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nexus_core.cli",
            "wait",
            "proc",
            "--idle-timeout",
            "60",
            # Each step below is a new CLI process: under load one can take seconds, and a grace
            # shorter than that ends the wait as "settled, awaiting collect" (exit 6). Accepted
            # ends it at once whatever the grace.
            "--settle-grace",
            "20",
            "--event-log",
            str(log),
            "--json",
            "-d",
            str(root),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (log.exists() and "watch-started" in log.read_text()):
            assert time.monotonic() < deadline and waiter.poll() is None, "wait never started watching"
            time.sleep(0.02)
        code, _, err = cli(root, "launch", "proc", "p")
        assert code == 0, err
        attempt = latest(root, "proc", "p")
        code, _, err = cli(root, "collect", "proc", "p", input_value={"attemptId": attempt["id"], **identity(attempt)})
        assert code == 0, err
        assert cli(root, "verify", "proc", "p")[0] == 0
        assert cli(root, "accept", "proc", "p")[0] == 0
        out, err = waiter.communicate(timeout=60)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    assert waiter.returncode == 0, err
    events = [json.loads(line) for line in log.read_text().splitlines()]
    kinds = [e["type"] for e in events]
    started = next(e for e in events if e["type"] == "attempt-started")
    assert started["backend"] == "process" and started["attempt"] == attempt["id"]
    assert "accepted" in kinds and "verification-passed" in kinds
    # The collected outcome is seen whether the look caught the receipt first or not.
    assert "process-finished" in kinds or "outcome-recorded" in kinds
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["outcome"], summary["exitCode"]) == ("accepted", 0)
