"""The state checks of the actions, each with its refusal words: the one home of "would the
core accept this action on this task, as far as the run file says".

A :class:`Check` reads named facts of the run file (:func:`task_facts`, listed in FACT_WORDS)
and holds two wordings of the same refusal: ``message``, the SPEC's exact text, which the engine
raises (``require``), and ``words``, how the dashboard says it (a key press, the palette). The
engine (engine.py, process.py) raises from the groups below at the places the SPEC orders them
between its other steps (input, files, processes); each action's entry of the command table
(``nexus_core.actions.COMMANDS``) lists its checks in that order, and the dashboard and shell
completion ask that entry. Pure functions of a loaded run; tolerant of any shape.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import cast

from .errors import NexusError, fail
from .paths import look_memo
from .shapes import JsonObject, Record


def records(value: object) -> list[JsonObject]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# How many lists a look keeps indexed (a run's tasks and its plan's, first and last).
BY_ID_KEPT = 4


def by_id(value: object, *, last: bool = False) -> dict[object, JsonObject]:
    """The records of the list ``value`` by their ``id``: the first of an id, as a scan finds it,
    or with ``last`` the last, as a dict built from them keeps it. Within a look, built once per
    list (a 200-task run asked it for each of its tasks: quadratic)."""
    memo = look_memo()
    kept = (
        None
        if memo is None
        else cast(dict[tuple[int, bool], tuple[object, dict[object, JsonObject]]], memo.setdefault("by_id", {}))
    )
    key = (id(value), last)
    if kept is not None:
        entry = kept.get(key)
        if entry is not None and entry[0] is value:
            return entry[1]
    index: dict[object, JsonObject] = {}
    for item in records(value):
        if last or item.get("id") not in index:
            index[item.get("id")] = item
    if kept is not None:
        # The list is kept with its index (its id is not reused while kept), for the run being
        # inspected only: the few newest; a look over 30 runs kept every parsed run alive.
        kept[key] = (value, index)
        while len(kept) > BY_ID_KEPT:
            del kept[next(iter(kept))]
    return index


def plan_of(run: Record) -> Record:
    plan = run.get("plan")
    return plan if isinstance(plan, dict) else {}


def _definition(run: Record, task: Record) -> Record:
    return by_id(plan_of(run).get("tasks")).get(task["id"]) or {}


def latest_attempt(task: Record) -> JsonObject | None:
    attempts = records(task.get("attempts"))
    return attempts[-1] if attempts else None


def verification_status(attempt: Record) -> str | None:
    verification = attempt.get("verification")
    return verification.get("status") if isinstance(verification, dict) else None


def _status(value: object) -> str | None:
    return value.get("status") if isinstance(value, dict) else None


# ----------------------------------------------------------------- the facts the checks read

Facts = Mapping[str, object]

# Every fact of the run file that a check reads, by name, with its words (the dashboard
# compares the facts an action reads again when its dialog is confirmed, and names what changed).
FACT_WORDS = {
    "attempt": "latest attempt",
    "attempts": "number of attempts",
    "integration": "acceptance",
    "unacceptedDependency": "first dependency not accepted",
    "execution": "execution",
    "verification": "verification status",
    "verifiedAttempt": "verification of the latest attempt",
    "verificationRounds": "verification rounds",
    "cancellation": "cancellation",
    "backend": "backend kind",
    "retrySafe": "retry-safe reconciliation",
    "reconciled": "reconciliation",
    "process": "process status",
    "receipt": "process receipt stored",
    "keptReceipt": "process receipt kept beside the state",
    "collected": "receipt collected",
    "contract": "execution contract",
    "idempotent": "idempotent",
    "maxAttempts": "maxAttempts",
}
# A fact of the call, not of the run file: whether it opens a retry attempt (start: no, retry:
# yes, launch: its input's ``retry``). See ``nexus_core.actions.facts_for``.
CALL_FACTS = ("retry",)


def task_facts(run: Record, task: Record, kept_receipt: bool | None = None) -> dict[str, object]:
    """The facts of ``task`` (and of the tasks it depends on) that the checks read.

    ``kept_receipt``: whether a process receipt the launch could not store is kept beside the
    state for the latest attempt (collect stores it first); None reads it from the inspection's
    observation when ``run`` is one (the engine's own load has none: it recovers the file first)."""
    definition = _definition(run, task)
    attempts = records(task.get("attempts"))
    attempt = attempts[-1] if attempts else {}
    backend = attempt.get("backend")
    process = attempt.get("process")
    reconciliation = attempt.get("reconciliation")
    verification = attempt.get("verification")
    tasks = by_id(run.get("tasks"), last=True)
    unaccepted = next(
        (dep for dep in definition.get("dependsOn") or [] if (tasks.get(dep) or {}).get("integration") != "accepted"),
        None,
    )
    if kept_receipt is None:
        kept_receipt = _kept_receipt_observed(run, task)
    return {
        "attempt": attempt.get("id"),
        "attempts": len(attempts),
        "integration": task.get("integration"),
        "unacceptedDependency": unaccepted,
        "execution": attempt.get("execution"),
        "verification": _status(verification),
        "verifiedAttempt": bool(attempt)
        and isinstance(verification, dict)
        and verification.get("attemptId") == attempt.get("id"),
        "verificationRounds": attempt.get("verificationRounds"),
        "cancellation": _status(attempt.get("cancellation")),
        "backend": backend.get("kind") if isinstance(backend, dict) else None,
        "retrySafe": isinstance(reconciliation, dict) and reconciliation.get("retrySafe") is True,
        "reconciled": reconciliation is not None or bool(attempt.get("reconciliations")),
        "process": _status(process),
        "receipt": isinstance(process, dict) and process.get("receipt") is not None,
        "keptReceipt": kept_receipt,
        "collected": isinstance(process, dict) and bool(process.get("collectedAt")),
        "contract": bool(definition.get("execution")),
        "idempotent": bool(definition.get("idempotent")),
        "maxAttempts": definition.get("maxAttempts"),
    }


def _kept_receipt_observed(run: Record, task: Record) -> bool:
    observation = next((o for o in records(run.get("observations")) if o.get("taskId") == task.get("id")), {})
    process = observation.get("process")
    return isinstance(process, dict) and isinstance(process.get("recoverableReceipt"), str)


# ----------------------------------------------------------------- checks


class Check:
    """One state check of an action: what it reads, when it passes, its refusal in the SPEC's
    words (``message``, without the engine's ``Nexus: ``; ``{fact}`` names a fact's value) and
    in the dashboard's (``words``). ``interleaved``: the engine makes it at its own place between
    other steps (each dependency's acceptance, then its evidence, in plan order), so ``require``
    leaves it out. A plain class: a NamedTuple's class costs some 0.7 ms to make, on every call
    of the CLI (the vocabulary holds these)."""

    __slots__ = ("interleaved", "message", "name", "passes", "reads", "words")

    def __init__(
        self,
        name: str,
        reads: tuple[str, ...],
        passes: Callable[[Facts], bool],
        message: str,
        words: str,
        interleaved: bool = False,
    ) -> None:
        self.name = name
        self.reads = reads
        self.passes = passes
        self.message = message
        self.words = words
        self.interleaved = interleaved

    def __repr__(self) -> str:
        return f"Check({self.name!r}: {self.message!r})"

    def refusal(self, facts: Facts) -> NexusError:
        """The engine's refusal: exactly the SPEC's message."""
        return fail(self.message.format_map(facts) if "{" in self.message else self.message)


def first_refusal(checks: Iterable[Check], facts: Facts) -> Check | None:
    """The first check of ``checks`` that ``facts`` fail, or None."""
    return next((check for check in checks if not check.passes(facts)), None)


def require(checks: Iterable[Check], facts: Facts) -> None:
    """Raise the first failing check's refusal (the interleaved ones are the caller's)."""
    failing = first_refusal((check for check in checks if not check.interleaved), facts)
    if failing is not None:
        raise failing.refusal(facts)


def _int_below(value: object, limit: object) -> bool:
    return isinstance(value, int) and isinstance(limit, int) and value < limit


def _active(facts: Facts) -> bool:
    """SPEC 5.0.7 (engine.is_active) on the latest attempt."""
    return (
        facts["execution"] in ("running", "blocked", "ambiguous")
        or facts["verification"] in ("running", "ambiguous")
        or facts["cancellation"] == "requested"
    )


NO_ATTEMPT = "The task has no attempt yet."
IS_ACCEPTED = "The task is accepted; nothing can change it."

# -- begin (SPEC 5.4-5.7): start, retry and launch, each after its own contract check
START_CONTRACT = Check(
    "host-plan",
    ("contract",),
    lambda f: not f["contract"],
    "Executable plans use launch; start requires a host-owned plan and host identity.",
    "This task has an execution contract: use launch.",
)
RETRY_CONTRACT = Check(
    "host-plan",
    ("contract",),
    lambda f: not f["contract"],
    "Executable plans retry through launch with retry: true; retry requires a host identity.",
    "This task has an execution contract: launch retries it.",
)
LAUNCH_CONTRACT = Check(
    "execution-contract",
    ("contract",),
    lambda f: bool(f["contract"]),
    "launch needs a plan with an explicit execution contract.",
    "This task has no execution contract: use start (or retry).",
)
_RETRY_NEEDS = "Retry requires a reconciled failed/cancelled attempt or failed verification."
BEGIN = (
    Check(
        "unaccepted",
        ("integration",),
        lambda f: f["integration"] != "accepted",
        "Accepted tasks cannot be restarted.",
        "Accepted tasks cannot be restarted.",
    ),
    Check(
        "previous-attempt",
        ("attempts",),
        lambda f: not f["retry"] or bool(f["attempts"]),
        _RETRY_NEEDS,
        "There is no attempt to retry.",
    ),
    Check(
        "retryable",
        ("execution", "verification", "cancellation"),
        lambda f: (
            not f["retry"]
            or (not _active(f) and (f["execution"] in ("failed", "cancelled") or f["verification"] == "failed"))
        ),
        _RETRY_NEEDS,
        "Retry needs a reconciled failed or cancelled attempt, or a failed verification.",
    ),
    Check(
        "retry-safe",
        ("idempotent", "retrySafe"),
        lambda f: not f["retry"] or bool(f["idempotent"]) or bool(f["retrySafe"]),
        "Non-idempotent retry requires an explicit retry-safe reconciliation.",
        "This task is not idempotent: reconcile with retry-safe first.",
    ),
    Check(
        "first-attempt",
        ("attempts",),
        lambda f: bool(f["retry"]) or not f["attempts"],
        "Task already has an attempt; inspect or explicitly retry.",
        "The task already has an attempt; retry it instead.",
    ),
    Check(
        "attempt-budget",
        ("attempts", "maxAttempts"),
        lambda f: _int_below(f["attempts"], f["maxAttempts"]),
        "Retry limit reached.",
        "The attempt budget (maxAttempts) is spent.",
    ),
)
# SPEC 5.6 step 5 and 5.0.8's last step: each dependency in plan order is accepted, then its
# evidence is current; the engine interleaves the two (engine.dependencies_current).
DEPENDENCIES = Check(
    "dependencies",
    ("unacceptedDependency",),
    lambda f: f["unacceptedDependency"] is None,
    "Dependency has not been accepted: {unacceptedDependency}",
    "A task it depends on is not accepted yet.",
    interleaved=True,
)

# -- an action on the latest attempt, after engine.bound_attempt (which refuses a missing one
# in the same words)
ATTEMPT_BOUND = Check(
    "attempt", ("attempts",), lambda f: bool(f["attempts"]), "Stale or missing attempt identity.", NO_ATTEMPT
)
RECORD = (
    ATTEMPT_BOUND,
    Check(
        "host-attempt",
        ("backend",),
        lambda f: f["backend"] != "process",
        "Process attempts collect their owned receipt; worker observations cannot replace it.",
        "Process attempts are collected, not recorded.",
    ),
    Check(
        "working",
        ("execution", "cancellation"),
        lambda f: f["execution"] in ("running", "blocked") and f["cancellation"] == "none",
        "This attempt requires reconciliation, not a late worker acknowledgement.",
        "This attempt needs reconciliation, not a worker report.",
    ),
)
RECONCILE = (
    ATTEMPT_BOUND,
    Check(
        "unaccepted",
        ("integration",),
        lambda f: f["integration"] != "accepted",
        "Accepted work cannot be rewritten through reconciliation.",
        IS_ACCEPTED,
    ),
)
_CANCELLABLE = "Only an unaccepted existing attempt can be cancelled."
CANCEL = (
    Check("attempt", ("attempts",), lambda f: bool(f["attempts"]), _CANCELLABLE, NO_ATTEMPT),
    Check("unaccepted", ("integration",), lambda f: f["integration"] != "accepted", _CANCELLABLE, IS_ACCEPTED),
    Check(
        "no-cancellation",
        ("cancellation",),
        lambda f: f["cancellation"] == "none",
        "Cancellation is already recorded; inspect and reconcile it.",
        "Cancellation is already recorded; reconcile it.",
    ),
)
_VERIFIABLE = "Verification requires completed, unaccepted, reconciled work."
VERIFY = (
    Check("attempt", ("attempts",), lambda f: bool(f["attempts"]), _VERIFIABLE, NO_ATTEMPT),
    Check("unaccepted", ("integration",), lambda f: f["integration"] != "accepted", _VERIFIABLE, IS_ACCEPTED),
    Check(
        "completed",
        ("execution", "cancellation"),
        lambda f: f["execution"] == "completed" and f["cancellation"] != "requested",
        _VERIFIABLE,
        "Verification needs a completed, reconciled attempt.",
    ),
    Check(
        "unverified",
        ("verification",),
        lambda f: f["verification"] == "pending",
        "Verification already exists; inspect/reconcile or retry before executing again.",
        "This attempt already has a verification.",
    ),
    Check(
        "verification-budget",
        ("verificationRounds", "maxAttempts"),
        lambda f: _int_below(f["verificationRounds"], f["maxAttempts"]),
        "Verification restart limit reached; reconcile and create a new attempt.",
        "The verification restart limit is reached.",
    ),
)
# SPEC 5.0.8 step 3, on the task and on each dependency (engine.evidence_current).
_ELIGIBLE = "Current attempt has no eligible passed verification."
EVIDENCE = (
    Check("attempt", ("attempts",), lambda f: bool(f["attempts"]), _ELIGIBLE, NO_ATTEMPT),
    Check(
        "passed",
        ("verification",),
        lambda f: f["verification"] == "passed",
        _ELIGIBLE,
        "Accept needs a passed verification.",
    ),
    Check(
        "eligible",
        ("verifiedAttempt", "execution", "cancellation"),
        lambda f: bool(f["verifiedAttempt"]) and f["execution"] == "completed" and f["cancellation"] != "requested",
        _ELIGIBLE,
        "The passed verification is not of the current, completed attempt.",
    ),
)
ACCEPT_UNACCEPTED = Check(
    "unaccepted", ("integration",), lambda f: f["integration"] != "accepted", "Task is already accepted.", IS_ACCEPTED
)
ACCEPT = (ACCEPT_UNACCEPTED, *EVIDENCE, DEPENDENCIES)
# SPEC 5.8 steps 2-4, then (after the receipt's integrity, the engine's) step 6.
COLLECT_READY = (
    ATTEMPT_BOUND,
    Check(
        "process-attempt",
        ("backend",),
        lambda f: f["backend"] == "process",
        "collect requires an owned process attempt.",
        "Only process attempts have a receipt to collect.",
    ),
    Check(
        "receipt-ready",
        ("process", "receipt", "keptReceipt"),
        lambda f: (f["process"] == "finished" and bool(f["receipt"])) or bool(f["keptReceipt"]),
        "Process receipt is not ready; inspect the original owner.",
        "The process receipt is not ready.",
    ),
    Check(
        "uncollected",
        ("collected",),
        lambda f: not f["collected"],
        "This process receipt was already collected.",
        "This receipt was already collected.",
    ),
)
COLLECT_UNRECONCILED = Check(
    "unreconciled",
    ("reconciled",),
    lambda f: not f["reconciled"],
    "A reconciled attempt cannot be overwritten by a late process receipt.",
    "The attempt is reconciled: a late receipt cannot overwrite it.",
)
COLLECT = (*COLLECT_READY, COLLECT_UNRECONCILED)
START = (START_CONTRACT, *BEGIN, DEPENDENCIES)
RETRY = (RETRY_CONTRACT, *BEGIN, DEPENDENCIES)
LAUNCH = (LAUNCH_CONTRACT, *BEGIN, DEPENDENCIES)
