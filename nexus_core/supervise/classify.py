"""Where each task of a run stands, and whether the run has settled (and with what exit code)."""

from __future__ import annotations

from dataclasses import dataclass

from ..engine import definition_of, is_active, latest
from ..hostinfo import owner_gone
from ..shapes import Attempt, JsonObject, Observation, Task
from ..timeutil import now_ms
from .events import Snapshot, View, _observations, heartbeat_stale

EXIT_ACCEPTED = 0
EXIT_ERROR = 1
EXIT_OPERATOR = 3
EXIT_BUDGET = 4
EXIT_UNFINISHED = 6
EXIT_IDLE = 124
EXIT_INTERRUPTED = 130


# ----------------------------------------------------------------- settling


DONE = "done"
MOVING = "moving"
WAITING = "waiting"
OPERATOR = "operator"
BUDGET = "budget"
UNFINISHED = "unfinished"


@dataclass(frozen=True)
class TaskState:
    task: str
    state: str
    category: str
    detail: str | None
    attempt: str | None
    attempts_used: int
    max_attempts: int

    def as_json(self) -> JsonObject:
        return {
            "task": self.task,
            "state": self.state,
            "category": self.category,
            "attempt": self.attempt,
            "attemptsUsed": self.attempts_used,
            "maxAttempts": self.max_attempts,
            "detail": self.detail,
        }


def _owner_gone(owner: object) -> bool:
    """A lock's or a running verification's owner record ({"pid", "hostname", ...}) whose process
    can no longer run (``hostinfo.owner_gone``); one that does not parse is not judged here."""
    return isinstance(owner, dict) and owner_gone(owner.get("hostname"), owner.get("pid"))


# (state, category, detail) of a task, before the attempt counts are added.
_Found = tuple[str, str, str | None]


def classify_task(
    view: View,
    task: Task,
    observation: Observation,
    dependencies_done: bool,
    now: int,
) -> TaskState:
    """Where one task stands (see the README's "settled" table)."""
    definition = definition_of(view, task["id"])
    attempt = latest(task)
    used, budget = len(task["attempts"]), int(definition["maxAttempts"])
    stale_reason = observation.get("staleReason") if observation.get("stale") else None
    found: _Found
    if task["integration"] == "accepted":
        found = ("stale-evidence", OPERATOR, stale_reason) if stale_reason else ("accepted", DONE, None)
    elif attempt is None:
        found = _not_started(view, dependencies_done)
    else:
        found = _in_motion(attempt, observation, now) or _at_rest(attempt, stale_reason, used, budget)
    name, category, detail = found
    return TaskState(task["id"], name, category, detail, attempt["id"] if attempt else None, used, budget)


def _not_started(view: View, dependencies_done: bool) -> _Found:
    if not dependencies_done:
        return ("waiting-on-dependencies", WAITING, None)
    active = sum(1 for t in view["tasks"] if is_active(t))
    if active >= view["plan"]["maxParallel"]:
        # Its start waits for active work; if that work needs an operator, so does this.
        return ("waiting-for-capacity", WAITING, f"{active} active of maxParallel {view['plan']['maxParallel']}")
    return ("awaiting-start", MOVING, "every dependency is accepted; an agent may start it")


def _in_motion(attempt: Attempt, observation: Observation, now: int) -> _Found | None:
    """Work in motion: something is running that will change the state by itself (or was, and
    needs an operator now that it stopped), else None."""
    execution = attempt["execution"]
    process = attempt.get("process") if isinstance(attempt.get("process"), dict) else None
    is_process = attempt["backend"].get("kind") == "process"
    if attempt["verification"].get("status") == "running":
        owner = attempt["verification"].get("owner")
        if _owner_gone(owner):
            pid_text = owner.get("pid") if isinstance(owner, dict) else None
            return ("verifier-gone", OPERATOR, f"verification left running by pid {pid_text}, which is gone")
        return ("verifying", MOVING, None)
    if (
        is_process
        and (process is None or process.get("status") != "finished")
        and execution in ("running", "ambiguous")
    ):
        if heartbeat_stale(attempt, now):
            beat = (process or {}).get("heartbeatAt")
            return ("heartbeat-stale", OPERATOR, f"process supervisor heartbeat stale (last {beat})")
        return ("launching" if process is None or process.get("status") == "starting" else "running", MOVING, None)
    if is_process and execution == "running" and process is not None and not process.get("collectedAt"):
        return ("awaiting-collect", UNFINISHED, "the process finished; collect its receipt")
    if execution == "running" and attempt.get("cancellation", {}).get("status") == "none":
        if observation.get("overdue"):
            return ("overdue", OPERATOR, f"past its deadline {attempt.get('deadline')}")
        return ("running", MOVING, None)
    return None


