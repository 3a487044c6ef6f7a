"""The mutating actions of the dashboard, without widgets.

For each action this module says what the core needs, states in plain language exactly what
will change, validates the operator's input, re-reads the core's current state when the
operator confirms (refusing when the target changed under the dialog), builds the core input,
calls ``nexus_core`` and records an action-log entry. The dialogs only collect values.
"""

from __future__ import annotations

import getpass
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nexus_core import actions as mutations
from nexus_core import engine
from nexus_core.errors import NexusError, message_of
from nexus_core.hostinfo import hostname, owner_liveness
from nexus_core.locks import RECOVERY_LOCK, WRITER_LOCK, lock_snapshot
from nexus_core.paths import root_of, text_ok
from nexus_core.process import receipt_file_status
from nexus_core.store import load_run, run_path
from nexus_core.timeutil import now_iso

ACTION_IDS = (
    "start",
    "record",
    "reconcile",
    "verify",
    "accept",
    "retry",
    "cancel",
    "launch",
    "collect",
    "recover-lock",
    "create",
)
# Actions that run long enough to need a worker with live progress and a Stop button.
LONG_ACTIONS = ("verify", "launch")
RECORD_OUTCOMES = ("completed", "failed", "blocked", "ambiguous")
RECONCILE_OUTCOMES = ("completed", "failed", "cancelled")
TEXT_LIMIT = 8000
IDENTITY_LIMIT = 200
FINGERPRINT_CHARS = 8
ACTIVE_EXECUTIONS = ("running", "blocked", "ambiguous")


class OperationRefused(Exception):
    """The dashboard refused before calling the core; the message says why, plainly."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class InvalidInput(OperationRefused):
    """The operator's input is incomplete or malformed (per field in ``errors``)."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__("; ".join(errors.values()))
        self.errors = errors


class TargetChanged(OperationRefused):
    """The state on disk is no longer the one the dialog described."""


# ----------------------------------------------------------------- what the dialog saw


@dataclass(frozen=True)
class Seen:
    """The identity of the target when the dialog opened, compared again at confirm time."""

    run_id: str | None = None
    task_id: str | None = None
    attempt_id: str | None = None
    attempt_count: int = 0
    execution: str | None = None
    verification_id: str | None = None
    verification_status: str | None = None
    cancellation: str | None = None
    integration: str | None = None
    receipt_hash: str | None = None
    lock_hash: str | None = None


_SEEN_LABELS = {
    "attempt_id": "latest attempt",
    "attempt_count": "number of attempts",
    "execution": "execution",
    "verification_id": "verification",
    "verification_status": "verification status",
    "cancellation": "cancellation",
    "integration": "acceptance",
    "receipt_hash": "process receipt",
    "lock_hash": "writer.lock fingerprint",
}
# Which parts of the target each action's statement depends on.
_COMPARED: dict[str, tuple[str, ...]] = {
    "start": ("attempt_id", "attempt_count", "integration"),
    "retry": ("attempt_id", "attempt_count", "execution", "verification_status", "cancellation", "integration"),
    "launch": ("attempt_id", "attempt_count", "execution", "verification_status", "cancellation", "integration"),
    "record": ("attempt_id", "execution", "cancellation", "integration"),
    "reconcile": ("attempt_id", "execution", "verification_id", "verification_status", "cancellation", "integration"),
    "cancel": ("attempt_id", "execution", "cancellation", "integration"),
    "verify": ("attempt_id", "execution", "verification_id", "verification_status", "cancellation", "integration"),
    "accept": ("attempt_id", "verification_id", "verification_status", "integration"),
    "collect": ("attempt_id", "execution", "receipt_hash", "cancellation", "integration"),
    "recover-lock": ("lock_hash",),
    "create": (),
}


def _short(value: object) -> str:
    if value is None:
        return "none"
    text = str(value)
    return text[:8] if len(text) == 36 or len(text) == 64 else text


