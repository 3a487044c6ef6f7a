"""launch / collect / the process parts of inspect and reconcile (SPEC 5.7, 5.8, 6), with real
worker processes started by the real CLI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from process_support import (
    cli,
    cli_retrying,
    codex_task,
    command_task,
    create,
    identity,
    kill_quietly,
    latest,
    make_project,
    pid_alive,
    spawn_cli,
    state,
    wait_for,
    wait_running,
    worker_waiting,
    write,
)

from nexus_core import engine, observe, timeutil
from nexus_core.backend import process
from nexus_core.backend.checks import check_environment
from nexus_core.errors import NexusError
from nexus_core.shapes import Run
from nexus_core.state import canonical


@pytest.fixture
def project(tmp_path: Path) -> Path:
    return make_project(tmp_path / "project")


def receipt_of(attempt: dict[str, Any]) -> dict[str, Any]:
    return attempt["process"]["receipt"]  # type: ignore[no-any-return]


def launched(root: Path, run_id: str, task_id: str, *args: str) -> tuple[int, dict[str, Any], dict[str, Any]]:
    code, result, err = cli(root, "launch", run_id, task_id, *args)
    assert isinstance(result, dict) and "tasks" in result, (result, err)
    attempt = latest(root, run_id, task_id)
    return code, attempt, receipt_of(attempt)


# ----------------------------------------------------------------- the command adapter


def test_completed_launch_collect_verify_accept(project: Path) -> None:
    create(project, "r", [command_task("t", "ok")])
    code, attempt, receipt = launched(project, "r", "t")
    assert code == 0
    process = attempt["process"]
    assert list(process) == [
        "status",
        "owner",
        "childPid",
        "heartbeatAt",
        "collectedAt",
        "runtimeHash",
        "receipt",
        "receiptHash",
    ]
    assert process["status"] == "finished" and process["collectedAt"] is None
    assert isinstance(process["childPid"], int) and process["childPid"] != os.getpid()
    assert process["receiptHash"] == canonical.sha256_json(receipt)
    assert attempt["execution"] == "running"  # until collect
    backend = attempt["backend"]
    assert list(backend) == ["kind", "id", "sessionId", "hostname", "ownerPid", "capabilities"]
    assert backend["kind"] == "process" and backend["ownerPid"] != os.getpid()
    assert process["owner"] == backend
    assert list(receipt) == [
        "startedAt",
        "endedAt",
        "exitCode",
        "signal",
        "error",
        "reason",
        "spawned",
        "directChildExited",
        "streamsClosed",
        "directChildSignalled",
        "descendantState",
        "outcome",
        "provider",
        "output",
        "schemaVersion",
        "attemptId",
        "backend",
        "planHash",
        "execution",
        "inputSha256",
        "inputBytes",
        "environment",
        "evidenceClass",
        "independentlyVerified",
        "resultHashes",
    ]
    assert receipt["outcome"] == "completed" and receipt["exitCode"] == 0 and receipt["reason"] is None
    assert receipt["spawned"] and receipt["directChildExited"] and receipt["streamsClosed"]
    assert not receipt["directChildSignalled"]
    stdout = receipt["output"]["stdout"]
    assert stdout["text"] == "worker t done\n"
    assert base64.b64decode(stdout["base64"]) == b"worker t done\n"
    assert stdout["sha256"] == hashlib.sha256(b"worker t done\n").hexdigest()
    assert stdout["capturedBytes"] == stdout["observedBytes"] == 14 and stdout["complete"] is True
    assert receipt["output"]["stderr"]["text"] == "worker t note\n"
    # stdin: exactly the declared input file, no separator without instructions.
    brief = (project / "briefs" / "t.md").read_bytes()
    assert (project / "out" / "t" / "stdin.txt").read_bytes() == brief
    assert receipt["inputSha256"] == hashlib.sha256(brief).hexdigest() and receipt["inputBytes"] == len(brief)
    assert receipt["resultHashes"] == {
        "out/t/result.txt": hashlib.sha256(b"ok\n").hexdigest(),
        "out/t/stdin.txt": hashlib.sha256(brief).hexdigest(),
    }
    assert receipt["environment"]["policy"] == "minimal-local-v1"
    assert receipt["environment"]["credentialValuesRecorded"] is False
    assert receipt["planHash"] == state(project, "r")["planHash"]

    # inspect before collect: receipt ready.
    _, inspected, _ = cli(project, "inspect", "r")
    observation = inspected["observations"][0]
    assert observation["process"]["receiptReady"] is True
    assert observation["process"]["status"] == "finished"
    assert observation["hint"].startswith("An owned process receipt is ready.")

    code, collected, err = cli(project, "collect", "r", "t", input_value=identity(attempt))
    assert code == 0, (collected, err)
    attempt = latest(project, "r", "t")
    assert attempt["execution"] == "completed"
    assert attempt["endedAt"] == receipt["endedAt"]
    assert attempt["resultHashes"] == receipt["resultHashes"]
    assert attempt["process"]["collectedAt"] == attempt["observedAt"]
    assert attempt["observations"] == [
        {
            "at": attempt["observedAt"],
            "outcome": "completed",
            "evidenceClass": "owned-process-result",
            "receiptHash": attempt["process"]["receiptHash"],
            "independentlyVerified": False,
            "summary": "Collected the exact foreground supervisor result. Verification remains separate.",
        }
    ]
    assert cli(project, "verify", "r", "t")[0] == 0
    assert cli(project, "accept", "r", "t")[0] == 0
    assert state(project, "r")["tasks"][0]["integration"] == "accepted"


def test_child_gets_exactly_the_execution_environment(project: Path) -> None:
    create(project, "r", [command_task("t", "env")])
    code, _, receipt = launched(project, "r", "t")
    assert code == 0
    lines = receipt["output"]["stdout"]["text"].splitlines()
    seen = dict(line.split("=", 1) for line in lines)
    seen.pop("PWD", None)  # set by the shell itself
    assert seen == check_environment()["values"]
    assert receipt["environment"]["inheritedKeys"] == sorted(check_environment()["values"])


def test_instructions_are_delivered_with_separators(project: Path) -> None:
    task = command_task("t", "ok", execution={"instructions": ["briefs/common.md"]})
    create(project, "r", [task])
    code, _, receipt = launched(project, "r", "t")
    assert code == 0
    expected = (
        b"\n--- briefs/common.md ---\n"
        + (project / "briefs" / "common.md").read_bytes()
        + b"\n--- briefs/t.md ---\n"
        + (project / "briefs" / "t.md").read_bytes()
    )
    assert (project / "out" / "t" / "stdin.txt").read_bytes() == expected
    assert receipt["inputSha256"] == hashlib.sha256(expected).hexdigest()
    assert receipt["execution"]["resources"] == ["briefs/t.md", "briefs/common.md", "workers/worker.sh"]


def test_failed_exit(project: Path) -> None:
    create(project, "r", [command_task("t", "fail")])
    code, attempt, receipt = launched(project, "r", "t")
    assert code == 1
    assert receipt["outcome"] == "failed" and receipt["exitCode"] == 3 and receipt["reason"] is None
    assert receipt["output"]["stderr"]["text"] == "worker t failed\n"
    code, _, _ = cli(project, "collect", "r", "t", input_value=identity(attempt))
    assert code == 1
    attempt = latest(project, "r", "t")
    assert attempt["execution"] == "failed" and attempt["endedAt"] == receipt["endedAt"]


def test_blocked_exit_code(project: Path) -> None:
    create(project, "r", [command_task("t", "blocked", execution={"blockedExitCodes": [75, 77, 75]})])
    assert state(project, "r")["plan"]["tasks"][0]["execution"]["blockedExitCodes"] == [75, 77]
    code, attempt, receipt = launched(project, "r", "t")
    assert code == 1 and receipt["outcome"] == "blocked" and receipt["exitCode"] == 77
    code, _, _ = cli(project, "collect", "r", "t", input_value=identity(attempt))
    assert code == 1
    attempt = latest(project, "r", "t")
    assert attempt["execution"] == "blocked"
    assert attempt["blockedRequest"].startswith("Executable reported a blocked operation")
    assert attempt["endedAt"] is None


def test_deadline_terminates_the_child(project: Path) -> None:
    create(project, "r", [command_task("t", "slow", deadlineMs=1200)])
    code, attempt, receipt = launched(project, "r", "t")
    assert code == 1
    assert receipt["reason"] == "deadline" and receipt["directChildSignalled"] is True
    assert receipt["signal"] == "SIGTERM" and receipt["exitCode"] is None
    assert receipt["directChildExited"] is True and receipt["outcome"] == "ambiguous"
    assert receipt["output"]["stdout"]["complete"] is False
    assert attempt["execution"] == "ambiguous"  # finalization of an ambiguous receipt
    assert not pid_alive(attempt["process"]["childPid"])


def test_child_that_ignores_sigterm_is_killed_after_the_grace(project: Path) -> None:
    """Beyond the reference (which leaves it running, SPEC 6.4): a child that traps SIGTERM gets
    SIGKILL with its process group once the grace has passed, so the attempt can be reconciled
    at once instead of waiting for someone to kill it by hand."""
    create(project, "r", [command_task("t", "stubborn", deadlineMs=1000)])
    code, attempt, receipt = launched(project, "r", "t")
    child = attempt["process"]["childPid"]
    try:
        assert code == 1
        assert receipt["reason"] == "deadline" and receipt["directChildSignalled"] is True
        assert receipt["directChildExited"] is True and receipt["signal"] == "SIGKILL"
        assert receipt["outcome"] == "ambiguous"
        assert not pid_alive(child)
    finally:
        kill_quietly(child)
    reconcile = {**identity(attempt), "outcome": "failed", "ownerStopped": True, "summary": "Stopped by nexus."}
    code, result, _ = cli(project, "reconcile", "r", "t", input_value=reconcile)
    assert code == 0, result


def test_descendant_holding_the_pipes(project: Path) -> None:
    create(project, "r", [command_task("t", "detach")])
    code, attempt, receipt = launched(project, "r", "t")
    assert code == 1 and receipt["exitCode"] == 0 and receipt["directChildExited"] is True
    assert receipt["reason"] == "retained-pipes" and receipt["streamsClosed"] is False
    assert receipt["outcome"] == "ambiguous" and receipt["descendantState"] == "unobserved"
    assert attempt["execution"] == "ambiguous"


def test_output_beyond_the_limit(project: Path) -> None:
    create(project, "r", [command_task("t", "loud", execution={"outputLimitBytes": 1024})])
    code, _, receipt = launched(project, "r", "t")
    assert code == 1
    stdout = receipt["output"]["stdout"]
    assert stdout["capturedBytes"] == 1024 and len(base64.b64decode(stdout["base64"])) == 1024
    assert stdout["observedBytes"] > 1024 and stdout["complete"] is False
    assert receipt["reason"] == "output-limit" and receipt["outcome"] == "ambiguous"


def test_launch_refusals(project: Path) -> None:
    create(project, "r", [command_task("t", "ok")])
    engine_host = {"attemptId": "x"}
    code, result, _ = cli(project, "launch", "r", "t", input_value={"retry": "yes"})
    assert code == 1 and result["error"] == (
        "Nexus: launch accepts only an optional boolean retry; executable settings belong in the plan."
    )
    code, result, _ = cli(project, "launch", "r", "t", input_value={"retry": False, **engine_host})
    assert "launch accepts only" in result["error"]
    code, result, _ = cli(project, "launch", "r", "nope")
    assert result["error"] == "Nexus: launch needs a plan with an explicit execution contract."
    before = (project / ".bmad-plus" / "nexus" / "runs" / "r.json").read_bytes()
    code, result, _ = cli(
        project, "start", "r", "t", input_value={"backend": {"kind": "host", "id": "a", "sessionId": "b"}}
    )
    assert result["error"] == "Nexus: Executable plans use launch; start requires a host-owned plan and host identity."
    assert (project / ".bmad-plus" / "nexus" / "runs" / "r.json").read_bytes() == before


def test_retry_up_to_max_attempts(project: Path) -> None:
    create(project, "r", [command_task("t", "flaky", idempotent=True, maxAttempts=2)])
    code, first, _ = launched(project, "r", "t")
    assert code == 1
    assert cli(project, "collect", "r", "t", input_value=identity(first))[0] == 1
    code, result, _ = cli(project, "launch", "r", "t")
    assert result["error"] == "Nexus: Task already has an attempt; inspect or explicitly retry."
    code, second, receipt = launched(project, "r", "t", "--input", str(write_json(project, {"retry": True})))
    assert code == 0 and receipt["outcome"] == "completed"
    assert second["parentAttemptId"] == first["id"] and second["backend"]["id"] != first["backend"]["id"]
    assert cli(project, "collect", "r", "t", input_value=identity(second))[0] == 0
    # A failed verification of the second attempt could retry, but the budget is spent.
    (project / "out" / "t" / "result.txt").write_text("bad\n")
    reconcile = {**identity(second), "outcome": "failed", "ownerStopped": True, "summary": "Result was wrong."}
    assert cli(project, "reconcile", "r", "t", input_value=reconcile)[0] == 0
    code, result, _ = cli(project, "launch", "r", "t", input_value={"retry": True})
    assert result["error"] == "Nexus: Retry limit reached."


def write_json(root: Path, value: Any) -> Path:
    path = root.parent / f"value-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(value))
    return path


# ----------------------------------------------------------------- another client while launch runs


def test_cancel_from_another_client_terminates_the_child(project: Path) -> None:
    create(project, "r", [command_task("t", "slow")])
    supervisor = spawn_cli(project, "launch", "r", "t")
    try:
        attempt = wait_running(project, "r", "t")
        child = attempt["process"]["childPid"]
        assert pid_alive(child)
        reconcile = {**identity(attempt), "outcome": "cancelled", "ownerStopped": True, "summary": "stop"}
        code, result, _ = cli_retrying(project, "reconcile", "r", "t", input_value=reconcile)
        assert result["error"] == (
            "Nexus: Process supervisor may still be alive; request cancellation and inspect its actual operation."
        )
        cancel = {**identity(attempt), "reason": "The release was postponed."}
        code, result, err = cli_retrying(project, "cancel", "r", "t", input_value=cancel)
        assert code == 0, (result, err)
        _out, err = supervisor.communicate(timeout=20)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    assert supervisor.returncode == 1, err
    attempt = latest(project, "r", "t")
    receipt = receipt_of(attempt)
    assert receipt["reason"] == "cancellation-requested" and receipt["directChildSignalled"] is True
    assert receipt["directChildExited"] is True and receipt["outcome"] == "ambiguous"
    assert attempt["execution"] == "ambiguous"
    assert attempt["cancellation"]["termination"] == "direct-child-exited-descendants-unobserved"
    assert attempt["cancellation"]["processesSignalled"] == [child]
    assert not pid_alive(child)
    code, result, _ = cli(project, "collect", "r", "t", input_value=identity(attempt))
    assert code == 1
    assert latest(project, "r", "t")["execution"] == "ambiguous"


def test_heartbeats_then_sigterm_to_the_supervisor(project: Path) -> None:
    create(project, "r", [command_task("t", "slow")])
    supervisor = spawn_cli(project, "launch", "r", "t")
    try:
        attempt = wait_running(project, "r", "t")
        first = attempt["process"]["heartbeatAt"]
        wait_for(lambda: latest(project, "r", "t")["process"]["heartbeatAt"] > first, what="a heartbeat")
        supervisor.send_signal(signal.SIGTERM)
        _, err = supervisor.communicate(timeout=20)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    assert supervisor.returncode == 1, err
    attempt = latest(project, "r", "t")
    receipt = receipt_of(attempt)
    assert receipt["reason"] == "supervisor-interrupted" and receipt["directChildSignalled"] is True
    assert receipt["outcome"] == "ambiguous" and attempt["execution"] == "ambiguous"
    assert not pid_alive(attempt["process"]["childPid"])


def test_supervisor_killed_mid_run(project: Path) -> None:
    create(project, "r", [command_task("t", "slow")])
    supervisor = spawn_cli(project, "launch", "r", "t")
    attempt = wait_running(project, "r", "t")
    child = attempt["process"]["childPid"]
    try:
        wait_for(lambda: worker_waiting(child), what="the worker to reach its sleep")
        fresh = observe.inspect_run(str(project), "r")["observations"][0]["process"]
        assert fresh["heartbeatStale"] is False and fresh["childPid"] == child
        supervisor.send_signal(signal.SIGKILL)
        supervisor.communicate(timeout=10)
        assert pid_alive(child), "killing the supervisor does not kill the child"
        recover_lock_of_dead_owner(project, supervisor.pid)
        later = time.time() + 6
        timeutil.set_clock(lambda: later)
        observation = observe.inspect_run(str(project), "r")["observations"][0]
        timeutil.set_clock(None)
        process = observation["process"]
        assert process["heartbeatStale"] is True and process["status"] == "running"
        assert process["receiptReady"] is False and process["supervisor"] == attempt["backend"]
        assert observation["hint"].startswith("Inspect this exact backend and attempt.")
        code, result, _ = cli(project, "collect", "r", "t", input_value=identity(attempt))
        assert result["error"] == "Nexus: Process receipt is not ready; inspect the original owner."
        reconcile = {**identity(attempt), "outcome": "failed", "ownerStopped": True, "summary": "Supervisor died."}
        code, result, _ = cli(project, "reconcile", "r", "t", input_value=reconcile)
        assert result["error"] == (
            "Nexus: The original child may still be alive; inspect its effects before stopped-owner reconciliation."
        )
    finally:
        kill_quietly(child)
    wait_for(lambda: not pid_alive(child), what="the orphaned child to stop")
    code, result, _ = cli(project, "reconcile", "r", "t", input_value=reconcile)
    assert code == 0, result
    task = state(project, "r")["tasks"][0]
    assert len(task["attempts"]) == 1, "never relaunched automatically"
    assert task["attempts"][0]["execution"] == "failed"
    code, result, _ = cli(project, "collect", "r", "t", input_value=identity(attempt))
    assert result["error"] == "Nexus: Process receipt is not ready; inspect the original owner."


def recover_lock_of_dead_owner(root: Path, owner_pid: int) -> None:
    """A SIGKILL that lands during a heartbeat leaves writer.lock behind: recover it by the book."""
    lock = observe.inspect_run(str(root))["lock"]
    if lock is None:
        return
    assert lock["owner"]["pid"] == owner_pid
    observation = {"expectedHash": lock["hash"], "ownerStopped": True, "note": "The supervisor was SIGKILLed."}
    code, result, err = cli(root, "recover-lock", input_value=observation)
    assert code == 0, (result, err)


# ----------------------------------------------------------------- collect refusals


def rewrite_state(root: Path, run_id: str, change: Any) -> None:
    path = root / ".bmad-plus" / "nexus" / "runs" / f"{run_id}.json"
    envelope = canonical.parse(path.read_text(encoding="utf-8"))
    change(envelope["run"])
    envelope["sha256"] = canonical.sha256_json(envelope["run"])
    path.write_text(canonical.pretty(envelope) + "\n", encoding="utf-8")


def test_collect_refusals(project: Path) -> None:
    """Through the core API (the CLI prints the same messages; one is checked through it)."""
    root = str(project)
    host = {"kind": "host", "id": "me", "sessionId": "s"}
    host_task = command_task("h", "ok")
    del host_task["execution"]
    create(project, "r", [command_task("a", "ok"), command_task("b", "ok"), command_task("c", "ok"), host_task])

    def launch(task: str) -> dict[str, Any]:
        process.launch_task(root, "r", task, {})
        return latest(project, "r", task)

    def refused(task: str, value: Any) -> str:
        with pytest.raises(NexusError) as error:
            process.collect_task(root, "r", task, value)
        return error.value.message

    attempt = launch("a")
    ident = identity(attempt)
    assert refused("a", {**ident, "attemptId": "0" * 8}) == "Nexus: Stale or missing attempt identity."
    foreign = {**ident, "backend": {**ident["backend"], "sessionId": "someone-else"}}
    assert refused("a", foreign) == "Nexus: Backend handle/session does not own this attempt."
    assert refused("a", {**ident, "backend": {**ident["backend"], "ownerPid": 0}}) == (
        "Nexus: Process backend needs its actual supervisor PID."
    )
    # A receipt whose bytes no longer match its hash.
    path = project / ".bmad-plus" / "nexus" / "runs" / "r.json"
    original = path.read_bytes()
    rewrite_state(project, "r", lambda run: run["tasks"][0]["attempts"][0]["process"]["receipt"].update(exitCode=5))
    assert refused("a", ident) == "Nexus: Foreign or corrupt process receipt."
    path.write_bytes(original)
    # A result changed after the receipt.
    (project / "out" / "a" / "result.txt").write_text("changed\n")
    assert refused("a", ident) == (
        "Nexus: Process result changed before collection; reconcile and create a fresh attempt."
    )
    (project / "out" / "a" / "result.txt").write_text("ok\n")
    process.collect_task(root, "r", "a", ident)
    assert refused("a", ident) == "Nexus: This process receipt was already collected."
    before = path.read_bytes()
    code, result, _ = cli(project, "collect", "r", "a", input_value=ident)
    assert code == 1 and result["error"] == "Nexus: This process receipt was already collected."
    assert path.read_bytes() == before

    # A completed receipt with a cancellation recorded afterwards is ambiguous.
    b_attempt = launch("b")
    engine.cancel_task(root, "r", "b", {**identity(b_attempt), "reason": "Too late."})
    assert refused("b", identity(b_attempt)) == "Nexus: Ambiguous execution cannot be collected as completed."

    # A reconciled attempt cannot take a late receipt.
    c_attempt = launch("c")
    reconcile = {**identity(c_attempt), "outcome": "failed", "ownerStopped": True, "summary": "Rejected by hand."}
    engine.reconcile_attempt(root, "r", "c", reconcile)
    assert refused("c", identity(c_attempt)) == (
        "Nexus: A reconciled attempt cannot be overwritten by a late process receipt."
    )

    # A host attempt has no process receipt.
    engine.start_task(root, "r", "h", {"backend": host})
    h_attempt = latest(project, "r", "h")
    assert refused("h", {"attemptId": h_attempt["id"], "backend": host}) == (
        "Nexus: collect requires an owned process attempt."
    )


# ----------------------------------------------------------------- the codex-exec adapter


def test_codex_exec_completed(project: Path) -> None:
    task = codex_task(
        "cx", "completed", sandbox="workspace-write", model="gpt-test.1", instructions=["briefs/common.md"]
    )
    create(project, "r", [task])
    stored = state(project, "r")["plan"]["tasks"][0]["execution"]
    assert stored["args"] == [
        "-a",
        "never",
        "exec",
        "--json",
        "--color",
        "never",
        "--sandbox",
        "workspace-write",
        "--skip-git-repo-check",
        "--ignore-user-config",
        "--model",
        "gpt-test.1",
        "-",
    ]
    assert stored["blockedExitCodes"] == [] and list(stored)[-2:] == ["sandbox", "model"]
    code, attempt, receipt = launched(project, "r", "cx")
    assert code == 0, receipt
    assert receipt["outcome"] == "completed"
    assert receipt["provider"] == {
        "threadId": "thread-1",
        "completed": True,
        "failed": False,
        "usage": {"output_tokens": 7, "input_tokens": 120, "cached_input_tokens": 64},
        "concreteModel": None,
        "monetaryCost": None,
    }
    assert list(receipt["provider"]["usage"]) == ["output_tokens", "input_tokens", "cached_input_tokens"]
    environment = receipt["environment"]
    assert environment["policy"] == "local-codex-auth-paths-v1"
    assert ("HOME" in environment["inheritedKeys"]) == ("HOME" in os.environ)
    if "HOME" in os.environ:
        assert f"home={os.environ['HOME']} " in receipt["output"]["stderr"]["text"]
    assert "args=-a never exec --json" in receipt["output"]["stderr"]["text"]
    assert cli(project, "collect", "r", "cx", input_value=identity(attempt))[0] == 0
    assert cli(project, "verify", "r", "cx")[0] == 0


@pytest.mark.parametrize(
    ("scenario", "outcome", "provider_problem", "completed", "failed"),
    [
        ("approval", "blocked", None, False, True),
        ("turn-failed", "failed", None, False, True),
        ("garbage", "failed", "Invalid Codex JSONL.", None, None),
        ("array", "failed", "Invalid Codex event object.", None, None),
        ("no-turn", "failed", None, False, False),
        ("no-thread", "failed", None, True, False),
    ],
)
def test_codex_exec_outcomes(
    project: Path, scenario: str, outcome: str, provider_problem: str | None, completed: Any, failed: Any
) -> None:
    create(project, "r", [codex_task("c1", scenario)])
    code, attempt, receipt = launched(project, "r", "c1")
    assert code == 1
    assert receipt["outcome"] == outcome
    if provider_problem:
        assert receipt["provider"] == {"problem": provider_problem}
    else:
        assert receipt["provider"]["completed"] is completed and receipt["provider"]["failed"] is failed
    cli(project, "collect", "r", "c1", input_value=identity(attempt))
    assert latest(project, "r", "c1")["execution"] == outcome


# ----------------------------------------------------------------- the reference-written process fixture


def test_reference_process_fixture_through_our_inspect_and_collect(tmp_path: Path) -> None:
    from fixture_tools import capture_time_ms, recorded_output, relocate, substitute_root

    root = relocate("process", tmp_path)
    captured = capture_time_ms("process", "inspect-proc.json")
    timeutil.set_clock(lambda: captured / 1000)
    ours = observe.inspect_run(str(root), "proc")
    timeutil.set_clock(None)
    reference = substitute_root(
        json.loads(recorded_output("process", "inspect-proc.json")), "/home/operator/projects/process", str(root)
    )
    for mine, theirs in zip(ours["observations"], reference["observations"], strict=True):
        if mine["taskId"] == "p-codex":
            continue  # its plan names the reference machine's fake-codex path
        assert mine.get("process") == theirs.get("process"), mine["taskId"]
        assert mine["hint"] == theirs["hint"], mine["taskId"]
    # Our collect accepts the reference's checksummed receipt of p-ready...
    run = state(root, "proc")
    ready = next(t for t in run["tasks"] if t["id"] == "p-ready")["attempts"][-1]
    code, result, err = cli(root, "collect", "proc", "p-ready", input_value=identity(ready))
    assert code == 0, (result, err)
    assert latest(root, "proc", "p-ready")["execution"] == "completed"
    assert cli(root, "verify", "proc", "p-ready")[0] == 0
    # ...and the crashed launch (status starting, supervisor gone) has nothing to collect, but
    # can be reconciled since its supervisor is not alive.
    crashed = next(t for t in run["tasks"] if t["id"] == "p-crashed")["attempts"][-1]
    code, result, _ = cli(root, "collect", "proc", "p-crashed", input_value=identity(crashed))
    assert result["error"] == "Nexus: Process receipt is not ready; inspect the original owner."
    if not pid_alive(crashed["backend"]["ownerPid"]):
        reconcile = {**identity(crashed), "outcome": "cancelled", "ownerStopped": True, "summary": "Never spawned."}
        code, result, _ = cli(root, "reconcile", "proc", "p-crashed", input_value=reconcile)
        assert code == 0, result


def test_launch_json_error_shape_for_a_missing_run(project: Path) -> None:
    done = subprocess.run(
        [*__import__("process_support").CLI, "launch", "nope", "t", "--json", "-d", str(project)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    error = json.loads(done.stdout)
    assert error["status"] == "error" and error["schemaVersion"] == 1


# ----------------------------------------------------------------- the execution contract (SPEC 4.3)


@pytest.mark.parametrize(
    ("execution", "message"),
    [
        (None, "execution must be a command or codex-exec object."),
        ([], "execution must be a command or codex-exec object."),
        ({"adapter": "shell"}, "Unsupported execution adapter."),
        (
            {"adapter": "command", "shell": True},
            "Unknown execution field; shell, environment and arbitrary Codex flags are unsupported.",
        ),
        (
            {"adapter": "codex-exec", "args": []},
            "Unknown execution field; shell, environment and arbitrary Codex flags are unsupported.",
        ),
        (
            {"adapter": "command", "env": {}},
            "Unknown execution field; shell, environment and arbitrary Codex flags are unsupported.",
        ),
        (
            {"adapter": "command", "input": "briefs/t.md", "outputLimitBytes": 1023, "args": []},
            "execution outputLimitBytes must be between 1024 and 2097152.",
        ),
        (
            {"adapter": "command", "input": "briefs/t.md", "args": "x"},
            "execution args must be a bounded literal argument array.",
        ),
        (
            {"adapter": "command", "input": "briefs/t.md", "args": [], "blockedExitCodes": [0]},
            "blockedExitCodes must contain explicit nonzero exit codes between 1 and 255.",
        ),
        (
            {"adapter": "command", "input": "briefs/t.md", "args": [], "blockedExitCodes": [True]},
            "blockedExitCodes must contain explicit nonzero exit codes between 1 and 255.",
        ),
        (
            {"adapter": "codex-exec", "input": "briefs/t.md", "sandbox": "danger-full-access"},
            "codex-exec supports read-only or workspace-write only.",
        ),
        (
            {"adapter": "codex-exec", "input": "briefs/t.md", "model": "--yolo"},
            "Codex model must be an explicit bounded model identifier.",
        ),
    ],
)
def test_execution_contract_refusals(project: Path, execution: Any, message: str) -> None:
    write(project / "briefs" / "t.md", "brief\n")
    if isinstance(execution, dict) and "input" in execution:
        execution = {
            "command": "/bin/sh" if execution["adapter"] == "command" else str(project / "tools" / "fake-codex"),
            **execution,
        }
    task = command_task("t", "ok")
    task["execution"] = execution
    with pytest.raises(NexusError) as refused:
        engine.create_run(str(project), {"id": "r", "tasks": [task]})
    assert refused.value.message == "Nexus: " + message
    assert not (project / ".bmad-plus" / "nexus" / "runs" / "r.json").exists()


def test_worker_executable_inside_a_write_scope_is_refused(project: Path) -> None:
    write(project / "out" / "t" / "tool.sh", "exit 0\n", 0o700)
    task = command_task("t", "ok", execution={"command": str(project / "out" / "t" / "tool.sh"), "args": []})
    with pytest.raises(NexusError) as refused:
        create(project, "r", [task])
    assert refused.value.message == "Nexus: Worker executable lies in a worker write scope."
    task = command_task("t", "ok", execution={"args": ["workers/worker.sh", "t", "ok"], "resources": []})
    with pytest.raises(NexusError) as refused:
        create(project, "r", [task])
    assert refused.value.message == "Nexus: Execution file argument must be a protected resource: workers/worker.sh"


# ----------------------------------------------------------------- ownership replaced during a launch


def take_over(root: Path, run_id: str, task_id: str) -> dict[str, Any]:
    """Another backend session takes the attempt over (what the reference's suite does by
    replacing the state); returns its identity."""
    taken: dict[str, Any] = {}

    def replace_owner(_root: str, run: Run) -> None:
        attempt = next(t for t in run["tasks"] if t["id"] == task_id)["attempts"][-1]
        attempt["backend"] = {**attempt["backend"], "sessionId": "another-session"}
        taken.update(identity(attempt))

    engine.mutate(str(root), run_id, replace_owner, patient=True)  # patient: heartbeats hold the lock briefly
    return taken


def assert_no_receipt_offered(root: Path, run_id: str, taken: dict[str, Any]) -> None:
    assert not (root / ".bmad-plus" / "nexus" / "receipts").exists()
    observation = observe.inspect_run(str(root), run_id)["observations"][0]
    assert observation["process"]["receiptReady"] is False
    assert "recoverableReceipt" not in observation["process"]
    assert "ollect" not in observation["hint"]
    code, result, _ = cli_retrying(root, "collect", run_id, "t", input_value=taken)
    assert (code, result["error"]) == (1, "Nexus: Process receipt is not ready; inspect the original owner.")


def test_a_launch_whose_ownership_was_replaced_keeps_no_receipt(project: Path) -> None:
    create(project, "r", [command_task("t", "slow")])
    supervisor = spawn_cli(project, "launch", "r", "t")
    try:
        wait_running(project, "r", "t")
        taken = take_over(project, "r", "t")
        out, err = supervisor.communicate(timeout=60)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
            supervisor.wait()
    assert supervisor.returncode == 1, (out, err)
    # The reference's words, and nothing kept that collect would refuse.
    assert json.loads(out)["error"] == "Nexus: Backend handle/session does not own this attempt."
    assert "collect" not in out
    assert "receipt" not in latest(project, "r", "t")["process"]
    assert_no_receipt_offered(project, "r", taken)


def test_a_receipt_save_that_loses_the_lock_to_a_takeover_keeps_nothing(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(project, "r", [command_task("t", "ok")])
    original = engine.mutate
    taken: dict[str, Any] = {}

    def takeover_then_busy(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("patience") == process.RECEIPT_PATIENCE_SECONDS:  # the receipt's save
            taken.update(take_over(project, "r", "t"))
            raise engine.WriterBusy("Nexus: Another mutation owns writer.lock; inspect before explicit recovery.")
        return original(*args, **kwargs)

    monkeypatch.setattr(process, "mutate", takeover_then_busy)
    with pytest.raises(NexusError) as refused:
        process.launch_task(str(project), "r", "t", {})
    monkeypatch.setattr(process, "mutate", original)
    assert refused.value.message == "Nexus: Backend handle/session does not own this attempt."
    assert_no_receipt_offered(project, "r", taken)


def test_a_kept_receipt_is_no_longer_offered_once_another_owner_took_the_attempt(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(project, "r", [command_task("t", "ok")])
    original = engine.mutate

    def busy_receipt_save(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("patience") == process.RECEIPT_PATIENCE_SECONDS:
            raise engine.WriterBusy("Nexus: Another mutation owns writer.lock; inspect before explicit recovery.")
        return original(*args, **kwargs)

    monkeypatch.setattr(process, "mutate", busy_receipt_save)
    with pytest.raises(NexusError, match="collect accepts this exact receipt"):
        process.launch_task(str(project), "r", "t", {})
    monkeypatch.setattr(process, "mutate", original)
    attempt = latest(project, "r", "t")
    kept = f".bmad-plus/nexus/receipts/r/{attempt['id']}.json"
    assert observe.inspect_run(str(project), "r")["observations"][0]["process"]["recoverableReceipt"] == kept
    taken = take_over(project, "r", "t")
    observation = observe.inspect_run(str(project), "r")["observations"][0]
    assert observation["process"]["receiptReady"] is False
    assert "recoverableReceipt" not in observation["process"]
    assert kept not in observation["hint"]
    code, result, _ = cli(project, "collect", "r", "t", input_value=taken)
    assert (code, result["error"]) == (1, "Nexus: Foreign or corrupt process receipt.")
    assert (project / kept).exists()  # never deleted: it is evidence
