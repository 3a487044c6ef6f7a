"""Where a task stands, and what, if anything, a person must do about it: the one classifier.

``stand`` gives every task one :class:`Standing`: a state (the words ``nexus wait`` prints), a
category (done, moving, waiting, operator, budget, unfinished) and, when a person must act, the
kind of :class:`Need` and its guided action (an Operation of the dashboard, a ``nexus`` action).
``run_needs``, ``lock_needs``, ``unreadable_need`` and ``schedule_needs`` turn the state of a
project into needs: kind, project, run, task, since (a time read from the state, never "now"),
a stable id (the same need keeps it across looks; a new occurrence gets a new one), the guided
action and a short text made of our own words (never a worker's).

Everything that says where a task stands reads this module: ``wait``'s verdict
(``supervise/classify.py``), ``nexus attention``, the dashboard's rows, counts, inbox and guided
recovery, and completion's order. Pure functions of what is loaded; the only probes are the
liveness of a recorded owner pid on this host (``hostinfo``), as inspect itself does.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .hostinfo import owner_gone, owner_liveness
from .shapes import Attempt, JsonObject, LockSnapshot, Observation, Run, Task, TaskDefinition
from .terminal import terminal_safe
from .timeutil import parse_iso_ms

HEARTBEAT_STALE_MS = 5000  # a process supervisor beats about every second (inspect reads this too)

# ----------------------------------------------------------------- categories (wait's words)

DONE = "done"
MOVING = "moving"
WAITING = "waiting"
OPERATOR = "operator"
BUDGET = "budget"
UNFINISHED = "unfinished"

# ----------------------------------------------------------------- kinds of need

WRITER_LOCK_DEAD = "writer-lock-dead"
RECOVERY_LOCK_LEFT = "recovery-lock-left"
LOCK_UNSAFE = "lock-unsafe"
RUN_UNREADABLE = "run-unreadable"
VERIFIER_GONE = "verifier-gone"
SUPERVISOR_GONE = "supervisor-gone"
RECEIPT = "receipt-to-collect"
OVERDUE = "attempt-overdue"
CANCEL_REQUESTED = "cancellation-requested"
BLOCKED = "attempt-blocked"
EXECUTION_AMBIGUOUS = "execution-ambiguous"
VERIFICATION_AMBIGUOUS = "verification-ambiguous"
EVIDENCE_STALE = "evidence-stale"
ACCEPTED_STALE = "accepted-stale"
RESOURCE_CHANGED = "resource-changed"
DEPENDENCY_STALE = "dependency-stale"
VERIFICATION_LIMIT = "verification-limit"
ATTEMPT_FAILED = "attempt-failed"
BUDGET_SPENT = "budget-spent"
SCHEDULE_FAILED = "schedule-failed"

# What each kind is, in a few words (the inbox's "what", the CLI's line, a notification).
KIND_WORDS = {
    WRITER_LOCK_DEAD: "writer.lock left by a process that is gone",
    RECOVERY_LOCK_LEFT: "recovery.lock left by an interrupted recovery",
    LOCK_UNSAFE: "a lock file is unsafe",
    RUN_UNREADABLE: "the run file is corrupt or unsafe",
    VERIFIER_GONE: "a verification was left running by a process that is gone",
    SUPERVISOR_GONE: "the process supervisor stopped reporting",
    RECEIPT: "a process receipt waits to be collected",
    OVERDUE: "the attempt is running past its deadline",
    CANCEL_REQUESTED: "a cancellation waits to be reconciled",
    BLOCKED: "the worker reported it is blocked",
    EXECUTION_AMBIGUOUS: "the execution outcome is ambiguous",
    VERIFICATION_AMBIGUOUS: "the verification was interrupted",
    EVIDENCE_STALE: "the passed verification is stale",
    ACCEPTED_STALE: "evidence changed after acceptance",
    RESOURCE_CHANGED: "a protected resource changed since create",
    DEPENDENCY_STALE: "cannot start: an accepted dependency is stale",
    VERIFICATION_LIMIT: "the verification restart limit is reached",
    ATTEMPT_FAILED: "the attempt failed: retry is a decision",
    BUDGET_SPENT: "failed with no attempt left",
    SCHEDULE_FAILED: "a scheduled re-check failed",
}
KINDS = tuple(KIND_WORDS)

# ----------------------------------------------------------------- where a task stands


@dataclass(frozen=True, slots=True)
class Standing:
    """Where one task stands. ``kind``/``action``: the need, when a person must act."""

    state: str
    category: str
    detail: str | None = None
    kind: str | None = None
    action: str | None = None

    @property
    def needs_person(self) -> bool:
        return self.kind is not None


def latest_attempt(task: Task) -> Attempt | None:
    attempts = task.get("attempts") or []
    return attempts[-1] if attempts else None


def is_active(task: Task) -> bool:
    """engine.is_active (here without importing the engine)."""
    attempt = latest_attempt(task)
    if attempt is None:
        return False
    return (
        attempt["execution"] in ("running", "blocked", "ambiguous")
        or (attempt.get("verification") or {}).get("status") in ("running", "ambiguous")
        or (attempt.get("cancellation") or {}).get("status") == "requested"
    )


# ``clock_due``'s answer for state that must be looked at each time: an owner's liveness.
EVERY_LOOK = 0


def clock_due(tasks: Iterable[Task], now: int) -> int | None:
    """The first moment after ``now`` at which what the clock decides about a run's ``tasks``
    may read differently (their ``overdue``, a process observation's ``heartbeatStale``, the
    needs built on them); ``EVERY_LOOK`` when an owner's liveness decides it (a running
    verification's owner, an unfinished launch's supervisor: a process can end at any moment);
    None when only the run's files can change it. Until then a reader may keep its last answer."""
    due: int | None = None
    for task in tasks:
        attempt = latest_attempt(task)
        if attempt is None:
            continue
        if (attempt.get("verification") or {}).get("status") == "running":
            return EVERY_LOOK  # verifier_gone
        if (attempt.get("backend") or {}).get("kind") == "process":
            process = attempt.get("process")
            process = process if isinstance(process, dict) else {}
            if process.get("status") != "finished" and attempt["execution"] in ("running", "ambiguous"):
                return EVERY_LOOK  # supervisor_gone
            beat = parse_iso_ms(process.get("heartbeatAt"))  # process_observation's heartbeatStale
            if beat is not None and now - beat <= HEARTBEAT_STALE_MS:
                due = _sooner(due, beat + HEARTBEAT_STALE_MS + 1)
        if is_active(task):
            deadline = parse_iso_ms(attempt.get("deadline"))  # overdue
            if deadline is not None and now <= deadline:
                due = _sooner(due, deadline + 1)
    return due


