"""Every action's happy path and each refusal the SPEC lists, through the CLI and the library.

A refusal must give the SPEC's message (`Nexus: ` + message on stderr, exit 1; the JSON error
shape with --json), raise the same NexusError from the library, and leave the whole
`.bmad-plus` tree byte-identical.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest
from project_kit import HOST, Project, RunCli, plan, task_def

from nexus_core import engine
from nexus_core.cli.main import dispatch
from nexus_core.errors import NexusError
from nexus_core.state import canonical, locks


@dataclass
class Call:
    action: str
    run: str | None = None
    task: str | None = None
    options: Any = None  # the --input object (or --plan for create)


Setup = Callable[[Project], Call]


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _write_lock(project: Project, name: str, pid: int) -> None:
    lock = project.root / ".bmad-plus" / "nexus" / name
    lock.parent.mkdir(parents=True, exist_ok=True)
    owner = {"token": "t0ken", "pid": pid, "hostname": os.uname().nodename, "createdAt": "2026-01-01T00:00:00.000Z"}
    fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, canonical.compact(owner).encode())
    os.close(fd)


def _lock_hash(project: Project) -> str:
    snapshot = locks.lock_snapshot(project.dir, ".bmad-plus/nexus/writer.lock")
    assert snapshot is not None
    return str(snapshot["hash"])


def _two_tasks(project: Project, **b: Any) -> None:
    project.create(plan("r1", task_def("a"), task_def("b", **b)))


def _rec(attempt: str, **extra: Any) -> dict[str, Any]:
    return {"attemptId": attempt, "backend": HOST, "outcome": "completed", "summary": "done", **extra}


def _recon(attempt: str, **extra: Any) -> dict[str, Any]:
    base = {"attemptId": attempt, "backend": HOST, "outcome": "failed", "ownerStopped": True, "summary": "checked"}
    return {**base, **extra}


def _execution_task() -> dict[str, Any]:
    return task_def(
        "p",
        execution={
            "adapter": "command",
            "command": "/bin/sh",
            "args": ["checks/check.sh", "p"],
            "input": "checks/check.sh",
        },
    )


def _fresh(project: Project) -> None:
    project.create(plan("r1", task_def("a"), task_def("c", dependsOn=["a"])))


REFUSALS: dict[str, tuple[Setup, str | None]] = {
    # create
    "create-bad-plan-id": (
        lambda p: Call("create", options=plan("Bad ID")),
        "Nexus: Run ID must use 1-64 lowercase letters, numbers, _ or -.",
    ),
    "create-existing-run": (
        lambda p: (_fresh(p), Call("create", options=plan("r1")))[1],
        "Nexus: Run already exists; inspect it instead.",
    ),
    # start
    "start-unknown-task": (
        lambda p: (_fresh(p), Call("start", "r1", "nope", {"backend": HOST}))[1],
        "Nexus: Unknown task: nope",
    ),
    "start-unknown-run": (lambda p: Call("start", "ghost", "a", {"backend": HOST}), None),
    "start-process-plan": (
        lambda p: (p.create(plan("r1", _execution_task())), Call("start", "r1", "p", {"backend": HOST}))[1],
        "Nexus: Executable plans use launch; start requires a host-owned plan and host identity.",
    ),
    "start-non-host-backend": (
        lambda p: (_fresh(p), Call("start", "r1", "a", {"backend": {"kind": "cloud", "id": "x", "sessionId": "y"}}))[1],
        "Nexus: Executable plans use launch; start requires a host-owned plan and host identity.",
    ),
    "start-bad-backend-handle": (
        lambda p: (_fresh(p), Call("start", "r1", "a", {"backend": {"kind": "host", "id": "", "sessionId": "s"}}))[1],
        "Nexus: Backend handle must be a nonempty bounded string.",
    ),
    "start-twice": (
        lambda p: (_fresh(p), p.start("r1", "a"), Call("start", "r1", "a", {"backend": HOST}))[2],
        "Nexus: Task already has an attempt; inspect or explicitly retry.",
    ),
    "start-accepted": (
        lambda p: (_fresh(p), p.accepted("r1", "a"), Call("start", "r1", "a", {"backend": HOST}))[2],
        "Nexus: Accepted tasks cannot be restarted.",
    ),
    "start-dependency-pending": (
        lambda p: (_fresh(p), Call("start", "r1", "c", {"backend": HOST}))[1],
        "Nexus: Dependency has not been accepted: a",
    ),
    "start-capacity": (
        lambda p: (
            p.create(plan("r1", task_def("a"), task_def("b"), max_parallel=1)),
            p.start("r1", "a"),
            Call("start", "r1", "b", {"backend": HOST}),
        )[2],
        "Nexus: Run capacity is occupied until active work is reconciled.",
    ),
    "start-scope-owned-by-other-run": (
        lambda p: (
            p.create(plan("r1", task_def("a"))),
            p.create(plan("r2", task_def("z", scope=["OUT/a/sub"], artifacts=["OUT/a/sub/x"]))),
            p.start("r1", "a"),
            Call("start", "r2", "z", {"backend": HOST}),
        )[3],
        "Nexus: Write scope is owned by active attempt: r1/a",
    ),
    "start-writer-lock-held": (
        lambda p: (_fresh(p), _write_lock(p, "writer.lock", _dead_pid()), Call("start", "r1", "a", {"backend": HOST}))[
            2
        ],
        "Nexus: Another mutation owns writer.lock; inspect before explicit recovery.",
    ),
    "start-recovery-lock-held": (
        lambda p: (
            _fresh(p),
            _write_lock(p, "recovery.lock", _dead_pid()),
            Call("start", "r1", "a", {"backend": HOST}),
        )[2],
        "Nexus: Lock recovery is active or interrupted; inspect recovery.lock and its owner before proceeding.",
    ),
    # retry
    "retry-without-attempt": (
        lambda p: (_fresh(p), Call("retry", "r1", "a", {"backend": HOST}))[1],
        "Nexus: Retry requires a reconciled failed/cancelled attempt or failed verification.",
    ),
    "retry-while-running": (
        lambda p: (_fresh(p), p.start("r1", "a"), Call("retry", "r1", "a", {"backend": HOST}))[2],
        "Nexus: Retry requires a reconciled failed/cancelled attempt or failed verification.",
    ),
    "retry-non-idempotent": (
        lambda p: (
            _two_tasks(p, idempotent=False),
            p.record("r1", "b", p.start("r1", "b"), "failed"),
            Call("retry", "r1", "b", {"backend": HOST}),
        )[2],
        "Nexus: Non-idempotent retry requires an explicit retry-safe reconciliation.",
    ),
    "retry-limit": (
        lambda p: (
            _two_tasks(p, maxAttempts=1),
            p.record("r1", "b", p.start("r1", "b"), "failed"),
            Call("retry", "r1", "b", {"backend": HOST}),
        )[2],
        "Nexus: Retry limit reached.",
    ),
    "retry-process-plan": (
        lambda p: (p.create(plan("r1", _execution_task())), Call("retry", "r1", "p", {"backend": HOST}))[1],
        "Nexus: Executable plans retry through launch with retry: true; retry requires a host identity.",
    ),
    # record
    "record-stale-attempt": (
        lambda p: (_fresh(p), p.start("r1", "a"), Call("record", "r1", "a", _rec("not-the-attempt")))[2],
        "Nexus: Stale or missing attempt identity.",
    ),
    "record-foreign-backend": (
        lambda p: (
            _fresh(p),
            a := p.start("r1", "a"),
            Call("record", "r1", "a", {**_rec(a), "backend": {**HOST, "sessionId": "other"}}),
        )[2],
        "Nexus: Backend handle/session does not own this attempt.",
    ),
    "record-late": (
        lambda p: (_fresh(p), a := p.completed("r1", "a"), Call("record", "r1", "a", _rec(a)))[2],
        "Nexus: This attempt requires reconciliation, not a late worker acknowledgement.",
    ),
    "record-unsupported-outcome": (
        lambda p: (_fresh(p), a := p.start("r1", "a"), Call("record", "r1", "a", _rec(a, outcome="cancelled")))[2],
        "Nexus: Unsupported worker outcome.",
    ),
    "record-null-exit-code": (
        lambda p: (_fresh(p), a := p.start("r1", "a"), Call("record", "r1", "a", _rec(a, exitCode=None)))[2],
        "Nexus: exitCode must be an integer.",
    ),
    "record-completed-nonzero": (
        lambda p: (_fresh(p), a := p.start("r1", "a"), Call("record", "r1", "a", _rec(a, exitCode=3)))[2],
        "Nexus: Nonzero exit cannot be a completed outcome.",
    ),
    "record-empty-summary": (
        lambda p: (_fresh(p), a := p.start("r1", "a"), Call("record", "r1", "a", _rec(a, summary="")))[2],
        "Nexus: Worker observation must be a nonempty bounded string.",
    ),
    "record-after-cancel": (
        lambda p: (
            _fresh(p),
            a := p.start("r1", "a"),
            engine.cancel_task(p.dir, "r1", "a", {"reason": "stop"}),
            Call("record", "r1", "a", _rec(a)),
        )[3],
        "Nexus: This attempt requires reconciliation, not a late worker acknowledgement.",
    ),
    # reconcile
    "reconcile-accepted": (
        lambda p: (_fresh(p), a := p.accepted("r1", "a"), Call("reconcile", "r1", "a", _recon(a)))[2],
        "Nexus: Accepted work cannot be rewritten through reconciliation.",
    ),
    "reconcile-bad-outcome": (
        lambda p: (_fresh(p), a := p.start("r1", "a"), Call("reconcile", "r1", "a", _recon(a, outcome="blocked")))[2],
        "Nexus: Reconciliation must establish completed, failed or cancelled work.",
    ),
    "reconcile-without-owner-stopped": (
        lambda p: (_fresh(p), a := p.start("r1", "a"), Call("reconcile", "r1", "a", _recon(a, ownerStopped="yes")))[2],
        "Nexus: Reconciliation requires an explicit ownerStopped observation; timeouts alone are insufficient.",
    ),
    "reconcile-completed-after-failed-verification": (
        lambda p: (
            _fresh(p),
            a := p.verified("r1", "a", "nope\n"),
            Call("reconcile", "r1", "a", _recon(a, outcome="completed")),
        )[2],
        "Nexus: Failed verification requires a new attempt; reconciliation cannot reset it.",
    ),
    "reconcile-completed-result-changed": (
        lambda p: (
            _fresh(p),
            a := p.completed("r1", "a"),
            p.write_result("a", "ok, edited\n"),
            Call("reconcile", "r1", "a", _recon(a, outcome="completed")),
        )[3],
        "Nexus: Recorded result changed; reconcile failure and retry with a new attempt.",
    ),
    # cancel
    "cancel-without-attempt": (
        lambda p: (_fresh(p), Call("cancel", "r1", "a", {"reason": "stop"}))[1],
        "Nexus: Only an unaccepted existing attempt can be cancelled.",
    ),
    "cancel-accepted": (
        lambda p: (_fresh(p), p.accepted("r1", "a"), Call("cancel", "r1", "a", {"reason": "stop"}))[2],
        "Nexus: Only an unaccepted existing attempt can be cancelled.",
    ),
    "cancel-twice": (
        lambda p: (
            _fresh(p),
            p.start("r1", "a"),
            engine.cancel_task(p.dir, "r1", "a", {"reason": "stop"}),
            Call("cancel", "r1", "a", {"reason": "again"}),
        )[3],
        "Nexus: Cancellation is already recorded; inspect and reconcile it.",
    ),
    "cancel-empty-reason": (
        lambda p: (_fresh(p), p.start("r1", "a"), Call("cancel", "r1", "a", {"reason": " "}))[2],
        "Nexus: Cancellation reason must be a nonempty bounded string.",
    ),
    # verify
    "verify-before-work": (
        lambda p: (_fresh(p), Call("verify", "r1", "a"))[1],
        "Nexus: Verification requires completed, unaccepted, reconciled work.",
    ),
    "verify-running-attempt": (
        lambda p: (_fresh(p), p.start("r1", "a"), Call("verify", "r1", "a"))[2],
        "Nexus: Verification requires completed, unaccepted, reconciled work.",
    ),
    "verify-twice": (
        lambda p: (_fresh(p), p.verified("r1", "a"), Call("verify", "r1", "a"))[2],
        "Nexus: Verification already exists; inspect/reconcile or retry before executing again.",
    ),
    "verify-artifacts-changed": (
        lambda p: (_fresh(p), p.completed("r1", "a"), p.write_result("a", "ok 2\n"), Call("verify", "r1", "a"))[3],
        "Nexus: Artifacts changed after the worker result; reconcile the current result first.",
    ),
    "verify-resource-changed": (
        lambda p: (
            _fresh(p),
            p.completed("r1", "a"),
            (p.root / "checks" / "check.sh").write_text("exit 0\n"),
            Call("verify", "r1", "a"),
        )[3],
        "Nexus: Protected verifier or agent resource changed since the plan was created.",
    ),
    # accept
    "accept-twice": (
        lambda p: (_fresh(p), p.accepted("r1", "a"), Call("accept", "r1", "a"))[2],
        "Nexus: Task is already accepted.",
    ),
    "accept-unverified": (
        lambda p: (_fresh(p), p.completed("r1", "a"), Call("accept", "r1", "a"))[2],
        "Nexus: Current attempt has no eligible passed verification.",
    ),
    "accept-failed-verification": (
        lambda p: (_fresh(p), p.verified("r1", "a", "nope\n"), Call("accept", "r1", "a"))[2],
        "Nexus: Current attempt has no eligible passed verification.",
    ),
    "accept-stale": (
        lambda p: (_fresh(p), p.verified("r1", "a"), p.write_result("a", "ok but edited\n"), Call("accept", "r1", "a"))[
            3
        ],
        "Nexus: Stale evidence: checked artifacts or write scope changed.",
    ),
    "accept-stale-new-file-in-scope": (
        lambda p: (
            _fresh(p),
            p.verified("r1", "a"),
            (p.root / "out" / "a" / "extra.txt").write_text("x"),
            Call("accept", "r1", "a"),
        )[3],
        "Nexus: Stale evidence: checked artifacts or write scope changed.",
    ),
    "accept-resource-changed": (
        lambda p: (
            _fresh(p),
            p.verified("r1", "a"),
            (p.root / "checks" / "check.sh").write_text("exit 0\n"),
            Call("accept", "r1", "a"),
        )[3],
        "Nexus: Protected verifier or agent resource changed since the plan was created.",
    ),
    # recover-lock
    "recover-lock-without-lock": (
        lambda p: (
            _fresh(p),
            Call("recover-lock", options={"expectedHash": "0" * 64, "ownerStopped": True, "note": "n"}),
        )[1],
        "Nexus: Exact lock hash and an explicit stopped-owner observation are required.",
    ),
    "recover-lock-wrong-hash": (
        lambda p: (
            _fresh(p),
            _write_lock(p, "writer.lock", _dead_pid()),
            Call("recover-lock", options={"expectedHash": "0" * 64, "ownerStopped": True, "note": "n"}),
        )[2],
        "Nexus: Exact lock hash and an explicit stopped-owner observation are required.",
    ),
    "recover-lock-owner-not-declared-stopped": (
        lambda p: (
            _fresh(p),
            _write_lock(p, "writer.lock", _dead_pid()),
            Call("recover-lock", options={"expectedHash": _lock_hash(p), "note": "n"}),
        )[2],
        "Nexus: Exact lock hash and an explicit stopped-owner observation are required.",
    ),
    "recover-lock-empty-note": (
        lambda p: (
            _fresh(p),
            _write_lock(p, "writer.lock", _dead_pid()),
            Call("recover-lock", options={"expectedHash": _lock_hash(p), "ownerStopped": True, "note": ""}),
        )[2],
        "Nexus: Recovery observation must be a nonempty bounded string.",
    ),
    "recover-lock-owner-alive": (
        lambda p: (
            _fresh(p),
            _write_lock(p, "writer.lock", os.getpid()),
            Call("recover-lock", options={"expectedHash": _lock_hash(p), "ownerStopped": True, "note": "n"}),
        )[2],
        "Nexus: Lock owner process is still alive; no lock was removed.",
    ),
    "recover-lock-recovery-in-progress": (
        lambda p: (
            _fresh(p),
            _write_lock(p, "writer.lock", _dead_pid()),
            _write_lock(p, "recovery.lock", _dead_pid()),
            Call("recover-lock", options={"expectedHash": _lock_hash(p), "ownerStopped": True, "note": "n"}),
        )[3],
        "Nexus: Another recovery owns recovery.lock; inspect its owner and effects before any manual recovery.",
    ),
}


def _cli_args(project: Project, call: Call, tmp: Path) -> list[str]:
    args = [call.action]
    args += [a for a in (call.run, call.task) if a is not None]
    if call.options is not None:
        path = tmp / "input.json"
        path.write_text(json.dumps(call.options))
        args += ["--plan" if call.action == "create" else "--input", str(path)]
    return [*args, "-d", project.dir]


def _api(project: Project, call: Call) -> Any:
    if call.action == "create":
        return engine.create_run(project.dir, call.options)
    if call.action == "recover-lock":
        return locks.recover_lock(project.dir, call.options)
    if call.action == "verify":
        return engine.verify_task(project.dir, call.run, call.task)  # type: ignore[arg-type]
    if call.action == "accept":
        return engine.accept_task(project.dir, call.run, call.task)  # type: ignore[arg-type]
    handler = {
        "start": engine.start_task,
        "retry": engine.retry_task,
        "record": engine.record_attempt,
        "reconcile": engine.reconcile_attempt,
        "cancel": engine.cancel_task,
    }[call.action]
    return handler(project.dir, call.run, call.task, call.options)  # type: ignore[arg-type]


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_refusal_through_cli_and_api(case: str, tmp_path: Path, nexus_cli: RunCli) -> None:
    setup, message = REFUSALS[case]
    project = Project(tmp_path / "project")
    call = setup(project)
    if message is None:  # messages that embed a path of this test's directory
        message = f"Nexus: Unknown run: {call.run} (no state file {project.root}/.bmad-plus/nexus/runs/{call.run}.json)"
    before = project.state_tree()

    result = nexus_cli(*_cli_args(project, call, tmp_path))
    assert (result.returncode, result.stdout, result.stderr) == (1, "", f"Nexus: {message}\n")
    assert project.state_tree() == before

    as_json = nexus_cli(*_cli_args(project, call, tmp_path), "--json")
    assert as_json.returncode == 1
    assert as_json.stdout == canonical.compact({"schemaVersion": 1, "status": "error", "error": message}) + "\n"
    assert project.state_tree() == before

    with pytest.raises(NexusError) as refused:
        _api(project, call)
    assert str(refused.value) == message
    assert project.state_tree() == before


# --- happy paths ------------------------------------------------------------------------


def _cli_json(nexus_cli: RunCli, project: Project, *args: str, tmp: Path, options: Any = None) -> tuple[int, Any]:
    extra: list[str] = []
    if options is not None:
        path = tmp / f"in-{args[0]}.json"
        path.write_text(json.dumps(options))
        extra = ["--plan" if args[0] == "create" else "--input", str(path)]
    result = nexus_cli(*args, *extra, "--json", "-d", project.dir)
    assert result.stderr == ""
    return result.returncode, canonical.parse(result.stdout)


def _task(run: Mapping[str, Any], task_id: str) -> dict[str, Any]:
    return next(t for t in run["tasks"] if t["id"] == task_id)


def test_full_lifecycle_through_cli(tmp_path: Path, nexus_cli: RunCli) -> None:
    project = Project(tmp_path / "project")
    code, run = _cli_json(
        nexus_cli, project, "create", tmp=tmp_path, options=plan("r1", task_def("a"), task_def("c", dependsOn=["a"]))
    )
    assert code == 0 and run["sequence"] == 1 and run["planHash"] == canonical.sha256_json(run["plan"])
    state = project.root / ".bmad-plus/nexus/runs/r1.json"
    assert os.stat(state).st_mode & 0o777 == 0o600
    assert os.stat(state.parent).st_mode & 0o777 == 0o700

    code, run = _cli_json(nexus_cli, project, "start", "r1", "a", tmp=tmp_path, options={"backend": HOST})
    attempt = _task(run, "a")["attempts"][0]
    assert (code, attempt["execution"]) == (0, "running")
    assert attempt["backend"] == {
        **HOST,
        "capabilities": {"launch": False, "terminate": False, "inspect": "host-observation"},
    }
    project.write_result("a")
    code, run = _cli_json(nexus_cli, project, "record", "r1", "a", tmp=tmp_path, options=_rec(attempt["id"]))
    assert (code, _task(run, "a")["attempts"][0]["execution"]) == (0, "completed")
    code, run = _cli_json(nexus_cli, project, "verify", "r1", "a", tmp=tmp_path)
    verification = _task(run, "a")["attempts"][0]["verification"]
    assert (code, verification["status"], len(verification["checks"])) == (0, "passed", 1)
    assert verification["checks"][0]["exitCode"] == 0
    code, run = _cli_json(nexus_cli, project, "accept", "r1", "a", tmp=tmp_path)
    assert (code, _task(run, "a")["integration"]) == (0, "accepted")
    assert _task(run, "a")["integrationReceipt"]["attemptId"] == attempt["id"]
    # Its dependant can now start.
    code, run = _cli_json(nexus_cli, project, "start", "r1", "c", tmp=tmp_path, options={"backend": HOST})
    assert code == 0 and run["sequence"] == 8  # verify saves thrice: prepare, one check, finalize
    code, inspected = _cli_json(nexus_cli, project, "inspect", "r1", tmp=tmp_path)
    observation = {o["taskId"]: o for o in inspected["observations"]}
    assert observation["a"]["evidenceEligible"] is True and observation["a"]["stale"] is False
    assert observation["c"]["overdue"] is False


def test_failed_verification_exits_1_then_retry_and_accept(tmp_path: Path, nexus_cli: RunCli) -> None:
    project = Project(tmp_path / "project")
    project.create(plan("r1", task_def("a")))
    first = project.completed("r1", "a", "wrong\n")
    code, run = _cli_json(nexus_cli, project, "verify", "r1", "a", tmp=tmp_path)
    task = _task(run, "a")
    assert (code, task["attempts"][0]["verification"]["status"], task["integration"]) == (1, "failed", "rejected")
    assert "must contain ok" in task["attempts"][0]["verification"]["checks"][0]["stderr"]
    code, run = _cli_json(
        nexus_cli, project, "retry", "r1", "a", tmp=tmp_path, options={"backend": {**HOST, "sessionId": "s2"}}
    )
    task = _task(run, "a")
    assert code == 0 and task["integration"] == "pending"
    second = task["attempts"][1]
    assert second["parentAttemptId"] == first
    project.write_result("a")
    engine.record_attempt(project.dir, "r1", "a", {**_rec(second["id"]), "backend": {**HOST, "sessionId": "s2"}})
    assert _cli_json(nexus_cli, project, "verify", "r1", "a", tmp=tmp_path)[0] == 0
    assert _cli_json(nexus_cli, project, "accept", "r1", "a", tmp=tmp_path)[0] == 0


def test_cancel_then_reconcile_then_retry(tmp_path: Path, nexus_cli: RunCli) -> None:
    project = Project(tmp_path / "project")
    project.create(plan("r1", task_def("a", idempotent=False)))
    attempt = project.start("r1", "a")
    code, run = _cli_json(nexus_cli, project, "cancel", "r1", "a", tmp=tmp_path, options={"reason": "wrong branch"})
    latest = _task(run, "a")["attempts"][-1]
    assert (code, latest["execution"], latest["cancellation"]["status"]) == (0, "ambiguous", "requested")
    options = _recon(attempt, outcome="cancelled", retrySafe=True)
    code, run = _cli_json(nexus_cli, project, "reconcile", "r1", "a", tmp=tmp_path, options=options)
    latest = _task(run, "a")["attempts"][-1]
    assert (code, latest["execution"], latest["cancellation"]["status"]) == (0, "cancelled", "reconciled")
    assert latest["reconciliation"]["retrySafe"] is True and len(latest["reconciliations"]) == 1
    code, run = _cli_json(nexus_cli, project, "retry", "r1", "a", tmp=tmp_path, options={"backend": HOST})
    assert code == 0 and len(_task(run, "a")["attempts"]) == 2


def test_recover_lock_happy_path_writes_receipt_and_unblocks(tmp_path: Path, nexus_cli: RunCli) -> None:
    project = Project(tmp_path / "project")
    _fresh(project)
    pid = _dead_pid()
    _write_lock(project, "writer.lock", pid)
    assert (
        nexus_cli(
            "start", "r1", "a", "--input", project.input_file("host", {"backend": HOST}), "-d", project.dir
        ).returncode
        == 1
    )
    inspected = engine_inspect(project)
    lock = inspected["lock"]
    assert lock["owner"]["pid"] == pid
    options = {"expectedHash": lock["hash"], "ownerStopped": True, "note": "verifier pid is gone"}
    result = nexus_cli("recover-lock", "--input", project.input_file("recover", options), "-d", project.dir)
    assert result.returncode == 0, result.stderr
    receipt = json.loads(result.stdout)  # human mode prints the receipt as pretty JSON
    assert receipt["note"] == "verifier pid is gone" and receipt["observed"]["hash"] == lock["hash"]
    receipts = list((project.root / ".bmad-plus/nexus/lock-recovery").glob("*.json"))
    assert len(receipts) == 1 and json.loads(receipts[0].read_text()) == receipt
    assert os.stat(receipts[0]).st_mode & 0o777 == 0o600
    assert not (project.root / ".bmad-plus/nexus/writer.lock").exists()
    assert (
        nexus_cli(
            "start", "r1", "a", "--input", project.input_file("host", {"backend": HOST}), "-d", project.dir
        ).returncode
        == 0
    )


def engine_inspect(project: Project, run_id: str | None = "r1") -> dict[str, Any]:
    from nexus_core import observe

    return cast(dict[str, Any], observe.inspect_run(project.dir, run_id))


def test_check_timeout_is_ambiguous_and_kills_the_child(tmp_path: Path, nexus_cli: RunCli) -> None:
    project = Project(tmp_path / "project")
    (project.root / "checks" / "spin.sh").write_text("echo started\nwhile :; do :; done\n")
    slow = task_def(
        "a",
        resources=["checks/check.sh", "checks/spin.sh"],
        checks=[{"id": "spin", "command": "/bin/sh", "args": ["checks/spin.sh"], "cwd": ".", "timeoutMs": 300}],
    )
    project.create(plan("r1", slow))
    project.completed("r1", "a")
    code, run = _cli_json(nexus_cli, project, "verify", "r1", "a", tmp=tmp_path)
    verification = _task(run, "a")["attempts"][0]["verification"]
    check = verification["checks"][0]
    assert code == 1
    assert (verification["status"], check["timedOut"], check["signal"], check["exitCode"]) == (
        "ambiguous",
        True,
        "SIGKILL",
        None,
    )
    assert check["stdout"] == "started\n"
    assert _task(run, "a")["integration"] == "rejected"


def test_check_output_budget_is_shared_and_truncated(tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    (project.root / "checks" / "loud.sh").write_text(
        'i=0; while [ $i -lt 2000 ]; do echo "0123456789012345678901234567890123456789"; '
        'echo "err-err-err-err-err-err-err-err-err-err" >&2; i=$((i+1)); done\n'
    )
    loud = task_def(
        "a",
        resources=["checks/check.sh", "checks/loud.sh"],
        checks=[{"id": "loud", "command": "/bin/sh", "args": ["checks/loud.sh"], "cwd": ".", "timeoutMs": 30000}],
    )
    project.create(plan("r1", loud))
    project.completed("r1", "a")
    run = engine.verify_task(project.dir, "r1", "a")
    check = _task(run, "a")["attempts"][0]["verification"]["checks"][0]
    assert check["outputTruncated"] is True
    assert len(check["stdout"].encode()) + len(check["stderr"].encode()) == 65536
    assert check["exitCode"] == 0
    assert check["outputHash"] == canonical.sha256_text(check["stdout"] + "\0" + check["stderr"])


def test_check_environment_is_minimal(tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    (project.root / "checks" / "env.sh").write_text("env | sort\n")
    probe = task_def(
        "a",
        resources=["checks/check.sh", "checks/env.sh"],
        checks=[{"id": "env", "command": "/bin/sh", "args": ["checks/env.sh"], "cwd": ".", "timeoutMs": 30000}],
    )
    project.create(plan("r1", probe))
    project.completed("r1", "a")
    os.environ["NEXUS_TEST_SECRET"] = "leak"
    try:
        run = engine.verify_task(project.dir, "r1", "a")
    finally:
        del os.environ["NEXUS_TEST_SECRET"]
    verification = _task(run, "a")["attempts"][0]["verification"]
    environment = verification["environment"]
    assert environment["policy"] == "minimal-local-v1"
    assert environment["sha256"] == canonical.sha256_json(environment["values"])
    printed = dict(line.split("=", 1) for line in verification["checks"][0]["stdout"].splitlines() if "=" in line)
    assert "NEXUS_TEST_SECRET" not in printed
    for key, value in environment["values"].items():
        assert printed[key] == value
    assert set(printed) - set(environment["values"]) <= {"PWD", "SHLVL", "_", "OLDPWD"}  # set by sh itself


# --- CLI grammar ---------------------------------------------------------------------------

USAGE = (
    "Use nexus create --plan FILE, inspect RUN, or "
    "start|launch|collect|record|reconcile|verify|retry|cancel|accept RUN TASK."
    # then ours, on the next line (the hint): the forms the reference's line does not name
    "\nAlso: nexus recover-lock --input FILE, nexus wait RUN, nexus loop RUN --every INTERVAL,"
    " nexus schedule add|list|show|runs|pause|resume|delete|run, nexus scheduler [-d DIR ...],"
    " nexus report RUN --format markdown|junit|html [-o FILE],"
    " nexus attention [-d DIR ...] [--discover ROOT] [--watch [--exec CMD]],"
    " nexus observe [-d DIR ...] [--json-lines]"
    " (nexus --help shows every option)."
)


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (["start", "a", "b", "c"], "error: too many arguments for 'nexus'. Expected 3 arguments but got 4.\n"),
        (["inspect", "--bogus"], "error: unknown option '--bogus'\n"),
        (["create", "r1"], f"Nexus: {USAGE}\n"),
        (["inspect", "r1", "t"], f"Nexus: {USAGE}\n"),
        (["frobnicate", "r1", "t"], f"Nexus: {USAGE}\n"),
        (["start", "r1", ""], f"Nexus: {USAGE}\n"),
        (["create"], "Nexus: --plan requires a JSON file.\n"),
        (["start", "r1", "a"], "Nexus: --input requires a JSON file.\n"),
        (["recover-lock"], "Nexus: --input requires a JSON file.\n"),
        (["create", "--input", "x.json"], "Nexus: create uses --plan.\n"),
        (["recover-lock", "--plan", "x.json"], "Nexus: recover-lock uses --input.\n"),
        (["inspect", "--input", "x.json"], "Nexus: inspect is read-only and takes no input file.\n"),
        (
            ["accept", "r1", "a", "--input", "x.json"],
            "Nexus: accept executes its recorded contract and takes no input file.\n",
        ),
        (
            ["verify", "r1", "a", "--input", "x.json"],
            "Nexus: verify executes its recorded contract and takes no input file.\n",
        ),
    ],
)
def test_cli_grammar_errors(args: list[str], stderr: str, tmp_path: Path, nexus_cli: RunCli) -> None:
    result = nexus_cli(*args, "-d", str(tmp_path))
    assert (result.returncode, result.stdout, result.stderr) == (1, "", stderr)
    assert list(tmp_path.iterdir()) == []


def test_a_bare_nexus_gives_commanders_line_then_the_full_help(tmp_path: Path, nexus_cli: RunCli) -> None:
    result = nexus_cli("-d", str(tmp_path))
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.startswith("error: missing required argument 'action'\n\nUsage: nexus ")
    assert "nexus start|launch|collect|record|reconcile|verify|retry|cancel|accept RUN TASK" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_inspect_inventory_of_empty_project_creates_nothing(tmp_path: Path, nexus_cli: RunCli) -> None:
    result = nexus_cli("inspect", "-d", str(tmp_path))
    assert result.returncode == 0
    inventory = json.loads(result.stdout)
    assert inventory["runIds"] == [] and inventory["project"] == str(tmp_path.resolve())
    assert list(tmp_path.iterdir()) == []


def test_missing_project_directory(tmp_path: Path, nexus_cli: RunCli) -> None:
    missing = tmp_path / "nowhere"
    result = nexus_cli("inspect", "-d", str(missing))
    assert (result.returncode, result.stderr) == (1, f"Nexus: Nexus: Project directory does not exist: {missing}\n")


def test_dispatch_is_the_cli_grammar(tmp_path: Path) -> None:
    """The library entry the CLI uses refuses the same way (no click involved)."""
    with pytest.raises(NexusError, match="create uses --plan"):
        dispatch("create", None, None, str(tmp_path), None, "x.json")