def _at_rest(attempt: Attempt, stale_reason: str | None, used: int, budget: int) -> _Found:
    """Nothing runs: either someone must decide, or the next routine step awaits an agent."""
    execution = attempt["execution"]
    verification = attempt["verification"].get("status")
    if attempt.get("cancellation", {}).get("status") == "requested":
        return ("cancellation-requested", OPERATOR, "cancellation requested; reconcile the attempt")
    if execution == "blocked":
        return ("blocked", OPERATOR, attempt.get("blockedRequest"))
    if execution == "ambiguous":
        return ("ambiguous", OPERATOR, "the execution outcome is ambiguous; reconcile the attempt")
    if verification == "ambiguous":
        return ("verification-ambiguous", OPERATOR, "the verification is ambiguous; reconcile the attempt")
    if stale_reason:
        return ("stale-evidence", OPERATOR, stale_reason)
    if execution == "completed" and verification == "pending":
        if attempt.get("verificationRounds", 0) >= budget:
            return ("verification-limit", OPERATOR, "verification restart limit reached")
        return ("awaiting-verify", UNFINISHED, None)
    if verification == "passed" and execution == "completed":
        return ("awaiting-accept", UNFINISHED, None)
    # A terminal attempt: failed, cancelled, or its verification failed.
    what = "verification failed" if verification == "failed" else f"execution {execution}"
    if used >= budget:
        return ("budget-spent", BUDGET, f"{what}; {used} of {budget} attempts used")
    return ("retry-pending", OPERATOR, f"{what}; {used} of {budget} attempts used, retry is a decision")


def _closure(view: View, task_id: str | None) -> list[str]:
    """The task and everything it depends on, in plan order (every task without one)."""
    order = [t["id"] for t in view["plan"]["tasks"]]
    if task_id is None:
        return order
    needed: set[str] = set()
    pending = [task_id]
    while pending:
        current = pending.pop()
        if current in needed:
            continue
        needed.add(current)
        pending.extend(definition_of(view, current)["dependsOn"])
    return [t for t in order if t in needed]


def classify_run(view: View, task_id: str | None = None, now: int | None = None) -> list[TaskState]:
    moment = now_ms() if now is None else now
    observations = _observations(view)
    tasks = {t["id"]: t for t in view["tasks"]}
    states: dict[str, TaskState] = {}

    def resolve(current: str, trail: frozenset[str]) -> TaskState:
        if current in states:
            return states[current]
        dependencies = [d for d in definition_of(view, current)["dependsOn"] if d not in trail]
        done = all(resolve(d, trail | {current}).category == DONE for d in dependencies)
        result = classify_task(view, tasks[current], observations.get(current, {}), done, moment)
        states[current] = result
        return result

    return [resolve(t, frozenset()) for t in _closure(view, task_id)]


@dataclass(frozen=True)
class Verdict:
    settled: bool
    code: int | None
    outcome: str | None
    message: str
    states: tuple[TaskState, ...]


def _listing(states: list[TaskState]) -> str:
    return "; ".join(f"{s.task}: {s.state}" + (f" ({s.detail})" if s.detail else "") for s in states)


def lock_problem(snapshot: Snapshot) -> str | None:
    """A lock that blocks every mutation until an operator acts: unsafe, unreadable, or left by
    a process that is gone (on this host; another host's owner cannot be probed)."""
    for name, lock in snapshot.locks.items():
        if lock is None:
            continue
        if "unsafe" in lock:
            return f"{name}.lock is unsafe ({lock['unsafe']}); inspect it by hand"
        owner = lock.get("owner")
        if not isinstance(owner, dict):
            return f"{name}.lock has no readable owner; inspect it, then recover-lock"
        if _owner_gone(owner):
            return f"{name}.lock was left by pid {owner.get('pid')}, which is gone; inspect it, then recover-lock"
    return None


def verdict_for(snapshot: Snapshot, run_id: str, task_id: str | None = None) -> Verdict:
    """Whether the run (or the task with its dependencies) has settled, and with what code."""
    subject = f"Run {run_id}" if task_id is None else f"Task {task_id} of run {run_id}"
    if snapshot.view is None:
        if snapshot.unknown:
            return Verdict(True, EXIT_ERROR, "error", snapshot.error or "unknown run", ())
        return Verdict(True, EXIT_OPERATOR, "needs-operator", f"{subject} is unreadable: {snapshot.error}", ())
    states = classify_run(snapshot.view, task_id, snapshot.at_ms)
    stuck = lock_problem(snapshot)
    if stuck is not None:
        # No mutation can happen until an operator deals with the lock, whatever else is running.
        return Verdict(True, EXIT_OPERATOR, "needs-operator", f"{subject} needs an operator: {stuck}.", tuple(states))
    by = {category: [s for s in states if s.category == category] for category in (MOVING, OPERATOR, BUDGET)}
    unfinished = [s for s in states if s.category == UNFINISHED]
    frozen = tuple(states)
    if by[MOVING]:
        return Verdict(False, None, None, f"{subject} in progress: {_listing(by[MOVING])}", frozen)
    if all(s.category == DONE for s in states):
        what = "every task accepted" if task_id is None else "accepted, with its dependencies"
        return Verdict(True, EXIT_ACCEPTED, "accepted", f"{subject}: {what}.", frozen)
    if by[BUDGET]:
        return Verdict(
            True, EXIT_BUDGET, "budget-spent", f"{subject}: attempt budget spent: {_listing(by[BUDGET])}.", frozen
        )
    if by[OPERATOR]:
        return Verdict(
            True, EXIT_OPERATOR, "needs-operator", f"{subject} needs an operator: {_listing(by[OPERATOR])}.", frozen
        )
    return Verdict(
        True, EXIT_UNFINISHED, "unfinished", f"{subject} settled but not finished: {_listing(unfinished)}.", frozen
    )