def _sooner(due: int | None, moment: int) -> int:
    return moment if due is None else min(due, moment)


def heartbeat_stale(attempt: Attempt, now: int) -> bool:
    """A launched process whose supervisor stopped beating (or never acknowledged the spawn)."""
    if (attempt.get("backend") or {}).get("kind") != "process":
        return False
    process = attempt.get("process")
    process = process if isinstance(process, dict) else {}
    if process.get("status") == "finished":
        return False
    beat = parse_iso_ms(process.get("heartbeatAt")) or parse_iso_ms(attempt.get("startedAt"))
    return beat is None or now - beat > HEARTBEAT_STALE_MS


def supervisor_gone(attempt: Attempt, now: int) -> bool:
    """The supervisor of a process attempt stopped beating and is not alive on this host (dead,
    or on another host where a stale heartbeat is all there is to go by)."""
    if not heartbeat_stale(attempt, now):
        return False
    backend = attempt.get("backend") or {}
    return owner_liveness(backend.get("hostname"), backend.get("ownerPid")) != "alive"


def verifier_gone(attempt: Attempt) -> bool:
    """A verification stored as running whose owner can certainly no longer run."""
    verification = attempt.get("verification") or {}
    owner = verification.get("owner")
    return (
        verification.get("status") == "running"
        and isinstance(owner, dict)
        and owner_gone(owner.get("hostname"), owner.get("pid"))
    )


