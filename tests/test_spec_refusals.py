"""Every refusal the SPEC lists (Appendix A, which gathers those of sections 1-8), each from a
situation that triggers it, through the real ``nexus`` CLI in both modes (issue 23):

- ``--json``: exit 1, stdout one compact line, the reference's envelope, whose ``error`` is the
  SPEC's message byte for byte; our guidance only in a trailing ``hint`` key;
- human: exit 1, stdout empty, the first stderr line exactly ``Nexus: `` + that message, our
  guidance (if any) on the lines after it;
- and the refusal changed nothing on disk.

The table below is the catalogue: the SPEC's words (its placeholders), the situation, the exact
text. A handful cannot be reached by one CLI call (a race, or a rule another one always
precedes); they are listed in UNREACHABLE_BY_ONE_CALL with how they are exercised instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from process_support import command_task, make_project, write

from nexus_core import engine, paths
from nexus_core.backend import process
from nexus_core.cli.refusal import human_text, json_line
from nexus_core.errors import NexusError
from nexus_core.state import canonical, locks, store

HOST = {"kind": "host", "id": "tester", "sessionId": "s1"}
# A check's or worker's python runs as the real interpreter (the command's realpath), outside
# this virtual environment: scripts that act as a second client import nexus_core from here.
CORE_HOME = str(Path(engine.__file__).resolve().parent.parent)
CLI = [sys.executable, "-m", "nexus_core.cli"]
USAGE = (
    "Use nexus create --plan FILE, inspect RUN, or "
    "start|launch|collect|record|reconcile|verify|retry|cancel|accept RUN TASK."
)


def host(task_id: str, **overrides: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "objective": f"Write out/{task_id}/result.txt.",
        "scope": [f"out/{task_id}"],
        "artifacts": [f"out/{task_id}/result.txt"],
        "resources": ["checks/check.sh"],
        "checks": [{"id": "content", "command": "/bin/sh", "args": ["checks/check.sh", task_id], "timeoutMs": 10000}],
        **overrides,
    }


def one_plan(*tasks: dict[str, Any], run_id: str = "r", **extra: Any) -> dict[str, Any]:
    return {"id": run_id, "maxParallel": 4, "tasks": list(tasks) or [host("a")], **extra}


@dataclass
class Kit:
    """A fresh project (real worker and check scripts) and what a situation needs."""

    root: Path
    cleanups: list[Callable[[], object]] = field(default_factory=list)
    inputs: int = 0

    @property
    def dir(self) -> str:
        return str(self.root)

    def file(self, value: Any, raw: str | bytes | None = None) -> str:
        self.inputs += 1
        path = self.root.parent / f"input-{self.inputs}.json"
        if isinstance(raw, bytes):
            path.write_bytes(raw)
        else:
            path.write_text(raw if raw is not None else json.dumps(value))
        return str(path)

    def create(self, *tasks: dict[str, Any], run_id: str = "r", **extra: Any) -> None:
        for task in tasks:
            execution = task.get("execution")
            if execution and not (self.root / execution["input"]).exists():
                write(self.root / execution["input"], f"Task {task['id']}.\n")
        engine.create_run(self.dir, one_plan(*tasks, run_id=run_id, **extra))

    def result(self, task_id: str, text: str = "ok\n") -> None:
        write(self.root / "out" / task_id / "result.txt", text)

    def latest(self, task_id: str, run_id: str = "r") -> dict[str, Any]:
        run = store.load_run(self.dir, run_id)
        return cast(dict[str, Any], next(t for t in run["tasks"] if t["id"] == task_id)["attempts"][-1])

    def child_pid(self, task_id: str) -> int | None:
        task = next(t for t in store.load_run(self.dir, "r")["tasks"] if t["id"] == task_id)
        process_record = (task["attempts"][-1].get("process") or {}) if task["attempts"] else {}
        pid = process_record.get("childPid")
        return pid if isinstance(pid, int) else None

    def start(self, task_id: str, run_id: str = "r") -> str:
        engine.start_task(self.dir, run_id, task_id, {"backend": HOST})
        return str(self.latest(task_id, run_id)["id"])

    def bound(self, task_id: str) -> dict[str, Any]:
        attempt = self.latest(task_id)
        backend = {
            k: attempt["backend"][k]
            for k in ("kind", "id", "sessionId", "hostname", "ownerPid")
            if k in attempt["backend"]
        }
        return {"attemptId": attempt["id"], "backend": backend}

    def record(self, task_id: str, outcome: str = "completed") -> None:
        engine.record_attempt(self.dir, "r", task_id, {**self.bound(task_id), "outcome": outcome, "summary": "done"})

    def completed(self, task_id: str, text: str = "ok\n") -> None:
        self.start(task_id)
        self.result(task_id, text)
        self.record(task_id)

    def verified(self, task_id: str) -> None:
        self.completed(task_id)
        engine.verify_task(self.dir, "r", task_id)

    def accepted(self, task_id: str) -> None:
        self.verified(task_id)
        engine.accept_task(self.dir, "r", task_id)

    def tamper(self, change: Callable[[Any], None], run_id: str = "r") -> None:
        """Change the stored run and write it back with a valid envelope (as another writer could):
        ``change`` gets it as plain JSON, any key."""
        run = store.load_run(self.dir, run_id)
        change(run)
        store.save_run(self.dir, run)

    def state(self) -> Path:
        return self.root / ".bmad-plus" / "nexus"

    def background(self, *args: str) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            [*CLI, *args, "-d", self.dir], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

        def stop() -> None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()

        self.cleanups.append(stop)
        return child

    def sleeper(self) -> int:
        """A live process of this host (its pid), ended after the case."""
        child = subprocess.Popen(["sleep", "300"])
        self.cleanups.append(lambda: (child.kill(), child.wait()))
        return child.pid

    def until(self, predicate: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + 60
        while not predicate():
            assert time.monotonic() < deadline, f"never: {what}"
            time.sleep(0.05)


@dataclass(frozen=True)
class Call:
    args: list[str]  # after ``nexus``, without -d and --json
    error: str  # the exact message (the envelope's error; the first stderr line after "Nexus: ")
    hint: str | None = None  # a fragment of our guidance, when we give some
    changes: bool = False  # the SPEC's refusal leaves something behind (said in its case)
    others_write: bool = False  # another process writes meanwhile (a running launch's heartbeats)


Arrange = Callable[[Kit], Call]


def _plan(kit: Kit, *tasks: dict[str, Any], **extra: Any) -> list[str]:
    return ["create", "--plan", kit.file(one_plan(*tasks, **extra))]


def _task(kit: Kit, action: str, task_id: str, value: Any | None = None) -> list[str]:
    args = [action, "r", task_id]
    return args + (["--input", kit.file(value)] if value is not None else [])


def E(text: str) -> str:  # an engine error: the message carries the reference's prefix
    return "Nexus: " + text


# ----------------------------------------------------------------- plan validation (SPEC 4)


def bad_plan(error: str, *tasks: dict[str, Any], hint: str | None = None, **extra: Any) -> Arrange:
    return lambda kit: Call(_plan(kit, *tasks, **extra), E(error), hint)


def bad_task(error: str, hint: str | None = None, **overrides: Any) -> Arrange:
    return bad_plan(error, host("a", **overrides), hint=hint)


def bad_execution(error: str, hint: str | None = None, **overrides: Any) -> Arrange:
    def arrange(kit: Kit) -> Call:
        write(kit.root / "briefs" / "a.md", "Task a.\n")
        task = command_task("a", "ok")
        for key, value in overrides.items():  # None: the key is left out
            task["execution"].pop(key, None) if value is None else task["execution"].update({key: value})
        return Call(_plan(kit, task), E(error), hint)

    return arrange


def _files_in_execution(kit: Kit, error: str, make: Callable[[Path], object], **overrides: Any) -> Call:
    make(kit.root)
    task = command_task("a", "ok")
    task["execution"].update(overrides)
    return Call(_plan(kit, task), E(error))


def _big_inputs(root: Path) -> None:
    for index in range(5):
        write(root / "briefs" / f"part{index}.md", "x" * 250_000 + "\n")


def _verifier_in_scope(kit: Kit) -> Call:
    tool = kit.root / "out" / "a" / "tool"
    write(tool, "#!/bin/sh\nexit 0\n", 0o755)
    return Call(
        _plan(kit, host("a", checks=[{"id": "c", "command": str(tool), "args": []}])),
        E("Verifier executable lies in a worker write scope."),
    )


def _worker_in_scope(kit: Kit) -> Call:
    tool = kit.root / "out" / "a" / "tool"
    write(tool, "#!/bin/sh\nexit 0\n", 0o755)
    write(kit.root / "briefs" / "a.md", "Task a.\n")
    task = command_task("a", "ok")
    task["execution"].update(command=str(tool), args=[])
    return Call(_plan(kit, task), E("Worker executable lies in a worker write scope."))


def _unprotected_execution_argument(kit: Kit) -> Call:
    write(kit.root / "briefs" / "a.md", "Task a.\n")
    write(kit.root / "tools" / "helper.sh", "exit 0\n")
    task = command_task("a", "ok")
    task["execution"]["args"] = ["workers/worker.sh", "a", "ok", "tools/helper.sh"]
    return Call(_plan(kit, task), E("Execution file argument must be a protected resource: tools/helper.sh"))


PLAN_REFUSALS: dict[str, Arrange] = {
    "A plan needs 1-200 tasks.": lambda kit: Call(
        ["create", "--plan", kit.file({"id": "r", "tasks": []})], E("A plan needs 1-200 tasks.")
    ),
    "maxParallel must be between 1 and 32.": bad_plan("maxParallel must be between 1 and 32.", maxParallel=33),
    "config accepts non-secret primitive settings only.": bad_plan(
        "config accepts non-secret primitive settings only.", config={"apiKey": "x"}
    ),
    "Run ID must use 1-64 lowercase letters, numbers, _ or -.": bad_plan(
        "Run ID must use 1-64 lowercase letters, numbers, _ or -.", run_id="Bad Run"
    ),
    "Task ID must use 1-64 lowercase letters, numbers, _ or -.": bad_plan(
        "Task ID must use 1-64 lowercase letters, numbers, _ or -.", host("Bad")
    ),
    "Check ID must use 1-64 lowercase letters, numbers, _ or -.": bad_task(
        "Check ID must use 1-64 lowercase letters, numbers, _ or -.",
        checks=[{"id": "Bad", "command": "/bin/sh", "args": []}],
    ),
    "ID must use 1-64 lowercase letters, numbers, _ or -.": bad_task(
        "ID must use 1-64 lowercase letters, numbers, _ or -.", "At tasks[0].dependsOn[0] (task a).", dependsOn=["Bad"]
    ),
    "Relative path must be a nonempty bounded string.": bad_task(
        "Relative path must be a nonempty bounded string.", "At tasks[0].scope[0] (task a).", scope=[""]
    ),
    "Objective must be a nonempty bounded string.": bad_task(
        "Objective must be a nonempty bounded string.", objective=" "
    ),
    "dependencies must be a nonempty bounded string.": bad_task(
        "dependencies must be a nonempty bounded string.", dependsOn=[""]
    ),
    "acceptance criteria must be a nonempty bounded string.": bad_task(
        "acceptance criteria must be a nonempty bounded string.", acceptance=[""]
    ),
    "existing authorizations must be a nonempty bounded string.": bad_task(
        "existing authorizations must be a nonempty bounded string.", authorizations=[""]
    ),
    "write scope must be a bounded array.": bad_task("write scope must be a bounded array.", scope="out/a"),
    "artifacts must be a bounded array.": bad_task("artifacts must be a bounded array.", artifacts=[]),
    "resources must be a bounded array.": bad_task("resources must be a bounded array.", resources="checks"),
    "check resources must be a bounded array.": bad_task(
        "check resources must be a bounded array.",
        checks=[{"id": "c", "command": "/bin/sh", "args": [], "resources": "x"}],
    ),
    "dependencies must be a bounded array.": bad_task("dependencies must be a bounded array.", dependsOn="b"),
    "acceptance criteria must be a bounded array.": bad_task(
        "acceptance criteria must be a bounded array.", acceptance=[]
    ),
    "existing authorizations must be a bounded array.": bad_task(
        "existing authorizations must be a bounded array.", authorizations="all"
    ),
    "execution instructions must be a bounded array.": bad_execution(
        "execution instructions must be a bounded array.", instructions="briefs/common.md"
    ),
    "execution resources must be a bounded array.": bad_execution(
        "execution resources must be a bounded array.", resources="workers"
    ),
    "Duplicate write scope.": bad_task("Duplicate write scope.", scope=["out/a", "OUT/A"]),
    "Duplicate artifacts.": bad_task("Duplicate artifacts.", artifacts=["out/a/x", "out/a/x"]),
    "Duplicate resources.": bad_task("Duplicate resources.", resources=["checks/check.sh", "checks/check.sh"]),
    "Duplicate check resources.": bad_task(
        "Duplicate check resources.",
        checks=[{"id": "c", "command": "/bin/sh", "args": [], "resources": ["checks/check.sh"] * 2}],
    ),
    "Duplicate dependencies.": bad_plan("Duplicate dependencies.", host("b"), host("a", dependsOn=["b", "b"])),
    "Duplicate acceptance criteria.": bad_task("Duplicate acceptance criteria.", acceptance=["ok", "OK"]),
    "Duplicate existing authorizations.": bad_task("Duplicate existing authorizations.", authorizations=["x", "x"]),
    "Duplicate execution instructions.": bad_execution(
        "Duplicate execution instructions.", instructions=["briefs/common.md", "briefs/common.md"]
    ),
    "Duplicate execution resources.": bad_execution(
        "Duplicate execution resources.", resources=["workers/worker.sh", "workers/worker.sh"]
    ),
    "Unsafe relative path: <v>": bad_task(
        "Unsafe relative path: ../outside", "At tasks[0].scope[0] (task a).", scope=["../outside"]
    ),
    "Nonportable path: <v>": bad_task(
        "Nonportable path: out/aux.c", "At tasks[0].scope[0] (task a).", scope=["out/aux.c"], artifacts=["out/aux.c/x"]
    ),
    "Runtime state and .git cannot be a worker write scope.": bad_task(
        "Runtime state and .git cannot be a worker write scope.", scope=[".git"], artifacts=[".git/x"]
    ),
    "Artifact is outside its task write scope: <f>": bad_task(
        "Artifact is outside its task write scope: elsewhere/x", artifacts=["elsewhere/x"]
    ),
    "Each task needs 1-30 explicit verification checks.": bad_task(
        "Each task needs 1-30 explicit verification checks.", checks=[]
    ),
    "Check args must be a bounded literal argument array.": bad_task(
        "Check args must be a bounded literal argument array.", checks=[{"id": "c", "command": "/bin/sh", "args": "x"}]
    ),
    "File argument must be declared as a protected resource: <c>": bad_task(
        "File argument must be declared as a protected resource: workers/worker.sh",
        checks=[{"id": "c", "command": "/bin/sh", "args": ["workers/worker.sh"]}],
    ),
    "Check timeoutMs must be between 10 and 300000.": bad_task(
        "Check timeoutMs must be between 10 and 300000.",
        checks=[{"id": "c", "command": "/bin/sh", "args": [], "timeoutMs": 5}],
    ),
    "Check command must be node or an absolute executable path.": bad_task(
        "Check command must be node or an absolute executable path.",
        "At tasks[0].checks[0].command (task a).",
        checks=[{"id": "c", "command": "sh", "args": []}],
    ),
    "Check command is not a regular executable.": bad_task(
        "Check command is not a regular executable.", checks=[{"id": "c", "command": "/dev/null", "args": []}]
    ),
    "Duplicate check IDs.": bad_task(
        "Duplicate check IDs.",
        checks=[{"id": "c", "command": "/bin/sh", "args": []}, {"id": "c", "command": "/bin/sh", "args": []}],
    ),
    "maxAttempts must be between 1 and 10.": bad_task("maxAttempts must be between 1 and 10.", maxAttempts=11),
    "idempotent must be boolean.": bad_task("idempotent must be boolean.", idempotent="yes"),
    "deadlineMs must be between 100 and 86400000.": bad_task(
        "deadlineMs must be between 100 and 86400000.", deadlineMs=50
    ),
    "Duplicate task IDs.": bad_plan(
        "Duplicate task IDs.", host("a"), host("a", scope=["out/b"], artifacts=["out/b/result.txt"])
    ),
    "Unknown dependency: <d>": bad_task("Unknown dependency: zz", dependsOn=["zz"]),
    "Dependency cycle at <t>": bad_plan(
        "Dependency cycle at a", host("a", dependsOn=["b"]), host("b", dependsOn=["a"])
    ),
    "Overlapping exclusive write scopes: <a> and <b>": bad_plan(
        "Overlapping exclusive write scopes: a and b", host("a"), host("b", scope=["out/a/b"], artifacts=["out/a/b/x"])
    ),
    "Verifier/resource lies in a worker write scope: <f>": bad_plan(
        "Verifier/resource lies in a worker write scope: checks/check.sh",
        host("a"),
        host("b", scope=["checks"], artifacts=["checks/x"]),
    ),
    "Verifier executable lies in a worker write scope.": _verifier_in_scope,
    "Worker executable lies in a worker write scope.": _worker_in_scope,
    "Execution file argument must be a protected resource: <c>": _unprotected_execution_argument,
    "execution must be a command or codex-exec object.": bad_task(
        "execution must be a command or codex-exec object.", execution="run it"
    ),
    "Unsupported execution adapter.": bad_execution("Unsupported execution adapter.", adapter="shell"),
    "Unknown execution field; shell, environment and arbitrary Codex flags are unsupported.": bad_execution(
        "Unknown execution field; shell, environment and arbitrary Codex flags are unsupported.", env={"A": "1"}
    ),
    "execution outputLimitBytes must be between 1024 and 2097152.": bad_execution(
        "execution outputLimitBytes must be between 1024 and 2097152.", outputLimitBytes=10
    ),
    "execution args must be a bounded literal argument array.": bad_execution(
        "execution args must be a bounded literal argument array.", args="workers/worker.sh"
    ),
    "blockedExitCodes must contain explicit nonzero exit codes between 1 and 255.": bad_execution(
        "blockedExitCodes must contain explicit nonzero exit codes between 1 and 255.", blockedExitCodes=[0]
    ),
    "codex-exec supports read-only or workspace-write only.": bad_execution(
        "codex-exec supports read-only or workspace-write only.",
        adapter="codex-exec",
        sandbox="danger-full-access",
        args=None,
    ),
    "Codex model must be an explicit bounded model identifier.": bad_execution(
        "Codex model must be an explicit bounded model identifier.", adapter="codex-exec", model="-x", args=None
    ),
    "execution input must be a regular file no larger than 256 KiB.": lambda kit: _files_in_execution(
        kit,
        "execution input must be a regular file no larger than 256 KiB.",
        lambda root: write(root / "briefs" / "a.md", "x" * 300_000),
    ),
    "execution input must contain UTF-8 text without NUL bytes.": lambda kit: _files_in_execution(
        kit,
        "execution input must contain UTF-8 text without NUL bytes.",
        lambda root: (root / "briefs" / "a.md").write_bytes(b"a\x00b"),
    ),
    "combined execution input exceeds 1 MiB.": lambda kit: _files_in_execution(
        kit,
        "combined execution input exceeds 1 MiB.",
        _big_inputs,
        input="briefs/part0.md",
        instructions=[f"briefs/part{i}.md" for i in range(1, 5)],
    ),
}


# ----------------------------------------------------------------- snapshots and files (SPEC 1, 5.0)


def _scope_with(kit: Kit, make: Callable[[Path], None], error: str) -> Call:
    kit.create(host("a"))
    (kit.root / "out" / "a").mkdir(parents=True, exist_ok=True)
    make(kit.root / "out" / "a")
    return Call(_task(kit, "start", "a", {"backend": HOST}), E(error))


def _many_files(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(10001):
        (folder / f"f{index}").write_bytes(b"")


def _big_resource(kit: Kit) -> Call:
    with open(kit.root / "checks" / "big.bin", "wb") as handle:
        handle.truncate(16 * 1024 * 1024 + 1)  # sparse: costs no disk
    return Call(
        _plan(kit, host("a", resources=["checks/check.sh", "checks/big.bin"])),
        E("File exceeds the 16 MiB snapshot limit: checks/big.bin"),
    )


FILE_REFUSALS: dict[str, Arrange] = {
    "Required file is missing: <f>": bad_task(
        "Required file is missing: checks/gone.sh", resources=["checks/check.sh", "checks/gone.sh"]
    ),
    "File exceeds the 16 MiB snapshot limit: <f>": _big_resource,
    "Scope contains a symlink or junction: <p>": lambda kit: _scope_with(
        kit, lambda scope: (scope / "link").symlink_to("/etc"), "Scope contains a symlink or junction: out/a/link"
    ),
    "Scope exceeds the 10000 file snapshot limit.": lambda kit: _scope_with(
        kit, _many_files, "Scope exceeds the 10000 file snapshot limit."
    ),
    "Scope contains a non-regular file: <p>": lambda kit: _scope_with(
        kit,
        lambda scope: os.mkfifo(scope / "pipe"),
        "Scope contains a non-regular file: out/a/pipe",
    ),
}


# ----------------------------------------------------------------- run state (SPEC 2.3)


def _state_over_the_save_limit(kit: Kit) -> Call:
    kit.create(host("a"))

    # A stored plan whose config is just under the limit: the attempt copies it into its
    # baseline, so the next save is over 16 MiB.
    def big_config(run: dict[str, Any]) -> None:
        run["plan"]["config"]["blob"] = "x" * (9 * 1024 * 1024)
        run["planHash"] = canonical.sha256_json(run["plan"])

    kit.tamper(big_config)
    return Call(_task(kit, "start", "a", {"backend": HOST}), E("Run exceeds the 16 MiB state limit."))


def _state_over_the_load_limit(kit: Kit) -> Call:
    kit.create(host("a"))
    with open(kit.state() / "runs" / "r.json", "r+b") as handle:
        handle.truncate(store.LOAD_LIMIT + 1)
    return Call(["inspect", "r"], E("Run state exceeds the size limit."))


def _damaged(change: Callable[[Path], object], error: str) -> Arrange:
    def arrange(kit: Kit) -> Call:
        kit.create(host("a"))
        change(kit.state() / "runs" / "r.json")
        return Call(["inspect", "r"], E(error), "Nothing was repaired.")

    return arrange


def _tampered(change: Callable[[dict[str, Any]], None], error: str) -> Arrange:
    def arrange(kit: Kit) -> Call:
        kit.create(host("a"))
        kit.start("a")
        kit.tamper(change)
        return Call(["inspect", "r"], E(error), "Nothing was repaired.")

    return arrange


def _run_exists(kit: Kit) -> Call:
    kit.create(host("a"))
    return Call(_plan(kit, host("a")), E("Run already exists; inspect it instead."))


STATE_REFUSALS: dict[str, Arrange] = {
    "Run exceeds the 16 MiB state limit.": _state_over_the_save_limit,
    "Run state exceeds the size limit.": _state_over_the_load_limit,
    "Corrupt run state; original bytes were preserved.": _damaged(
        lambda path: path.write_bytes(path.read_bytes()[:100]), "Corrupt run state; original bytes were preserved."
    ),
    "Corrupt or foreign run state; original bytes were preserved.": _damaged(
        lambda path: path.write_text(path.read_text().replace('"sha256": "', '"sha256": "0', 1)),
        "Corrupt or foreign run state; original bytes were preserved.",
    ),
    "Run plan integrity mismatch.": _tampered(
        lambda run: run["plan"].update(maxParallel=3), "Run plan integrity mismatch."
    ),
    "Invalid task lifecycle record.": _tampered(
        lambda run: run["tasks"][0].update(integration="merged"), "Invalid task lifecycle record."
    ),
    "Invalid attempt lifecycle record.": _tampered(
        lambda run: run["tasks"][0]["attempts"][-1].update(execution="paused"), "Invalid attempt lifecycle record."
    ),
    "Run already exists; inspect it instead.": _run_exists,
}


# ----------------------------------------------------------------- locks (SPEC 7)


def _recovery_lock(kit: Kit, args: list[str], error: str) -> Call:
    kit.state().mkdir(parents=True, exist_ok=True)
    owner = {
        "token": str(uuid.uuid4()),
        "pid": 4194304,
        "hostname": os.uname().nodename,
        "createdAt": "2026-11-30T00:00:00.000Z",
    }
    (kit.state() / "recovery.lock").write_text(json.dumps(owner, separators=(",", ":")))
    os.chmod(kit.state() / "recovery.lock", 0o600)
    return Call(args, E(error))


def _held_writer_lock(kit: Kit) -> str:
    """writer.lock held by this (live) test process; released after the case. Its hash."""
    kit.create(host("a"))
    token = locks.try_acquire_writer(kit.dir)
    assert token is not None
    kit.cleanups.append(lambda: locks.release_writer(kit.dir, token))
    snapshot = locks.lock_snapshot(kit.dir, locks.WRITER_LOCK)
    assert snapshot is not None
    return snapshot["hash"]


def _recover(kit: Kit, expected_hash: str) -> list[str]:
    return [
        "recover-lock",
        "--input",
        kit.file({"expectedHash": expected_hash, "ownerStopped": True, "note": "checked"}),
    ]


LOCK_REFUSALS: dict[str, Arrange] = {
    "Lock recovery is active or interrupted; inspect recovery.lock and its owner before proceeding.": lambda kit: (
        kit.create(host("a")),
        _recovery_lock(
            kit,
            _task(kit, "start", "a", {"backend": HOST}),
            "Lock recovery is active or interrupted; inspect recovery.lock and its owner before proceeding.",
        ),
    )[1],
    "Another recovery owns recovery.lock; inspect its owner and effects before any manual recovery.": lambda kit: (
        _recovery_lock(
            kit,
            _recover(kit, "0" * 64),
            "Another recovery owns recovery.lock; inspect its owner and effects before any manual recovery.",
        )
    ),
    "Another mutation owns writer.lock; inspect before explicit recovery.": lambda kit: (
        _held_writer_lock(kit),
        Call(
            _task(kit, "start", "a", {"backend": HOST}),
            E("Another mutation owns writer.lock; inspect before explicit recovery."),
        ),
    )[1],
    "Exact lock hash and an explicit stopped-owner observation are required.": lambda kit: (
        _held_writer_lock(kit),
        Call(_recover(kit, "0" * 64), E("Exact lock hash and an explicit stopped-owner observation are required.")),
    )[1],
    "Lock owner process is still alive; no lock was removed.": lambda kit: Call(
        _recover(kit, _held_writer_lock(kit)), E("Lock owner process is still alive; no lock was removed.")
    ),
}


# ----------------------------------------------------------------- lifecycle (SPEC 5, 6)


def _bound_input(kit: Kit, task_id: str, **extra: Any) -> dict[str, Any]:
    return {**kit.bound(task_id), **extra}


def _host_attempt(kit: Kit, *tasks: dict[str, Any], task_id: str = "a") -> None:
    kit.create(*(tasks or (host("a"),)))
    kit.start(task_id)


def _record_with(extra: dict[str, Any], error: str, backend: dict[str, Any] | None = None) -> Arrange:
    def arrange(kit: Kit) -> Call:
        _host_attempt(kit)
        value = {**_bound_input(kit, "a"), "outcome": "completed", "summary": "done", **extra}
        if backend is not None:
            value["backend"] = backend
        return Call(_task(kit, "record", "a", value), E(error))

    return arrange


def _reconcile_with(extra: dict[str, Any], error: str, setup: Callable[[Kit], None] | None = None) -> Arrange:
    def arrange(kit: Kit) -> Call:
        if setup is None:
            _host_attempt(kit)
        else:
            setup(kit)
        value = {**_bound_input(kit, "a"), "outcome": "failed", "ownerStopped": True, "summary": "seen", **extra}
        return Call(_task(kit, "reconcile", "a", value), E(error))

    return arrange


def _launched(kit: Kit, mode: str = "ok", **overrides: Any) -> None:
    kit.create(command_task("a", mode, **overrides))
    process.launch_task(kit.dir, "r", "a", {})


def _changed_resource(kit: Kit) -> Call:
    kit.create(host("a"))
    write(kit.root / "checks" / "check.sh", "exit 0\n")
    return Call(
        _task(kit, "start", "a", {"backend": HOST}),
        E("Protected verifier or agent resource changed since the plan was created."),
    )


def _changed_executable(kit: Kit, worker: bool) -> Call:
    tool = kit.root / "tools" / "run"
    write(tool, "#!/bin/sh\nexit 0\n", 0o755)
    if worker:
        task = command_task("a", "ok")
        task["execution"].update(command=str(tool), args=[])
        kit.create(task)
    else:
        kit.create(host("a", checks=[{"id": "c", "command": str(tool), "args": []}]))
    write(tool, "#!/bin/sh\nexit 1\n", 0o755)
    if worker:
        return Call(_task(kit, "launch", "a"), E("Worker executable changed since plan creation."))
    return Call(_task(kit, "start", "a", {"backend": HOST}), E("Verifier executable changed since plan creation."))


def _verification_tampered(change: Callable[[dict[str, Any]], None], error: str) -> Arrange:
    def arrange(kit: Kit) -> Call:
        kit.create(host("a"))
        kit.verified("a")
        kit.tamper(lambda run: change(run["tasks"][0]["attempts"][-1]["verification"]))
        return Call(_task(kit, "accept", "a"), E(error))

    return arrange


def _stale_evidence(kit: Kit) -> Call:
    kit.create(host("a"))
    kit.verified("a")
    kit.result("a", "ok, edited after the verification\n")
    return Call(_task(kit, "accept", "a"), E("Stale evidence: checked artifacts or write scope changed."))


def _capacity(kit: Kit) -> Call:
    kit.create(host("a"), host("b"), maxParallel=1)
    kit.start("a")
    return Call(
        _task(kit, "start", "b", {"backend": HOST}), E("Run capacity is occupied until active work is reconciled.")
    )


def _scope_owned(kit: Kit) -> Call:
    kit.create(host("a"), run_id="first")
    kit.create(host("a"), run_id="r")
    engine.start_task(kit.dir, "first", "a", {"backend": HOST})
    return Call(_task(kit, "start", "a", {"backend": HOST}), E("Write scope is owned by active attempt: first/a"))


def _failed(kit: Kit, **overrides: Any) -> None:
    kit.create(host("a", **overrides))
    kit.start("a")
    kit.record("a", "failed")


def _process_supervisor_alive(kit: Kit) -> Call:
    kit.create(command_task("a", "slow"))
    kit.background("launch", "r", "a")
    kit.until(lambda: kit.child_pid("a") is not None, "the worker runs")
    value = {**_bound_input(kit, "a"), "outcome": "failed", "ownerStopped": True, "summary": "seen"}
    return Call(
        _task(kit, "reconcile", "a", value),
        E("Process supervisor may still be alive; request cancellation and inspect its actual operation."),
        others_write=True,
    )


def _child_alive(kit: Kit) -> Call:
    _launched(kit, "ok")
    child = kit.sleeper()

    def alive_child(run: dict[str, Any]) -> None:
        process_record = run["tasks"][0]["attempts"][-1]["process"]
        process_record["childPid"] = child
        process_record["receipt"]["directChildExited"] = False

    kit.tamper(alive_child)
    value = {**_bound_input(kit, "a"), "outcome": "failed", "ownerStopped": True, "summary": "seen"}
    return Call(
        _task(kit, "reconcile", "a", value),
        E("The original child may still be alive; inspect its effects before stopped-owner reconciliation."),
    )


def _verifier_alive(kit: Kit) -> Call:
    kit.create(host("a"))
    kit.completed("a")
    owner = {"pid": kit.sleeper(), "hostname": os.uname().nodename}
    kit.tamper(
        lambda run: run["tasks"][0]["attempts"][-1].update(
            verification={"id": str(uuid.uuid4()), "status": "running", "owner": owner, "checks": []}
        )
    )
    value = {**_bound_input(kit, "a"), "outcome": "failed", "ownerStopped": True, "summary": "seen"}
    return Call(
        _task(kit, "reconcile", "a", value),
        E("Verification process is still alive; request cancellation and wait for it to stop."),
    )


def _failed_verification(kit: Kit) -> None:
    kit.create(host("a"))
    kit.completed("a", "not good\n")
    engine.verify_task(kit.dir, "r", "a")


def _result_changed(kit: Kit) -> None:
    kit.create(host("a"))
    kit.completed("a")
    kit.result("a", "changed since the report\n")


def _cancelled(kit: Kit) -> Call:
    _host_attempt(kit)
    engine.cancel_task(kit.dir, "r", "a", {"reason": "stop"})
    return Call(
        _task(kit, "cancel", "a", {"reason": "again"}), E("Cancellation is already recorded; inspect and reconcile it.")
    )


def _owner_replaced_during_launch(kit: Kit) -> Call:
    """The worker itself rewrites its attempt's process record (as a second client could): the
    launch's final save finds the operation no longer its own."""
    script = kit.root / "workers" / "replace.py"
    write(
        script,
        (
            f"import sys\nsys.path.insert(0, {CORE_HOME!r})\nfrom nexus_core.state import store\n"
            "run = store.load_run(sys.argv[1], 'r')\n"
            "run['tasks'][0]['attempts'][-1]['process']['status'] = 'finished'\n"
            "store.save_run(sys.argv[1], run)\n"
        ),
    )
    task = command_task("a", "ok")
    task["execution"].update(
        command=sys.executable, args=["workers/replace.py", kit.dir], resources=["workers/replace.py"]
    )
    kit.create(task)
    return Call(_task(kit, "launch", "a"), E("Original process no longer owns the active operation."), changes=True)