def seen_of(run: dict[str, Any] | None, task_id: str | None, lock: dict[str, Any] | None) -> Seen:
    if run is None or task_id is None:
        return Seen(lock_hash=lock["hash"] if lock else None)
    task = next((t for t in run["tasks"] if t["id"] == task_id), None)
    if task is None:
        raise OperationRefused(f"Task {task_id} is not in run {run['id']}.")
    attempt = task["attempts"][-1] if task["attempts"] else None
    verification = attempt["verification"] if attempt else {}
    process = (attempt or {}).get("process") or {}
    return Seen(
        run_id=run["id"],
        task_id=task_id,
        attempt_id=attempt["id"] if attempt else None,
        attempt_count=len(task["attempts"]),
        execution=attempt["execution"] if attempt else None,
        verification_id=verification.get("id"),
        verification_status=verification.get("status"),
        cancellation=(attempt.get("cancellation") or {}).get("status") if attempt else None,
        integration=task["integration"],
        receipt_hash=process.get("receiptHash"),
        lock_hash=lock["hash"] if lock else None,
    )


def differences(action: str, before: Seen, after: Seen) -> list[str]:
    """What changed, in words, among the parts the action's statement relies on."""
    changed = []
    for name in _COMPARED[action]:
        old, new = getattr(before, name), getattr(after, name)
        if old != new:
            changed.append(f"{_SEEN_LABELS[name]}: {_short(old)} -> {_short(new)}")
    return changed


# ----------------------------------------------------------------- identities


