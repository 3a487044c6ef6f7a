"""Headless supervision: ``nexus wait`` and ``nexus loop``.

Both work from successive read-only snapshots of one run (the run file through ``inspect``,
the two lock files and the lock-recovery receipts). Events are derived by diffing two
snapshots, so a change that happens between two looks is still reported (merged into one
look), never lost. ``wait`` never writes anything; ``loop`` writes only through
``verify`` when asked to.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, NoReturn

import click

from . import canonical
from .engine import definition_of, is_active, latest
from .errors import NexusError
from .hostinfo import hostname, pid_alive
from .locks import LOCK_RECOVERY_DIR, RECOVERY_LOCK, WRITER_LOCK, lock_snapshot
from .observe import HEARTBEAT_STALE_MS, inspect_loaded
from .paths import root_of
from .snapshots import observational_hashes
from .store import BASE, parse_run, read_state_bytes, run_path
from .terminal import terminal_safe
from .timeutil import iso_from_ms, now_ms, parse_iso_ms

View = dict[str, Any]
Event = dict[str, Any]
Emit = Callable[[str], None]

EXIT_ACCEPTED = 0
EXIT_ERROR = 1
EXIT_OPERATOR = 3
EXIT_BUDGET = 4
EXIT_UNFINISHED = 6
EXIT_IDLE = 124
EXIT_INTERRUPTED = 130

DEFAULT_IDLE_TIMEOUT = 600.0
DEFAULT_SETTLE_GRACE = 2.0
WATCH_TICK_MS = 500  # the watcher wakes at least this often for time-derived flags
POLL_SECONDS = 0.2  # polling fallback: a cheap stat-based look this often
FULL_LOOK_SECONDS = 1.0  # a full inspect at least this often (workspace files, clocks)
LOOP_TICK_CAP = 500
LOOP_MIN_SECONDS = 30
LOOP_MAX_SECONDS = 24 * 3600

LOCK_NAMES = {"writer": WRITER_LOCK, "recovery": RECOVERY_LOCK}


# ----------------------------------------------------------------- snapshots


@dataclass
class Snapshot:
    """One look at a run: its inspect view (or why it could not be read) and the locks."""

    at_ms: int
    view: View | None
    error: str | None = None
    unknown: bool = False
    locks: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    recoveries: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def sequence(self) -> int | None:
        return self.view["sequence"] if self.view is not None else None


def _dict(value: object) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _message(error: BaseException) -> str:
    if isinstance(error, NexusError):
        return error.message
    if isinstance(error, OSError) and error.filename:
        return f"{error.strerror}: {error.filename}"
    return str(error) or type(error).__name__


def _lock_view(root: str, rel: str) -> dict[str, Any] | None:
    try:
        return lock_snapshot(root, rel)
    except (NexusError, OSError) as error:
        # A lock path that is a symlink or a directory: present, and not to be trusted.
        return {"hash": None, "owner": None, "unsafe": _message(error)}


def _recovery_receipts(root: str, known: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Lock-recovery receipts by file name; receipts never change, so known ones are reused."""
    try:
        names = os.listdir(os.path.join(root, LOCK_RECOVERY_DIR))
    except OSError:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for name in names:
        if not name.endswith(".json"):
            continue
        if name in known:
            found[name] = known[name]
            continue
        try:
            with open(os.path.join(root, LOCK_RECOVERY_DIR, name), "rb") as handle:
                receipt = canonical.parse(handle.read(1024 * 1024).decode("utf-8", "replace"))
        except (OSError, ValueError, RecursionError):
            continue
        if isinstance(receipt, dict):
            found[name] = receipt
    return found


def take_snapshot(
    root: str,
    run_id: str,
    known_recoveries: dict[str, dict[str, Any]] | None = None,
    hash_cache: dict[tuple[int, ...], str] | None = None,
) -> Snapshot:
    """Read-only: lstat, open for reading and listdir only."""
    at = now_ms()
    locks = {name: _lock_view(root, rel) for name, rel in LOCK_NAMES.items()}
    recoveries = _recovery_receipts(root, known_recoveries or {})
    try:
        _, raw = read_state_bytes(root, run_id)
        run = parse_run(root, run_id, raw)
        with observational_hashes(hash_cache if hash_cache is not None else {}):
            view = inspect_loaded(root, run, at)
    except Exception as error:
        message = _message(error)
        unknown = isinstance(error, NexusError) and "Unknown run:" in message
        return Snapshot(at, None, message, unknown, locks, recoveries)
    return Snapshot(at, view, None, False, locks, recoveries)


def fingerprint(root: str, run_id: str) -> tuple[Any, ...]:
    """A cheap summary that changes whenever the run file, a lock or a receipt changes."""
    items: list[Any] = []
    for rel in (run_path(run_id), WRITER_LOCK, RECOVERY_LOCK):
        try:
            info = os.lstat(os.path.join(root, rel))
        except OSError:
            items.append(None)
            continue
        items.append((info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode, info.st_uid))
    try:
        items.append(tuple(sorted(os.listdir(os.path.join(root, LOCK_RECOVERY_DIR)))))
    except OSError:
        items.append(())
    return tuple(items)


# ----------------------------------------------------------------- events


def _observations(view: View) -> dict[str, dict[str, Any]]:
    return {o["taskId"]: o for o in view.get("observations") or []}