def _not_ready(kit: Kit) -> Call:
    _launched(kit)
    kit.tamper(lambda run: run["tasks"][0]["attempts"][-1]["process"].update(status="running", receipt=None))
    return Call(
        _task(kit, "collect", "a", kit.bound("a")), E("Process receipt is not ready; inspect the original owner.")
    )


def _collected(kit: Kit) -> Call:
    _launched(kit)
    process.collect_task(kit.dir, "r", "a", kit.bound("a"))
    return Call(_task(kit, "collect", "a", kit.bound("a")), E("This process receipt was already collected."))


def _foreign_receipt(kit: Kit) -> Call:
    _launched(kit)
    kit.tamper(lambda run: run["tasks"][0]["attempts"][-1]["process"].update(receiptHash="0" * 64))
    return Call(_task(kit, "collect", "a", kit.bound("a")), E("Foreign or corrupt process receipt."))


def _reconciled_before_collect(kit: Kit) -> Call:
    _launched(kit)
    engine.reconcile_attempt(
        kit.dir, "r", "a", {**kit.bound("a"), "outcome": "failed", "ownerStopped": True, "summary": "seen"}
    )
    return Call(
        _task(kit, "collect", "a", kit.bound("a")),
        E("A reconciled attempt cannot be overwritten by a late process receipt."),
    )


