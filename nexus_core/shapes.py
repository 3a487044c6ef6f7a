"""The shapes of the stored JSON domain (SPEC 3), as TypedDicts: a run, its plan, each task
definition and check, each task, attempt, backend, verification and check receipt; a lock's
owner and snapshot; and what inspect adds to a run (``Inspection``: observations, locks).

A TypedDict is a plain ``dict`` at run time: these only tell the type checker which keys exist
(in the reference's order) and what they hold; the bytes written and read are untouched. At run
time each name IS ``dict``: building the classes would cost every ``nexus`` call milliseconds. Every
key is optional here (``total=False``): some exist only in some states (``acceptedAt``,
``reconciliation``, ``process``), and records read back are validated by the core, not by type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypedDict

# A JSON object whose keys are not fixed here: ``--input`` and plan files before validation,
# command output, progress events, what the canonical writer takes, and the records below not
# modelled (yet) key by key: reconciliations, observations, a process record, an execution.
JsonObject = dict[str, Any]
# A run, task, attempt or definition read without assuming its shape: a typed record below, or
# raw JSON that may not be one (shell completion reads runs the core would refuse).
Record = Mapping[str, Any]


if TYPE_CHECKING:

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
        artifactHashes: dict[str, str | None]
        scopeSnapshotHash: str

    class Owner(TypedDict, total=False):
        """Who holds a lock (all four keys) or runs a verification (pid and hostname)."""

        token: str
        pid: int
        hostname: str
        createdAt: str

    class Verification(TypedDict, total=False):
        id: str
        attemptId: str
        status: str  # pending, running, passed, failed, ambiguous
        startedAt: str
        frameworkVersion: str
        environment: Any
        owner: Owner
        revision: Any
        scopeHashes: dict[str, str | None]
        artifactHashes: dict[str, str | None]
        resourceHashes: dict[str, str | None]
        checks: list[CheckReceipt]
        problem: str | None
        endedAt: str

    class Cancellation(TypedDict, total=False):
        status: str  # none, requested, reconciled
        requestedAt: str
        reason: str
        termination: Any
        processesSignalled: list[int]
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
        reconciliations: list[JsonObject]
        reconciliation: JsonObject
        cancellation: Cancellation
        startedAt: str
        observedAt: str
        endedAt: str | None
        deadline: str
        baseline: Any
        authorizations: Any
        observations: list[JsonObject]
        blockedRequest: str
        uncheckedScope: Any
        process: JsonObject
        resultHashes: dict[str, str | None]

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
        execution: JsonObject
        resourceHashes: dict[str, str | None]

    class Plan(TypedDict, total=False):
        id: str
        maxParallel: int
        config: JsonObject
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

    class LockSnapshot(TypedDict, total=False):
        """A lock as inspect reports it; ``owner`` is the file's JSON as parsed, not validated."""

        hash: str
        owner: Any
        recovery: str
        unsafe: str  # ours: why the lock is not trusted

    class Observation(TypedDict, total=False):
        """Inspect's observation of one task (SPEC 5.2), with our additive keys after the reference's."""

        taskId: str
        attemptId: str | None
        overdue: bool
        resourcesCurrent: bool
        evidenceEligible: bool
        stale: bool
        staleReason: str | None
        process: JsonObject
        hint: str
        runningVerification: JsonObject

    class Inspection(Run, total=False):
        """``nexus inspect RUN``: the run, then what inspect adds (never stored)."""

        observations: list[Observation]
        lock: LockSnapshot | None
        recoveryLock: LockSnapshot | None
        recoveryLockHint: str
        unsafeStateDirectories: list[dict[str, str]]

else:
    Backend = CheckReceipt = Owner = Verification = Cancellation = Attempt = Task = CheckDefinition = TaskDefinition = (
        Plan
    ) = Run = LockSnapshot = Observation = Inspection = dict