def receipt_ready(attempt: Attempt, observation: Observation) -> bool:
    """A finished process's receipt that ``collect`` would take (owned, uncollected, unreconciled)."""
    process = attempt.get("process")
    if (attempt.get("backend") or {}).get("kind") != "process" or not isinstance(process, dict):
        return False
    if attempt.get("reconciliation") is not None or attempt.get("reconciliations"):
        return False
    if process.get("collectedAt") or attempt["execution"] != "running":
        return False
    seen = observation.get("process")
    if isinstance(seen, dict) and "receiptReady" in seen:
        return bool(seen["receiptReady"])
    return process.get("status") == "finished" and process.get("receipt") is not None


def overdue(attempt: Attempt, task: Task, now: int) -> bool:
    """observe_task's ``overdue``: an active attempt past its deadline."""
    deadline = parse_iso_ms(attempt.get("deadline"))
    return bool(is_active(task) and deadline is not None and now > deadline)


def stand(
    run: Run,
    task: Task,
    observation: Observation,
    dependencies_done: bool,
    now: int,
    definition: TaskDefinition | None = None,
    stale_dependencies: Iterable[str] = (),
    active: int | None = None,
) -> Standing:
    """Where one task stands; the first rule that matches wins (the README's table).

    ``observation``: inspect's for the task (``stale``, ``staleReason``, ``overdue``,
    ``resourcesCurrent``, the process's ``receiptReady``); an empty one (completion) leaves
    stale evidence unseen and derives the rest from the record. ``stale_dependencies``: the
    accepted dependencies whose evidence is stale (a task that has not started waits on them).
    ``active``: how many tasks of the run are active (counted here when not given)."""
    if definition is None:
        definition = next(d for d in run["plan"]["tasks"] if d["id"] == task["id"])
    attempt = latest_attempt(task)
    stale_reason = observation.get("staleReason") if observation.get("stale") else None
    resources_changed = observation.get("resourcesCurrent", True) is False
    if task["integration"] == "accepted":
        if resources_changed:
            return Standing("stale-evidence", OPERATOR, stale_reason, RESOURCE_CHANGED)
        if stale_reason:
            return Standing("stale-evidence", OPERATOR, stale_reason, ACCEPTED_STALE)
        return Standing("accepted", DONE)
    if attempt is None:
        if active is None:
            active = sum(1 for t in run["tasks"] if is_active(t))
        return _not_started(run, resources_changed, stale_reason, dependencies_done, tuple(stale_dependencies), active)
    return _in_motion(task, attempt, observation, now) or _at_rest(
        attempt, definition, stale_reason, resources_changed, len(task["attempts"])
    )


def _not_started(
    run: Run,
    resources_changed: bool,
    stale_reason: str | None,
    dependencies_done: bool,
    stale: tuple[str, ...],
    active: int,
) -> Standing:
    if resources_changed:
        return Standing("resource-changed", OPERATOR, stale_reason, RESOURCE_CHANGED)
    if stale:
        return Standing("dependency-stale", OPERATOR, f"{', '.join(stale)} is stale", DEPENDENCY_STALE)
    if not dependencies_done:
        return Standing("waiting-on-dependencies", WAITING)
    if active >= run["plan"]["maxParallel"]:
        # Its start waits for active work; if that work needs an operator, so does this.
        return Standing("waiting-for-capacity", WAITING, f"{active} active of maxParallel {run['plan']['maxParallel']}")
    return Standing("awaiting-start", MOVING, "every dependency is accepted; an agent may start it")