def operator_identity() -> dict[str, str]:
    """The stable host identity used by start and retry; the operator may edit it."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "operator"
    return {"kind": "host", "id": "operator", "sessionId": f"nexus-tui-{user}@{hostname()}"}


def _process_identity(backend: dict[str, Any]) -> dict[str, Any]:
    return {key: backend.get(key) for key in ("kind", "id", "sessionId", "hostname", "ownerPid")}


# ----------------------------------------------------------------- preview


@dataclass
class Preview:
    """Everything a dialog needs: the statement of what will change and the defaults."""

    action: str
    root: str
    run_id: str | None
    task_id: str | None
    seen: Seen
    title: str
    changes: list[str]
    cautions: list[str] = field(default_factory=list)
    backend: dict[str, Any] | None = None
    backend_editable: bool = False
    defaults: dict[str, Any] = field(default_factory=dict)
    confirm_text: str | None = None
    unavailable: str | None = None


def _latest(task: dict[str, Any]) -> dict[str, Any] | None:
    attempts = task["attempts"]
    return attempts[-1] if attempts else None


def _definition(run: dict[str, Any], task_id: str) -> dict[str, Any]:
    for definition in run["plan"]["tasks"]:
        if definition["id"] == task_id:
            return definition  # type: ignore[no-any-return]
    raise OperationRefused(f"Task {task_id} is not in run {run['id']}.")


def _task(run: dict[str, Any], task_id: str) -> dict[str, Any]:
    for task in run["tasks"]:
        if task["id"] == task_id:
            return task  # type: ignore[no-any-return]
    raise OperationRefused(f"Task {task_id} is not in run {run['id']}.")


def _is_active(attempt: dict[str, Any] | None) -> bool:
    if attempt is None:
        return False
    return (
        attempt["execution"] in ACTIVE_EXECUTIONS
        or attempt["verification"]["status"] in ("running", "ambiguous")
        or (attempt.get("cancellation") or {}).get("status") == "requested"
    )


def unavailable_reason(
    action: str, run: dict[str, Any] | None, task_id: str | None, lock: Any = None, root: str | None = None
) -> str | None:
    """Why the core would refuse this action for this selection now, or None when it may
    accept it. A cheap mirror of the core's preconditions (no hashing) for the palette and
    the footer; the core stays the authority. With ``root``, a process receipt kept beside
    the state (the launch could not store it) counts as ready to collect."""
    if action == "recover-lock":
        return None if lock else "There is no writer.lock to recover."
    if action == "create":
        return None
    if run is None or task_id is None:
        return "Select a task first."
    try:
        task = _task(run, task_id)
        definition = _definition(run, task_id)
    except OperationRefused as refused:
        return refused.message
    attempt = _latest(task)
    accepted = task["integration"] == "accepted"
    executable = bool(definition.get("execution"))
    if action in ("start", "retry", "launch"):
        if accepted:
            return "Accepted tasks cannot be restarted."
        if action == "start" and executable:
            return "This task has an execution contract: use launch."
        if action == "retry" and executable:
            return "This task has an execution contract: launch retries it."
        if action == "launch" and not executable:
            return "This task has no execution contract: use start (or retry)."
        if action == "start" and attempt is not None:
            return "The task already has an attempt; retry it instead."
        if attempt is not None or action == "retry":
            if attempt is None:
                return "There is no attempt to retry."
            if _is_active(attempt) or not (
                attempt["execution"] in ("failed", "cancelled") or attempt["verification"]["status"] == "failed"
            ):
                return "Retry needs a reconciled failed or cancelled attempt, or a failed verification."
            if not definition["idempotent"] and (attempt.get("reconciliation") or {}).get("retrySafe") is not True:
                return "This task is not idempotent: reconcile with retry-safe first."
        if len(task["attempts"]) >= definition["maxAttempts"]:
            return "The attempt budget (maxAttempts) is spent."
        return None
    if attempt is None:
        return "The task has no attempt yet."
    if action == "record":
        if attempt["backend"].get("kind") != "host":
            return "Process attempts are collected, not recorded."
        if attempt["execution"] not in ("running", "blocked") or attempt["cancellation"].get("status") != "none":
            return "This attempt needs reconciliation, not a worker report."
        return None
    if accepted:
        return "The task is accepted; nothing can change it."
    if action == "reconcile":
        return None
    if action == "cancel":
        if attempt["cancellation"].get("status") != "none":
            return "Cancellation is already recorded; reconcile it."
        return None
    if action == "verify":
        if attempt["execution"] != "completed" or attempt["cancellation"].get("status") == "requested":
            return "Verification needs a completed, reconciled attempt."
        if attempt["verification"]["status"] != "pending":
            return "This attempt already has a verification."
        if attempt["verificationRounds"] >= definition["maxAttempts"]:
            return "The verification restart limit is reached."
        return None
    if action == "accept":
        if attempt["verification"]["status"] != "passed":
            return "Accept needs a passed verification."
        return None
    if action == "collect":
        process = attempt.get("process") or {}
        if attempt["backend"].get("kind") != "process":
            return "Only process attempts have a receipt to collect."
        kept = receipt_file_status(root, run["id"], attempt) if root else None
        if kept is None and (process.get("status") != "finished" or process.get("receipt") is None):
            return "The process receipt is not ready."
        if process.get("collectedAt"):
            return "This receipt was already collected."
        return None
    raise ValueError(f"unknown action {action}")


def _load(root: str, run_id: str | None) -> dict[str, Any] | None:
    return load_run(root, run_id) if run_id else None


def _owner_words(owner: Any) -> str:
    if not isinstance(owner, dict):
        return "an unreadable owner"
    pid = owner.get("pid")
    host = owner.get("hostname")
    state = owner_liveness(host, pid)
    alive = {"alive": ", alive", "dead": ", not running"}.get(state, "")
    if state == "unknown" and host is not None and host != hostname():
        alive = ", on another host (liveness unknown here)"
    return f"pid {pid} on {host}{alive}, since {owner.get('createdAt')}"


def preview(directory: str, action: str, run_id: str | None = None, task_id: str | None = None) -> Preview:
    """Read the current state and describe exactly what ``action`` will change.

    Raises the core's NexusError when the run cannot be loaded, OperationRefused for an
    unknown task."""
    if action not in ACTION_IDS:
        raise ValueError(f"unknown action {action}")
    root = root_of(directory)
    lock = lock_snapshot(root, WRITER_LOCK)
    if action == "recover-lock":
        return _preview_recover_lock(root, lock)
    if run_id is None or task_id is None:
        raise OperationRefused("Select a task first.")
    run = load_run(root, run_id)
    task = _task(run, task_id)
    definition = _definition(run, task_id)
    attempt = _latest(task)
    seen = seen_of(run, task_id, lock)
    where = f"task {task_id} of run {run_id}"
    result = Preview(
        action=action,
        root=root,
        run_id=run_id,
        task_id=task_id,
        seen=seen,
        title=f"{action} {task_id}",
        changes=[],
        unavailable=unavailable_reason(action, run, task_id, lock, root),
    )
    short_attempt = attempt["id"][:8] if attempt else ""
    if action in ("start", "retry"):
        identity = operator_identity()
        result.backend = identity
        result.backend_editable = True
        number = len(task["attempts"]) + 1
        result.title = f"{'Start' if action == 'start' else 'Retry'} {task_id}"
        result.changes = [
            f"Creates attempt {number} of {definition['maxAttempts']} for {where}, owned by the host "
            "identity below, with execution 'running'.",
            f"Its deadline is {definition['deadlineMs'] // 1000} s from now. Acceptance becomes 'pending'.",
            "The baseline snapshots the write scope, the artifacts and the protected resources.",
        ]
        if attempt is not None:
            result.changes.append(f"The previous attempt {short_attempt} stays on record as its parent.")
        result.cautions = ["Nothing is launched: the worker runs outside Nexus and reports with record."]
    elif action == "launch":
        retry = attempt is not None
        number = len(task["attempts"]) + 1
        execution = definition.get("execution") or {}
        command = " ".join([str(execution.get("command")), *[str(a) for a in execution.get("args", [])]])
        result.title = f"Launch {task_id}"
        result.defaults = {"retry": retry}
        result.changes = [
            f"Creates attempt {number} of {definition['maxAttempts']} for {where}"
            + (f" (a retry after {short_attempt})" if retry else "")
            + " owned by this dashboard process, then runs its execution contract:",
            f"  {command}",
            "The process receipt is stored when it ends; collect then records its outcome.",
        ]
        result.cautions = [
            "The worker changes files in the task's write scope. Stop requests cancellation; "
            "the child gets SIGTERM at the next poll."
        ]
    elif action == "record":
        assert attempt is not None
        backend = attempt["backend"]
        result.backend = {"kind": "host", "id": backend.get("id"), "sessionId": backend.get("sessionId")}
        result.backend_editable = True
        result.title = f"Record a worker report for {task_id}"
        result.defaults = {"outcome": "completed", "summary": "", "exit_code": ""}
        result.changes = [
            f"Adds a host report to attempt {short_attempt} of {where} and sets its execution "
            f"from '{attempt['execution']}' to the outcome chosen below.",
            "completed or failed also records the end time and a snapshot of the write scope "
            "(the result that verify will check).",
            "blocked records the summary as the blocked request.",
        ]
        result.cautions = ["This is the worker's word, not verified evidence."]
    elif action == "reconcile":
        assert attempt is not None
        backend = attempt["backend"]
        if backend.get("kind") == "process":
            result.backend = _process_identity(backend)
        else:
            result.backend = {"kind": "host", "id": backend.get("id"), "sessionId": backend.get("sessionId")}
            result.backend_editable = True
        result.title = f"Reconcile {task_id}"
        result.defaults = {"outcome": "failed", "summary": "", "owner_stopped": False, "retry_safe": False}
        verification = attempt["verification"]
        result.changes = [
            f"Records your observation on attempt {short_attempt} of {where}: its execution goes from "
            f"'{attempt['execution']}' to the outcome chosen below and it ends now.",
            "The current write-scope snapshot is stored as the observed result.",
        ]
        if verification["status"] in ("running", "ambiguous"):
            result.changes.append(
                f"The {verification['status']} verification {_short(verification.get('id'))} moves to the "
                "history; the attempt can be verified again."
            )
        if attempt["cancellation"].get("status") == "requested":
            result.changes.append("The requested cancellation is marked reconciled.")
        result.cautions = [
            "Tick 'owner stopped' only after checking yourself that the worker (and any verifier) "
            "has really stopped: it is your declaration, never inferred.",
            "Retry-safe allows a retry of a non-idempotent task: tick it only if redoing the work is harmless.",
        ]
        if task["integration"] == "rejected":
            result.cautions.append("Acceptance stays 'rejected' until a new attempt.")
    elif action == "cancel":
        assert attempt is not None
        result.title = f"Cancel {task_id}"
        result.confirm_text = task_id
        result.defaults = {"reason": ""}
        is_process = attempt["backend"].get("kind") == "process"
        if is_process:
            result.backend = _process_identity(attempt["backend"])
        change = f"Records a cancellation request on attempt {short_attempt} of {where}."
        if attempt["execution"] in ("running", "blocked"):
            change += f" Its execution goes from '{attempt['execution']}' to 'ambiguous'."
        result.changes = [change, "The attempt stays active until you reconcile it."]
        result.cautions = [
            (
                "The original supervisor sees the request at its next poll and sends SIGTERM to its child."
                if is_process
                else "Nothing is signalled: stop the host worker yourself, then reconcile."
            )
        ]
    elif action == "verify":
        assert attempt is not None
        checks = definition["checks"]
        result.title = f"Verify {task_id}"
        result.changes = [
            f"Runs the {len(checks)} configured check(s) of {where} on attempt {short_attempt}, one by one, "
            "outside the lock, and records each receipt:",
            *[f"  {c['id']}: {' '.join([c['command'], *c['args']])}" for c in checks],
            "The verification ends passed, failed (acceptance becomes 'rejected') or ambiguous (if stopped).",
        ]
        result.cautions = ["Checks run real commands in the project with a minimal environment."]
    elif action == "accept":
        assert attempt is not None
        result.title = f"Accept {task_id}"
        result.changes = [
            f"Marks {where} accepted, citing attempt {short_attempt} and its passed verification "
            f"{_short(attempt['verification'].get('id'))}.",
            "The core first re-hashes the scope, the artifacts and the protected resources: stale evidence is refused.",
        ]
        result.cautions = ["Acceptance is final: nothing can un-accept a task. No git operation is performed."]
    elif action == "collect":
        assert attempt is not None
        result.backend = _process_identity(attempt["backend"])
        receipt = (attempt.get("process") or {}).get("receipt") or {}
        kept = receipt_file_status(root, run_id, attempt)
        result.title = f"Collect {task_id}"
        result.changes = [
            (
                f"Stores the receipt kept in {kept} and records it on attempt {short_attempt} of {where}."
                if kept
                else f"Records the owned process receipt of attempt {short_attempt} of {where}: its execution "
                f"becomes '{receipt.get('outcome')}' (exit code {receipt.get('exitCode')})."
            ),
            "The receipt's scope snapshot becomes the attempt's result.",
        ]
        result.cautions = ["A completed receipt is refused if the scope changed since the process ended."]
    if lock is not None:
        # Mutations need writer.lock: say so before the operator fills the dialog in.
        result.cautions.append(
            f"writer.lock is held ({lock['hash'][:12]}, {_owner_words(lock.get('owner'))}): the core refuses "
            "every change until it is released or recovered (guided recovery, g)."
        )
    return result


def preview_fresh_run(
    directory: str, old_run_id: str, new_run_id: str, plan: dict[str, Any], problem: str | None = None
) -> Preview:
    """The confirmation of a fresh run from a recovered plan (guided recovery)."""
    root = root_of(directory)
    tasks = plan.get("tasks") or []
    return Preview(
        action="create",
        root=root,
        run_id=new_run_id,
        task_id=None,
        seen=Seen(run_id=new_run_id),
        title=f"Create fresh run {new_run_id}",
        changes=[
            f"Creates run {new_run_id} from the plan of {old_run_id} ({len(tasks)} task(s)); every task starts "
            "again from nothing, pending.",
            "create re-validates the plan and snapshots the protected resources as they are now.",
            f"{old_run_id} is not touched: it stays as evidence.",
        ],
        cautions=[
            "A fresh run may redo work (and repeat external effects) that the old run already did. "
            "Inspect the earlier workspace changes first."
        ],
        defaults={"plan": plan},
        unavailable=problem,
    )


def _preview_recover_lock(root: str, lock: dict[str, Any] | None) -> Preview:
    result = Preview(
        action="recover-lock",
        root=root,
        run_id=None,
        task_id=None,
        seen=Seen(lock_hash=lock["hash"] if lock else None),
        title="Recover writer.lock",
        changes=[],
        unavailable=None if lock else "There is no writer.lock to recover.",
    )
    if lock is None:
        result.changes = ["There is no writer.lock: nothing to recover."]
        return result
    result.confirm_text = lock["hash"][:FINGERPRINT_CHARS]
    result.defaults = {"note": "", "owner_stopped": False}
    result.changes = [
        f"Removes writer.lock (fingerprint {lock['hash'][:12]}), held by {_owner_words(lock.get('owner'))}.",
        "First writes a recovery receipt under .bmad-plus/nexus/lock-recovery/ with your note.",
        "The core refuses if the lock changed, if its owner is alive on this host, or if recovery.lock exists.",
    ]
    result.cautions = [
        "Recover only after checking that the owner process has really stopped: a live writer could "
        "lose its update. 'Owner stopped' is your declaration."
    ]
    if lock.get("unsafe"):
        result.cautions.append(f"writer.lock is unsafe ({lock['unsafe']}): the core will not remove it.")
    return result


# ----------------------------------------------------------------- validation and input


def validate(preview_: Preview, values: dict[str, Any]) -> dict[str, str]:
    """Field errors for the operator's values ({} when valid)."""
    action = preview_.action
    errors: dict[str, str] = {}

    def need_text(key: str, label: str, limit: int = TEXT_LIMIT) -> None:
        if not text_ok(values.get(key), limit):
            errors[key] = f"{label} must be non-empty (at most {limit} characters, no NUL)."

    if preview_.backend_editable:
        need_text("backend_id", "Backend handle", IDENTITY_LIMIT)
        need_text("backend_session", "Backend session", IDENTITY_LIMIT)
    if action == "record":
        if values.get("outcome") not in RECORD_OUTCOMES:
            errors["outcome"] = "Choose an outcome."
        need_text("summary", "Summary")
        raw = str(values.get("exit_code") or "").strip()
        if raw:
            try:
                code = int(raw)
            except ValueError:
                errors["exit_code"] = "Exit code must be an integer (or empty)."
            else:
                if values.get("outcome") == "completed" and code != 0:
                    errors["exit_code"] = "A nonzero exit code cannot be a completed outcome."
    elif action == "reconcile":
        if values.get("outcome") not in RECONCILE_OUTCOMES:
            errors["outcome"] = "Choose an outcome."
        need_text("summary", "Observation")
        if values.get("owner_stopped") is not True:
            errors["owner_stopped"] = "Tick 'owner stopped' after checking that the worker has stopped."
    elif action == "cancel":
        need_text("reason", "Reason")
        if values.get("typed") != preview_.confirm_text:
            errors["typed"] = f"Type the task id ({preview_.confirm_text}) to confirm."
    elif action == "recover-lock":
        need_text("note", "Note")
        if values.get("owner_stopped") is not True:
            errors["owner_stopped"] = "Tick 'owner stopped' after checking that the lock owner has stopped."
        if values.get("typed") != preview_.confirm_text:
            errors["typed"] = f"Type the first {FINGERPRINT_CHARS} characters of the fingerprint to confirm."
    return errors


