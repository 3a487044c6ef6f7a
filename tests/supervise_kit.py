"""A project driven through the real `nexus` CLI, for the wait and loop tests."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HOST = {"kind": "host", "id": "ci-agent", "sessionId": "s1"}


def task_def(task_id: str, **overrides: Any) -> dict[str, Any]:
    """A task whose one check passes when out/<task>/result.txt contains `done`."""
    definition: dict[str, Any] = {
        "id": task_id,
        "objective": f"Write out/{task_id}/result.txt.",
        "scope": [f"out/{task_id}"],
        "artifacts": [f"out/{task_id}/result.txt"],
        "checks": [
            {
                "id": "content",
                "command": "/bin/sh",
                "args": ["-c", f"grep -q done out/{task_id}/result.txt"],
                "timeoutMs": 30000,
            }
        ],
        "maxAttempts": 2,
        "idempotent": True,
    }
    definition.update(overrides)
    return definition


def nexus_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "nexus_core.cli", *args]


class Project:
    def __init__(self, base: Path, run_id: str = "demo") -> None:
        self.root = base / "project"
        self.inputs = base / "inputs"
        self.root.mkdir()
        self.inputs.mkdir()
        self.run_id = run_id
        self.attempts: dict[str, str] = {}  # task -> latest attempt id, from the CLI's own output

    def nexus(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            nexus_command(*args, "-d", str(self.root)), capture_output=True, text=True, timeout=60, check=False
        )
        if ok:
            assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    def input_file(self, value: dict[str, Any]) -> str:
        path = self.inputs / f"{uuid.uuid4()}.json"
        path.write_text(json.dumps(value))
        return str(path)

    def create(self, *tasks: dict[str, Any], max_parallel: int = 4) -> None:
        plan = {"id": self.run_id, "maxParallel": max_parallel, "config": {}, "tasks": list(tasks)}
        self.nexus("create", "--plan", self.input_file(plan))

    def state(self) -> dict[str, Any]:
        return json.loads(self.nexus("inspect", self.run_id, "--json").stdout)  # type: ignore[no-any-return]

    def attempt_id(self, task_id: str) -> str:
        return self.attempts[task_id]

    def _begin(self, action: str, task_id: str) -> str:
        done = self.nexus(action, self.run_id, task_id, "--input", self.input_file({"backend": HOST}), "--json")
        task = next(t for t in json.loads(done.stdout)["tasks"] if t["id"] == task_id)
        self.attempts[task_id] = task["attempts"][-1]["id"]
        return self.attempts[task_id]

    def write(self, task_id: str, text: str = "done\n") -> None:
        folder = self.root / "out" / task_id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "result.txt").write_text(text)

    def start(self, task_id: str) -> str:
        return self._begin("start", task_id)

    def retry(self, task_id: str) -> str:
        return self._begin("retry", task_id)

    def record(self, task_id: str, outcome: str = "completed", summary: str = "worker finished") -> None:
        body = {"attemptId": self.attempt_id(task_id), "backend": HOST, "outcome": outcome, "summary": summary}
        self.nexus("record", self.run_id, task_id, "--input", self.input_file(body))

    def verify(self, task_id: str) -> subprocess.CompletedProcess[str]:
        return self.nexus("verify", self.run_id, task_id, ok=False)

    def accept(self, task_id: str) -> None:
        self.nexus("accept", self.run_id, task_id)

    def cancel(self, task_id: str, reason: str = "operator stop") -> None:
        self.nexus("cancel", self.run_id, task_id, "--input", self.input_file({"reason": reason}))

    def reconcile(self, task_id: str, outcome: str, retry_safe: bool = True) -> None:
        body = {
            "attemptId": self.attempt_id(task_id),
            "backend": HOST,
            "outcome": outcome,
            "ownerStopped": True,
            "retrySafe": retry_safe,
            "summary": "operator checked the worker",
        }
        self.nexus("reconcile", self.run_id, task_id, "--input", self.input_file(body))

    def finish(self, task_id: str, text: str = "done\n") -> None:
        """start, write, record completed, verify, accept."""
        self.start(task_id)
        self.write(task_id, text)
        self.record(task_id)
        assert self.verify(task_id).returncode == 0
        self.accept(task_id)

    @property
    def run_file(self) -> Path:
        return self.root / ".bmad-plus" / "nexus" / "runs" / f"{self.run_id}.json"

    @property
    def writer_lock(self) -> Path:
        return self.root / ".bmad-plus" / "nexus" / "writer.lock"

    def hand_lock(self, owner_pid: int) -> str:
        """A writer.lock as a killed mutation leaves it; returns its hash."""
        owner = {"token": str(uuid.uuid4()), "pid": owner_pid, "hostname": os.uname().nodename, "createdAt": now()}
        data = json.dumps(owner, separators=(",", ":")).encode()
        fd = os.open(self.writer_lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, data)
        os.close(fd)
        return hashlib.sha256(data).hexdigest()

    def wait(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            nexus_command("wait", self.run_id, *args, "-d", str(self.root)),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def wait_in_background(self, log: Path, *args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            nexus_command("wait", self.run_id, "--event-log", str(log), *args, "-d", str(self.root)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        until(lambda: log.exists() and "watch-started" in log.read_text(), what="wait to start")
        return process


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


def dead_pid() -> int:
    child = subprocess.Popen(["/bin/true"])
    child.wait()
    return child.pid


def until(condition: Any, timeout: float = 15.0, what: str = "condition", diagnose: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}" + (f": {diagnose()}" if diagnose else ""))
        time.sleep(0.05)


def events_in(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def wait_for_event(log: Path, kind: str, **fields: Any) -> dict[str, Any]:
    found: list[dict[str, Any]] = []

    def seen() -> bool:
        found[:] = [e for e in events_in(log) if e["type"] == kind and all(e.get(k) == v for k, v in fields.items())]
        return bool(found)

    until(seen, what=f"event {kind} {fields}")
    return found[0]


def tree_digest(root: Path) -> dict[str, tuple[int, str]]:
    """Every path under root with its mode and content hash (directories too)."""
    digest: dict[str, tuple[int, str]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            info = os.lstat(path)
            content = ""
            if os.path.isfile(path) and not os.path.islink(path):
                with open(path, "rb") as handle:
                    content = hashlib.sha256(handle.read()).hexdigest()
            digest[os.path.relpath(path, root)] = (info.st_mode, content)
    return digest


def interrupt(process: subprocess.Popen[str]) -> None:
    process.send_signal(signal.SIGINT)