def _in_motion(task: Task, attempt: Attempt, observation: Observation, now: int) -> Standing | None:
    """Work in motion: something is running that will change the state by itself (or was, and
    needs an operator now that its owner is gone), else None."""
    execution = attempt["execution"]
    process = attempt.get("process") if isinstance(attempt.get("process"), dict) else None
    is_process = (attempt.get("backend") or {}).get("kind") == "process"
    verification = attempt.get("verification") or {}
    if verification.get("status") == "running":
        if verifier_gone(attempt):
            pid = (verification.get("owner") or {}).get("pid")
            detail = f"verification left running by pid {pid}, which is gone"
            return Standing("verifier-gone", OPERATOR, detail, VERIFIER_GONE, "reconcile")
        return Standing("verifying", MOVING)
    if (
        is_process
        and (process is None or process.get("status") != "finished")
        and execution in ("running", "ambiguous")
    ):
        if supervisor_gone(attempt, now):
            beat = (process or {}).get("heartbeatAt")
            detail = f"process supervisor heartbeat stale (last {beat})"
            return Standing("heartbeat-stale", OPERATOR, detail, SUPERVISOR_GONE, "reconcile")
        return Standing("launching" if process is None or process.get("status") == "starting" else "running", MOVING)
    if receipt_ready(attempt, observation):
        return Standing("awaiting-collect", UNFINISHED, "the process finished; collect its receipt", RECEIPT, "collect")
    if execution == "running" and (attempt.get("cancellation") or {}).get("status", "none") == "none":
        late = observation["overdue"] if "overdue" in observation else overdue(attempt, task, now)
        if late:
            action = "cancel" if is_process else "reconcile"
            return Standing("overdue", OPERATOR, f"past its deadline {attempt.get('deadline')}", OVERDUE, action)
        return Standing("running", MOVING)
    return None


def _at_rest(
    attempt: Attempt, definition: TaskDefinition, stale_reason: str | None, resources_changed: bool, used: int
) -> Standing:
    """Nothing runs: either someone must decide, or the next routine step awaits an agent."""
    execution = attempt["execution"]
    verification = (attempt.get("verification") or {}).get("status")
    budget = int(definition["maxAttempts"])
    if (attempt.get("cancellation") or {}).get("status") == "requested":
        detail = "cancellation requested; reconcile the attempt"
        return Standing("cancellation-requested", OPERATOR, detail, CANCEL_REQUESTED, "reconcile")
    if execution == "blocked":
        # A host worker records its outcome once unblocked; a process attempt's blocked receipt
        # is final (its process ended): reconcile it, then launch again.
        host = (attempt.get("backend") or {}).get("kind") != "process"
        return Standing("blocked", OPERATOR, attempt.get("blockedRequest"), BLOCKED, "record" if host else "reconcile")
    if execution == "ambiguous":
        detail = "the execution outcome is ambiguous; reconcile the attempt"
        return Standing("ambiguous", OPERATOR, detail, EXECUTION_AMBIGUOUS, "reconcile")
    if verification == "ambiguous":
        detail = "the verification is ambiguous; reconcile the attempt"
        return Standing("verification-ambiguous", OPERATOR, detail, VERIFICATION_AMBIGUOUS, "reconcile")
    if resources_changed:
        return Standing("stale-evidence", OPERATOR, stale_reason, RESOURCE_CHANGED)
    if stale_reason and execution == "completed":
        # A passed verification whose evidence changed: once reconciled failed or cancelled, it is
        # no longer a claim, and the attempt stands as any ended one (a retry is the decision).
        return Standing("stale-evidence", OPERATOR, stale_reason, EVIDENCE_STALE, "reconcile")
    if execution == "completed" and verification == "pending":
        if attempt.get("verificationRounds", 0) >= budget:
            detail = "verification restart limit reached"
            return Standing("verification-limit", OPERATOR, detail, VERIFICATION_LIMIT, "reconcile")
        return Standing("awaiting-verify", UNFINISHED)
    if verification == "passed" and execution == "completed":
        return Standing("awaiting-accept", UNFINISHED)
    # A terminal attempt: failed, cancelled, or its verification failed.
    what = "verification failed" if verification == "failed" else f"execution {execution}"
    if used >= budget:
        return Standing("budget-spent", BUDGET, f"{what}; {used} of {budget} attempts used", BUDGET_SPENT)
    retry = "launch" if definition.get("execution") else "retry"
    retry_safe = (attempt.get("reconciliation") or {}).get("retrySafe") is True
    action = retry if definition.get("idempotent") or retry_safe else "reconcile"
    detail = f"{what}; {used} of {budget} attempts used, retry is a decision"
    return Standing("retry-pending", OPERATOR, detail, ATTEMPT_FAILED, action)