def _cancelled_completed_receipt(kit: Kit) -> Call:
    _launched(kit)
    engine.cancel_task(kit.dir, "r", "a", {**kit.bound("a"), "reason": "stop"})
    return Call(_task(kit, "collect", "a", kit.bound("a")), E("Ambiguous execution cannot be collected as completed."))


def _changed_before_collect(kit: Kit) -> Call:
    _launched(kit)
    kit.result("a", "edited before collect\n")
    return Call(
        _task(kit, "collect", "a", kit.bound("a")),
        E("Process result changed before collection; reconcile and create a fresh attempt."),
    )


def _restart_limit(kit: Kit) -> Call:
    kit.create(
        host(
            "a",
            maxAttempts=1,
            checks=[{"id": "slow", "command": "/bin/sh", "args": ["-c", "sleep 5"], "timeoutMs": 10}],
        )
    )
    kit.completed("a")
    engine.verify_task(kit.dir, "r", "a")  # timed out: ambiguous
    engine.reconcile_attempt(
        kit.dir, "r", "a", {**kit.bound("a"), "outcome": "completed", "ownerStopped": True, "summary": "the check hung"}
    )
    return Call(_task(kit, "verify", "a"), E("Verification restart limit reached; reconcile and create a new attempt."))


def _artifacts_changed(kit: Kit) -> Call:
    _result_changed(kit)
    return Call(
        _task(kit, "verify", "a"), E("Artifacts changed after the worker result; reconcile the current result first.")
    )


