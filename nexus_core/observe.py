"""``inspect``: the inventory and per-run observations (SPEC 3.18, 5.2). Read-only."""

from __future__ import annotations

import os
from typing import cast, overload

from . import __version__
from .errors import NexusError, message_of
from .needs import HEARTBEAT_STALE_MS
from .paths import root_of
from .running_verification import running_verification
from .schedule import DB_REL as SCHEDULES_DB
from .shapes import Attempt, Inspection, JsonObject, Observation, Run, Task
from .state import state_dirs
from .state.locks import (
    RECOVERY_LOCK,
    WRITER_LOCK,
    lock_snapshot,
    recovery_lock_hint,
)
from .state.store import list_run_ids, list_temp_files, load_run
from .timeutil import now_ms, parse_iso_ms

INVENTORY_HINT = "Run IDs are an inventory, not validated outcomes; inspect an individual run for current evidence."
HINT_ACCEPTED = "Accepted; no git operation was performed."
HINT_START = "Start when dependencies have current accepted evidence."
HINT_ACTIVE = (
    "Inspect this exact backend and attempt. Reconcile ambiguous or stopped work before retry; "
    "no automatic relaunch or termination."
)
HINT_ACCEPT = "Accept only after rechecking current artifacts and resources."
HINT_VERIFY = "Run the configured verification checks."
HINT_TERMINAL = "Review the terminal record and retry policy; a retry creates a new attempt."
HINT_RECEIPT_READY = "An owned process receipt is ready. Collect this exact attempt, then verify its current artifacts."
HINT_RECEIPT_OTHER = (
    "Inspect and collect the owned process receipt. Resolve blocked or ambiguous effects before a new "
    "attempt; completion is not established."
)
HINT_RECEIPT_FILE = (
    "The launch could not store its process receipt in the run state; it was kept in {path}. "
    "Collect this exact attempt to store it, then verify its current artifacts."
)
HINT_STALE_PREFIX = "Recorded state is historical; current inputs/evidence are stale: "
PROCESS_HINT = "A stored PID or fresh heartbeat is an observation, not authority to terminate or relaunch."


def process_observation(attempt: Attempt, now: int, receipt_file: str | None = None) -> JsonObject:
    """``receipt_file``: a recoverable receipt kept beside the state because the launch could
    not store it (not in the reference); it makes the receipt ready and is named."""
    process = attempt.get("process")
    if not isinstance(process, dict):
        process = None
    heartbeat = process.get("heartbeatAt") if process else None
    beat_ms = parse_iso_ms(heartbeat)
    observation: JsonObject = {
        "status": process.get("status") if process else "launch-unacknowledged",
        "supervisor": process.get("owner") if process else None,
        "lastHeartbeat": heartbeat,
        "heartbeatStale": beat_ms is None or now - beat_ms > HEARTBEAT_STALE_MS,
        "childPid": process.get("childPid") if process else None,
        "receiptReady": bool(
            process
            and (process.get("receipt") is not None or receipt_file is not None)
            and not process.get("collectedAt")
        ),
        "liveIdentityEstablished": False,
        "hint": PROCESS_HINT,
    }
    if receipt_file is not None:
        observation["recoverableReceipt"] = receipt_file
    return observation


def observe_task(root: str, run: Run, task: Task, verified: set[str], now: int) -> Observation:
    # Imported here: the inventory (plain ``nexus inspect``) never needs the engine.
    from .engine import is_active, latest

    attempt = latest(task)
    active = is_active(task)
    deadline = parse_iso_ms(attempt.get("deadline")) if attempt else None
    resources_current, evidence_eligible, stale_reason = _evidence(root, run, task, attempt, verified)
    verification = attempt["verification"] if attempt else {}
    if attempt:
        hint = _attempt_hint(attempt, active)
    else:
        hint = HINT_ACCEPTED if task["integration"] == "accepted" else HINT_START
    kept_receipt = None
    if attempt and attempt["backend"].get("kind") == "process":
        from .backend.process import receipt_file_status  # only process attempts need the process backend

        kept_receipt = receipt_file_status(root, run["id"], attempt, run["planHash"])
    if kept_receipt is not None:
        hint = HINT_RECEIPT_FILE.format(path=kept_receipt)
    if stale_reason is not None:
        hint = HINT_STALE_PREFIX + stale_reason
    observation: Observation = {
        "taskId": task["id"],
        "attemptId": attempt["id"] if attempt else None,
        "overdue": bool(attempt and active and deadline is not None and now > deadline),
        "resourcesCurrent": resources_current,
        "evidenceEligible": evidence_eligible,
        "stale": stale_reason is not None,
        "staleReason": stale_reason,
    }
    if attempt and attempt["backend"].get("kind") == "process":
        observation["process"] = process_observation(attempt, now, kept_receipt)
    observation["hint"] = hint
    if attempt and verification.get("status") == "running":
        # Not in the reference: who owns a running verification, and what ends it.
        observation["runningVerification"] = running_verification(root, run["id"], task["id"], attempt)
    return observation