def dependency_closure(run: Run, task_id: str | None) -> list[str]:
    """The task and everything it depends on, in plan order (every task without one)."""
    definitions = {d["id"]: d for d in run["plan"]["tasks"]}
    order = list(definitions)
    if task_id is None:
        return order
    needed: set[str] = set()
    pending = [task_id]
    while pending:
        current = pending.pop()
        if current in needed:
            continue
        needed.add(current)
        pending.extend(definitions[current]["dependsOn"])
    return [t for t in order if t in needed]


def observations_of(run: Mapping[str, Any]) -> dict[str, Observation]:
    return {o["taskId"]: o for o in run.get("observations") or []}


def stand_run(
    run: Run,
    observations: Mapping[str, Observation],
    now: int,
    task_id: str | None = None,
) -> dict[str, Standing]:
    """Every task's standing (with ``task_id``: that task and what it depends on), in plan order."""
    definitions = {d["id"]: d for d in run["plan"]["tasks"]}
    tasks = {t["id"]: t for t in run["tasks"]}
    active = sum(1 for t in run["tasks"] if is_active(t))
    states: dict[str, Standing] = {}

    def resolve(current: str, trail: frozenset[str]) -> Standing:
        known = states.get(current)
        if known is not None:
            return known
        definition = definitions[current]
        task = tasks[current]
        dependencies = [d for d in definition["dependsOn"] if d not in trail]
        stale: list[str] = []
        if latest_attempt(task) is None and task["integration"] != "accepted":
            stale = [
                d
                for d in dependencies
                if tasks[d]["integration"] == "accepted" and observations.get(d, {}).get("stale")
            ]
        done = all(resolve(d, trail | {current}).category == DONE for d in dependencies)
        result = stand(run, task, observations.get(current, {}), done, now, definition, stale, active)
        states[current] = result
        return result

    for current in dependency_closure(run, task_id):
        resolve(current, frozenset())
    return {t: states[t] for t in dependency_closure(run, task_id)}


# ----------------------------------------------------------------- needs


@dataclass(frozen=True, slots=True)
class Need:
    """Something a person must do. ``id`` is stable: the same kind, project, run, task and the
    fact of the state that opened it (an attempt, a verification, a lock's hash...)."""

    kind: str
    project: str
    run: str | None
    task: str | None
    since: str | None  # ISO time read from the state (when the situation began, as far as it says)
    id: str
    action: str | None  # the guided action: a nexus action / dashboard Operation name, or None
    text: str  # our own words, terminal-safe, one line
    attempt: str | None = None
    command: str = field(default="", compare=False)  # the CLI command that resolves (or shows) it
    since_ms: int | None = field(default=None, compare=False)

    @property
    def words(self) -> str:
        return KIND_WORDS[self.kind]

    def as_json(self) -> JsonObject:
        return {
            "id": self.id,
            "kind": self.kind,
            "project": self.project,
            "run": self.run,
            "task": self.task,
            "attempt": self.attempt,
            "since": self.since,
            "action": self.action,
            "command": self.command,
            "what": self.words,
            "text": self.text,
        }


def command_for(
    kind: str, project: str, run: str | None, task: str | None, action: str | None, subject: str | None = None
) -> str:
    """The CLI command that resolves a need (or shows it), for people and scripts."""
    import shlex

    where = f" -d {shlex.quote(project)}"
    if action == "recover-lock":
        return f"nexus recover-lock --input FILE{where}"
    if action in ("verify", "accept") and run and task:
        return f"nexus {action} {run} {task}{where}"
    if action and run and task:
        return f"nexus {action} {run} {task} --input FILE{where}"
    if kind == SCHEDULE_FAILED and subject:
        return f"nexus schedule runs {shlex.quote(subject)}{where}"
    if run:
        return f"nexus inspect {run}{where}"
    return f"nexus inspect{where}"


