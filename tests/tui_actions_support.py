"""Real projects for the dashboard-action tests, built with nexus_core (no hand-written state)."""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any, cast

from nexus_core import engine
from nexus_core.state import canonical
from nexus_core.state.store import load_run

# The check of task T reads out/T/result.txt; it waits while a `hold` file exists (tests use
# it to catch a verification mid-check). It takes the task id, not the artifact path: create
# requires an existing file named by a check argument to be a protected resource, which would
# refuse a fresh run from the same plan once the artifact exists.
CHECK = (
    "import pathlib, sys, time\n"
    "while pathlib.Path('hold').exists():\n    time.sleep(0.05)\n"
    "arg = sys.argv[1]\n"
    "path = pathlib.Path(arg) if '/' in arg else pathlib.Path('out', arg, 'result.txt')\n"
    "text = path.read_text() if path.exists() else ''\n"
    "sys.exit(0 if 'ok' in text.split() else 1)\n"
)
# The process worker: waits while `hold-worker` exists, then writes out/<task>/result.txt.
WORKER = (
    "import pathlib, sys, time\n"
    "while pathlib.Path('hold-worker').exists():\n    time.sleep(0.05)\n"
    "pathlib.Path('out', sys.argv[1], 'result.txt').write_text('ok\\n')\n"
)
HOST = {"kind": "host", "id": "worker", "sessionId": "session-1"}


def task_plan(task_id: str, **extra: Any) -> dict[str, Any]:
    plan: dict[str, Any] = {
        "id": task_id,
        "objective": f"Write out/{task_id}/result.txt containing ok.",
        "scope": [f"out/{task_id}"],
        "artifacts": [f"out/{task_id}/result.txt"],
        "resources": ["checks/check.py"],
        "checks": [
            {"id": "result-ok", "command": "python", "args": ["checks/check.py", task_id]},
        ],
        "idempotent": True,
    }
    plan.update(extra)
    return plan


def process_task_plan(task_id: str, **extra: Any) -> dict[str, Any]:
    """A task with an execution contract (launched and supervised by the process backend)."""
    execution = {
        "adapter": "command",
        "command": "python",
        "args": ["workers/work.py", task_id],
        "input": "inputs/task.txt",
    }
    return task_plan(task_id, execution=execution, resources=["checks/check.py", "workers/work.py"], **extra)


def make_project(tmp_path: Path, tasks: list[dict[str, Any]] | None = None, run_id: str = "demo") -> Path:
    root = (tmp_path / "project").resolve()
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "check.py").write_text(CHECK)
    (root / "workers").mkdir()
    (root / "workers" / "work.py").write_text(WORKER)
    (root / "inputs").mkdir()
    (root / "inputs" / "task.txt").write_text("Write ok.\n")
    for task in tasks or [task_plan("a")]:
        (root / "out" / task["id"]).mkdir(parents=True, exist_ok=True)
    plan = {"id": run_id, "maxParallel": 4, "tasks": tasks or [task_plan("a")]}
    engine.create_run(str(root), plan)
    return root


def write_result(root: Path, task_id: str, text: str = "ok\n") -> None:
    (root / "out" / task_id / "result.txt").write_text(text)


def run_of(root: Path, run_id: str = "demo") -> dict[str, Any]:
    return cast(dict[str, Any], load_run(str(root), run_id))  # the run as plain JSON


def task_of(root: Path, task_id: str, run_id: str = "demo") -> dict[str, Any]:
    return next(t for t in run_of(root, run_id)["tasks"] if t["id"] == task_id)


def latest(root: Path, task_id: str, run_id: str = "demo") -> dict[str, Any]:
    return task_of(root, task_id, run_id)["attempts"][-1]  # type: ignore[no-any-return]


def start(root: Path, task_id: str, run_id: str = "demo") -> str:
    run = engine.start_task(str(root), run_id, task_id, {"backend": HOST})
    task = next(t for t in run["tasks"] if t["id"] == task_id)
    return str(task["attempts"][-1]["id"])


def record(root: Path, task_id: str, outcome: str = "completed", run_id: str = "demo") -> None:
    attempt = latest(root, task_id, run_id)
    engine.record_attempt(
        str(root),
        run_id,
        task_id,
        {"attemptId": attempt["id"], "backend": HOST, "outcome": outcome, "summary": "worker report"},
    )


def accepted(root: Path, task_id: str, run_id: str = "demo") -> None:
    """Drive a task to accepted through the real core."""
    start(root, task_id, run_id)
    write_result(root, task_id)
    record(root, task_id, run_id=run_id)
    engine.verify_task(str(root), run_id, task_id)
    engine.accept_task(str(root), run_id, task_id)


def tree_digest(root: Path) -> str:
    """sha256 over every file (path, mode, bytes) under root: proves that nothing changed."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.is_file() or path.is_symlink():
            digest.update(str(path.relative_to(root)).encode())
            digest.update(oct(path.lstat().st_mode).encode())
            if path.is_file() and not path.is_symlink():
                digest.update(path.read_bytes())
    return digest.hexdigest()


def write_dead_writer_lock(root: Path, host: str | None = None) -> str:
    """A writer.lock as the core writes it, owned by a pid that cannot be alive; its hash."""
    owner = {
        "token": str(uuid.uuid4()),
        "pid": 4194304,
        "hostname": host or os.uname().nodename,
        "createdAt": "2026-11-30T00:00:00.000Z",
    }
    raw = canonical.compact(owner).encode("utf-8")
    path = root / ".bmad-plus" / "nexus" / "writer.lock"
    path.write_bytes(raw)
    os.chmod(path, 0o600)
    return hashlib.sha256(raw).hexdigest()


def write_dead_recovery_lock(root: Path) -> None:
    owner = {
        "token": str(uuid.uuid4()),
        "pid": 4194304,
        "hostname": os.uname().nodename,
        "createdAt": "2026-11-30T00:00:00.000Z",
    }
    path = root / ".bmad-plus" / "nexus" / "recovery.lock"
    path.write_text(json.dumps(owner, separators=(",", ":")))
    os.chmod(path, 0o600)