def _stale_receipt(kit: Kit) -> Call:
    """The check itself replaces the running verification (as a second client could): its
    receipt's save finds the verification no longer the one it runs for."""
    write(
        kit.root / "checks" / "replace.py",
        (
            f"import sys, uuid\nsys.path.insert(0, {CORE_HOME!r})\nfrom nexus_core.state import store\n"
            "run = store.load_run(sys.argv[1], 'r')\n"
            "run['tasks'][0]['attempts'][-1]['verification']['id'] = str(uuid.uuid4())\n"
            "store.save_run(sys.argv[1], run)\n"
        ),
    )
    kit.create(
        host(
            "a",
            resources=["checks/replace.py"],
            checks=[{"id": "c", "command": sys.executable, "args": ["checks/replace.py", kit.dir]}],
        )
    )
    kit.completed("a")
    return Call(_task(kit, "verify", "a"), E("Stale verification result was rejected."), changes=True)


LIFECYCLE_REFUSALS: dict[str, Arrange] = {
    "Unknown task: <t>": lambda kit: (
        kit.create(host("a")),
        Call(_task(kit, "start", "zz", {"backend": HOST}), E("Unknown task: zz")),
    )[1],
    "Process backend needs its actual supervisor PID.": lambda kit: (
        _launched(kit),
        Call(
            _task(kit, "collect", "a", {**kit.bound("a"), "backend": {**kit.bound("a")["backend"], "ownerPid": 0}}),
            E("Process backend needs its actual supervisor PID."),
        ),
    )[1],
    "Only host and process backends are implemented.": _record_with(
        {}, "Only host and process backends are implemented.", {"kind": "ssh", "id": "x", "sessionId": "y"}
    ),
    "Stale or missing attempt identity.": _record_with(
        {"attemptId": str(uuid.uuid4())}, "Stale or missing attempt identity."
    ),
    "Backend handle/session does not own this attempt.": _record_with(
        {}, "Backend handle/session does not own this attempt.", {**HOST, "sessionId": "another"}
    ),
    "Backend handle must be a nonempty bounded string.": lambda kit: (
        kit.create(host("a")),
        Call(
            _task(kit, "start", "a", {"backend": {**HOST, "id": ""}}),
            E("Backend handle must be a nonempty bounded string."),
        ),
    )[1],
    "Backend session must be a nonempty bounded string.": lambda kit: (
        kit.create(host("a")),
        Call(
            _task(kit, "start", "a", {"backend": {**HOST, "sessionId": " "}}),
            E("Backend session must be a nonempty bounded string."),
        ),
    )[1],
    "Process owner handle must be a nonempty bounded string.": lambda kit: (
        _launched(kit),
        Call(
            _task(kit, "collect", "a", {**kit.bound("a"), "backend": {**kit.bound("a")["backend"], "id": ""}}),
            E("Process owner handle must be a nonempty bounded string."),
        ),
    )[1],
    "Process session must be a nonempty bounded string.": lambda kit: (
        _launched(kit),
        Call(
            _task(kit, "collect", "a", {**kit.bound("a"), "backend": {**kit.bound("a")["backend"], "sessionId": ""}}),
            E("Process session must be a nonempty bounded string."),
        ),
    )[1],
    "Process host must be a nonempty bounded string.": lambda kit: (
        _launched(kit),
        Call(
            _task(kit, "collect", "a", {**kit.bound("a"), "backend": {**kit.bound("a")["backend"], "hostname": ""}}),
            E("Process host must be a nonempty bounded string."),
        ),
    )[1],
    "Protected verifier or agent resource changed since the plan was created.": _changed_resource,
    "Verifier executable changed since plan creation.": lambda kit: _changed_executable(kit, worker=False),
    "Worker executable changed since plan creation.": lambda kit: _changed_executable(kit, worker=True),
    "Current attempt has no eligible passed verification.": lambda kit: (
        kit.create(host("a")),
        kit.completed("a"),
        Call(_task(kit, "accept", "a"), E("Current attempt has no eligible passed verification.")),
    )[2],
    "Verification environment is missing or obsolete; fresh evidence is required.": _verification_tampered(
        lambda verification: verification["environment"].update(sha256="0" * 64),
        "Verification environment is missing or obsolete; fresh evidence is required.",
    ),
    "Stale evidence: checked artifacts or write scope changed.": _stale_evidence,
    "Verification receipt is incomplete.": _verification_tampered(
        lambda verification: verification.update(checks=[]), "Verification receipt is incomplete."
    ),
    "Dependency has not been accepted: <d>": lambda kit: (
        kit.create(host("a"), host("b", dependsOn=["a"])),
        Call(_task(kit, "start", "b", {"backend": HOST}), E("Dependency has not been accepted: a")),
    )[1],
    "Run capacity is occupied until active work is reconciled.": _capacity,
    "Write scope is owned by active attempt: <run>/<task>": _scope_owned,
    "Accepted tasks cannot be restarted.": lambda kit: (
        kit.create(host("a")),
        kit.accepted("a"),
        Call(_task(kit, "retry", "a", {"backend": HOST}), E("Accepted tasks cannot be restarted.")),
    )[2],
    "Retry requires a reconciled failed/cancelled attempt or failed verification.": lambda kit: (
        _host_attempt(kit),
        Call(
            _task(kit, "retry", "a", {"backend": HOST}),
            E("Retry requires a reconciled failed/cancelled attempt or failed verification."),
        ),
    )[1],
    "Non-idempotent retry requires an explicit retry-safe reconciliation.": lambda kit: (
        _failed(kit),
        Call(
            _task(kit, "retry", "a", {"backend": HOST}),
            E("Non-idempotent retry requires an explicit retry-safe reconciliation."),
        ),
    )[1],
    "Task already has an attempt; inspect or explicitly retry.": lambda kit: (
        _host_attempt(kit),
        Call(
            _task(kit, "start", "a", {"backend": HOST}), E("Task already has an attempt; inspect or explicitly retry.")
        ),
    )[1],
    "Retry limit reached.": lambda kit: (
        _failed(kit, maxAttempts=1, idempotent=True),
        Call(_task(kit, "retry", "a", {"backend": HOST}), E("Retry limit reached.")),
    )[1],
    "Executable plans use launch; start requires a host-owned plan and host identity.": lambda kit: (
        kit.create(command_task("a", "ok")),
        Call(
            _task(kit, "start", "a", {"backend": HOST}),
            E("Executable plans use launch; start requires a host-owned plan and host identity."),
        ),
    )[1],
    "Executable plans retry through launch with retry: true; retry requires a host identity.": lambda kit: (
        kit.create(command_task("a", "ok")),
        Call(
            _task(kit, "retry", "a", {"backend": HOST}),
            E("Executable plans retry through launch with retry: true; retry requires a host identity."),
        ),
    )[1],
    "Process attempts collect their owned receipt; worker observations cannot replace it.": lambda kit: (
        _launched(kit),
        Call(
            _task(kit, "record", "a", {**kit.bound("a"), "outcome": "completed", "summary": "done"}),
            E("Process attempts collect their owned receipt; worker observations cannot replace it."),
        ),
    )[1],
    "This attempt requires reconciliation, not a late worker acknowledgement.": lambda kit: (
        kit.create(host("a")),
        kit.completed("a"),
        Call(
            _task(kit, "record", "a", {**kit.bound("a"), "outcome": "completed", "summary": "again"}),
            E("This attempt requires reconciliation, not a late worker acknowledgement."),
        ),
    )[2],
    "Unsupported worker outcome.": _record_with({"outcome": "done"}, "Unsupported worker outcome."),
    "exitCode must be an integer.": _record_with({"exitCode": "0"}, "exitCode must be an integer."),
    "Nonzero exit cannot be a completed outcome.": _record_with(
        {"exitCode": 2}, "Nonzero exit cannot be a completed outcome."
    ),
    "Worker observation must be a nonempty bounded string.": _record_with(
        {"summary": ""}, "Worker observation must be a nonempty bounded string."
    ),
    "Accepted work cannot be rewritten through reconciliation.": _reconcile_with(
        {},
        "Accepted work cannot be rewritten through reconciliation.",
        lambda kit: (kit.create(host("a")), kit.accepted("a"))[1],
    ),
    "Reconciliation must establish completed, failed or cancelled work.": _reconcile_with(
        {"outcome": "blocked"}, "Reconciliation must establish completed, failed or cancelled work."
    ),
    "Reconciliation requires an explicit ownerStopped observation; timeouts alone are insufficient.": _reconcile_with(
        {"ownerStopped": "yes"},
        "Reconciliation requires an explicit ownerStopped observation; timeouts alone are insufficient.",
    ),
    "Process supervisor may still be alive; request cancellation and inspect its actual operation.": _process_supervisor_alive,
    "The original child may still be alive; inspect its effects before stopped-owner reconciliation.": _child_alive,
    "Verification process is still alive; request cancellation and wait for it to stop.": _verifier_alive,
    "Failed verification requires a new attempt; reconciliation cannot reset it.": _reconcile_with(
        {"outcome": "completed"},
        "Failed verification requires a new attempt; reconciliation cannot reset it.",
        _failed_verification,
    ),
    "Recorded result changed; reconcile failure and retry with a new attempt.": _reconcile_with(
        {"outcome": "completed"},
        "Recorded result changed; reconcile failure and retry with a new attempt.",
        _result_changed,
    ),
    "Reconciliation observation must be a nonempty bounded string.": _reconcile_with(
        {"summary": ""}, "Reconciliation observation must be a nonempty bounded string."
    ),
    "Only an unaccepted existing attempt can be cancelled.": lambda kit: (
        kit.create(host("a")),
        Call(_task(kit, "cancel", "a", {"reason": "stop"}), E("Only an unaccepted existing attempt can be cancelled.")),
    )[1],
    "Cancellation is already recorded; inspect and reconcile it.": _cancelled,
    "Cancellation reason must be a nonempty bounded string.": lambda kit: (
        _host_attempt(kit),
        Call(_task(kit, "cancel", "a", {"reason": ""}), E("Cancellation reason must be a nonempty bounded string.")),
    )[1],
    "launch accepts only an optional boolean retry; executable settings belong in the plan.": lambda kit: (
        kit.create(command_task("a", "ok")),
        Call(
            _task(kit, "launch", "a", {"retry": "yes"}),
            E("launch accepts only an optional boolean retry; executable settings belong in the plan."),
        ),
    )[1],
    "launch needs a plan with an explicit execution contract.": lambda kit: (
        kit.create(host("a")),
        Call(_task(kit, "launch", "a"), E("launch needs a plan with an explicit execution contract.")),
    )[1],
    "Original process no longer owns the active operation.": _owner_replaced_during_launch,
    "collect requires an owned process attempt.": lambda kit: (
        _host_attempt(kit),
        Call(_task(kit, "collect", "a", kit.bound("a")), E("collect requires an owned process attempt.")),
    )[1],
    "Process receipt is not ready; inspect the original owner.": _not_ready,
    "This process receipt was already collected.": _collected,
    "Foreign or corrupt process receipt.": _foreign_receipt,
    "A reconciled attempt cannot be overwritten by a late process receipt.": _reconciled_before_collect,
    "Ambiguous execution cannot be collected as completed.": _cancelled_completed_receipt,
    "Process result changed before collection; reconcile and create a fresh attempt.": _changed_before_collect,
    "Verification requires completed, unaccepted, reconciled work.": lambda kit: (
        _host_attempt(kit),
        Call(_task(kit, "verify", "a"), E("Verification requires completed, unaccepted, reconciled work.")),
    )[1],
    "Verification already exists; inspect/reconcile or retry before executing again.": lambda kit: (
        kit.create(host("a")),
        kit.verified("a"),
        Call(
            _task(kit, "verify", "a"),
            E("Verification already exists; inspect/reconcile or retry before executing again."),
        ),
    )[2],
    "Verification restart limit reached; reconcile and create a new attempt.": _restart_limit,
    "Artifacts changed after the worker result; reconcile the current result first.": _artifacts_changed,
    "Stale verification result was rejected.": _stale_receipt,
    "Task is already accepted.": lambda kit: (
        kit.create(host("a")),
        kit.accepted("a"),
        Call(_task(kit, "accept", "a"), E("Task is already accepted.")),
    )[2],
    "Recovery observation must be a nonempty bounded string.": lambda kit: Call(
        ["recover-lock", "--input", kit.file({"expectedHash": "0" * 64, "ownerStopped": True, "note": ""})],
        E("Recovery observation must be a nonempty bounded string."),
    ),
}


