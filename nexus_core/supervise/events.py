"""Snapshots of one run and the events derived by diffing two of them.

A snapshot is the run's inspect view (or why it could not be read), the two lock files and the
lock-recovery receipts, all read without writing. Events come from diffing two snapshots, so a
change that happens between two looks is still reported (merged into one look), never lost.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from ..engine import latest
from ..errors import NexusError
from ..observe import inspect_loaded
from ..paths import read_regular
from ..shapes import Attempt, Inspection, JsonObject, LockSnapshot, Observation, Task, Verification
from ..snapshots import observational_hashes
from ..state import canonical
from ..state.locks import LOCK_RECOVERY_DIR, RECOVERY_LOCK, WRITER_LOCK, lock_snapshot
from ..state.store import BASE, parse_run, read_state_bytes, run_path
from ..terminal import terminal_safe_json
from ..timeutil import iso_from_ms, now_ms

View = Inspection
Event = JsonObject
Emit = Callable[[str], None]

LOCK_NAMES = {"writer": WRITER_LOCK, "recovery": RECOVERY_LOCK}
RECOVERY_RECEIPT_LIMIT = 1024 * 1024  # a receipt is a few hundred bytes; anything larger is not one

# ----------------------------------------------------------------- snapshots


@dataclass
class Snapshot:
    """One look at a run: its inspect view (or why it could not be read) and the locks."""

    at_ms: int
    view: View | None
    error: str | None = None
    unknown: bool = False
    locks: dict[str, LockSnapshot | None] = field(default_factory=dict)
    recoveries: dict[str, JsonObject] = field(default_factory=dict)

    @property
    def sequence(self) -> int | None:
        return self.view["sequence"] if self.view is not None else None


def as_object(value: object) -> JsonObject:
    return value if isinstance(value, dict) else {}


def error_message(error: BaseException) -> str:
    if isinstance(error, NexusError):
        return error.message
    if isinstance(error, OSError) and error.filename:
        return f"{error.strerror}: {error.filename}"
    return str(error) or type(error).__name__


def safe_lock_snapshot(root: str, rel: str) -> LockSnapshot | None:
    try:
        return lock_snapshot(root, rel)
    except (NexusError, OSError) as error:
        # A lock path that is a symlink or a directory: present, and not to be trusted.
        return cast(LockSnapshot, {"hash": None, "owner": None, "unsafe": error_message(error)})


def _recovery_receipts(root: str, known: dict[str, JsonObject]) -> dict[str, JsonObject]:
    """Lock-recovery receipts by file name; receipts never change, so known ones are reused.

    The directory is never followed through a symlink, and only regular files are read (never
    waiting on a FIFO): what another user plants there cannot stall a watcher."""
    try:
        fd = os.open(os.path.join(root, LOCK_RECOVERY_DIR), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return {}
    found: dict[str, JsonObject] = {}
    try:
        with os.scandir(fd) as listing:
            entries = [entry for entry in listing if entry.name.endswith(".json")]
        for entry in entries:
            name = entry.name
            if name in known:
                found[name] = known[name]
                continue
            try:
                if not entry.is_file(follow_symlinks=False):
                    continue
                raw = read_regular(name, RECOVERY_RECEIPT_LIMIT, dir_fd=fd)
                receipt = canonical.parse(raw.decode("utf-8", "replace"))
            except (OSError, ValueError, RecursionError):
                continue  # swapped for a FIFO, oversized or unparsable: not a receipt
            if isinstance(receipt, dict):
                found[name] = receipt
    except OSError:
        return found
    finally:
        os.close(fd)
    return found


def take_snapshot(
    root: str,
    run_id: str,
    known_recoveries: dict[str, JsonObject] | None = None,
    hash_cache: dict[tuple[int, ...], str] | None = None,
) -> Snapshot:
    """Read-only: lstat, open for reading and listdir only."""
    at = now_ms()
    locks = {name: safe_lock_snapshot(root, rel) for name, rel in LOCK_NAMES.items()}
    recoveries = _recovery_receipts(root, known_recoveries or {})
    try:
        _, raw = read_state_bytes(root, run_id)
        run = parse_run(root, run_id, raw)
        with observational_hashes(hash_cache if hash_cache is not None else {}):
            view = inspect_loaded(root, run, at)
    except Exception as error:
        message = error_message(error)
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


def _observations(view: View) -> dict[str, Observation]:
    return {o["taskId"]: o for o in view.get("observations") or []}


def heartbeat_stale(attempt: Attempt, now: int) -> bool:
    """A launched process whose supervisor stopped beating (``needs.heartbeat_stale``)."""
    from ..needs import heartbeat_stale as stale

    return stale(attempt, now)


def _verifications(attempt: Attempt) -> dict[str, Verification]:
    found: dict[str, Verification] = {}
    for verification in [*attempt.get("verificationHistory", []), attempt["verification"]]:
        if isinstance(verification, dict) and isinstance(verification.get("id"), str):
            found[verification["id"]] = verification
    return found


def _blank_attempt(attempt: Attempt) -> Attempt:
    """What a new attempt looked like when begun: its later changes are reported as events too."""
    blank: JsonObject = {
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
    return cast(Attempt, blank)


class EventBatch:
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


def _lock_owner(snapshot: Mapping[str, Any]) -> JsonObject | None:
    owner = snapshot.get("owner")
    if not isinstance(owner, dict):
        return None
    return {key: owner.get(key) for key in ("pid", "hostname", "createdAt")}


def _lock_events(out: EventBatch, before: Snapshot, after: Snapshot) -> None:
    receipts = {as_object(receipt.get("observed")).get("hash"): receipt for receipt in after.recoveries.values()}
    present = {as_object(lock).get("hash") for lock in after.locks.values()}
    # Receipts first seen now whose lock is already gone (a recovery between two looks). One
    # whose lock is still there (receipt written, lock not yet removed) waits for the removal.
    recovered_hashes = {
        as_object(receipt.get("observed")).get("hash"): receipt
        for name, receipt in after.recoveries.items()
        if name not in before.recoveries and as_object(receipt.get("observed")).get("hash") not in present
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


def _attempt_events(out: EventBatch, task_id: str, old: Attempt | None, new: Attempt, old_now: int, now: int) -> None:
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
    old_process, new_process = as_object(old.get("process")), as_object(new.get("process"))
    if new_process.get("status") == "finished" and old_process.get("status") != "finished":
        receipt: Mapping[str, Any] = as_object(new_process.get("receipt"))
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
        before: Mapping[str, Any] = old_verifications.get(verification_id, {"status": None, "checks": []})
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
    out = EventBatch(run_id, after.sequence, after.at_ms)
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
        _task_events(out, old_task, task, before.at_ms, after.at_ms)
        _observation_events(out, task, old_observations.get(task_id, {}), new_observations.get(task_id, {}))
    return out.items


def _task_events(out: EventBatch, old_task: Task, task: Task, old_now: int, now: int) -> None:
    """Changes of one task's records: its attempts, its acceptance."""
    task_id = task["id"]
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
        _attempt_events(out, task_id, previous, attempt, old_now, now)
    if task["integration"] == "accepted" and old_task["integration"] != "accepted":
        receipt = task.get("integrationReceipt") or {}
        out.add("accepted", task_id, receipt.get("attemptId"))