def heartbeat_stale(attempt: dict[str, Any], now: int) -> bool:
    """A launched process whose supervisor stopped beating (or never acknowledged the spawn)."""
    if attempt["backend"].get("kind") != "process":
        return False
    process = attempt.get("process")
    process = process if isinstance(process, dict) else {}
    if process.get("status") == "finished":
        return False
    beat = parse_iso_ms(process.get("heartbeatAt")) or parse_iso_ms(attempt.get("startedAt"))
    return beat is None or now - beat > HEARTBEAT_STALE_MS


def _verifications(attempt: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for verification in [*attempt.get("verificationHistory", []), attempt["verification"]]:
        if isinstance(verification, dict) and isinstance(verification.get("id"), str):
            found[verification["id"]] = verification
    return found


def _blank_attempt(attempt: dict[str, Any]) -> dict[str, Any]:
    """What a new attempt looked like when begun: its later changes are reported as events too."""
    return {
        "id": attempt["id"],
        "backend": attempt["backend"],
        "execution": "running",
        "verification": {"status": "pending", "checks": []},
        "verificationHistory": [],
        "reconciliations": [],
        "observations": [],
        "cancellation": {"status": "none"},
        "startedAt": attempt.get("startedAt"),
    }


class _Events:
    def __init__(self, run_id: str, sequence: int | None, at_ms: int) -> None:
        self.run_id = run_id
        self.sequence = sequence
        self.time = iso_from_ms(at_ms)
        self.items: list[Event] = []

    def add(self, kind: str, task: str | None = None, attempt: str | None = None, **extra: Any) -> None:
        event: Event = {"type": kind, "time": self.time, "run": self.run_id, "sequence": self.sequence}
        if task is not None:
            event["task"] = task
        if attempt is not None:
            event["attempt"] = attempt
        event.update(extra)
        self.items.append(event)


def _lock_owner(snapshot: dict[str, Any]) -> dict[str, Any] | None:
    owner = snapshot.get("owner")
    if not isinstance(owner, dict):
        return None
    return {key: owner.get(key) for key in ("pid", "hostname", "createdAt")}


def _lock_events(out: _Events, before: Snapshot, after: Snapshot) -> None:
    receipts = {_dict(receipt.get("observed")).get("hash"): receipt for receipt in after.recoveries.values()}
    present = {_dict(lock).get("hash") for lock in after.locks.values()}
    # Receipts first seen now whose lock is already gone (a recovery between two looks). One
    # whose lock is still there (receipt written, lock not yet removed) waits for the removal.
    recovered_hashes = {
        _dict(receipt.get("observed")).get("hash"): receipt
        for name, receipt in after.recoveries.items()
        if name not in before.recoveries and _dict(receipt.get("observed")).get("hash") not in present
    }
    for name in LOCK_NAMES:
        old, new = before.locks.get(name), after.locks.get(name)
        if old is not None and (new is None or new.get("hash") != old.get("hash")):
            recovered_hashes.pop(old.get("hash"), None)
            receipt = receipts.get(old.get("hash"))
            if receipt is not None and name == "writer":
                out.add(
                    "lock-recovered",
                    lock=name,
                    hash=old.get("hash"),
                    owner=_lock_owner(old),
                    note=receipt.get("note"),
                    recoveredAt=receipt.get("recoveredAt"),
                )
            else:
                out.add("lock-released", lock=name, hash=old.get("hash"), owner=_lock_owner(old))
        if new is not None and (old is None or new.get("hash") != old.get("hash")):
            extra = {"unsafe": new["unsafe"]} if "unsafe" in new else {}
            out.add("lock-taken", lock=name, hash=new.get("hash"), owner=_lock_owner(new), **extra)
    for receipt in recovered_hashes.values():
        # The lock came and went between two looks; the receipt still proves the recovery.
        observed = receipt.get("observed") or {}
        out.add(
            "lock-recovered",
            lock="writer",
            hash=observed.get("hash"),
            owner=_lock_owner(observed),
            note=receipt.get("note"),
            recoveredAt=receipt.get("recoveredAt"),
        )


def _attempt_events(
    out: _Events, task_id: str, old: dict[str, Any] | None, new: dict[str, Any], old_now: int, now: int
) -> None:
    """Changes of one attempt; ``old`` is None for an attempt first seen now."""
    was_stale = old is not None and heartbeat_stale(old, old_now)
    old = old if old is not None else _blank_attempt(new)
    attempt_id = new["id"]
    explained = False
    for observation in new.get("observations", [])[len(old.get("observations", [])) :]:
        extra = {
            "outcome": observation.get("outcome"),
            "evidenceClass": observation.get("evidenceClass"),
            "summary": observation.get("summary"),
        }
        if "exitCode" in observation:
            extra["exitCode"] = observation.get("exitCode")
        out.add("outcome-recorded", task_id, attempt_id, **extra)
        explained = True
    old_process, new_process = _dict(old.get("process")), _dict(new.get("process"))
    if new_process.get("status") == "finished" and old_process.get("status") != "finished":
        receipt = _dict(new_process.get("receipt"))
        out.add(
            "process-finished",
            task_id,
            attempt_id,
            outcome=receipt.get("outcome"),
            exitCode=receipt.get("exitCode"),
            reason=receipt.get("reason"),
        )
        explained = True
    if heartbeat_stale(new, now) and not was_stale:
        out.add(
            "process-heartbeat-stale",
            task_id,
            attempt_id,
            lastHeartbeat=new_process.get("heartbeatAt"),
            processStatus=new_process.get("status", "launch-unacknowledged"),
        )
    old_cancel = old.get("cancellation", {}).get("status")
    new_cancel = new.get("cancellation", {})
    if old_cancel == "none" and "requestedAt" in new_cancel:
        out.add("cancellation-requested", task_id, attempt_id, reason=new_cancel.get("reason"))
        explained = True
    for reconciliation in new.get("reconciliations", [])[len(old.get("reconciliations", [])) :]:
        out.add(
            "reconciled",
            task_id,
            attempt_id,
            outcome=reconciliation.get("outcome"),
            retrySafe=reconciliation.get("retrySafe"),
            summary=reconciliation.get("summary"),
        )
        explained = True
    old_verifications = _verifications(old)
    for verification_id, verification in _verifications(new).items():
        before = old_verifications.get(verification_id, {"status": None, "checks": []})
        if before["status"] is None:
            out.add("verification-started", task_id, attempt_id, verification=verification_id)
        for receipt in verification.get("checks", [])[len(before.get("checks", [])) :]:
            out.add(
                "check-finished",
                task_id,
                attempt_id,
                verification=verification_id,
                check=receipt.get("id"),
                exitCode=receipt.get("exitCode"),
                signal=receipt.get("signal"),
                timedOut=receipt.get("timedOut", False),
                error=receipt.get("error"),
            )
        status = verification.get("status")
        if status in ("passed", "failed", "ambiguous") and before["status"] != status:
            out.add(
                f"verification-{status}",
                task_id,
                attempt_id,
                verification=verification_id,
                problem=verification.get("problem"),
            )
    if old.get("execution") != new["execution"] and not explained:
        out.add("execution-changed", task_id, attempt_id, previous=old.get("execution"), execution=new["execution"])


def derive_events(
    before: Snapshot,
    after: Snapshot,
    run_id: str,
    tasks: set[str] | None = None,
    last_readable: Snapshot | None = None,
) -> list[Event]:
    """Every change from ``before`` to ``after``, in a stable order; ``tasks`` limits task events.

    When the run becomes readable again, its changes are taken from ``last_readable``.
    """
    out = _Events(run_id, after.sequence, after.at_ms)
    _lock_events(out, before, after)
    if after.view is None:
        if before.view is not None or before.error != after.error:
            out.add("run-unreadable", error=after.error)
        return out.items
    if before.view is None:
        out.add("run-readable")
        if last_readable is None or last_readable.view is None:
            return out.items
        before = last_readable
    assert before.view is not None
    old_observations = _observations(before.view)
    new_observations = _observations(after.view)
    old_tasks = {t["id"]: t for t in before.view["tasks"]}
    for task in after.view["tasks"]:
        task_id = task["id"]
        if tasks is not None and task_id not in tasks:
            continue
        old_task = old_tasks.get(task_id, {"integration": "pending", "attempts": []})
        old_attempts = {a["id"]: a for a in old_task["attempts"]}
        for attempt in task["attempts"]:
            previous = old_attempts.get(attempt["id"])
            if previous is None:
                out.add(
                    "attempt-started",
                    task_id,
                    attempt["id"],
                    backend=attempt["backend"].get("kind"),
                    parentAttemptId=attempt.get("parentAttemptId"),
                    deadline=attempt.get("deadline"),
                )
            _attempt_events(out, task_id, previous, attempt, before.at_ms, after.at_ms)
        if task["integration"] == "accepted" and old_task["integration"] != "accepted":
            receipt = task.get("integrationReceipt") or {}
            out.add("accepted", task_id, receipt.get("attemptId"))
        old_seen = old_observations.get(task_id, {})
        seen = new_observations.get(task_id, {})
        same_attempt = old_seen.get("attemptId") == seen.get("attemptId")
        if seen.get("overdue") and not (same_attempt and old_seen.get("overdue")):
            current = latest(task) or {}
            out.add("attempt-overdue", task_id, seen.get("attemptId"), deadline=current.get("deadline"))
        if seen.get("stale") and not old_seen.get("stale"):
            out.add("evidence-stale", task_id, seen.get("attemptId"), reason=seen.get("staleReason"))
        elif old_seen.get("stale") and not seen.get("stale"):
            out.add("evidence-current", task_id, seen.get("attemptId"))
    return out.items


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

    def as_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "state": self.state,
            "category": self.category,
            "attempt": self.attempt,
            "attemptsUsed": self.attempts_used,
            "maxAttempts": self.max_attempts,
            "detail": self.detail,
        }