# ----------------------------------------------------------------- path safety (SPEC 1.4, no prefix)


def _project_is_a_file(kit: Kit) -> Call:
    target = kit.root / "notes.txt"
    target.write_text("x\n")
    return Call(
        ["inspect", "-d", str(target)], f"Adapter parent is not a directory: {target}", "is a file, not a directory"
    )


def _project_through_a_link(kit: Kit) -> Call:
    link = kit.root.parent / "link"
    link.symlink_to(kit.root)
    return Call(
        ["inspect", "-d", str(link)],
        f"Adapter path contains a symlink or junction: {link}",
        "give the real path instead",
    )


def _resource_is_a_directory(kit: Kit) -> Call:
    return Call(
        _plan(kit, host("a", resources=["checks/check.sh", "checks"])),
        f"Adapter target is not a regular file: {kit.root}/checks",
    )


PATH_REFUSALS: dict[str, Arrange] = {
    "Adapter path contains a symlink or junction: <abs>": _project_through_a_link,
    "Adapter target is not a regular file: <abs>": _resource_is_a_directory,
    "Adapter parent is not a directory: <abs>": _project_is_a_file,
}


# ----------------------------------------------------------------- the CLI wrapper (SPEC 8.2, 8.3; no prefix)


def _cli(args: Callable[[Kit], list[str]], error: str, hint: str | None = None) -> Arrange:
    return lambda kit: Call(args(kit), error, hint)