def _current_attempt(run: dict[str, Any], task_id: str) -> dict[str, Any]:
    attempt = _latest(_task(run, task_id))
    if attempt is None:
        raise OperationRefused(f"Task {task_id} has no attempt.")
    return attempt


def build_input(preview_: Preview, values: dict[str, Any], run: dict[str, Any] | None) -> dict[str, Any]:
    """The core input for the action, from the operator's values and the CURRENT attempt."""
    action = preview_.action
    if action in ("start", "retry"):
        return {"backend": {"kind": "host", "id": values["backend_id"], "sessionId": values["backend_session"]}}
    if action == "launch":
        return {"retry": bool(preview_.defaults.get("retry"))}
    if action == "recover-lock":
        return {"expectedHash": preview_.seen.lock_hash, "ownerStopped": True, "note": values["note"]}
    if action == "create":
        return dict(preview_.defaults["plan"])
    if action in ("verify", "accept"):
        return {}
    assert run is not None and preview_.task_id is not None
    attempt = _current_attempt(run, preview_.task_id)
    if attempt["backend"].get("kind") == "process":
        backend: dict[str, Any] = _process_identity(attempt["backend"])
    elif preview_.backend_editable:
        backend = {"kind": "host", "id": values["backend_id"], "sessionId": values["backend_session"]}
    else:
        backend = {"kind": "host", "id": attempt["backend"].get("id"), "sessionId": attempt["backend"].get("sessionId")}
    bound = {"attemptId": attempt["id"], "backend": backend}
    if action == "record":
        options: dict[str, Any] = {**bound, "outcome": values["outcome"], "summary": values["summary"]}
        raw = str(values.get("exit_code") or "").strip()
        if raw:
            options["exitCode"] = int(raw)
        return options
    if action == "reconcile":
        return {
            **bound,
            "outcome": values["outcome"],
            "ownerStopped": values.get("owner_stopped") is True,
            "summary": values["summary"],
            "retrySafe": values.get("retry_safe") is True,
        }
    if action == "cancel":
        if attempt["backend"].get("kind") == "process":
            return {**bound, "reason": values["reason"]}
        return {"reason": values["reason"]}
    if action == "collect":
        return bound
    raise ValueError(f"unknown action {action}")