def _pid_gone(owner: object, this_host: str, alive: Callable[[int], bool]) -> bool:
    if not isinstance(owner, dict) or owner.get("hostname") != this_host:
        return False  # another host: we cannot tell, so it may still be running
    owner_pid = owner.get("pid")
    if not isinstance(owner_pid, int) or isinstance(owner_pid, bool) or owner_pid < 1:
        return True
    return not alive(owner_pid)


def classify_task(
    view: View,
    task: dict[str, Any],
    observation: dict[str, Any],
    dependencies_done: bool,
    now: int,
    this_host: str,
    alive: Callable[[int], bool] = pid_alive,
) -> TaskState:
    """Where one task stands (see the README's "settled" table)."""
    definition = definition_of(view, task["id"])
    attempt = latest(task)
    used, budget = len(task["attempts"]), int(definition["maxAttempts"])

    def state(name: str, category: str, detail: str | None = None) -> TaskState:
        return TaskState(task["id"], name, category, detail, attempt["id"] if attempt else None, used, budget)

    stale_reason = observation.get("staleReason") if observation.get("stale") else None
    if task["integration"] == "accepted":
        if stale_reason:
            return state("stale-evidence", OPERATOR, stale_reason)
        return state("accepted", DONE)
    if attempt is None:
        if not dependencies_done:
            return state("waiting-on-dependencies", WAITING)
        active = sum(1 for t in view["tasks"] if is_active(t))
        if active >= view["plan"]["maxParallel"]:
            # Its start waits for active work; if that work needs an operator, so does this.
            return state(
                "waiting-for-capacity", WAITING, f"{active} active of maxParallel {view['plan']['maxParallel']}"
            )
        return state("awaiting-start", MOVING, "every dependency is accepted; an agent may start it")
    execution = attempt["execution"]
    verification = attempt["verification"]
    cancellation = attempt.get("cancellation", {}).get("status")
    process = attempt.get("process") if isinstance(attempt.get("process"), dict) else None
    is_process = attempt["backend"].get("kind") == "process"
    # Work in motion first: something is running that will change the state by itself.
    if verification.get("status") == "running":
        owner = verification.get("owner")
        if _pid_gone(owner, this_host, alive):
            pid_text = owner.get("pid") if isinstance(owner, dict) else None
            return state("verifier-gone", OPERATOR, f"verification left running by pid {pid_text}, which is gone")
        return state("verifying", MOVING)
    if (
        is_process
        and (process is None or process.get("status") != "finished")
        and execution in ("running", "ambiguous")
    ):
        if heartbeat_stale(attempt, now):
            beat = (process or {}).get("heartbeatAt")
            return state("heartbeat-stale", OPERATOR, f"process supervisor heartbeat stale (last {beat})")
        return state("launching" if process is None or process.get("status") == "starting" else "running", MOVING)
    if is_process and execution == "running" and process is not None and not process.get("collectedAt"):
        return state("awaiting-collect", UNFINISHED, "the process finished; collect its receipt")
    if execution == "running" and cancellation == "none":
        if observation.get("overdue"):
            return state("overdue", OPERATOR, f"past its deadline {attempt.get('deadline')}")
        return state("running", MOVING)
    # Nothing runs: either someone must decide, or the next routine step awaits an agent.
    if cancellation == "requested":
        return state("cancellation-requested", OPERATOR, "cancellation requested; reconcile the attempt")
    if execution == "blocked":
        return state("blocked", OPERATOR, attempt.get("blockedRequest"))
    if execution == "ambiguous":
        return state("ambiguous", OPERATOR, "the execution outcome is ambiguous; reconcile the attempt")
    if verification.get("status") == "ambiguous":
        return state("verification-ambiguous", OPERATOR, "the verification is ambiguous; reconcile the attempt")
    if stale_reason:
        return state("stale-evidence", OPERATOR, stale_reason)
    if execution == "completed" and verification.get("status") == "pending":
        if attempt.get("verificationRounds", 0) >= budget:
            return state("verification-limit", OPERATOR, "verification restart limit reached")
        return state("awaiting-verify", UNFINISHED)
    if verification.get("status") == "passed" and execution == "completed":
        return state("awaiting-accept", UNFINISHED)
    # A terminal attempt: failed, cancelled, or its verification failed.
    what = "verification failed" if verification.get("status") == "failed" else f"execution {execution}"
    if used >= budget:
        return state("budget-spent", BUDGET, f"{what}; {used} of {budget} attempts used")
    return state("retry-pending", OPERATOR, f"{what}; {used} of {budget} attempts used, retry is a decision")


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