CLI_REFUSALS: dict[str, Arrange] = {
    "--plan requires a JSON file.": _cli(lambda kit: ["create"], "--plan requires a JSON file."),
    "--input requires a JSON file.": _cli(lambda kit: ["start", "r", "a"], "--input requires a JSON file."),
    "--plan must name a regular JSON file no larger than 1 MiB.": _cli(
        lambda kit: ["create", "--plan", str(kit.root / "checks")],
        "--plan must name a regular JSON file no larger than 1 MiB.",
    ),
    "--input must name a regular JSON file no larger than 1 MiB.": _cli(
        lambda kit: ["start", "r", "a", "--input", kit.file(None, " " * (1024 * 1024 + 1))],
        "--input must name a regular JSON file no larger than 1 MiB.",
    ),
    "--plan must contain a JSON object.": _cli(
        lambda kit: ["create", "--plan", kit.file([1])], "--plan must contain a JSON object."
    ),
    "--input must contain a JSON object.": _cli(
        lambda kit: ["record", "r", "a", "--input", kit.file("done")], "--input must contain a JSON object."
    ),
    "create uses --plan.": _cli(lambda kit: ["create", "--input", kit.file({})], "create uses --plan."),
    "recover-lock uses --input.": _cli(
        lambda kit: ["recover-lock", "--plan", kit.file({})], "recover-lock uses --input."
    ),
    "inspect is read-only and takes no input file.": _cli(
        lambda kit: ["inspect", "--input", kit.file({})], "inspect is read-only and takes no input file."
    ),
    USAGE: _cli(lambda kit: ["create", "r"], USAGE, "Also: nexus recover-lock"),
    "<action> executes its recorded contract and takes no input file.": _cli(
        lambda kit: ["accept", "r", "a", "--input", kit.file({})],
        "accept executes its recorded contract and takes no input file.",
    ),
}