def summarize_input(action: str, options: dict[str, Any]) -> str:
    """A short, plain input summary for the action log (no long free text)."""
    if action == "create":
        return f"plan {options.get('id')} ({len(options.get('tasks') or [])} task(s), from the old run)"
    parts = []
    for key, value in options.items():
        if key == "backend" and isinstance(value, dict):
            parts.append(f"backend={value.get('kind')}:{value.get('id')}/{value.get('sessionId')}")
        elif key in ("attemptId", "expectedHash"):
            parts.append(f"{key}={str(value)[:8]}")
        elif isinstance(value, str) and len(value) > 40:
            parts.append(f"{key}={value[:39]}…")
        else:
            parts.append(f"{key}={value}")
    return ", ".join(parts) if parts else "(no input)"


# ----------------------------------------------------------------- the action log


@dataclass(frozen=True)
class LogEntry:
    at: str
    action: str
    target: str
    inputs: str
    ok: bool
    result: str


class ActionLog:
    """Every core call made from this session, in order. Thread-safe: workers append too.

    ``listener`` is called after each append (from the appending thread); the app turns it
    into a message so widgets update on the UI thread."""

    def __init__(self) -> None:
        self._entries: list[LogEntry] = []
        self._lock = threading.Lock()
        self.listener: Callable[[LogEntry], None] | None = None

    def append(self, entry: LogEntry) -> None:
        with self._lock:
            self._entries.append(entry)
        if self.listener is not None:
            self.listener(entry)

    @property
    def entries(self) -> list[LogEntry]:
        with self._lock:
            return list(self._entries)