def classify_run(
    view: View, task_id: str | None = None, now: int | None = None, alive: Callable[[int], bool] = pid_alive
) -> list[TaskState]:
    moment = now_ms() if now is None else now
    this_host = hostname()
    observations = _observations(view)
    tasks = {t["id"]: t for t in view["tasks"]}
    states: dict[str, TaskState] = {}

    def resolve(current: str, trail: frozenset[str]) -> TaskState:
        if current in states:
            return states[current]
        dependencies = [d for d in definition_of(view, current)["dependsOn"] if d not in trail]
        done = all(resolve(d, trail | {current}).category == DONE for d in dependencies)
        result = classify_task(view, tasks[current], observations.get(current, {}), done, moment, this_host, alive)
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


def lock_problem(snapshot: Snapshot, alive: Callable[[int], bool] = pid_alive) -> str | None:
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
        if _pid_gone(owner, hostname(), alive):
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


# ----------------------------------------------------------------- wakes


def poll_wakes(sleep: Callable[[float], None] = time.sleep) -> Iterator[str]:
    while True:
        sleep(POLL_SECONDS)
        yield "poll"


def watch_wakes(root: str) -> Iterator[str]:
    """Wake on any change under .bmad-plus/nexus (or every WATCH_TICK_MS); poll if watching fails."""
    base = os.path.join(root, BASE)
    try:
        from watchfiles import watch

        for _changes in watch(
            base,
            watch_filter=lambda _change, path: not path.endswith(".tmp"),
            debounce=50,
            step=20,
            rust_timeout=WATCH_TICK_MS,
            yield_on_timeout=True,
            raise_interrupt=True,
        ):
            yield "watch"
    except (ImportError, OSError, RuntimeError):
        pass
    yield from poll_wakes()


# ----------------------------------------------------------------- wait


class EventLog:
    """A new file, 0600, that is never an existing one."""

    def __init__(self, path: str) -> None:
        self.path = path
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            self.fd = os.open(path, flags, 0o600)
        except FileExistsError:
            raise NexusError(refuse_existing_log(path)) from None
        os.fchmod(self.fd, 0o600)

    def write(self, line: str) -> None:
        view = memoryview(line.encode("utf-8"))
        while view:
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        os.close(self.fd)


