"""What the dashboard shows, computed off the UI thread from nexus_core's own inspection.

Nothing here imports textual. A :class:`ProjectScanner` owns one project: it rereads only the
run files whose bytes changed (stat first, then a hash of the bytes), runs the core's
``inspect_loaded`` on them under an observational hash cache, and hands out immutable
:class:`ProjectSnapshot` values that the UI diffs into its tables. It never writes anything.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from typing import Any

from nexus_core import observe
from nexus_core.errors import NexusError
from nexus_core.hostinfo import hostname, pid_alive
from nexus_core.locks import RECOVERY_LOCK, WRITER_LOCK
from nexus_core.paths import root_of
from nexus_core.snapshots import observational_hashes
from nexus_core.store import RUNS, parse_run, read_state_bytes, run_path
from nexus_core.timeutil import now_ms, parse_iso_ms

NOT_STARTED = "not started"

# Task states, in the order the progress column lists them.
STATE_ORDER = (
    "accepted",
    "to accept",
    "to verify",
    "verifying",
    "running",
    "cancelling",
    "blocked",
    "ambiguous",
    "failed",
    "cancelled",
    "rejected",
    NOT_STARTED,
)
ATTENTION = frozenset({"blocked", "ambiguous", "failed", "cancelled", "rejected", "cancelling"})
ACTIVE_STATES = frozenset({"running", "verifying", "blocked", "ambiguous", "cancelling"})


def message_of(error: BaseException) -> str:
    if isinstance(error, NexusError):
        return error.message
    if isinstance(error, OSError):
        return f"{error.strerror or error}: {error.filename}" if error.filename else str(error)
    return str(error) or type(error).__name__


def task_state(task: dict[str, Any]) -> str:
    """One word for where a task stands, derived from its record (never from the clock)."""
    if task.get("integration") == "accepted":
        return "accepted"
    attempts = task.get("attempts") or []
    if not attempts:
        return NOT_STARTED
    attempt = attempts[-1]
    execution = attempt.get("execution")
    verification = (attempt.get("verification") or {}).get("status")
    if (attempt.get("cancellation") or {}).get("status") == "requested":
        return "cancelling"
    if verification == "running":
        return "verifying"
    if execution in ("running", "blocked", "ambiguous", "failed", "cancelled"):
        return str(execution)
    if verification == "ambiguous":
        return "ambiguous"
    if task.get("integration") == "rejected" or verification == "failed":
        return "rejected"
    if verification == "passed":
        return "to accept"
    return "to verify"


@dataclass(frozen=True)
class TaskRow:
    """One row of the task table: plain values, compared to decide which cells to update."""

    task_id: str
    depends_on: tuple[str, ...]
    execution: str
    verification: str
    acceptance: str
    attempts_used: int
    max_attempts: int
    stale: bool
    overdue: bool
    last_observed: str | None
    state: str
    objective: str

    def flags(self) -> set[str]:
        words = {self.state, self.execution, self.verification, self.acceptance}
        if self.stale:
            words.add("stale")
        if self.overdue:
            words.add("overdue")
        if self.state in ACTIVE_STATES:
            words.add("active")
        if self.state in ATTENTION or self.stale or self.overdue:
            words.add("attention")
        return words


@dataclass(frozen=True)
class RunView:
    run_id: str
    state_path: str
    rows: tuple[TaskRow, ...]
    counts: tuple[tuple[str, int], ...]
    stale: int
    overdue: int
    sequence: int | None
    updated_at: str | None
    objective_count: int
    # The core's full inspection (run + observations), for the detail pane.
    inspection: dict[str, Any] | None
    # Why the latest read failed; the rows are then the last good ones.
    error: str | None = None
    # Scopes of tasks with passed or accepted evidence: their edits change "stale".
    evidence_scopes: tuple[str, ...] = ()
    # Any task whose flags move with the clock (active attempt, process heartbeat).
    time_sensitive: bool = False

    @property
    def total(self) -> int:
        return len(self.rows)

    def count(self, state: str) -> int:
        return dict(self.counts).get(state, 0)


@dataclass(frozen=True)
class LockView:
    name: str
    present: bool
    fingerprint: str | None = None
    pid: int | None = None
    host: str | None = None
    created_at: str | None = None
    # True/False when the owner is on this host; None when it cannot be probed from here.
    alive: bool | None = None
    unsafe: str | None = None
    unreadable: bool = False


@dataclass(frozen=True)
class ProjectSnapshot:
    directory: str
    root: str | None
    runs: tuple[RunView, ...]
    writer_lock: LockView
    recovery_lock: LockView
    scanned_at_ms: int
    error: str | None = None
    stray_temp_files: int = 0
    changed: frozenset[str] = field(default_factory=frozenset)

    def run(self, run_id: str | None) -> RunView | None:
        for view in self.runs:
            if view.run_id == run_id:
                return view
        return None


def lock_view(name: str, snapshot: dict[str, Any] | None) -> LockView:
    if snapshot is None:
        return LockView(name, False)
    owner = snapshot.get("owner")
    if not isinstance(owner, dict):
        return LockView(name, True, snapshot.get("hash"), unsafe=snapshot.get("unsafe"), unreadable=True)
    process_id = owner.get("pid")
    host = owner.get("hostname")
    valid_pid = isinstance(process_id, int) and not isinstance(process_id, bool) and process_id > 0
    alive: bool | None = None
    if valid_pid and isinstance(host, str) and host == hostname():
        alive = pid_alive(process_id)  # type: ignore[arg-type]
    return LockView(
        name,
        True,
        snapshot.get("hash"),
        pid=process_id if valid_pid else None,
        host=host if isinstance(host, str) else None,
        created_at=owner.get("createdAt") if isinstance(owner.get("createdAt"), str) else None,
        alive=alive,
        unsafe=snapshot.get("unsafe"),
    )


def _depends(definition: dict[str, Any] | None) -> tuple[str, ...]:
    if not definition:
        return ()
    return tuple(str(d) for d in definition.get("dependsOn") or ())


def build_rows(inspection: dict[str, Any]) -> tuple[TaskRow, ...]:
    definitions = {d.get("id"): d for d in inspection["plan"]["tasks"]}
    observations = {o["taskId"]: o for o in inspection.get("observations") or []}
    rows = []
    for task in inspection["tasks"]:
        definition = definitions.get(task["id"]) or {}
        observation = observations.get(task["id"]) or {}
        attempts = task["attempts"]
        attempt = attempts[-1] if attempts else None
        rows.append(
            TaskRow(
                task_id=task["id"],
                depends_on=_depends(definition),
                execution=attempt["execution"] if attempt else NOT_STARTED,
                verification=attempt["verification"]["status"] if attempt else "pending",
                acceptance=task["integration"],
                attempts_used=len(attempts),
                max_attempts=int(definition.get("maxAttempts") or 0),
                stale=bool(observation.get("stale")),
                overdue=bool(observation.get("overdue")),
                last_observed=attempt.get("observedAt") if attempt else None,
                state=task_state(task),
                objective=str(definition.get("objective") or ""),
            )
        )
    return tuple(rows)


def build_view(run_id: str, inspection: dict[str, Any], error: str | None = None) -> RunView:
    rows = build_rows(inspection)
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.state] = counts.get(row.state, 0) + 1
    definitions = {d.get("id"): d for d in inspection["plan"]["tasks"]}
    scopes: list[str] = []
    time_sensitive = False
    for task in inspection["tasks"]:
        attempt = task["attempts"][-1] if task["attempts"] else None
        if attempt is None:
            continue
        if task["integration"] == "accepted" or attempt["verification"].get("status") == "passed":
            scopes.extend((definitions.get(task["id"]) or {}).get("scope") or ())
        if task_state(task) in ACTIVE_STATES or attempt["backend"].get("kind") == "process":
            time_sensitive = True
    return RunView(
        run_id=run_id,
        state_path=run_path(run_id),
        rows=rows,
        counts=tuple((s, counts[s]) for s in STATE_ORDER if s in counts),
        stale=sum(1 for r in rows if r.stale),
        overdue=sum(1 for r in rows if r.overdue),
        sequence=inspection.get("sequence"),
        updated_at=inspection.get("updatedAt"),
        objective_count=len(rows),
        inspection=inspection,
        error=error,
        evidence_scopes=tuple(dict.fromkeys(scopes)),
        time_sensitive=time_sensitive,
    )


def _broken_view(run_id: str, previous: RunView | None, reason: str) -> RunView:
    if previous is not None:
        return RunView(
            run_id=previous.run_id,
            state_path=previous.state_path,
            rows=previous.rows,
            counts=previous.counts,
            stale=previous.stale,
            overdue=previous.overdue,
            sequence=previous.sequence,
            updated_at=previous.updated_at,
            objective_count=previous.objective_count,
            inspection=previous.inspection,
            error=reason,
            evidence_scopes=previous.evidence_scopes,
            time_sensitive=previous.time_sensitive,
        )
    return RunView(
        run_id=run_id,
        state_path=run_path(run_id),
        rows=(),
        counts=(),
        stale=0,
        overdue=0,
        sequence=None,
        updated_at=None,
        objective_count=0,
        inspection=None,
        error=reason,
    )


@dataclass
class _FileMemo:
    stamp: tuple[int, ...] | None
    digest: str | None
    run: dict[str, Any] | None


def _stamp(path: str) -> tuple[int, ...] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)


def covers(scope: str, relative_path: str) -> bool:
    return relative_path == scope or relative_path.startswith(scope.rstrip("/") + "/")


class ProjectScanner:
    """Reads one project's state, reusing whatever did not change since the last scan.

    Not thread-safe: one scanner thread owns it. Writes nothing, anywhere.
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.root: str | None = None
        self._memo: dict[str, _FileMemo] = {}
        self._views: dict[str, RunView] = {}
        self._hashes: dict[tuple[int, ...], str] = {}

    def _resolve_root(self) -> str:
        if self.root is None:
            self.root = root_of(self.directory)
        return self.root

    def evidence_scopes(self) -> set[str]:
        return {scope for view in self._views.values() for scope in view.evidence_scopes}

    def runs_touching(self, relative_paths: set[str]) -> set[str]:
        return {
            view.run_id
            for view in self._views.values()
            if any(covers(scope, p) for scope in view.evidence_scopes for p in relative_paths)
        }

    def scan(
        self, reinspect: set[str] | None = None, everything: bool = False, now: int | None = None
    ) -> ProjectSnapshot:
        """One pass: re-stat every run file, reload those whose bytes changed, re-inspect those
        too, plus ``reinspect`` (run ids), the time-sensitive ones, or all with ``everything``."""
        moment = now_ms() if now is None else now
        try:
            root = self._resolve_root()
            inventory = observe.inspect_inventory(root)
        except Exception as error:  # the project itself is unusable: show why, keep the last views
            return ProjectSnapshot(
                directory=self.directory,
                root=self.root,
                runs=tuple(self._views.values()),
                writer_lock=LockView("writer.lock", False),
                recovery_lock=LockView("recovery.lock", False),
                scanned_at_ms=moment,
                error=message_of(error),
            )
        wanted = set(reinspect or ())
        changed: set[str] = set()
        run_ids: list[str] = inventory["runIds"]
        with observational_hashes(self._hashes):
            for run_id in run_ids:
                previous = self._views.get(run_id)
                view = self._refresh_run(root, run_id, previous, everything or run_id in wanted, moment)
                if view is not previous:
                    self._views[run_id] = view
                    changed.add(run_id)
        for gone in set(self._views) - set(run_ids):
            del self._views[gone]
            self._memo.pop(gone, None)
            changed.add(gone)
        if len(self._hashes) > 200_000:  # old stat keys pile up; start over rather than grow
            self._hashes.clear()
        return ProjectSnapshot(
            directory=self.directory,
            root=root,
            runs=tuple(self._views[r] for r in run_ids),
            writer_lock=lock_view("writer.lock", inventory.get("lock")),
            recovery_lock=lock_view("recovery.lock", inventory.get("recoveryLock")),
            scanned_at_ms=moment,
            stray_temp_files=int(inventory.get("strayTempFiles") or 0),
            changed=frozenset(changed),
        )

    def _refresh_run(self, root: str, run_id: str, previous: RunView | None, force: bool, moment: int) -> RunView:
        memo = self._memo.setdefault(run_id, _FileMemo(None, None, None))
        path = os.path.join(root, RUNS, f"{run_id}.json")
        stamp = _stamp(path)
        reload = stamp is None or stamp != memo.stamp
        if reload:
            try:
                _, raw = read_state_bytes(root, run_id)
            except Exception as error:
                memo.stamp, memo.digest, memo.run = stamp, None, None
                return _broken_view(run_id, previous, message_of(error))
            digest = hashlib.sha256(raw).hexdigest()
            memo.stamp = stamp
            if digest == memo.digest and memo.run is not None and previous is not None:
                reload = False  # touched, same bytes
            else:
                memo.digest = digest
                try:
                    memo.run = parse_run(root, run_id, raw)
                except Exception as error:
                    memo.run = None
                    return _broken_view(run_id, previous, message_of(error))
        if memo.run is None:
            return previous if previous is not None else _broken_view(run_id, None, "not readable")
        if not (reload or force or previous is None or previous.error or (previous.time_sensitive)):
            return previous
        try:
            inspection = observe.inspect_loaded(root, memo.run, moment)
        except Exception as error:
            return _broken_view(run_id, previous, message_of(error))
        view = build_view(run_id, inspection)
        if previous is not None and _same_view(previous, view):
            return previous
        return view

    def scope_paths(self) -> list[str]:
        """Absolute paths worth watching for staleness (existing ones only)."""
        if self.root is None:
            return []
        paths = []
        for scope in sorted(self.evidence_scopes()):
            absolute = os.path.join(self.root, scope)
            if os.path.isdir(absolute):
                paths.append(absolute)
            elif os.path.exists(absolute):
                paths.append(os.path.dirname(absolute))
        return sorted(set(paths))


def _same_view(a: RunView, b: RunView) -> bool:
    if a.rows != b.rows or a.error != b.error or a.sequence != b.sequence:
        return False
    # Observations carry the stale reason, hints and heartbeat facts the rows do not.
    ia, ib = a.inspection or {}, b.inspection or {}
    return bool(ia.get("observations") == ib.get("observations") and ia.get("updatedAt") == ib.get("updatedAt"))


def age_text(iso: str | None, now: int) -> str:
    moment = parse_iso_ms(iso)
    if moment is None:
        return "—"
    return duration_text(max(0, now - moment)) + " ago"


def duration_text(ms: int) -> str:
    seconds = ms // 1000
    if seconds < 60:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 60:
        return f"{minutes}m{seconds % 60:02d}s"
    hours = minutes // 60
    if hours < 48:
        return f"{hours}h{minutes % 60:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


__all__ = [
    "RECOVERY_LOCK",
    "WRITER_LOCK",
    "LockView",
    "ProjectScanner",
    "ProjectSnapshot",
    "RunView",
    "TaskRow",
    "task_state",
]