@functools.lru_cache(maxsize=65536)
def need_id(kind: str, project: str, run: str | None, task: str | None, fact: Hashable) -> str:
    """A need's stable id (a live dashboard asks again each second: cached)."""
    key = "\x1f".join((kind, project, run or "", task or "", str(fact)))
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def make_need(
    kind: str,
    project: str,
    run: str | None,
    task: str | None,
    since: str | None,
    fact: Hashable,
    action: str | None = None,
    text: str | None = None,
    attempt: str | None = None,
    subject: str | None = None,
) -> Need:
    words = text or KIND_WORDS[kind]
    return Need(
        kind,
        project,
        run,
        task,
        since if isinstance(since, str) else None,
        need_id(kind, project, run, task, fact),
        action,
        terminal_safe(words, one_line=True)[:200],
        attempt,
        command_for(kind, project, run, task, action, subject),
        parse_iso_ms(since),
    )


def _first_time(*values: object) -> str | None:
    return next((value for value in values if isinstance(value, str) and parse_iso_ms(value) is not None), None)


def _since_and_fact(
    kind: str, run: Run, task: Task, attempt: Attempt | None, extra: object
) -> tuple[str | None, Hashable]:
    """When the need began as far as the state says, and the fact that identifies it."""
    if attempt is None:
        if kind == DEPENDENCY_STALE:
            return extra if isinstance(extra, str) else None, ("dependency", extra)
        return _first_time(run.get("createdAt")), ("task", run.get("planHash"))
    verification = attempt.get("verification") or {}
    stored = attempt.get("process")
    process: JsonObject = stored if isinstance(stored, dict) else {}
    cancellation = attempt.get("cancellation") or {}
    at_rest = _first_time(attempt.get("endedAt"), attempt.get("observedAt"), attempt.get("startedAt"))
    by_kind: dict[str, Callable[[], tuple[str | None, Hashable]]] = {  # only the asked one is computed
        VERIFIER_GONE: lambda: (_first_time(verification.get("startedAt"), at_rest), verification.get("id")),
        SUPERVISOR_GONE: lambda: (_first_time(process.get("heartbeatAt"), attempt.get("startedAt")), attempt["id"]),
        RECEIPT: lambda: (
            _first_time((process.get("receipt") or {}).get("endedAt"), process.get("heartbeatAt"), at_rest),
            process.get("receiptHash") or attempt["id"],
        ),
        OVERDUE: lambda: (_first_time(attempt.get("deadline")), attempt.get("deadline")),
        CANCEL_REQUESTED: lambda: (
            _first_time(cancellation.get("requestedAt"), at_rest),
            cancellation.get("requestedAt"),
        ),
        BLOCKED: lambda: (at_rest, attempt.get("observedAt")),
        EXECUTION_AMBIGUOUS: lambda: (at_rest, attempt.get("observedAt")),
        VERIFICATION_AMBIGUOUS: lambda: (
            _first_time(verification.get("endedAt"), verification.get("startedAt"), at_rest),
            verification.get("id"),
        ),
        EVIDENCE_STALE: lambda: (_first_time(verification.get("endedAt"), at_rest), verification.get("id")),
        ACCEPTED_STALE: lambda: (_first_time(task.get("acceptedAt"), at_rest), task.get("acceptedAt")),
        RESOURCE_CHANGED: lambda: (_first_time(run.get("createdAt")), run.get("planHash")),
        VERIFICATION_LIMIT: lambda: (
            _first_time(verification.get("endedAt"), at_rest),
            attempt.get("verificationRounds"),
        ),
        ATTEMPT_FAILED: lambda: (_first_time(verification.get("endedAt"), at_rest), verification.get("id")),
        BUDGET_SPENT: lambda: (_first_time(verification.get("endedAt"), at_rest), verification.get("id")),
    }
    since, fact = by_kind[kind]() if kind in by_kind else (at_rest, None)
    return since, (attempt["id"], fact)