def refuse_existing_log(path: str) -> str:
    return f"--event-log {path} already exists; an event log is never overwritten. Name a new file."


def _check_log_path(path: str, root: str) -> None:
    if os.path.lexists(path):
        raise NexusError(refuse_existing_log(path))
    parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    state_dir = os.path.join(root, BASE)
    if parent == state_dir or parent.startswith(state_dir + os.sep):
        raise NexusError("--event-log must not be inside .bmad-plus/nexus: wait never writes there.")


@dataclass
class WaitResult:
    code: int
    message: str
    events: int
    verdict: Verdict | None
    sequence: int | None


def wait_for_run(
    directory: str,
    run_id: str,
    *,
    task_id: str | None = None,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    settle_grace: float = DEFAULT_SETTLE_GRACE,
    event_log: str | None = None,
    emit: Emit,
    force_polling: bool = False,
    monotonic: Callable[[], float] = time.monotonic,
    wakes: Iterator[str] | None = None,
) -> WaitResult:
    """Watch until the run settles (see ``verdict_for``); ``emit`` receives each JSON line.

    Raises NexusError for the watcher's own errors (unknown run or task, unreadable project,
    an existing event log); everything else is an exit code in the result.
    """
    root = root_of(directory)
    run_path(run_id)  # the run id's own rule, before anything else
    if event_log is not None:
        _check_log_path(event_log, root)
    recoveries: dict[str, dict[str, Any]] = {}
    hashes: dict[tuple[int, ...], str] = {}
    current = take_snapshot(root, run_id, recoveries, hashes)
    if current.unknown:
        raise NexusError(current.error or f"Unknown run: {run_id}")
    if task_id is not None and current.view is not None and task_id not in {t["id"] for t in current.view["tasks"]}:
        names = ", ".join(t["id"] for t in current.view["tasks"])
        raise NexusError(f"Unknown task: {task_id} (run {run_id} has {names})")
    log = EventLog(event_log) if event_log is not None else None
    closure = set(_closure(current.view, task_id)) if current.view is not None and task_id else None
    count = 0

    def send(event: Event) -> None:
        nonlocal count
        line = canonical.compact(event) + "\n"
        emit(line)
        if log is not None:
            log.write(line)
        count += 1

    if wakes is None:
        wakes = poll_wakes() if force_polling else watch_wakes(root)
        mode = "polling" if force_polling else "watchfiles"
    else:
        mode = "injected"
    try:
        started = _Events(run_id, current.sequence, current.at_ms)
        extra: dict[str, Any] = {"mode": mode, "idleTimeout": idle_timeout, "settleGrace": settle_grace}
        if current.error is not None:
            extra["error"] = current.error
        started.add("watch-started", task_id, **extra)
        send(started.items[0])
        last_change = monotonic()
        last_full = last_change
        last_print = fingerprint(root, run_id)
        pending_since: float | None = None
        pending_key: tuple[Any, ...] | None = None
        readable: Snapshot | None = current if current.view is not None else None
        while True:
            verdict = verdict_for(current, run_id, task_id)
            moment = monotonic()
            if verdict.settled:
                key = (verdict.code, current.sequence, current.error)
                final = verdict.code in (EXIT_ACCEPTED, EXIT_BUDGET, EXIT_ERROR) or settle_grace <= 0
                if key != pending_key:
                    pending_key, pending_since = key, moment
                assert pending_since is not None
                if final or moment - pending_since >= settle_grace:
                    return WaitResult(verdict.code or 0, verdict.message, count, verdict, current.sequence)
            else:
                pending_key = pending_since = None
            if idle_timeout > 0 and moment - last_change >= idle_timeout:
                message = f"no change for {idle_timeout:g} s (idle timeout). {verdict.message}"
                return WaitResult(EXIT_IDLE, message, count, verdict, current.sequence)
            next(wakes)
            moment = monotonic()
            look = fingerprint(root, run_id)
            if look == last_print and moment - last_full < FULL_LOOK_SECONDS:
                continue
            last_print, last_full = look, moment
            newer = take_snapshot(root, run_id, recoveries, hashes)
            recoveries = newer.recoveries
            events = derive_events(current, newer, run_id, closure, readable)
            for event in events:
                send(event)
            if events or newer.sequence != current.sequence:
                last_change = moment
            current = newer
            if current.view is not None:
                readable = current
    finally:
        if log is not None:
            log.close()
        close = getattr(wakes, "close", None)
        if close is not None:
            close()


def summary_object(run_id: str, task_id: str | None, result: WaitResult) -> dict[str, Any]:
    status = {EXIT_IDLE: "idle-timeout", EXIT_ERROR: "error", EXIT_INTERRUPTED: "interrupted"}.get(
        result.code, "settled"
    )
    summary: dict[str, Any] = {
        "type": "summary",
        "schemaVersion": 1,
        "time": iso_from_ms(now_ms()),
        "run": run_id,
        "status": status,
        "outcome": result.verdict.outcome if result.verdict and status == "settled" else None,
        "exitCode": result.code,
        "message": result.message,
        "sequence": result.sequence,
        "events": result.events,
        "tasks": [s.as_json() for s in result.verdict.states] if result.verdict else [],
    }
    if task_id is not None:
        summary["task"] = task_id
    if status == "error":
        summary["error"] = result.message
    return summary


# ----------------------------------------------------------------- loop


