"""A small project builder for tests: real plans, real check scripts, driven through the core API."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from nexus_core import engine

# The nexus_cli fixture (conftest.py's run_cli): the real `nexus` as a subprocess.
RunCli = Callable[..., subprocess.CompletedProcess[str]]

HOST = {"kind": "host", "id": "tester", "sessionId": "s1"}
CHECK_SCRIPT = """\
# out/<task>/result.txt must contain ok
while IFS= read -r line || [ -n "$line" ]; do
  case "$line" in *ok*) exit 0 ;; esac
done < "out/$1/result.txt"
echo "out/$1/result.txt must contain ok" >&2
exit 1
"""


def task_def(task_id: str, **overrides: Any) -> dict[str, Any]:
    definition: dict[str, Any] = {
        "id": task_id,
        "objective": f"Write out/{task_id}/result.txt containing ok.",
        "acceptance": ["The check passes."],
        "dependsOn": [],
        "scope": [f"out/{task_id}"],
        "artifacts": [f"out/{task_id}/result.txt"],
        "resources": ["checks/check.sh"],
        "checks": [
            {
                "id": "content",
                "command": "/bin/sh",
                "args": ["checks/check.sh", task_id],
                "cwd": ".",
                "timeoutMs": 30000,
            }
        ],
        "maxAttempts": 2,
        "deadlineMs": 3600000,
        "idempotent": True,
        "authorizations": [],
    }
    definition.update(overrides)
    return definition


def plan(run_id: str = "r1", *tasks: dict[str, Any], max_parallel: int = 4) -> dict[str, Any]:
    return {
        "id": run_id,
        "maxParallel": max_parallel,
        "config": {},
        "tasks": list(tasks) or [task_def("a")],
    }


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "checks").mkdir(parents=True, exist_ok=True)
        (root / "checks" / "check.sh").write_text(CHECK_SCRIPT)
        self.dir = str(root)

    def create(self, value: dict[str, Any]) -> dict[str, Any]:
        return cast(dict[str, Any], engine.create_run(self.dir, value))  # the run as plain JSON

    def write_result(self, task_id: str, text: str = "ok\n") -> None:
        target = self.root / "out" / task_id
        target.mkdir(parents=True, exist_ok=True)
        (target / "result.txt").write_text(text)

    def start(self, run_id: str, task_id: str, backend: dict[str, Any] | None = None) -> str:
        run = engine.start_task(self.dir, run_id, task_id, {"backend": backend or HOST})
        return str(self.latest(run, task_id)["id"])

    @staticmethod
    def latest(run: Mapping[str, Any], task_id: str) -> dict[str, Any]:
        task = next(t for t in run["tasks"] if t["id"] == task_id)
        return task["attempts"][-1]  # type: ignore[no-any-return]

    def record(self, run_id: str, task_id: str, attempt: str, outcome: str = "completed", **extra: Any) -> None:
        options = {"attemptId": attempt, "backend": HOST, "outcome": outcome, "summary": "done", **extra}
        engine.record_attempt(self.dir, run_id, task_id, options)

    def completed(self, run_id: str, task_id: str, text: str = "ok\n") -> str:
        attempt = self.start(run_id, task_id)
        self.write_result(task_id, text)
        self.record(run_id, task_id, attempt)
        return attempt

    def verified(self, run_id: str, task_id: str, text: str = "ok\n") -> str:
        attempt = self.completed(run_id, task_id, text)
        engine.verify_task(self.dir, run_id, task_id)
        return attempt

    def accepted(self, run_id: str, task_id: str) -> str:
        attempt = self.verified(run_id, task_id)
        engine.accept_task(self.dir, run_id, task_id)
        return attempt

    def reconcile(self, run_id: str, task_id: str, attempt: str, outcome: str, **extra: Any) -> None:
        options = {
            "attemptId": attempt,
            "backend": HOST,
            "outcome": outcome,
            "ownerStopped": True,
            "summary": "operator checked",
            **extra,
        }
        engine.reconcile_attempt(self.dir, run_id, task_id, options)

    def input_file(self, name: str, value: Any) -> str:
        path = self.root.parent / f"{name}.json"
        path.write_text(value if isinstance(value, str) else json.dumps(value))
        return str(path)

    def state_tree(self) -> dict[str, bytes]:
        """Every file under .bmad-plus with its bytes (and mode), for byte-identity checks."""
        base = self.root / ".bmad-plus"
        tree: dict[str, bytes] = {}
        for path in sorted(base.rglob("*")) if base.exists() else []:
            rel = str(path.relative_to(self.root))
            mode = oct(os.lstat(path).st_mode).encode()
            tree[rel] = mode + b":" + (path.read_bytes() if path.is_file() else b"<dir>")
        return tree


# One task per host situation (and one whose dependency is not accepted): what the core's state
# checks (nexus_core.preconditions) and the dashboard's availability rules are compared on.
SITUATIONS = ("fresh", "running", "completed", "verified", "accepted", "failed", "cancelling", "dependent")


def host_situations(root: Path) -> Project:
    project = Project(root)
    tasks = [task_def(name) for name in SITUATIONS[:-1]] + [task_def("dependent", dependsOn=["fresh"])]
    project.create(plan("r1", *tasks, max_parallel=8))
    project.start("r1", "running")
    project.completed("r1", "completed")
    project.verified("r1", "verified")
    project.accepted("r1", "accepted")
    attempt = project.start("r1", "failed")
    project.record("r1", "failed", attempt, outcome="failed")
    project.start("r1", "cancelling")
    engine.cancel_task(project.dir, "r1", "cancelling", {"reason": "operator stop"})
    return project
