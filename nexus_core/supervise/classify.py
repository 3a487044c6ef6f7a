"""Where each task of a run stands, and whether the run has settled (and with what exit code)."""

from __future__ import annotations

from dataclasses import dataclass

from .. import needs
from ..engine import definition_of
from ..hostinfo import owner_gone
from ..shapes import JsonObject, Observation, Task
from ..timeutil import now_ms
from .events import Snapshot, View

EXIT_ACCEPTED = 0
EXIT_ERROR = 1
EXIT_OPERATOR = 3
EXIT_BUDGET = 4
EXIT_UNFINISHED = 6
EXIT_IDLE = 124
EXIT_INTERRUPTED = 130


# ----------------------------------------------------------------- settling

# Where a task stands is decided in one place, nexus_core.needs; these are its categories.
DONE = needs.DONE
MOVING = needs.MOVING
WAITING = needs.WAITING
OPERATOR = needs.OPERATOR
BUDGET = needs.BUDGET
UNFINISHED = needs.UNFINISHED


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


def owner_record_gone(owner: object) -> bool:
    """A lock's or a running verification's owner record ({"pid", "hostname", ...}) whose process
    can no longer run (``hostinfo.owner_gone``); one that does not parse is not judged here."""
    return isinstance(owner, dict) and owner_gone(owner.get("hostname"), owner.get("pid"))


def _task_state(view: View, task: Task, standing: needs.Standing) -> TaskState:
    definition = definition_of(view, task["id"])
    attempt = needs.latest_attempt(task)
    return TaskState(
        task["id"],
        standing.state,
        standing.category,
        standing.detail,
        attempt["id"] if attempt else None,
        len(task["attempts"]),
        int(definition["maxAttempts"]),
    )


def classify_task(
    view: View,
    task: Task,
    observation: Observation,
    dependencies_done: bool,
    now: int,
) -> TaskState:
    """Where one task stands (see the README's "settled" table; decided by ``needs.stand``)."""
    return _task_state(view, task, needs.stand(view, task, observation, dependencies_done, now))


def classify_run(view: View, task_id: str | None = None, now: int | None = None) -> list[TaskState]:
    moment = now_ms() if now is None else now
    standings = needs.stand_run(view, needs.observations_of(view), moment, task_id)
    tasks = {t["id"]: t for t in view["tasks"]}
    return [_task_state(view, tasks[current], standing) for current, standing in standings.items()]


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
    """A lock that blocks every mutation until an operator acts (``needs.lock_need``: unsafe,
    unreadable, or left by a process that is gone), in wait's words."""
    for name, lock in snapshot.locks.items():
        need = needs.lock_need("", name, lock)
        if need is None or lock is None:
            continue
        owner = lock.get("owner")
        if need.kind == needs.LOCK_UNSAFE:
            return f"{name}.lock is unsafe ({lock['unsafe']}); inspect it by hand"
        if not isinstance(owner, dict):
            return f"{name}.lock has no readable owner; inspect it, then recover-lock"
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