INTERVAL = re.compile(r"(0|[1-9][0-9]*)([smh])\Z", re.ASCII)
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def parse_interval(text: str) -> int:
    """``30s`` .. ``24h`` as whole seconds, minutes or hours; anything else is refused."""
    match = INTERVAL.match(text)
    if not match:
        raise NexusError(
            f"--every takes a whole number of seconds, minutes or hours such as 30s, 5m or 2h; got {text!r}."
        )
    seconds = int(match.group(1)) * UNIT_SECONDS[match.group(2)]
    if not LOOP_MIN_SECONDS <= seconds <= LOOP_MAX_SECONDS:
        raise NexusError(f"--every must be between 30s and 24h; got {text}.")
    return seconds


@dataclass
class LoopStop:
    """Stop requests (Ctrl+C): the first ends the loop after the current step, the second
    ends it at once, leaving a running verification to finish on its own."""

    requests: int = 0
    event: threading.Event = field(default_factory=threading.Event)

    def request(self) -> None:
        self.requests += 1
        self.event.set()


def busy_reason(snapshot: Snapshot, alive: Callable[[int], bool] = pid_alive) -> str | None:
    """Why a tick must not run now, or None."""
    this_host = hostname()
    for name, lock in snapshot.locks.items():
        if lock is None:
            continue
        owner = _dict(lock.get("owner"))
        where = f"pid {owner.get('pid')} on {owner.get('hostname')}"
        if _pid_gone(owner, this_host, alive):
            where += ", not alive here: inspect, then recover-lock"
        return f"{name}.lock held by {where}"
    if snapshot.view is None:
        return None
    for task in snapshot.view["tasks"]:
        attempt = latest(task)
        if attempt is None:
            continue
        verification = attempt["verification"]
        if verification.get("status") == "running" and not _pid_gone(verification.get("owner"), this_host, alive):
            return f"a verification of {task['id']} is running"
        process = attempt.get("process") if isinstance(attempt.get("process"), dict) else None
        if (
            attempt["backend"].get("kind") == "process"
            and process is not None
            and process.get("status") in ("starting", "running")
            and not heartbeat_stale(attempt, snapshot.at_ms)
        ):
            return f"a launch of {task['id']} is running"
    return None


def _short(value: object) -> str:
    return value[:8] if isinstance(value, str) else str(value)


def render_event(event: Event) -> str:
    """One event in words, for the loop's output."""
    kind = event["type"]
    where = f"task {event['task']}" if "task" in event else "run"
    if event.get("attempt"):
        where += f" attempt {_short(event['attempt'])}"
    details = {
        key: value
        for key, value in event.items()
        if key not in ("type", "time", "run", "sequence", "task", "attempt") and value not in (None, "", [])
    }
    if "owner" in details and isinstance(details["owner"], dict):
        owner = details.pop("owner")
        details["owner"] = f"pid {owner.get('pid')}@{owner.get('hostname')}"
    if "hash" in details:
        details["hash"] = _short(details["hash"])
    if "verification" in details:
        details["verification"] = _short(details["verification"])
    text = ", ".join(f"{key}={value}" for key, value in details.items())
    return f"{kind}: {where}" + (f" ({text})" if text else "")


def verify_candidates(view: View) -> list[str]:
    """Tasks whose latest attempt completed and has no verification yet."""
    found = []
    for task in view["tasks"]:
        attempt = latest(task)
        if (
            attempt is not None
            and task["integration"] != "accepted"
            and attempt["execution"] == "completed"
            and attempt["verification"].get("status") == "pending"
            and attempt.get("cancellation", {}).get("status") != "requested"
            and attempt.get("verificationRounds", 0) < definition_of(view, task["id"])["maxAttempts"]
        ):
            found.append(task["id"])
    return found