def task_need(project: str, run: Run, task: Task, standing: Standing, extra: object = None) -> Need | None:
    """The need of a task that stands so (None when nobody must act)."""
    if standing.kind is None:
        return None
    attempt = latest_attempt(task)
    since, fact = _since_and_fact(standing.kind, run, task, attempt, extra)
    text = f"{task['id']}: {KIND_WORDS[standing.kind]}"
    return make_need(
        standing.kind,
        project,
        run["id"],
        task["id"],
        since,
        fact,
        standing.action,
        text,
        attempt["id"] if attempt else None,
    )


def run_needs(
    project: str,
    run: Run,
    observations: Mapping[str, Observation],
    now: int,
    standings: Mapping[str, Standing] | None = None,
) -> list[Need]:
    """Every need of one loaded run (``observations``: inspect's, by task id)."""
    standings = standings if standings is not None else stand_run(run, observations, now)
    tasks = {t["id"]: t for t in run["tasks"]}
    found = []
    for task_id, standing in standings.items():
        if standing.kind is None:
            continue
        extra = None
        if standing.kind == DEPENDENCY_STALE:
            definition = next(d for d in run["plan"]["tasks"] if d["id"] == task_id)
            times = [
                tasks[d].get("acceptedAt") for d in definition["dependsOn"] if observations.get(d, {}).get("stale")
            ]
            extra = min((t for t in times if isinstance(t, str)), default=None)
        need = task_need(project, run, tasks[task_id], standing, extra)
        if need is not None:
            found.append(need)
    return found


def lock_need(project: str, name: str, lock: LockSnapshot | None) -> Need | None:
    """``name`` ("writer" or "recovery")'s lock when it blocks every mutation until a person acts:
    unsafe, with no readable owner, or left by a process that is gone (another host's owner
    cannot be told: not a need)."""
    if lock is None:
        return None
    owner = lock.get("owner")
    created = owner.get("createdAt") if isinstance(owner, dict) else None
    if lock.get("unsafe"):
        return make_need(
            LOCK_UNSAFE, project, None, None, created, (name, lock.get("hash")), None, f"{name}.lock is unsafe"
        )
    if isinstance(owner, dict) and not owner_gone(owner.get("hostname"), owner.get("pid")):
        return None
    pid = owner.get("pid") if isinstance(owner, dict) else None
    text = f"{name}.lock left by pid {pid}, which is gone" if pid is not None else f"{name}.lock has no readable owner"
    if name == "writer":
        return make_need(WRITER_LOCK_DEAD, project, None, None, created, lock.get("hash"), "recover-lock", text)
    return make_need(RECOVERY_LOCK_LEFT, project, None, None, created, lock.get("hash"), None, text)


def lock_needs(project: str, writer: LockSnapshot | None, recovery: LockSnapshot | None) -> list[Need]:
    """The needs of a project's two locks (``lock_need``)."""
    found = [lock_need(project, "writer", writer), lock_need(project, "recovery", recovery)]
    return [need for need in found if need is not None]


def unreadable_need(project: str, run_id: str, error: str, changed_at: str | None) -> Need:
    """A run file that cannot be loaded (``changed_at``: the file's modification time)."""
    return make_need(
        RUN_UNREADABLE,
        project,
        run_id,
        None,
        changed_at,
        (error, changed_at),
        None,
        f"run {run_id}: {KIND_WORDS[RUN_UNREADABLE]}",
    )


def schedule_need(
    project: str, schedule_id: str, run_id: str | None, occurrence: object, finished_at: str | None
) -> Need:
    text = f"schedule {schedule_id}: {KIND_WORDS[SCHEDULE_FAILED]}"
    fact = (schedule_id, occurrence)
    return make_need(SCHEDULE_FAILED, project, run_id, None, finished_at, fact, None, text, subject=schedule_id)


def oldest_first(needs: Iterable[Need]) -> list[Need]:
    """Oldest first; needs whose time the state does not say come first (they may be oldest)."""
    return sorted(
        needs,
        key=lambda need: (
            need.since_ms is not None,
            need.since_ms or 0,
            need.project,
            need.run or "",
            need.task or "",
            need.kind,
        ),
    )