def _evidence(
    root: str, run: Run, task: Task, attempt: Attempt | None, verified: set[str]
) -> tuple[bool, bool, str | None]:
    """(resources current, evidence eligible, why it is stale): the protected files as the plan
    hashed them, and a passed verification's evidence still current (SPEC 5.2)."""
    from .engine import definition_of, evidence_current
    from .snapshots import protected_snapshot

    definition = definition_of(run, task["id"])
    stale_reason: str | None = None
    resources_current = True
    try:
        protected_snapshot(root, definition)
    except Exception as error:
        resources_current = False
        stale_reason = message_of(error)
    evidence_eligible = False
    if attempt and attempt["verification"].get("status") == "passed":
        try:
            evidence_current(root, run, task, verified, set())
            evidence_eligible = True
        except Exception as error:
            stale_reason = message_of(error)
    return resources_current, evidence_eligible, stale_reason


def _attempt_hint(attempt: Attempt, active: bool) -> str:
    """The hint for a task with an attempt, before a kept receipt or stale evidence overrides it."""
    status = attempt["verification"].get("status")
    if active:
        hint = HINT_ACTIVE
    elif status == "passed":
        hint = HINT_ACCEPT
    elif attempt["execution"] == "completed" and status == "pending":
        hint = HINT_VERIFY
    else:
        hint = HINT_TERMINAL
    process = attempt.get("process")
    if (
        attempt["backend"].get("kind") == "process"
        and isinstance(process, dict)
        and process.get("status") == "finished"
        and not process.get("collectedAt")
    ):
        receipt = process.get("receipt") or {}
        hint = HINT_RECEIPT_READY if receipt.get("outcome") == "completed" else HINT_RECEIPT_OTHER
    return hint


def inspect_loaded(root: str, run: Run, now: int | None = None) -> Inspection:
    """Observations for a run already loaded (the dashboard reuses parsed runs)."""
    moment = now_ms() if now is None else now
    verified: set[str] = set()
    # A copy of the run, then the keys inspect adds (a Run may not be spread into an Inspection:
    # the type checker cannot know it carries none of them already).
    result = cast(Inspection, dict(run))
    result["observations"] = [observe_task(root, run, task, verified, moment) for task in run["tasks"]]
    result["lock"] = lock_snapshot(root, WRITER_LOCK)
    result["recoveryLock"] = lock_snapshot(root, RECOVERY_LOCK)
    add_recovery_lock_hint(result, root)
    add_unsafe_directories(result, root)
    return result


def add_unsafe_directories(result: Inspection | JsonObject, root: str) -> None:
    """Adds ``unsafeStateDirectories`` when a state directory is another user's or writable by
    others: every mutation refuses it until fixed (``state_dirs``); a read shows it."""
    found = state_dirs.problems(root)
    if found:
        result["unsafeStateDirectories"] = state_dirs.as_json(found)


def add_recovery_lock_hint(result: Inspection | JsonObject, root: str) -> None:
    """Adds ``recoveryLockHint`` to an inspection that has its ``recoveryLock`` (the dashboard's too)."""
    hint = recovery_lock_hint(result["recoveryLock"], root)
    if hint is not None:
        # Not in the reference: the way out of an interrupted recover-lock.
        result["recoveryLockHint"] = hint


def inspect_inventory(root: str) -> JsonObject:
    run_ids = list_run_ids(root)
    inventory: JsonObject = {
        "schemaVersion": 1,
        "project": root,
        "frameworkVersion": __version__,
        "runIds": run_ids,
        "lock": lock_snapshot(root, WRITER_LOCK),
        "recoveryLock": lock_snapshot(root, RECOVERY_LOCK),
        "hint": INVENTORY_HINT,
    }
    add_recovery_lock_hint(inventory, root)
    add_unsafe_directories(inventory, root)
    unreadable: list[dict[str, str]] = []
    for run_id in run_ids:
        try:
            load_run(root, run_id)
        except NexusError as error:
            entry = {"runId": run_id, "error": error.message}
            if error.hint:
                entry["hint"] = error.hint
            unreadable.append(entry)
    if unreadable:
        # Not in the reference: a run that cannot be loaded is named here, its load's refusal in
        # the SPEC's words and the way out (a fresh run under a new id) as the hint, so the
        # operator sees it without inspecting each run.
        inventory["unreadableRuns"] = unreadable
    temps = list_temp_files(root)
    if temps:
        # Not in the reference: leftovers of killed writers are counted, never loaded.
        inventory["strayTempFiles"] = len(temps)
    if os.path.lexists(os.path.join(root, SCHEDULES_DB)):
        from .schedule.db import inventory_summary  # only then: most projects have no schedules

        schedules = inventory_summary(root)
        if schedules is not None:
            # Not in the reference: what `nexus schedule` keeps for this project, read-only.
            inventory["schedules"] = schedules
    return inventory


@overload
def inspect_run(directory: str, run_id: None = None) -> JsonObject: ...  # the project's inventory
@overload
def inspect_run(directory: str, run_id: str) -> Inspection: ...
@overload
def inspect_run(directory: str, run_id: str | None) -> Inspection | JsonObject: ...
def inspect_run(directory: str, run_id: str | None = None) -> Inspection | JsonObject:
    root = root_of(directory)
    if run_id is None:
        return inspect_inventory(root)
    return inspect_loaded(root, load_run(root, run_id))