def verify_in_own_process_group(
    root: str, run_id: str, task_id: str, say: Callable[[str], None], stop: LoopStop
) -> bool:
    """Run ``nexus verify`` as a child in its own session and report its checks as they land.

    A terminal Ctrl+C signals the whole foreground process group: a check in the loop's group
    would be killed by it and recorded as a failed verification. In its own session the
    verification never sees the terminal's signals and always records a real verdict. Returns
    False when a second stop request leaves it running on its own.
    """
    import subprocess

    before = take_snapshot(root, run_id)
    child = subprocess.Popen(
        [sys.executable, "-m", "nexus_core.cli", "verify", run_id, task_id, "--json", "-d", root],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    output = b""
    while True:
        try:
            output, _ = child.communicate(timeout=0.2)
            finished = True
        except subprocess.TimeoutExpired:
            finished = False
        after = take_snapshot(root, run_id)
        for event in derive_events(before, after, run_id, {task_id}):
            if event["type"] == "check-finished":
                error = f", {event['error']}" if event.get("error") else ""
                say(f"    check {event['check']}: exit {event['exitCode']}{error}")
        before = after
        if finished:
            break
        if stop.requests >= 2:
            say(f"  the verification of {task_id} goes on in pid {child.pid} and will record its own verdict")
            return False
    try:
        result = canonical.parse(output.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        result = None
    if isinstance(result, dict) and isinstance(result.get("tasks"), list):
        task: dict[str, Any] = next((t for t in result["tasks"] if t.get("id") == task_id), {})
        status = _dict((latest(task) or {}).get("verification")).get("status")
        say(f"  verified {task_id}: {status}")
    elif isinstance(result, dict) and "error" in result:
        say(f"  verify {task_id} refused: {result['error']}")
    else:
        say(f"  verify {task_id} ended with exit {child.returncode} and no readable result")
    return True


@dataclass
class LoopResult:
    executed: int
    skipped: int
    reason: str


def run_loop(
    directory: str,
    run_id: str,
    every: float,
    *,
    verify: bool = False,
    emit: Emit,
    clock: Callable[[], float] = time.monotonic,
    sleeper: Callable[[float], object] | None = None,
    tick_cap: int = LOOP_TICK_CAP,
    stop: LoopStop | None = None,
) -> LoopResult:
    """Tick every ``every`` seconds until the cap or a stop request; see ``nexus loop --help``."""
    stop = stop or LoopStop()
    sleep: Callable[[float], object] = sleeper or stop.event.wait
    root = root_of(directory)
    run_path(run_id)
    first = take_snapshot(root, run_id)
    if first.unknown:
        raise NexusError(first.error or f"Unknown run: {run_id}")
    recoveries: dict[str, dict[str, Any]] = {}
    hashes: dict[tuple[int, ...], str] = {}
    executed = skipped = 0
    previous: Snapshot | None = None
    next_at = clock()

    def say(text: str) -> None:
        emit(f"[{iso_from_ms(now_ms())}] {terminal_safe(text, one_line=True)}\n")

    while True:
        if stop.requests:
            return LoopResult(executed, skipped, "stopped")
        moment = clock()
        if moment < next_at:
            sleep(next_at - moment)
            continue
        next_at += every
        tick = executed + skipped + 1
        snapshot = take_snapshot(root, run_id, recoveries, hashes)
        recoveries = snapshot.recoveries
        reason = busy_reason(snapshot)
        if reason is not None:
            skipped += 1
            say(f"tick {tick} skipped: run busy ({reason})")
            continue
        executed += 1
        _report_tick(say, tick, previous, snapshot, run_id)
        if verify and snapshot.view is not None:
            for task_id in verify_candidates(snapshot.view):
                if stop.requests:
                    break
                say(f"  verifying {task_id}...")
                if not verify_in_own_process_group(root, run_id, task_id, say, stop):
                    return LoopResult(executed, skipped, "stopped")
            snapshot = take_snapshot(root, run_id, recoveries, hashes)
        previous = snapshot
        if executed >= tick_cap:
            say(f"Loop stopped by itself after {executed} ticks (the cap); start it again to continue.")
            return LoopResult(executed, skipped, "cap")
        # Ticks that came due while this one ran are skipped and counted, never run late.
        finished = clock()
        missed = 0
        while next_at <= finished:
            missed += 1
            next_at += every
        if missed:
            skipped += missed
            say(f"{missed} tick(s) skipped: the previous tick was still running")


def _report_tick(
    say: Callable[[str], None], tick: int, previous: Snapshot | None, snapshot: Snapshot, run_id: str
) -> None:
    if snapshot.view is None:
        say(f"tick {tick}: run unreadable: {snapshot.error}")
        return
    observations = snapshot.view.get("observations") or []
    stale = [o for o in observations if o.get("stale")]
    overdue = [o for o in observations if o.get("overdue")]
    states = classify_run(snapshot.view, None, snapshot.at_ms)
    counts: dict[str, int] = {}
    for item in states:
        counts[item.state] = counts.get(item.state, 0) + 1
    tally = ", ".join(f"{n} {name}" for name, n in counts.items())
    say(f"tick {tick}: sequence {snapshot.sequence}; {tally}; {len(stale)} stale, {len(overdue)} overdue")
    if previous is None:
        for item in stale:
            say(f"  stale: task {item['taskId']}: {item.get('staleReason')}")
        for item in overdue:
            say(f"  overdue: task {item['taskId']} attempt {_short(item.get('attemptId'))}")
        return
    events = derive_events(previous, snapshot, run_id)
    if not events:
        say("  no change")
    for event in events:
        say("  " + render_event(event))


# ----------------------------------------------------------------- CLI


def _out(text: str) -> None:
    sys.stdout.buffer.write(text.encode("utf-8", "replace"))
    sys.stdout.buffer.flush()


def _err(text: str) -> None:
    sys.stderr.buffer.write(text.encode("utf-8", "replace"))
    sys.stderr.buffer.flush()


def _fail(message: str, as_json: bool) -> NoReturn:
    if as_json:
        _out(canonical.compact({"schemaVersion": 1, "status": "error", "error": message}) + "\n")
    _err(f"Nexus: {terminal_safe(message, one_line=True)}\n")
    raise SystemExit(EXIT_ERROR)


def _seconds(_ctx: click.Context, _param: click.Parameter, value: str) -> float:
    """A finite, non-negative number of seconds (nan and inf are refused, not read as "forever")."""
    try:
        number = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number of seconds") from None
    if not math.isfinite(number) or number < 0 or number > 10**9:
        raise click.BadParameter(f"{value!r} is not a number of seconds between 0 and 1000000000")
    return number


WAIT_HELP = """Block until RUN settles, streaming one JSON event per line on stdout.

\b
Read-only: never takes a lock, never writes state. Exit codes:
  0    every task accepted (with --task: that task and its dependencies)
  3    a task needs an operator (blocked, ambiguous, cancellation to
       reconcile, retry decision, stale evidence, overdue, dead verifier or
       supervisor, corrupt or unsafe run file)
  4    a task spent its attempt budget (maxAttempts) without acceptance
  6    settled but not finished: work awaits verify, accept or collect and
       nothing is running
  1    the watcher's own error (unknown run or task, unreadable project)
  124  no change for --idle-timeout seconds
A task that can be started (dependencies accepted) or is running or
verifying keeps the wait going. The last stderr line states the outcome.
"""

LOOP_HELP = """Inspect RUN every INTERVAL and print what changed; with --verify also
verify every completed attempt that has no verification yet.

\b
INTERVAL: 30s to 24h, as Ns, Nm or Nh. The first tick runs at once.
A tick that finds the run busy (writer.lock or recovery.lock held, a
verification or a launch running) is skipped and counted, never queued.
After 500 executed ticks the loop stops by itself with a notice.
The loop lives in this process only: nothing is scheduled or persisted,
and it ends with this process. Ctrl+C stops it cleanly after the current
step. Verifications run in their own process group, so Ctrl+C never reaches
a check; a second Ctrl+C leaves a running verification to finish and record
its verdict by itself.
"""


@click.command(name="wait", context_settings={"help_option_names": ["-h", "--help"]}, help=WAIT_HELP)
@click.argument("run")
@click.option("--task", "task_id", metavar="TASK", help="Wait for this task (and its dependencies) only.")
@click.option(
    "--idle-timeout",
    callback=_seconds,
    default="600",
    show_default=True,
    metavar="SECONDS",
    help="Give up (exit 124) after this long without any change; 0 waits forever.",
)
@click.option(
    "--settle-grace",
    callback=_seconds,
    default="2",
    show_default=True,
    metavar="SECONDS",
    help="A settled state that an agent may still move on (exit 3 or 6) must hold this long.",
)
@click.option("--event-log", metavar="FILE", help="Also write the events to FILE, a new file (0600).")
@click.option("--json", "as_json", is_flag=True, help="End with a summary object on stdout.")
@click.option("--poll", "force_polling", is_flag=True, help="Poll instead of using the file watcher.")
@click.option("-d", "--directory", default=".", metavar="PATH", help="Project directory (default: the current one).")
def wait_command(
    run: str,
    task_id: str | None,
    idle_timeout: float,
    settle_grace: float,
    event_log: str | None,
    as_json: bool,
    force_polling: bool,
    directory: str,
) -> None:
    try:
        result = wait_for_run(
            directory,
            run,
            task_id=task_id,
            idle_timeout=idle_timeout,
            settle_grace=settle_grace,
            event_log=event_log,
            emit=_out,
            force_polling=force_polling,
        )
    except NexusError as error:
        _fail(error.message, as_json)
    except OSError as error:
        _fail(_message(error), as_json)
    except KeyboardInterrupt:
        _err("nexus wait: interrupted; nothing was changed.\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
    if as_json:
        _out(canonical.compact(summary_object(run, task_id, result)) + "\n")
    if result.code == EXIT_ERROR:
        _err(f"Nexus: {terminal_safe(result.message, one_line=True)}\n")
    else:
        _err(f"nexus wait: {terminal_safe(result.message, one_line=True)} [exit {result.code}]\n")
    raise SystemExit(result.code)


@click.command(name="loop", context_settings={"help_option_names": ["-h", "--help"]}, help=LOOP_HELP)
@click.argument("run")
@click.option("--every", "interval", required=True, metavar="INTERVAL", help="30s to 24h, as Ns, Nm or Nh.")
@click.option("--verify", is_flag=True, help="Verify completed attempts that have no verification yet.")
@click.option("-d", "--directory", default=".", metavar="PATH", help="Project directory (default: the current one).")
def loop_command(run: str, interval: str, verify: bool, directory: str) -> None:
    try:
        every = parse_interval(interval)
    except NexusError as error:
        _fail(error.message, False)
    stop = LoopStop()

    def on_signal(_number: int, _frame: FrameType | None) -> None:
        stop.request()
        if stop.requests == 1:
            _err(
                "nexus loop: stopping after the current step (Ctrl+C again leaves a running verification to finish).\n"
            )

    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    _out(
        f"nexus loop: run {terminal_safe(run, one_line=True)} every {interval}{' with --verify' if verify else ''}; "
        "it lives in this process only. Ctrl+C stops it.\n"
    )
    try:
        result = run_loop(directory, run, every, verify=verify, emit=_out, stop=stop)
    except NexusError as error:
        _fail(error.message, False)
    except OSError as error:
        _fail(_message(error), False)
    finally:
        for number, handler in previous.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(number, handler)
    _out(f"nexus loop: {result.executed} ticks run, {result.skipped} skipped ({result.reason}).\n")
    raise SystemExit(0)


def _usage_error(message: str) -> NoReturn:
    _err(f"error: {terminal_safe(message, one_line=True)}\n")
    raise SystemExit(EXIT_ERROR)


def supervise_main(argv: list[str]) -> NoReturn:
    """``nexus wait ...`` and ``nexus loop ...``: argv starts with the command name."""
    command = wait_command if argv[0] == "wait" else loop_command
    try:
        command.main(args=argv[1:], prog_name=f"nexus {argv[0]}", standalone_mode=False)
    except click.exceptions.NoSuchOption as error:
        _usage_error(f"unknown option '{error.option_name}'")
    except click.exceptions.MissingParameter as error:
        name = error.param.name if error.param else "argument"
        kind = "option '--every'" if name == "interval" else f"argument '{name}'"
        _usage_error(f"missing required {kind}")
    except click.exceptions.UsageError as error:
        _usage_error(error.format_message().rstrip("."))
    except click.exceptions.Abort:
        raise SystemExit(EXIT_INTERRUPTED) from None
    except click.exceptions.Exit as done:
        raise SystemExit(done.exit_code) from None
    raise SystemExit(0)