def _target_words(preview_: Preview) -> str:
    if preview_.action == "recover-lock":
        return f"writer.lock {_short(preview_.seen.lock_hash)}"
    if preview_.action == "create":
        return f"run {preview_.run_id}"
    return f"{preview_.run_id}/{preview_.task_id}"


def _result_words(action: str, task_id: str | None, result: dict[str, Any]) -> str:
    if action == "recover-lock":
        return f"writer.lock removed; receipt recorded at {result.get('recoveredAt')}"
    if action == "create":
        return f"run {result.get('id')} created with {len(result.get('tasks', []))} task(s)"
    task = next((t for t in result.get("tasks", []) if t["id"] == task_id), None)
    if task is None:
        return "done"
    attempt = _latest(task)
    if attempt is None:
        return f"acceptance={task['integration']}"
    words = (
        f"attempt {attempt['id'][:8]}: execution={attempt['execution']}; "
        f"verification={attempt['verification']['status']}; acceptance={task['integration']}"
    )
    process = attempt.get("process") or {}
    receipt = process.get("receipt")
    if action == "launch" and isinstance(receipt, dict):
        words += f"; receipt outcome={receipt.get('outcome')}"
    return words


# ----------------------------------------------------------------- execute


def recheck(preview_: Preview) -> dict[str, Any] | None:
    """Re-read the core's current state and refuse if the target changed under the dialog.

    Returns the freshly loaded run (None for recover-lock)."""
    lock = lock_snapshot(preview_.root, WRITER_LOCK)
    if preview_.action == "recover-lock":
        now = Seen(lock_hash=lock["hash"] if lock else None)
        changed = differences("recover-lock", preview_.seen, now)
        if changed:
            raise TargetChanged(
                "writer.lock changed while the dialog was open (" + "; ".join(changed) + "). "
                "Nothing was removed; review the new owner and try again."
            )
        return None
    if preview_.action == "create":
        if os.path.lexists(os.path.join(preview_.root, run_path(preview_.run_id or ""))):
            raise TargetChanged(
                f"Run id {preview_.run_id} was taken while the dialog was open. Nothing was created; "
                "reopen the recovery screen for a new, unused id."
            )
        return None
    run = load_run(preview_.root, preview_.run_id or "")
    now = seen_of(run, preview_.task_id, lock)
    changed = differences(preview_.action, preview_.seen, now)
    if changed:
        raise TargetChanged(
            f"The state of {preview_.run_id}/{preview_.task_id} changed while the dialog was open ("
            + "; ".join(changed)
            + "). Nothing was done; review the current state and try again."
        )
    return run