CATALOGUE = {
    **PLAN_REFUSALS,
    **FILE_REFUSALS,
    **STATE_REFUSALS,
    **LOCK_REFUSALS,
    **LIFECYCLE_REFUSALS,
    **PATH_REFUSALS,
    **CLI_REFUSALS,
}

# SPEC Appendix A, every message as it is written there (labels expanded, placeholders kept).
_NONEMPTY = (
    "Relative path",
    "Objective",
    "Worker observation",
    "Reconciliation observation",
    "Cancellation reason",
    "Recovery observation",
    "Backend handle",
    "Backend session",
    "Process owner handle",
    "Process session",
    "Process host",
    "dependencies",
    "acceptance criteria",
    "existing authorizations",
)
_ARRAYS = (
    "write scope",
    "artifacts",
    "resources",
    "check resources",
    "dependencies",
    "acceptance criteria",
    "existing authorizations",
    "execution instructions",
    "execution resources",
)
APPENDIX_A = [
    "A JSON plan object is required.",
    "A plan needs 1-200 tasks.",
    "maxParallel must be between 1 and 32.",
    "config accepts non-secret primitive settings only.",
    *[
        f"{label} must use 1-64 lowercase letters, numbers, _ or -."
        for label in ("Run ID", "Task ID", "Check ID", "ID")
    ],
    *[f"{label} must be a nonempty bounded string." for label in _NONEMPTY],
    *[f"{label} must be a bounded array." for label in _ARRAYS],
    *[f"Duplicate {label}." for label in _ARRAYS],
    "Unsafe relative path: <v>",
    "Nonportable path: <v>",
    "Runtime state and .git cannot be a worker write scope.",
    "Artifact is outside its task write scope: <f>",
    "Each task needs 1-30 explicit verification checks.",
    "Check args must be a bounded literal argument array.",
    "File argument must be declared as a protected resource: <c>",
    "Check timeoutMs must be between 10 and 300000.",
    "Check command must be node or an absolute executable path.",
    "Check command is not a regular executable.",
    "Duplicate check IDs.",
    "maxAttempts must be between 1 and 10.",
    "idempotent must be boolean.",
    "deadlineMs must be between 100 and 86400000.",
    "Duplicate task IDs.",
    "Unknown dependency: <d>",
    "Dependency cycle at <t>",
    "Overlapping exclusive write scopes: <a> and <b>",
    "Verifier/resource lies in a worker write scope: <f>",
    "Verifier executable lies in a worker write scope.",
    "Worker executable lies in a worker write scope.",
    "Execution file argument must be a protected resource: <c>",
    "execution must be a command or codex-exec object.",
    "Unsupported execution adapter.",
    "Unknown execution field; shell, environment and arbitrary Codex flags are unsupported.",
    "execution outputLimitBytes must be between 1024 and 2097152.",
    "execution args must be a bounded literal argument array.",
    "blockedExitCodes must contain explicit nonzero exit codes between 1 and 255.",
    "codex-exec supports read-only or workspace-write only.",
    "Codex model must be an explicit bounded model identifier.",
    "execution input must be a regular file no larger than 256 KiB.",
    "execution input must contain UTF-8 text without NUL bytes.",
    "combined execution input exceeds 1 MiB.",
    # Snapshots and files
    "Project directory is not a directory.",
    "Check cwd is not a directory: <d>",
    "Required file is missing: <f>",
    "File exceeds the 16 MiB snapshot limit: <f>",
    "Scope contains a symlink or junction: <p>",
    "Scope exceeds the 10000 file snapshot limit.",
    "Scope contains a non-regular file: <p>",
    # State
    "Run exceeds the 16 MiB state limit.",
    "Run state exceeds the size limit.",
    "Corrupt run state; original bytes were preserved.",
    "Corrupt or foreign run state; original bytes were preserved.",
    "Run plan integrity mismatch.",
    "Invalid task lifecycle record.",
    "Invalid attempt lifecycle record.",
    "Run already exists; inspect it instead.",
    # Locks
    "Lock recovery is active or interrupted; inspect recovery.lock and its owner before proceeding.",
    "Another recovery owns recovery.lock; inspect its owner and effects before any manual recovery.",
    "Another mutation owns writer.lock; inspect before explicit recovery.",
    "Exact lock hash and an explicit stopped-owner observation are required.",
    "Lock owner process is still alive; no lock was removed.",
    "Lock changed during recovery.",
    # Lifecycle
    "Unknown task: <t>",
    "Process backend needs its actual supervisor PID.",
    "Only host and process backends are implemented.",
    "Stale or missing attempt identity.",
    "Backend handle/session does not own this attempt.",
    "Protected verifier or agent resource changed since the plan was created.",
    "Verifier executable changed since plan creation.",
    "Worker executable changed since plan creation.",
    "Current attempt has no eligible passed verification.",
    "Verification environment is missing or obsolete; fresh evidence is required.",
    "Stale evidence: checked artifacts or write scope changed.",
    "Verification receipt is incomplete.",
    "Dependency has not been accepted: <d>",
    "Run capacity is occupied until active work is reconciled.",
    "Write scope is owned by active attempt: <run>/<task>",
    "Accepted tasks cannot be restarted.",
    "Retry requires a reconciled failed/cancelled attempt or failed verification.",
    "Non-idempotent retry requires an explicit retry-safe reconciliation.",
    "Task already has an attempt; inspect or explicitly retry.",
    "Retry limit reached.",
    "Executable plans use launch; start requires a host-owned plan and host identity.",
    "Executable plans retry through launch with retry: true; retry requires a host identity.",
    "Process attempts collect their owned receipt; worker observations cannot replace it.",
    "This attempt requires reconciliation, not a late worker acknowledgement.",
    "Unsupported worker outcome.",
    "exitCode must be an integer.",
    "Nonzero exit cannot be a completed outcome.",
    "Accepted work cannot be rewritten through reconciliation.",
    "Reconciliation must establish completed, failed or cancelled work.",
    "Reconciliation requires an explicit ownerStopped observation; timeouts alone are insufficient.",
    "Process supervisor may still be alive; request cancellation and inspect its actual operation.",
    "The original child may still be alive; inspect its effects before stopped-owner reconciliation.",
    "Verification process is still alive; request cancellation and wait for it to stop.",
    "Failed verification requires a new attempt; reconciliation cannot reset it.",
    "Recorded result changed; reconcile failure and retry with a new attempt.",
    "Only an unaccepted existing attempt can be cancelled.",
    "Cancellation is already recorded; inspect and reconcile it.",
    "launch accepts only an optional boolean retry; executable settings belong in the plan.",
    "launch needs a plan with an explicit execution contract.",
    "Original process no longer owns the active operation.",
    "collect requires an owned process attempt.",
    "Process receipt is not ready; inspect the original owner.",
    "This process receipt was already collected.",
    "Foreign or corrupt process receipt.",
    "A reconciled attempt cannot be overwritten by a late process receipt.",
    "Ambiguous execution cannot be collected as completed.",
    "Process result changed before collection; reconcile and create a fresh attempt.",
    "Verification requires completed, unaccepted, reconciled work.",
    "Verification already exists; inspect/reconcile or retry before executing again.",
    "Verification restart limit reached; reconcile and create a new attempt.",
    "Artifacts changed after the worker result; reconcile the current result first.",
    "Verification ownership changed; no further command was launched.",
    "Checked files changed before the next verification command.",
    "Stale verification result was rejected.",
    "Stale verification finalization was rejected.",
    "Task is already accepted.",
    # Path safety (no prefix)
    "Adapter file must be a relative project path: <f>",
    "Adapter path escapes the target project: <f>",
    "Adapter path contains a symlink or junction: <abs>",
    "Adapter target is not a regular file: <abs>",
    "Adapter parent is not a directory: <abs>",
    # The CLI wrapper (no prefix)
    "--plan requires a JSON file.",
    "--input requires a JSON file.",
    "--plan must name a regular JSON file no larger than 1 MiB.",
    "--input must name a regular JSON file no larger than 1 MiB.",
    "--plan must contain a JSON object.",
    "--input must contain a JSON object.",
    "create uses --plan.",
    "recover-lock uses --input.",
    "inspect is read-only and takes no input file.",
    USAGE,
    "<action> executes its recorded contract and takes no input file.",
]

# Not reachable by one CLI call; each is exercised by the test named here instead.
UNREACHABLE_BY_ONE_CALL = {
    "A JSON plan object is required.": "test_the_messages_no_single_call_reaches (--plan refuses a non-object first)",
    "Project directory is not a directory.": "test_the_messages_no_single_call_reaches (safeTarget refuses first)",
    "Adapter file must be a relative project path: <f>": "test_the_messages_no_single_call_reaches (paths are "
    "validated by relative() first)",
    "Adapter path escapes the target project: <f>": "test_the_messages_no_single_call_reaches (SPEC 1.4: step 1 "
    "makes it unreachable)",
    "Lock changed during recovery.": "test_the_messages_no_single_call_reaches (a race)",
    "Verification ownership changed; no further command was launched.": "test_the_verification_races",
    "Stale verification finalization was rejected.": "test_the_verification_races",
    "Checked files changed before the next verification command.": "test_a_check_receipt_stores_its_words "
    "(stored in a receipt, never printed)",
    "Check cwd is not a directory: <d>": "test_the_messages_no_single_call_reaches (SPEC 1.7: safeTarget's probe "
    "refuses a file first)",
}


