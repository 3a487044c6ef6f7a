"""Which tasks an action would be accepted on, from the run file alone.

The state checks each engine operation makes first (those on files, processes and ``--input``
are left to the action itself): a task that passes is one the core would accept as far as the
run file says. Pure functions of a loaded run; tolerant of any shape (a refusal, never a crash).
Keep them in step with engine.py and process.py. Shell completion orders task ids by them.

Each check reads only named facts of the run file (``task_facts``), and ``READS`` lists which:
the dashboard re-compares exactly those when a dialog is confirmed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .shapes import JsonObject, Record


def records(value: object) -> list[JsonObject]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def plan_of(run: Record) -> Record:
    plan = run.get("plan")
    return plan if isinstance(plan, dict) else {}


def _definition(run: Record, task: Record) -> Record:
    return next((d for d in records(plan_of(run).get("tasks")) if d.get("id") == task["id"]), {})


def latest_attempt(task: Record) -> JsonObject | None:
    attempts = records(task.get("attempts"))
    return attempts[-1] if attempts else None


def verification_status(attempt: Record) -> str | None:
    verification = attempt.get("verification")
    return verification.get("status") if isinstance(verification, dict) else None


def _cancellation(attempt: Record) -> str | None:
    cancellation = attempt.get("cancellation")
    return cancellation.get("status") if isinstance(cancellation, dict) else None


# ----------------------------------------------------------------- the facts the checks read

Facts = Mapping[str, object]

# Every fact of the run file that a check below reads, by name, with its words (the dashboard
# compares the facts an action reads again when its dialog is confirmed, and names what changed).
FACT_WORDS = {
    "attempt": "latest attempt",
    "attempts": "number of attempts",
    "integration": "acceptance",
    "dependenciesAccepted": "dependencies accepted",
    "execution": "execution",
    "verification": "verification status",
    "verificationRounds": "verification rounds",
    "cancellation": "cancellation",
    "backend": "backend kind",
    "retrySafe": "retry-safe reconciliation",
    "reconciled": "reconciliation",
    "process": "process status",
    "receipt": "process receipt stored",
    "collected": "receipt collected",
    "contract": "execution contract",
    "idempotent": "idempotent",
    "maxAttempts": "maxAttempts",
}


def task_facts(run: Record, task: Record) -> dict[str, object]:
    """The facts of ``task`` (and of the tasks it depends on) that the state checks read."""
    definition = _definition(run, task)
    attempts = records(task.get("attempts"))
    attempt = attempts[-1] if attempts else {}
    backend = attempt.get("backend")
    process = attempt.get("process")
    reconciliation = attempt.get("reconciliation")
    accepted = {t.get("id") for t in records(run.get("tasks")) if t.get("integration") == "accepted"}
    return {
        "attempt": attempt.get("id"),
        "attempts": len(attempts),
        "integration": task.get("integration"),
        "dependenciesAccepted": all(dep in accepted for dep in definition.get("dependsOn") or []),
        "execution": attempt.get("execution"),
        "verification": verification_status(attempt),
        "verificationRounds": attempt.get("verificationRounds"),
        "cancellation": _cancellation(attempt),
        "backend": backend.get("kind") if isinstance(backend, dict) else None,
        "retrySafe": isinstance(reconciliation, dict) and reconciliation.get("retrySafe") is True,
        "reconciled": reconciliation is not None or bool(attempt.get("reconciliations")),
        "process": process.get("status") if isinstance(process, dict) else None,
        "receipt": isinstance(process, dict) and process.get("receipt") is not None,
        "collected": isinstance(process, dict) and bool(process.get("collectedAt")),
        "contract": bool(definition.get("execution")),
        "idempotent": bool(definition.get("idempotent")),
        "maxAttempts": definition.get("maxAttempts"),
    }


# ----------------------------------------------------------------- the checks, on those facts

_BEGIN = ("integration", "attempts", "maxAttempts", "dependenciesAccepted")
_RETRY = (*_BEGIN, "execution", "verification", "cancellation", "idempotent", "retrySafe")
# What each check reads (a test proves it reads nothing else): the one home of "the fields the
# core's precondition of an action depends on".
READS: dict[str, tuple[str, ...]] = {
    "start": ("contract", *_BEGIN),
    "retry": ("contract", *_RETRY),
    "launch": ("contract", *_RETRY),
    "record": ("attempts", "backend", "execution", "cancellation"),
    "reconcile": ("attempts", "integration"),
    "cancel": ("attempts", "integration", "cancellation"),
    "verify": (
        "attempts",
        "integration",
        "execution",
        "cancellation",
        "verification",
        "verificationRounds",
        "maxAttempts",
    ),
    "accept": ("attempts", "integration", "execution", "verification", "cancellation", "dependenciesAccepted"),
    "collect": ("attempts", "backend", "process", "receipt", "collected", "reconciled"),
}


def _active(facts: Facts) -> bool:
    """engine.is_active."""
    return (
        facts["execution"] in ("running", "blocked", "ambiguous")
        or facts["verification"] in ("running", "ambiguous")
        or facts["cancellation"] == "requested"
    )


def _may_begin(facts: Facts, retry: bool) -> bool:
    """engine.begin."""
    if facts["integration"] == "accepted":
        return False
    if retry:
        if not facts["attempts"] or _active(facts):
            return False
        if not (facts["execution"] in ("failed", "cancelled") or facts["verification"] == "failed"):
            return False
        if not facts["idempotent"] and not facts["retrySafe"]:
            return False
    elif facts["attempts"]:
        return False
    limit, count = facts["maxAttempts"], facts["attempts"]
    return isinstance(limit, int) and isinstance(count, int) and count < limit and bool(facts["dependenciesAccepted"])


def _start(facts: Facts) -> bool:
    return not facts["contract"] and _may_begin(facts, retry=False)


def _retry(facts: Facts) -> bool:
    return not facts["contract"] and _may_begin(facts, retry=True)


def _launch(facts: Facts) -> bool:
    """process.launch_task: a first launch, or one with ``{"retry": true}``."""
    return bool(facts["contract"]) and (_may_begin(facts, retry=False) or _may_begin(facts, retry=True))


def _record(facts: Facts) -> bool:
    return (
        bool(facts["attempts"])
        and facts["backend"] == "host"
        and facts["execution"] in ("running", "blocked")
        and facts["cancellation"] == "none"
    )


def _reconcile(facts: Facts) -> bool:
    return bool(facts["attempts"]) and facts["integration"] != "accepted"


def _cancel(facts: Facts) -> bool:
    return bool(facts["attempts"]) and facts["integration"] != "accepted" and facts["cancellation"] == "none"


def _verify(facts: Facts) -> bool:
    if not facts["attempts"] or facts["integration"] == "accepted":
        return False
    rounds, limit = facts["verificationRounds"], facts["maxAttempts"]
    return (
        facts["execution"] == "completed"
        and facts["cancellation"] != "requested"
        and facts["verification"] == "pending"
        and isinstance(rounds, int)
        and isinstance(limit, int)
        and rounds < limit
    )


def _accept(facts: Facts) -> bool:
    """engine.accept_task and the state part of engine.evidence_current."""
    return (
        facts["integration"] != "accepted"
        and bool(facts["attempts"])
        and facts["execution"] == "completed"
        and facts["verification"] == "passed"
        and facts["cancellation"] != "requested"
        and bool(facts["dependenciesAccepted"])
    )


def _collect(facts: Facts) -> bool:
    """process.collect_task: an owned, finished, uncollected and unreconciled receipt."""
    return (
        bool(facts["attempts"])
        and facts["backend"] == "process"
        and facts["process"] == "finished"
        and bool(facts["receipt"])
        and not facts["collected"]
        and not facts["reconciled"]
    )


_ALLOWS: dict[str, Callable[[Facts], bool]] = {
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


def state_allows(action: str, run: Record, task: Record) -> bool:
    """Whether ``action`` on ``task`` passes the core's state checks, as far as the run file
    says (False for an action not in CHECKED_ACTIONS, or a shape the core would refuse)."""
    try:
        return facts_allow(action, task_facts(run, task))
    except Exception:  # a shape the core would refuse anyway
        return False


def facts_allow(action: str, facts: Facts) -> bool:
    """The check of ``action`` on facts as ``task_facts`` gives them (False for an unknown action)."""
    allows = _ALLOWS.get(action)
    return allows is not None and allows(facts)