def execute(
    preview_: Preview,
    values: dict[str, Any],
    log: ActionLog,
    progress: engine.Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> dict[str, Any]:
    """Validate, re-check the target, call the core, log the call. Returns the core's result
    (the saved run, or the recovery receipt). Raises InvalidInput, TargetChanged or the core's
    NexusError; every refusal past validation is logged with its exact message."""
    errors = validate(preview_, values)
    if errors:
        raise InvalidInput(errors)
    target = _target_words(preview_)
    summary = "(not built)"
    try:
        run = recheck(preview_)
        options = build_input(preview_, values, run)
        summary = summarize_input(preview_.action, options)
        result = _call(preview_, options, progress, should_stop)
    except (NexusError, OperationRefused, OSError) as error:
        log.append(LogEntry(now_iso(), preview_.action, target, summary, False, message_of(error)))
        raise
    log.append(
        LogEntry(
            now_iso(), preview_.action, target, summary, True, _result_words(preview_.action, preview_.task_id, result)
        )
    )
    return result


def _call(
    preview_: Preview,
    options: dict[str, Any],
    progress: engine.Progress | None,
    should_stop: Callable[[], bool] | None,
) -> dict[str, Any]:
    return mutations.call(
        preview_.action,
        preview_.root,
        preview_.run_id,
        preview_.task_id,
        options,
        progress=progress,
        should_stop=should_stop,
    )


def recovery_lock_present(directory: str) -> dict[str, Any] | None:
    return lock_snapshot(root_of(directory), RECOVERY_LOCK)