def _pattern(words: str) -> re.Pattern[str]:
    """A SPEC line as a pattern: each <placeholder> stands for a value."""
    parts = re.split(r"<[a-z]+>", words)
    return re.compile(".+".join(re.escape(part) for part in parts) + r"\Z")


def tree(root: Path) -> dict[str, bytes]:
    """Every file and directory under the project (bytes, and mode), for "nothing changed"."""
    found: dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        try:
            info = path.lstat()
            content = path.read_bytes() if path.is_file() and not path.is_symlink() and info.st_size < 1 << 20 else b""
        except FileNotFoundError:  # gone since listed: a running launch's writer.lock, between two heartbeats
            continue
        found[str(path.relative_to(root))] = oct(info.st_mode).encode() + b":" + content
    return found


def run_nexus(args: list[str], directory: str) -> subprocess.CompletedProcess[str]:
    with_directory = args if "-d" in args else [*args, "-d", directory]
    return subprocess.run([*CLI, *with_directory], capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def kit(tmp_path: Path) -> Any:
    made = Kit(make_project(tmp_path / "project"))
    yield made
    for cleanup in reversed(made.cleanups):
        cleanup()


def test_the_catalogue_is_appendix_a_whole() -> None:
    """Every message of Appendix A has a situation here, or says why one call cannot reach it."""
    assert len(APPENDIX_A) == len(set(APPENDIX_A))
    assert set(CATALOGUE) | set(UNREACHABLE_BY_ONE_CALL) == set(APPENDIX_A)
    assert not set(CATALOGUE) & set(UNREACHABLE_BY_ONE_CALL)


@pytest.mark.parametrize("words", list(CATALOGUE))
def test_every_refusal_in_the_specs_words_in_both_modes(kit: Kit, words: str) -> None:
    call = CATALOGUE[words](kit)
    expected = (
        words
        if words.startswith(
            ("Adapter", "--", "Use nexus", "create uses", "recover-lock uses", "inspect is", "<action>")
        )
        else "Nexus: " + words
    )
    assert _pattern(expected).match(call.error), (words, call.error)
    before = tree(kit.root)
    human = run_nexus(call.args, kit.dir)
    assert (human.returncode, human.stdout) == (1, ""), human
    first, *guidance = human.stderr.splitlines()
    assert first == "Nexus: " + call.error, human.stderr

    if call.changes:  # the same situation again, for the other mode
        kit = Kit(make_project(kit.root.parent / "again"), kit.cleanups)
        call = CATALOGUE[words](kit)
    machine = run_nexus([*call.args, "--json"], kit.dir)
    assert machine.returncode == 1 and machine.stderr == "", machine
    envelope = json.loads(machine.stdout)
    assert machine.stdout == json_line(call.error, envelope.get("hint"))  # compact, one line, keys in order
    assert envelope["error"] == call.error
    assert guidance == (envelope["hint"].splitlines() if "hint" in envelope else [])
    if call.hint is not None:
        assert call.hint in envelope["hint"], envelope
    if not (call.changes or call.others_write):
        assert tree(kit.root) == before, "a refusal changed something on disk"


def test_the_messages_no_single_call_reaches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What one CLI call cannot reach, in the core's exact words (and printed as any other)."""
    root = make_project(tmp_path / "project")
    with pytest.raises(NexusError) as caught:
        engine.create_run(str(root), [1])
    assert caught.value.message == "Nexus: A JSON plan object is required."
    assert human_text(caught.value.message, None) == "Nexus: Nexus: A JSON plan object is required.\n"
    with pytest.raises(NexusError) as caught:
        paths.safe_target(str(root), "/etc/passwd")
    assert caught.value.message == "Adapter file must be a relative project path: /etc/passwd"
    with pytest.raises(NexusError) as caught:  # SPEC 1.4: step 1 precedes "escapes the target project"
        paths.safe_target(str(root), "../outside")
    assert caught.value.message == "Adapter file must be a relative project path: ../outside"
    notes = root / "notes.txt"
    notes.write_text("x")
    with pytest.raises(NexusError) as caught:  # SPEC 1.5: safeTarget precedes "Project directory is not ..."
        paths.root_of(str(notes))
    assert caught.value.message == f"Adapter parent is not a directory: {notes}"

    with pytest.raises(NexusError) as caught:  # SPEC 1.7: the probe under a file refuses first...
        paths.directory_at(str(root), "checks/check.sh")
    assert caught.value.message == f"Adapter parent is not a directory: {root}/checks/check.sh"
    with monkeypatch.context() as bypass:  # ...so only a directory_at past it meets a file
        bypass.setattr(paths, "safe_target", lambda root, file: file)
        with pytest.raises(NexusError) as caught:
            paths.directory_at(str(root), "checks/check.sh")
    assert caught.value.message == "Nexus: Check cwd is not a directory: checks/check.sh"

    # Lock changed during recovery: writer.lock is replaced after the receipt is written.
    token = locks.try_acquire_writer(str(root))
    assert token is not None
    snapshot = locks.lock_snapshot(str(root), locks.WRITER_LOCK)
    assert snapshot is not None
    real_write = store.atomic_write  # what locks calls (imported from store), replaced there below

    def write_then_replace_the_lock(*args: Any, **kwargs: Any) -> Any:
        written = real_write(*args, **kwargs)
        lock = root / locks.WRITER_LOCK
        lock.write_text(lock.read_text().replace('"pid":', '"pid": ', 1))
        return written

    monkeypatch.setattr(locks, "atomic_write", write_then_replace_the_lock)
    monkeypatch.setattr(locks, "owner_liveness", lambda *_: "dead", raising=False)
    with pytest.raises(NexusError) as caught:
        locks.recover_lock(str(root), {"expectedHash": snapshot["hash"], "ownerStopped": True, "note": "checked"})
    assert caught.value.message == "Nexus: Lock changed during recovery."


def _two_check_task(kit: Kit) -> None:
    kit.create(
        host(
            "a",
            checks=[
                {"id": "one", "command": "/bin/sh", "args": ["checks/check.sh", "a"]},
                {"id": "two", "command": "/bin/sh", "args": ["checks/check.sh", "a"]},
            ],
        )
    )
    kit.completed("a")


def _replace_the_verification(kit: Kit) -> None:
    kit.tamper(lambda run: run["tasks"][0]["attempts"][-1]["verification"].update(id=str(uuid.uuid4())))


def test_the_verification_races(kit: Kit) -> None:
    """Another client replaces the running verification between two checks, or after the last."""
    _two_check_task(kit)

    def after_the_first(event: dict[str, Any]) -> None:
        if event["event"] == "check-finished" and event["index"] == 0:
            _replace_the_verification(kit)

    with pytest.raises(NexusError) as caught:
        engine.verify_task(kit.dir, "r", "a", progress=after_the_first)
    assert caught.value.message == "Nexus: Verification ownership changed; no further command was launched."

    other = Kit(make_project(kit.root.parent / "other"))
    _two_check_task(other)

    def after_the_last(event: dict[str, Any]) -> None:
        if event["event"] == "check-finished" and event["index"] == 1:
            _replace_the_verification(other)

    with pytest.raises(NexusError) as caught:
        engine.verify_task(other.dir, "r", "a", progress=after_the_last)
    assert caught.value.message == "Nexus: Stale verification finalization was rejected."


def test_a_check_receipt_stores_its_words(kit: Kit) -> None:
    """A scope changed between two checks: the next check's receipt stores the SPEC's words (the
    verification ends failed; nothing is printed as a refusal)."""
    write(kit.root / "checks" / "touch.sh", 'printf changed > "out/$1/result.txt"\n')
    kit.create(
        host(
            "a",
            resources=["checks/check.sh", "checks/touch.sh"],
            checks=[
                {"id": "one", "command": "/bin/sh", "args": ["checks/touch.sh", "a"]},
                {"id": "two", "command": "/bin/sh", "args": ["checks/check.sh", "a"]},
            ],
        )
    )
    kit.completed("a")
    done = run_nexus(["verify", "r", "a", "--json"], kit.dir)
    assert done.returncode == 1
    receipts = json.loads(done.stdout)["tasks"][0]["attempts"][-1]["verification"]["checks"]
    assert receipts[1]["error"] == "Nexus: Checked files changed before the next verification command."
