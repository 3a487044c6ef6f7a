"""The shapes of the stored JSON domain (SPEC 3), as TypedDicts: a run, its plan, each task
definition and check, each task, attempt, backend, verification and check receipt.

A TypedDict is a plain ``dict`` at run time: these only tell the type checker which keys exist
(in the reference's order) and what they hold; the bytes written and read are untouched. Every
key is optional here (``total=False``): some exist only in some states (``acceptedAt``,
``reconciliation``, ``process``), and records read back are validated by the core, not by type.
"""

from __future__ import annotations

from typing import Any, TypedDict


class Backend(TypedDict, total=False):
    kind: str  # "host" or "process"
    id: str
    sessionId: str
    hostname: str
    ownerPid: int
    capabilities: Any


class CheckReceipt(TypedDict, total=False):
    id: str
    attemptId: str
    command: str
    commandHash: str
    args: list[str]
    cwd: str
    timeoutMs: int
    environment: Any
    startedAt: str
    endedAt: str
    exitCode: int | None
    signal: str | None
    error: str | None
    timedOut: bool
    stdout: str
    stderr: str
    outputTruncated: bool
    outputHash: str
    evidenceClass: str
    termination: Any
    artifactHashes: dict[str, str]
    scopeSnapshotHash: str


class Verification(TypedDict, total=False):
    id: str
    attemptId: str
    status: str  # pending, running, passed, failed, ambiguous
    startedAt: str
    frameworkVersion: str
    environment: Any
    owner: dict[str, Any]
    revision: Any
    scopeHashes: dict[str, str]
    artifactHashes: dict[str, str]
    resourceHashes: dict[str, str]
    checks: list[CheckReceipt]
    problem: str | None
    endedAt: str


class Cancellation(TypedDict, total=False):
    status: str  # none, requested, reconciled
    requestedAt: str
    reason: str
    termination: Any
    reconciledAt: str
    resolvedOutcome: str


class Attempt(TypedDict, total=False):
    id: str
    runId: str
    taskId: str
    parentAttemptId: str | None
    backend: Backend
    execution: str  # running, blocked, ambiguous, completed, failed, cancelled
    verification: Verification
    verificationRounds: int
    verificationHistory: list[Verification]
    reconciliations: list[dict[str, Any]]
    reconciliation: dict[str, Any]
    cancellation: Cancellation
    startedAt: str
    observedAt: str
    endedAt: str | None
    deadline: str
    baseline: Any
    authorizations: Any
    observations: list[dict[str, Any]]
    blockedRequest: str
    uncheckedScope: Any
    process: dict[str, Any]
    resultHashes: dict[str, str]


class Task(TypedDict, total=False):
    id: str
    integration: str  # pending, accepted, rejected
    attempts: list[Attempt]
    acceptedAt: str
    integrationReceipt: Any


class CheckDefinition(TypedDict, total=False):
    id: str
    command: str
    commandHash: str
    args: list[str]
    cwd: str
    timeoutMs: int
    resources: list[str]


class TaskDefinition(TypedDict, total=False):
    id: str
    objective: str
    dependsOn: list[str]
    scope: list[str]
    artifacts: list[str]
    resources: list[str]
    checks: list[CheckDefinition]
    maxAttempts: int
    idempotent: bool
    deadlineMs: int
    acceptance: Any
    authorizations: Any
    execution: dict[str, Any]
    resourceHashes: dict[str, str]


class Plan(TypedDict, total=False):
    id: str
    maxParallel: int
    config: dict[str, Any]
    tasks: list[TaskDefinition]


class Run(TypedDict, total=False):
    schemaVersion: int
    id: str
    project: str
    frameworkVersion: str
    createdAt: str
    updatedAt: str
    sequence: int
    planHash: str
    plan: Plan
    tasks: list[Task]
    # inspect's additions (not stored): the per-task observations and the lock states
    observations: list[dict[str, Any]]
    lock: Any
    recoveryLock: Any
