"""Which tasks an action would be accepted on, from the run file alone.

The state checks each engine operation makes first (those on files, processes and ``--input``
are left to the action itself): a task that passes is one the core would accept as far as the
run file says. Pure functions of a loaded run; tolerant of any shape (a refusal, never a crash).
Keep them in step with engine.py and process.py. Shell completion orders task ids by them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Task = dict[str, Any]


def records(value: object) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def plan_of(run: dict[str, Any]) -> dict[str, Any]:
    plan = run.get("plan")
    return plan if isinstance(plan, dict) else {}


def _definition(run: dict[str, Any], task: Task) -> dict[str, Any]:
    return next((d for d in records(plan_of(run).get("tasks")) if d.get("id") == task["id"]), {})


def latest_attempt(task: Task) -> dict[str, Any] | None:
    attempts = records(task.get("attempts"))
    return attempts[-1] if attempts else None


def verification_status(attempt: dict[str, Any]) -> str | None:
    verification = attempt.get("verification")
    return verification.get("status") if isinstance(verification, dict) else None


def _cancellation(attempt: dict[str, Any]) -> str | None:
    cancellation = attempt.get("cancellation")
    return cancellation.get("status") if isinstance(cancellation, dict) else None


def _active(attempt: dict[str, Any]) -> bool:
    """engine.is_active."""
    return (
        attempt.get("execution") in ("running", "blocked", "ambiguous")
        or verification_status(attempt) in ("running", "ambiguous")
        or _cancellation(attempt) == "requested"
    )


def _dependencies_accepted(run: dict[str, Any], task: Task) -> bool:
    accepted = {t.get("id") for t in records(run.get("tasks")) if t.get("integration") == "accepted"}
    return all(dep in accepted for dep in _definition(run, task).get("dependsOn") or [])


def _may_begin(run: dict[str, Any], task: Task, retry: bool) -> bool:
    """engine.begin."""
    definition = _definition(run, task)
    previous = latest_attempt(task)
    if task.get("integration") == "accepted":
        return False
    if retry:
        if previous is None or _active(previous):
            return False
        if not (previous.get("execution") in ("failed", "cancelled") or verification_status(previous) == "failed"):
            return False
        reconciliation = previous.get("reconciliation")
        if not definition.get("idempotent") and not (
            isinstance(reconciliation, dict) and reconciliation.get("retrySafe") is True
        ):
            return False
    elif previous is not None:
        return False
    attempts = records(task.get("attempts"))
    limit = definition.get("maxAttempts")
    return isinstance(limit, int) and len(attempts) < limit and _dependencies_accepted(run, task)


def _start(run: dict[str, Any], task: Task) -> bool:
    return not _definition(run, task).get("execution") and _may_begin(run, task, retry=False)


def _retry(run: dict[str, Any], task: Task) -> bool:
    return not _definition(run, task).get("execution") and _may_begin(run, task, retry=True)


def _launch(run: dict[str, Any], task: Task) -> bool:
    """process.launch_task: a first launch, or one with ``{"retry": true}``."""
    return bool(_definition(run, task).get("execution")) and (
        _may_begin(run, task, retry=False) or _may_begin(run, task, retry=True)
    )


def _record(_run: dict[str, Any], task: Task) -> bool:
    attempt = latest_attempt(task)
    backend = attempt.get("backend") if attempt else None
    return (
        attempt is not None
        and isinstance(backend, dict)
        and backend.get("kind") == "host"
        and attempt.get("execution") in ("running", "blocked")
        and _cancellation(attempt) == "none"
    )


def _reconcile(_run: dict[str, Any], task: Task) -> bool:
    return latest_attempt(task) is not None and task.get("integration") != "accepted"


def _cancel(_run: dict[str, Any], task: Task) -> bool:
    attempt = latest_attempt(task)
    return attempt is not None and task.get("integration") != "accepted" and _cancellation(attempt) == "none"


def _verify(run: dict[str, Any], task: Task) -> bool:
    attempt = latest_attempt(task)
    if attempt is None or task.get("integration") == "accepted":
        return False
    rounds = attempt.get("verificationRounds")
    limit = _definition(run, task).get("maxAttempts")
    return (
        attempt.get("execution") == "completed"
        and _cancellation(attempt) != "requested"
        and verification_status(attempt) == "pending"
        and isinstance(rounds, int)
        and isinstance(limit, int)
        and rounds < limit
    )


def _accept(run: dict[str, Any], task: Task) -> bool:
    """engine.accept_task and the state part of engine.evidence_current."""
    attempt = latest_attempt(task)
    return (
        task.get("integration") != "accepted"
        and attempt is not None
        and attempt.get("execution") == "completed"
        and verification_status(attempt) == "passed"
        and _cancellation(attempt) != "requested"
        and _dependencies_accepted(run, task)
    )


def _collect(_run: dict[str, Any], task: Task) -> bool:
    """process.collect_task: an owned, finished, uncollected and unreconciled receipt."""
    attempt = latest_attempt(task)
    if attempt is None:
        return False
    backend = attempt.get("backend")
    process = attempt.get("process")
    return (
        isinstance(backend, dict)
        and backend.get("kind") == "process"
        and isinstance(process, dict)
        and process.get("status") == "finished"
        and process.get("receipt") is not None
        and not process.get("collectedAt")
        and attempt.get("reconciliation") is None
        and not attempt.get("reconciliations")
    )


_ALLOWS: dict[str, Callable[[dict[str, Any], Task], bool]] = {
    "start": _start,
    "launch": _launch,
    "collect": _collect,
    "record": _record,
    "reconcile": _reconcile,
    "verify": _verify,
    "retry": _retry,
    "cancel": _cancel,
    "accept": _accept,
}


CHECKED_ACTIONS = frozenset(_ALLOWS)


def state_allows(action: str, run: dict[str, Any], task: Task) -> bool:
    """Whether ``action`` on ``task`` passes the core's state checks, as far as the run file
    says (False for an action not in CHECKED_ACTIONS, or a shape the core would refuse)."""
    allows = _ALLOWS.get(action)
    if allows is None:
        return False
    try:
        return allows(run, task)
    except Exception:  # a shape the core would refuse anyway
        return False