def _observation_events(out: EventBatch, task: Task, old_seen: Observation, seen: Observation) -> None:
    """Changes of what inspect observes about one task: overdue, stale, current again."""
    task_id = task["id"]
    same_attempt = old_seen.get("attemptId") == seen.get("attemptId")
    if seen.get("overdue") and not (same_attempt and old_seen.get("overdue")):
        current = latest(task) or {}
        out.add("attempt-overdue", task_id, seen.get("attemptId"), deadline=current.get("deadline"))
    if seen.get("stale") and not old_seen.get("stale"):
        out.add("evidence-stale", task_id, seen.get("attemptId"), reason=seen.get("staleReason"))
    elif old_seen.get("stale") and not seen.get("stale"):
        out.add("evidence-current", task_id, seen.get("attemptId"))


def short_id(value: object) -> str:
    return value[:8] if isinstance(value, str) else str(value)


def render_event(event: Event) -> str:
    """One event in words, for the loop's output."""
    kind = event["type"]
    where = f"task {event['task']}" if "task" in event else "run"
    if event.get("attempt"):
        where += f" attempt {short_id(event['attempt'])}"
    details = {
        key: value
        for key, value in event.items()
        if key not in ("type", "time", "run", "sequence", "task", "attempt") and value not in (None, "", [])
    }
    if "owner" in details and isinstance(details["owner"], dict):
        owner = details.pop("owner")
        details["owner"] = f"pid {owner.get('pid')}@{owner.get('hostname')}"
    if "hash" in details:
        details["hash"] = short_id(details["hash"])
    if "verification" in details:
        details["verification"] = short_id(details["verification"])
    text = ", ".join(f"{key}={value}" for key, value in details.items())
    return f"{kind}: {where}" + (f" ({text})" if text else "")


# ----------------------------------------------------------------- event log


def json_line(value: JsonObject) -> str:
    """One JSON line of wait's or the scheduler's output (events, the summary, the error), for
    stdout and the event log alike: canonical JSON, C1 and bidi controls escaped for a terminal."""
    return terminal_safe_json(canonical.compact(value)) + "\n"


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


def check_log_path(path: str, root: str) -> None:
    if os.path.lexists(path):
        raise NexusError(refuse_existing_log(path))
    parent = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    state_dir = os.path.join(root, BASE)
    if parent == state_dir or parent.startswith(state_dir + os.sep):
        raise NexusError("--event-log must not be inside .bmad-plus/nexus: wait never writes there.")
