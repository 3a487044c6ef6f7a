"""Every object of every state file our CLI writes carries exactly the keys of SPEC section 3, in
its order: a strict reader of the reference's schema accepts our runs (issue 11).

The lifecycles are built here through the `nexus` CLI (host, process, codex, verification
pass/fail/retry, preflight receipts, cancellation, reconciliation, lock recovery), then every
run file and lock-recovery receipt is walked object by object against the table below, which
is written from SPEC section 3 (not from our code)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from process_support import (
    cli,
    codex_task,
    command_task,
    identity,
    latest,
    make_project,
    spawn_cli,
    wait_running,
    write,
)
from project_kit import HOST, task_def

from nexus_core.state import canonical, store

# ----------------------------------------------------------------- SPEC section 3, as a table

# A key ending in "?" may be absent; present keys must come in the table's order, nothing else.
ENVELOPE = ["schemaVersion", "sha256", "run"]  # 2.1
RUN = [  # 3.1
    "schemaVersion",
    "id",
    "project",
    "frameworkVersion",
    "createdAt",
    "updatedAt",
    "sequence",
    "planHash",
    "plan",
    "tasks",
]
PLAN = ["id", "maxParallel", "config", "tasks"]  # 3.2
TASK_DEFINITION = [  # 3.3
    "id",
    "objective",
    "dependsOn",
    "scope",
    "artifacts",
    "resources",
    "checks",
    "maxAttempts",
    "idempotent",
    "deadlineMs",
    "acceptance",
    "authorizations",
    "execution?",
    "resourceHashes",
]
CHECK_DEFINITION = ["id", "command", "commandHash", "args", "cwd", "timeoutMs", "resources"]  # 3.4
EXECUTION_DEFINITION = [  # 3.4b
    "adapter",
    "command",
    "commandHash",
    "args",
    "input",
    "instructions",
    "resources",
    "cwd",
    "outputLimitBytes",
    "blockedExitCodes",
    "sandbox?",
    "model?",
]
TASK_RECORD = ["id", "integration", "attempts", "acceptedAt?", "integrationReceipt?"]  # 3.5
ATTEMPT_BEGIN = [  # 3.6, created by begin
    "id",
    "runId",
    "taskId",
    "parentAttemptId",
    "backend",
    "execution",
    "verification",
    "verificationRounds",
    "verificationHistory",
    "reconciliations",
    "cancellation",
    "startedAt",
    "observedAt",
    "endedAt",
    "deadline",
    "baseline",
    "authorizations",
    "observations",
    "uncheckedScope",
]
ATTEMPT_LATER = {"process", "resultHashes", "blockedRequest", "reconciliation"}  # 3.6, order by history
BASELINE = [  # 3.6a
    "repository",
    "revision",
    "framework",
    "scopeHashes",
    "artifactHashes",
    "resourceHashes",
    "config",
]
FRAMEWORK = ["version", "runtimeHash", "installManifestHash", "nodeVersion", "platform", "arch"]  # 3.6a
HOST_BACKEND = ["kind", "id", "sessionId", "capabilities"]  # 3.7
PROCESS_BACKEND = ["kind", "id", "sessionId", "hostname", "ownerPid", "capabilities"]  # 3.7
CAPABILITIES = ["launch", "terminate", "inspect"]  # 3.7
PENDING_VERIFICATION = ["status", "checks"]  # 3.8
VERIFICATION = [  # 3.8; problem and endedAt are set at finalization
    "id",
    "attemptId",
    "status",
    "startedAt",
    "frameworkVersion",
    "environment",
    "owner",
    "revision",
    "scopeHashes",
    "artifactHashes",
    "resourceHashes",
    "checks",
    "problem?",
    "endedAt?",
]
CHECK_ENVIRONMENT = ["policy", "values", "sha256"]  # 3.8 / 5.0.3
VERIFICATION_OWNER = ["pid", "hostname"]  # 3.8
RECONCILIATION = [  # 3.9
    "at",
    "summary",
    "outcome",
    "ownerStopped",
    "retrySafe",
    "observedHashes",
    "evidenceClass",
    "independentlyVerified",
]
HOST_OBSERVATION = ["at", "outcome", "summary", "exitCode", "evidenceClass", "independentlyVerified"]  # 3.10
PROCESS_OBSERVATION = [  # 3.10
    "at",
    "outcome",
    "evidenceClass",
    "receiptHash",
    "independentlyVerified",
    "summary",
]
CANCELLATION_NONE = ["status"]  # 3.11
CANCELLATION_REQUESTED = ["status", "requestedAt", "reason", "termination", "processesSignalled"]  # 3.11
CANCELLATION_RECONCILED = [  # 3.11: the requested form (or none) with status replaced, then two keys
    "status",
    "requestedAt?",
    "reason?",
    "termination?",
    "processesSignalled?",
    "reconciledAt",
    "resolvedOutcome",
]
PROCESS_OPERATION = [  # 3.12
    "status",
    "owner",
    "childPid",
    "heartbeatAt",
    "collectedAt",
    "runtimeHash",
    "receipt?",
    "receiptHash?",
]
PROCESS_RECEIPT = [  # 3.12a, normal path; ends with resultHashes or snapshotError
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
]
INTERRUPTED_RECEIPT = [  # 3.12a, interrupted path
    "schemaVersion",
    "attemptId",
    "backend",
    "planHash",
    "outcome",
    "error",
    "endedAt",
    "evidenceClass",
    "independentlyVerified",
]
PROCESS_OUTPUT = ["stdout", "stderr"]  # 3.12a
OUTPUT_STREAM = ["text", "base64", "sha256", "capturedBytes", "observedBytes", "complete", "hashScope"]
EXECUTION_ENVIRONMENT = ["policy", "inheritedKeys", "credentialValuesRecorded"]  # 3.12a
CODEX_PROVIDER = ["threadId", "completed", "failed", "usage", "concreteModel", "monetaryCost"]  # 6.5
PROVIDER_PROBLEM = ["problem"]  # 6.5
USAGE_KEYS = {"input_tokens", "cached_input_tokens", "output_tokens"}  # 6.5, in the event's order
CHECK_RECEIPT = [  # 3.13
    "id",
    "attemptId",
    "command",
    "commandHash",
    "args",
    "cwd",
    "timeoutMs",
    "environment",
    "startedAt",
    "endedAt",
    "exitCode",
    "signal",
    "error",
    "timedOut",
    "stdout",
    "stderr",
    "outputTruncated",
    "outputHash",
    "evidenceClass",
    "termination",
    "artifactHashes",
    "scopeSnapshotHash",
]
PREFLIGHT_RECEIPT = ["id", "attemptId", "exitCode", "error", "evidenceClass", "startedAt", "endedAt"]  # 3.13
INTEGRATION_RECEIPT = ["attemptId", "artifactHashes", "action", "gitOperation"]  # 3.14
LOCK_OWNER = ["token", "pid", "hostname", "createdAt"]  # 3.15
LOCK_SNAPSHOT = ["hash", "owner", "recovery"]  # 3.16
LOCK_RECOVERY_RECEIPT = ["schemaVersion", "observed", "note", "ownerStopped", "recoveredAt", "evidenceClass"]  # 3.17


# ----------------------------------------------------------------- the walk


class Walk:
    def __init__(self) -> None:
        self.seen: dict[str, int] = {}

    def keys(self, value: Any, table: list[str], where: str) -> None:
        assert isinstance(value, dict), f"{where}: not an object"
        expected = [k.rstrip("?") for k in table if not k.endswith("?") or k.rstrip("?") in value]
        assert list(value) == expected, f"{where}: keys {list(value)} != SPEC {expected}"
        kind = re.sub(r"\[\d+\]", "", where).split(".")[-1]
        self.seen[kind] = self.seen.get(kind, 0) + 1

    def hash_map(self, value: Any, where: str, nullable: bool = False) -> None:
        assert isinstance(value, dict), f"{where}: not a map"
        for key, item in value.items():
            assert isinstance(key, str) and (isinstance(item, str) or (nullable and item is None)), where

    def envelope(self, value: Any, where: str) -> None:
        self.keys(value, ENVELOPE, where)
        self.run(value["run"], f"{where}.run")

    def run(self, run: Any, where: str) -> None:
        self.keys(run, RUN, where)
        self.keys(run["plan"], PLAN, f"{where}.plan")
        definitions = {}
        for index, definition in enumerate(run["plan"]["tasks"]):
            at = f"{where}.plan.tasks[{index}]"
            self.keys(definition, TASK_DEFINITION, at)
            for number, check in enumerate(definition["checks"]):
                self.keys(check, CHECK_DEFINITION, f"{at}.checks[{number}]")
            if "execution" in definition:
                self.execution(definition["execution"], f"{at}.execution")
            self.hash_map(definition["resourceHashes"], f"{at}.resourceHashes")
            definitions[definition["id"]] = definition
        for index, task in enumerate(run["tasks"]):
            at = f"{where}.tasks[{index}]"
            self.keys(task, TASK_RECORD, at)
            if "integrationReceipt" in task:
                self.keys(task["integrationReceipt"], INTEGRATION_RECEIPT, f"{at}.integrationReceipt")
                self.hash_map(task["integrationReceipt"]["artifactHashes"], f"{at}.integrationReceipt.artifactHashes")
            for number, attempt in enumerate(task["attempts"]):
                self.attempt(attempt, f"{at}.attempts[{number}]")

    def execution(self, execution: Any, where: str) -> None:
        table = EXECUTION_DEFINITION
        if execution.get("adapter") == "command":
            table = [k for k in table if not k.endswith("?")]
        else:
            table = [k.rstrip("?") for k in table]
        self.keys(execution, table, where)

    def backend(self, backend: Any, where: str) -> None:
        self.keys(backend, PROCESS_BACKEND if backend.get("kind") == "process" else HOST_BACKEND, where)
        self.keys(backend["capabilities"], CAPABILITIES, f"{where}.capabilities")

    def attempt(self, attempt: Any, where: str) -> None:
        keys = list(attempt)
        assert keys[: len(ATTEMPT_BEGIN)] == ATTEMPT_BEGIN, f"{where}: begin keys {keys}"
        later = keys[len(ATTEMPT_BEGIN) :]
        assert set(later) <= ATTEMPT_LATER, f"{where}: keys beyond SPEC 3.6: {set(later) - ATTEMPT_LATER}"
        if "process" in attempt:
            assert later[0] == "process", f"{where}: process must follow uncheckedScope"
        self.seen["attempt"] = self.seen.get("attempt", 0) + 1
        self.backend(attempt["backend"], f"{where}.backend")
        self.verification(attempt["verification"], f"{where}.verification")
        for number, old in enumerate(attempt["verificationHistory"]):
            self.verification(old, f"{where}.verificationHistory[{number}]")
        for number, reconciliation in enumerate(attempt["reconciliations"]):
            self.reconciliation(reconciliation, f"{where}.reconciliations[{number}]")
        if "reconciliation" in attempt:
            self.reconciliation(attempt["reconciliation"], f"{where}.reconciliation")
        self.cancellation(attempt["cancellation"], f"{where}.cancellation")
        baseline = attempt["baseline"]
        self.keys(baseline, BASELINE, f"{where}.baseline")
        self.keys(baseline["framework"], FRAMEWORK, f"{where}.baseline.framework")
        self.hash_map(baseline["scopeHashes"], f"{where}.baseline.scopeHashes")
        self.hash_map(baseline["artifactHashes"], f"{where}.baseline.artifactHashes", nullable=True)
        self.hash_map(baseline["resourceHashes"], f"{where}.baseline.resourceHashes")
        for number, observation in enumerate(attempt["observations"]):
            table = PROCESS_OBSERVATION if observation.get("evidenceClass") == "owned-process-result" else None
            self.keys(observation, table or HOST_OBSERVATION, f"{where}.observations[{number}]")
        if "resultHashes" in attempt:
            self.hash_map(attempt["resultHashes"], f"{where}.resultHashes")
        if "process" in attempt:
            self.process(attempt["process"], f"{where}.process")

    def verification(self, verification: Any, where: str) -> None:
        if verification.get("status") == "pending" and "id" not in verification:
            self.keys(verification, PENDING_VERIFICATION, where)
            return
        self.keys(verification, VERIFICATION, where)
        assert ("problem" in verification) == ("endedAt" in verification), where
        self.keys(verification["environment"], CHECK_ENVIRONMENT, f"{where}.environment")
        self.keys(verification["owner"], VERIFICATION_OWNER, f"{where}.owner")
        self.hash_map(verification["scopeHashes"], f"{where}.scopeHashes")
        self.hash_map(verification["artifactHashes"], f"{where}.artifactHashes", nullable=True)
        for number, receipt in enumerate(verification["checks"]):
            at = f"{where}.checks[{number}]"
            if receipt.get("evidenceClass") == "runtime-preflight":
                self.keys(receipt, PREFLIGHT_RECEIPT, at)
                continue
            self.keys(receipt, CHECK_RECEIPT, at)
            self.keys(receipt["environment"], CHECK_ENVIRONMENT, f"{at}.environment")

    def reconciliation(self, reconciliation: Any, where: str) -> None:
        self.keys(reconciliation, RECONCILIATION, where)
        self.hash_map(reconciliation["observedHashes"], f"{where}.observedHashes")

    def cancellation(self, cancellation: Any, where: str) -> None:
        table = {"none": CANCELLATION_NONE, "requested": CANCELLATION_REQUESTED}.get(cancellation.get("status"))
        self.keys(cancellation, table or CANCELLATION_RECONCILED, where)
        if table is None:
            present = [k for k in ("requestedAt", "reason", "termination", "processesSignalled") if k in cancellation]
            assert present in ([], ["requestedAt", "reason", "termination", "processesSignalled"]), where

    def process(self, operation: Any, where: str) -> None:
        self.keys(operation, PROCESS_OPERATION, where)
        self.backend(operation["owner"], f"{where}.owner")
        assert ("receipt" in operation) == ("receiptHash" in operation), where
        if "receipt" not in operation:
            return
        receipt = operation["receipt"]
        at = f"{where}.receipt"
        if receipt.get("evidenceClass") == "launch-interrupted":
            self.keys(receipt, INTERRUPTED_RECEIPT, at)
            self.backend(receipt["backend"], f"{at}.backend")
            return
        last = "resultHashes" if "resultHashes" in receipt else "snapshotError"
        self.keys(receipt, [*PROCESS_RECEIPT, last], at)
        self.backend(receipt["backend"], f"{at}.backend")
        self.execution(receipt["execution"], f"{at}.execution")
        self.keys(receipt["environment"], EXECUTION_ENVIRONMENT, f"{at}.environment")
        self.keys(receipt["output"], PROCESS_OUTPUT, f"{at}.output")
        for stream in PROCESS_OUTPUT:
            self.keys(receipt["output"][stream], OUTPUT_STREAM, f"{at}.output.{stream}")
        provider = receipt["provider"]
        if provider is not None:
            self.keys(provider, PROVIDER_PROBLEM if "problem" in provider else CODEX_PROVIDER, f"{at}.provider")
            if "usage" in provider and provider["usage"] is not None:
                assert set(provider["usage"]) <= USAGE_KEYS, f"{at}.provider.usage"
        if last == "resultHashes":
            self.hash_map(receipt["resultHashes"], f"{at}.resultHashes")

    def lock_recovery_receipt(self, receipt: Any, where: str) -> None:
        self.keys(receipt, LOCK_RECOVERY_RECEIPT, where)
        self.keys(receipt["observed"], LOCK_SNAPSHOT, f"{where}.observed")
        self.keys(receipt["observed"]["owner"], LOCK_OWNER, f"{where}.observed.owner")


# ----------------------------------------------------------------- the lifecycles


def ok(result: tuple[int, Any, str]) -> Any:
    code, value, err = result
    assert code == 0, (value, err)
    return value


def host_input(attempt: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"attemptId": attempt["id"], "backend": HOST, **extra}


def build_lifecycles(root: Path) -> None:
    """Every kind of stored object, written by the CLI."""
    host_tasks = [
        task_def("h-ok"),
        task_def("h-retry"),
        task_def("h-cancel"),
        task_def("h-requested"),
        task_def("h-blocked"),
        task_def(
            "h-preflight",  # the first check changes the scope: the second gets a preflight receipt
            checks=[
                {"id": "touch", "command": "/bin/sh", "args": ["-c", "echo x > out/h-preflight/extra.txt"]},
                {"id": "then", "command": "/bin/true", "args": []},
            ],
        ),
    ]
    plan_file = root.parent / "host-plan.json"
    host_plan = {"id": "host", "maxParallel": 8, "config": {"k": "v", "n": 1}, "tasks": host_tasks}
    plan_file.write_text(json.dumps(host_plan))
    ok(cli(root, "create", "--plan", str(plan_file)))

    def start(task: str) -> dict[str, Any]:
        ok(cli(root, "start", "host", task, input_value={"backend": HOST}))
        return latest(root, "host", task)

    attempt = start("h-ok")
    write(root / "out" / "h-ok" / "result.txt", "ok\n")
    ok(cli(root, "record", "host", "h-ok", input_value=host_input(attempt, outcome="completed", summary="done")))
    ok(cli(root, "verify", "host", "h-ok"))
    ok(cli(root, "accept", "host", "h-ok"))

    attempt = start("h-retry")
    write(root / "out" / "h-retry" / "result.txt", "not yet\n")
    ok(cli(root, "record", "host", "h-retry", input_value=host_input(attempt, outcome="completed", summary="x")))
    assert cli(root, "verify", "host", "h-retry")[0] == 1  # a failed verification
    ok(cli(root, "retry", "host", "h-retry", input_value={"backend": HOST}))
    attempt = latest(root, "host", "h-retry")
    write(root / "out" / "h-retry" / "result.txt", "ok\n")
    failed = host_input(attempt, outcome="failed", summary="no", exitCode=2)
    ok(cli(root, "record", "host", "h-retry", input_value=failed))

    attempt = start("h-cancel")
    ok(cli(root, "cancel", "host", "h-cancel", input_value=host_input(attempt, reason="Not needed.")))
    reconcile = host_input(attempt, outcome="cancelled", ownerStopped=True, summary="stopped", retrySafe=True)
    ok(cli(root, "reconcile", "host", "h-cancel", input_value=reconcile))

    attempt = start("h-requested")  # left with its cancellation requested
    ok(cli(root, "cancel", "host", "h-requested", input_value=host_input(attempt, reason="Wait.")))

    attempt = start("h-blocked")
    ok(cli(root, "record", "host", "h-blocked", input_value=host_input(attempt, outcome="blocked", summary="ask")))
    reconcile = host_input(attempt, outcome="failed", ownerStopped=True, summary="gave up")
    ok(cli(root, "reconcile", "host", "h-blocked", input_value=reconcile))

    attempt = start("h-preflight")
    write(root / "out" / "h-preflight" / "result.txt", "ok\n")
    ok(cli(root, "record", "host", "h-preflight", input_value=host_input(attempt, outcome="completed", summary="d")))
    assert cli(root, "verify", "host", "h-preflight")[0] == 1

    process_tasks = [
        command_task("p-ok", "ok"),
        command_task("p-fail", "fail"),
        command_task("p-blocked", "blocked", execution={"blockedExitCodes": [77]}),
        command_task("p-slow", "slow"),
        codex_task("cx", "completed", sandbox="workspace-write", model="gpt-test"),
        codex_task("cx-garbage", "garbage"),
    ]
    from process_support import create

    create(root, "proc", process_tasks)
    ok(cli(root, "launch", "proc", "p-ok"))
    ok(cli(root, "collect", "proc", "p-ok", input_value=identity(latest(root, "proc", "p-ok"))))
    ok(cli(root, "verify", "proc", "p-ok"))
    ok(cli(root, "accept", "proc", "p-ok"))
    for task in ("p-fail", "p-blocked", "cx-garbage"):
        assert cli(root, "launch", "proc", task)[0] == 1
        cli(root, "collect", "proc", task, input_value=identity(latest(root, "proc", task)))
    ok(cli(root, "launch", "proc", "cx"))
    ok(cli(root, "collect", "proc", "cx", input_value=identity(latest(root, "proc", "cx"))))
    supervisor = spawn_cli(root, "launch", "proc", "p-slow")
    try:
        attempt = wait_running(root, "proc", "p-slow")
        cancel = {**identity(attempt), "reason": "Postponed."}
        for _ in range(100):  # a heartbeat may hold writer.lock for an instant
            code, result, _ = cli(root, "cancel", "proc", "p-slow", input_value=cancel)
            if code == 0 or "owns writer.lock" not in str(result):
                break
        assert code == 0, result
        supervisor.communicate(timeout=30)
    finally:
        if supervisor.poll() is None:
            supervisor.kill()
    attempt = latest(root, "proc", "p-slow")
    reconcile = {**identity(attempt), "outcome": "cancelled", "ownerStopped": True, "summary": "cancelled"}
    ok(cli(root, "reconcile", "proc", "p-slow", input_value=reconcile))

    # Lock recovery: a writer.lock left by a process that has exited.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    owner = {"token": "00000000-0000-4000-8000-000000000000", "pid": dead.pid, "hostname": os.uname().nodename}
    owner["createdAt"] = "2026-01-01T00:00:00.000Z"
    lock = root / ".bmad-plus" / "nexus" / "writer.lock"
    lock.write_text(canonical.compact(owner))
    os.chmod(lock, 0o600)
    snapshot = ok(cli(root, "inspect"))["lock"]
    ok(cli(root, "recover-lock", input_value={"expectedHash": snapshot["hash"], "ownerStopped": True, "note": "x"}))


@pytest.fixture(scope="module")
def lifecycles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_project(tmp_path_factory.mktemp("schema") / "project")
    build_lifecycles(root)
    return root


def test_every_stored_object_has_exactly_the_reference_keys(lifecycles: Path) -> None:
    walk = Walk()
    base = lifecycles / ".bmad-plus" / "nexus"
    run_files = sorted((base / "runs").glob("*.json"))
    assert [p.name for p in run_files] == ["host.json", "proc.json"]
    for path in run_files:
        walk.envelope(json.loads(path.read_text(encoding="utf-8")), path.name)
    receipts = sorted((base / "lock-recovery").glob("*.json"))
    assert len(receipts) == 1
    for path in receipts:
        walk.lock_recovery_receipt(json.loads(path.read_text(encoding="utf-8")), path.name)
    # The lifecycles really produced every kind of object the table names.
    kinds = {where for where in walk.seen}
    for kind in (
        "run",
        "attempt",
        "framework",
        "integrationReceipt",
        "cancellation",
        "reconciliation",
        "process",
        "receipt",
        "provider",
        "stdout",
        "observed",
        "owner",
    ):
        assert any(k.startswith(kind) for k in kinds), (kind, sorted(kinds))
    tables_met = {tuple(table) for table in _tables_met(lifecycles)}
    for table in (
        CHECK_RECEIPT,
        PREFLIGHT_RECEIPT,
        HOST_OBSERVATION,
        PROCESS_OBSERVATION,
        CANCELLATION_REQUESTED,
        CODEX_PROVIDER,
        PROVIDER_PROBLEM,
    ):
        assert tuple(table) in tables_met, table


def _tables_met(root: Path) -> list[list[str]]:
    """Key lists of every object in the run files (to show which variants were exercised)."""
    found: list[list[str]] = []

    def visit(value: Any) -> None:
        if isinstance(value, dict):
            found.append(list(value))
            for item in value.values():
                visit(item)
        elif isinstance(value, list):
            for item in value:
                visit(item)

    for path in (root / ".bmad-plus" / "nexus" / "runs").glob("*.json"):
        visit(json.loads(path.read_text(encoding="utf-8")))
    return found


def test_no_object_anywhere_carries_python_version(lifecycles: Path) -> None:
    for path in (lifecycles / ".bmad-plus").rglob("*.json"):
        assert "pythonVersion" not in path.read_text(encoding="utf-8"), path


def test_runs_written_with_python_version_still_load_and_round_trip(lifecycles: Path, tmp_path: Path) -> None:
    """Earlier versions of this project wrote baseline.framework.pythonVersion: such a run loads,
    re-serialises byte for byte, and keeps the key (nothing stored is ever silently repaired)."""
    project = tmp_path / "old"
    subprocess.run(["cp", "-a", str(lifecycles), str(project)], check=True)
    real = os.path.realpath(project)
    path = project / ".bmad-plus" / "nexus" / "runs" / "host.json"
    envelope = canonical.parse(path.read_text(encoding="utf-8"))
    run = envelope["run"]
    run["project"] = real
    for task in run["tasks"]:
        for attempt in task["attempts"]:
            attempt["baseline"]["repository"] = real
            attempt["baseline"]["framework"]["pythonVersion"] = "3.11.7"
    envelope["sha256"] = canonical.sha256_json(run)
    old_bytes = (canonical.pretty(envelope) + "\n").encode("utf-8")
    path.write_bytes(old_bytes)
    loaded = store.load_run(real, "host")
    assert store.envelope_text(loaded)[1].encode("utf-8") == old_bytes
    code, inspected, err = cli(project, "inspect", "host")
    assert code == 0, (inspected, err)
    assert inspected["tasks"][0]["attempts"][0]["baseline"]["framework"]["pythonVersion"] == "3.11.7"
