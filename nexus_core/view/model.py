"""What the dashboard shows, computed off the UI thread from nexus_core's own inspection.

Nothing here imports textual. A :class:`ProjectScanner` owns one project: it rereads only the
run files whose bytes changed (stat first, then a hash of the bytes), runs the core's
``inspect_loaded`` on them under an observational hash cache, and hands out immutable
:class:`ProjectSnapshot` values that the UI diffs into its tables. It never writes anything.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

from nexus_core import needs, observe
from nexus_core.engine import is_active, latest
from nexus_core.errors import explained
from nexus_core.hostinfo import owner_liveness, usable_pid
from nexus_core.needs import Need
from nexus_core.paths import root_of
from nexus_core.shapes import (
    Inspection,
    JsonObject,
    LockSnapshot,
    Observation,
    Record,
    Run,
    Task,
    TaskDefinition,
)
from nexus_core.snapshots import observational_hashes
from nexus_core.state import canonical, state_dirs
from nexus_core.state.locks import RECOVERY_LOCK, WRITER_LOCK, lock_snapshot, recovery_lock_hint
from nexus_core.state.store import RUNS, list_run_ids, list_temp_files, parse_run, read_state_bytes, run_path
from nexus_core.timeutil import iso_from_ms, now_ms, parse_iso_ms

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


def task_state(task: Record) -> str:
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
    # The kind of need when a person must act (nexus_core.needs, the one classifier), else None.
    need: str | None = None

    @property
    def owner_gone(self) -> bool:
        """The process that owns its running work (a verifier, a launch supervisor) is gone."""
        return self.need in (needs.VERIFIER_GONE, needs.SUPERVISOR_GONE)

    def flags(self) -> set[str]:
        words = {self.state, self.execution, self.verification, self.acceptance}
        if self.stale:
            words.add("stale")
        if self.overdue:
            words.add("overdue")
        if self.state in ACTIVE_STATES:
            words.add("active")
        if self.state in ATTENTION or self.stale or self.overdue or self.need is not None:
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
    inspection: Inspection | None
    # Why the latest read failed; the rows are then the last good ones.
    error: str | None = None
    # Scopes of tasks with passed or accepted evidence: their edits change "stale".
    evidence_scopes: tuple[str, ...] = ()
    # The artifacts of those tasks and the protected resources of every task (inside a scope or
    # not): their edits change what the run says too; the safety pass looks at their status
    # (scopes_changed).
    evidence_files: tuple[str, ...] = ()
    # When the clock may change what this view says (needs.clock_due): EVERY_LOOK, a moment, or
    # None when only the run's files can.
    clock_due_ms: int | None = None
    # The core's observations (kept for every run; the full inspection only for the focus run).
    observations: tuple[Observation, ...] = ()
    # Listed in the inventory, not read yet (first load in progress).
    loading: bool = False
    # What its tasks need of a person (nexus_core.needs), in plan order.
    needs: tuple[Need, ...] = ()

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
    hint: str | None = None  # what to do about it, in the core's words (recovery.lock's recoveryLockHint)


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
    # State directories another user owns or may write, in the core's words (state_dirs).
    unsafe_directories: tuple[str, ...] = ()
    # Everything in the project that waits on a person (locks, runs, tasks, schedules), oldest first.
    needs: tuple[Need, ...] = ()

    @property
    def next_look_ms(self) -> int | None:
        """When a look could read differently with no file changed: ``needs.EVERY_LOOK`` for a
        held lock (its owner may exit), a run not read yet or unreadable, the project unusable,
        or a run whose owners' liveness decides; else the soonest moment a run's clock-derived
        facts change (a deadline, a heartbeat going stale); None when only files can change it,
        which the watcher and the rescans follow."""
        if self.error is not None or self.writer_lock.present or self.recovery_lock.present:
            return needs.EVERY_LOOK
        due: int | None = None
        for view in self.runs:
            if view.loading or view.error is not None:
                return needs.EVERY_LOOK
            if view.clock_due_ms is not None:
                due = view.clock_due_ms if due is None else min(due, view.clock_due_ms)
        return due

    def run(self, run_id: str | None) -> RunView | None:
        for view in self.runs:
            if view.run_id == run_id:
                return view
        return None


def lock_view(name: str, snapshot: LockSnapshot | None, hint: str | None = None) -> LockView:
    if snapshot is None:
        return LockView(name, False)
    owner = snapshot.get("owner")
    if not isinstance(owner, dict):
        return LockView(name, True, snapshot.get("hash"), unsafe=snapshot.get("unsafe"), unreadable=True, hint=hint)
    process_id = owner.get("pid")
    host = owner.get("hostname")
    valid_pid = usable_pid(process_id) is not None
    alive = {"alive": True, "dead": False, "unknown": None}[owner_liveness(host, process_id)]
    return LockView(
        name,
        True,
        snapshot.get("hash"),
        pid=process_id if valid_pid else None,
        host=host if isinstance(host, str) else None,
        created_at=owner.get("createdAt") if isinstance(owner.get("createdAt"), str) else None,
        alive=alive,
        unsafe=snapshot.get("unsafe"),
        hint=hint,
    )


def _depends(definition: Record | None) -> tuple[str, ...]:
    if not definition:
        return ()
    return tuple(str(d) for d in definition.get("dependsOn") or ())


def build_rows(
    inspection: Inspection,
    reusable: dict[str, TaskRow] | None = None,
    standings: dict[str, needs.Standing] | None = None,
) -> tuple[TaskRow, ...]:
    """``reusable``: rows known to be unchanged (same record, plan and observation);
    ``standings``: each task's (``needs.stand_run``), which gives the row its need."""
    definitions = {d.get("id"): d for d in inspection["plan"]["tasks"]}
    observations = {o["taskId"]: o for o in inspection.get("observations") or []}
    rows = []
    for task in inspection["tasks"]:
        standing = standings.get(task["id"]) if standings else None
        need = standing.kind if standing is not None else None
        kept = reusable.get(task["id"]) if reusable else None
        if kept is not None and kept.need == need:
            rows.append(kept)
            continue
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
                need=need,
            )
        )
    return tuple(rows)


def build_view(
    run_id: str,
    inspection: Inspection,
    keep_inspection: bool = True,
    reusable: dict[str, TaskRow] | None = None,
    now: int | None = None,
    project: str = "",
) -> RunView:
    """``project``: the root the run's needs name; ``now``: the clock the standings read."""
    moment = now_ms() if now is None else now
    observations = needs.observations_of(inspection)
    standings = needs.stand_run(inspection, observations, moment)
    rows = build_rows(inspection, reusable, standings)
    run_needs = tuple(needs.run_needs(project, inspection, observations, moment, standings))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row.state] = counts.get(row.state, 0) + 1
    definitions = {d.get("id"): d for d in inspection["plan"]["tasks"]}
    scopes: list[str] = []
    files: list[str] = []
    for task in inspection["tasks"]:
        attempt = task["attempts"][-1] if task["attempts"] else None
        if attempt is None:
            continue
        if task["integration"] == "accepted" or attempt["verification"].get("status") == "passed":
            definition = definitions.get(task["id"]) or {}
            scopes.extend(definition.get("scope") or ())
            files.extend(definition.get("artifacts") or ())
    for definition in definitions.values():  # a protected resource changed bars any task, verified or not
        files.extend(definition.get("resourceHashes") or ())
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
        inspection=inspection if keep_inspection else None,
        evidence_scopes=tuple(dict.fromkeys(scopes)),
        evidence_files=tuple(dict.fromkeys(files)),
        clock_due_ms=needs.clock_due(inspection["tasks"], moment),
        observations=tuple(inspection.get("observations") or ()),
        needs=run_needs,
    )


def _time_dependent(task: Task) -> bool:
    attempts = task.get("attempts") or []
    if not attempts:
        return False
    return is_active(task) or attempts[-1]["backend"].get("kind") == "process"


# The 1 s tick re-times every active attempt and every shown age: parse each timestamp once.
_parse_time = functools.lru_cache(maxsize=65536)(parse_iso_ms)


def _time_ms(text: object) -> int | None:
    return _parse_time(text) if isinstance(text, str) else None


def refresh_time_flags(observation: Observation, task: Task, now: int) -> Observation:
    """The observation with its clock-derived fields recomputed for ``now``: ``overdue`` (as
    observe_task computes it) and the process observation (the core's own function). Everything
    else in an observation depends on files, not on the clock (tests compare with inspect)."""
    attempt = latest(task)
    if attempt is None:
        return observation
    deadline = _time_ms(attempt.get("deadline"))
    overdue = bool(is_active(task) and deadline is not None and now > deadline)
    process = observation.get("process")
    fresh_process = None
    if attempt["backend"].get("kind") == "process":
        kept = process.get("recoverableReceipt") if isinstance(process, dict) else None
        fresh_process = observe.process_observation(attempt, now, kept)
    if overdue == observation.get("overdue") and fresh_process == process:
        return observation
    updated = observation.copy()
    updated["overdue"] = overdue
    if fresh_process is not None:
        updated["process"] = fresh_process
    # Keep the core's key order: "hint" stays last.
    updated["hint"] = updated.pop("hint")
    return updated


def _loading_view(run_id: str) -> RunView:
    return RunView(run_id, run_path(run_id), (), (), 0, 0, None, None, 0, None, loading=True)


def _broken_view(run_id: str, previous: RunView | None, reason: str) -> RunView:
    if previous is not None and not previous.loading:
        return dataclasses.replace(previous, error=reason)
    return RunView(run_id, run_path(run_id), (), (), 0, 0, None, None, 0, None, error=reason)


@dataclass
class _FileMemo:
    stamp: tuple[int, ...] | None = None
    digest: str | None = None
    plan_hash: str | None = None
    # Per task: a cheap fingerprint of its record, to re-observe only what changed; None while
    # ``run`` is kept (then the records themselves are compared, which is faster).
    task_keys: dict[str, int] | None = field(default_factory=dict)
    # Records of the tasks whose flags move with the clock (the 1 s tick needs only these), with
    # their definitions and the run's own facts (id, createdAt, plan): what their standing reads.
    clocked: dict[str, Task] = field(default_factory=dict)
    clocked_definitions: dict[str, TaskDefinition] = field(default_factory=dict)
    header: Run | None = None
    # The parsed run, kept for the focus run only (memory).
    run: Run | None = None
    # When the run's last full inspection began (wall clock, ns; see changed_since).
    inspected_ns: int | None = None


def _stamp(path: str) -> tuple[int, ...] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_mode)


# File timestamps come from the kernel's coarse clock, a tick behind time.time_ns() at most;
# anything changed within this much before an inspection began counts as changed after it.
CHANGE_SLACK_NS = 1_000_000_000


def changed_since(path: str, since_ns: int) -> bool:
    """Whether ``path``, or anything under it, was changed at or after ``since_ns`` (its status
    or content: ctime, which no one can set back, or mtime), by the status of each entry alone
    (never a link followed, never a file opened). A path missing now counts as changed when its
    nearest existing parent's listing changed since. Cheap next to an inspection: the watcher's
    catch-up asks it of every scope it starts watching."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        parent = os.path.dirname(path)
        return parent == path or changed_since(parent, since_ns)
    except OSError:
        return True
    if max(info.st_ctime_ns, info.st_mtime_ns) >= since_ns:
        return True
    directories = [path] if stat.S_ISDIR(info.st_mode) else []
    while directories:
        try:
            with os.scandir(directories.pop()) as entries:
                for entry in entries:
                    info = entry.stat(follow_symlinks=False)
                    if max(info.st_ctime_ns, info.st_mtime_ns) >= since_ns:
                        return True
                    if stat.S_ISDIR(info.st_mode):
                        directories.append(entry.path)
        except OSError:
            return True  # gone or unreadable since: the inspection says what it is now
    return False


def covers(scope: str, relative_path: str) -> bool:
    return relative_path == scope or relative_path.startswith(scope.rstrip("/") + "/")


class ScopeIndex:
    """Which runs have an evidence scope covering a path (as :func:`covers` decides), by
    looking up the path's prefixes: a project can hold tens of thousands of scopes."""

    def __init__(self) -> None:
        self._scopes_of: dict[str, tuple[str, ...]] = {}
        self._runs_of: dict[str, set[str]] = {}

    def update(self, views: tuple[RunView, ...] | list[RunView]) -> None:
        """Follow ``views``; unchanged runs (the same scopes tuple) cost one comparison."""
        seen = set()
        for view in views:
            seen.add(view.run_id)
            old = self._scopes_of.get(view.run_id)
            if old is view.evidence_scopes:
                continue
            if old is not None:
                self._forget(view.run_id, old)
            self._scopes_of[view.run_id] = view.evidence_scopes
            for scope in view.evidence_scopes:
                self._runs_of.setdefault(_scope_key(scope), set()).add(view.run_id)
        for gone in [run_id for run_id in self._scopes_of if run_id not in seen]:
            self._forget(gone, self._scopes_of.pop(gone))

    def _forget(self, run_id: str, scopes: tuple[str, ...]) -> None:
        for scope in scopes:
            runs = self._runs_of.get(_scope_key(scope))
            if runs is not None:
                runs.discard(run_id)
                if not runs:
                    del self._runs_of[_scope_key(scope)]

    def runs_covering(self, relative_path: str) -> set[str]:
        found: set[str] = set()
        runs_of = self._runs_of
        exact = runs_of.get(relative_path)
        if exact:
            found |= exact
        position = relative_path.find("/")
        while position != -1:
            runs = runs_of.get(relative_path[:position])
            if runs:
                found |= runs
            position = relative_path.find("/", position + 1)
        return found


def _scope_key(scope: str) -> str:
    return scope.rstrip("/")


def _inventory(root: str) -> JsonObject:
    """The inventory's cheap part, from the same core functions as ``inspect_inventory``
    (which also loads every run to name the unreadable ones: here each run's own view says
    why it cannot be read)."""
    return {
        "runIds": list_run_ids(root),
        "lock": lock_snapshot(root, WRITER_LOCK),
        "recoveryLock": lock_snapshot(root, RECOVERY_LOCK),
        "strayTempFiles": len(list_temp_files(root)),
        "unsafeStateDirectories": [d.warning() for d in state_dirs.problems(root)],
    }


def _task_key(task: Task) -> int:
    """A fingerprint of the task's record, to tell on the next read whether it changed: of
    orjson's text of it (a tenth of ``repr``'s cost, which was an eighth of a first scan), or
    of its ``repr`` where orjson cannot write it (an integer beyond 64 bits). The same in every
    process (``hash`` of bytes is salted per process): a first look done by a worker process
    (first_look.py) leaves keys its scanner compares against."""
    orjson = canonical.plain_path()
    text: bytes | None = None
    if orjson is not None:
        with contextlib.suppress(TypeError):  # orjson.JSONEncodeError
            text = orjson.dumps(task)
    if text is None:
        text = repr(task).encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def _changed_tasks(run: Run, memo: _FileMemo, task_keys: dict[str, int] | None) -> set[str]:
    """Ids of the tasks whose record differs from the last read (every task if unknown)."""
    if memo.run is not None:
        before = {task["id"]: task for task in memo.run["tasks"]}
        return {task["id"] for task in run["tasks"] if before.get(task["id"]) != task}
    if memo.task_keys is None:
        return {task["id"] for task in run["tasks"]}
    keys = task_keys if task_keys is not None else {task["id"]: _task_key(task) for task in run["tasks"]}
    return {task_id for task_id, key in keys.items() if memo.task_keys.get(task_id) != key}


def _dependents(run: Run, changed: set[str]) -> set[str]:
    """``changed`` plus every task that depends on one of them, transitively."""
    reverse: dict[str, list[str]] = {}
    for definition in run["plan"]["tasks"]:
        for dep in definition.get("dependsOn") or ():
            reverse.setdefault(dep, []).append(definition["id"])
    result = set(changed)
    todo = list(changed)
    while todo:
        for child in reverse.get(todo.pop(), ()):
            if child not in result:
                result.add(child)
                todo.append(child)
    return result


# A periodic safety-net pass looks at the status of every run's evidence paths (what a missed
# watcher event left unseen: scopes_changed), and re-inspects runs in full round-robin within
# this budget per pass, kept as credit for a run that costs more than one pass's (what only a
# full inspection sees: an executable outside the project replaced, a check's directory gone).
# The watcher covers run files and evidence scopes immediately. 0.15 s per pass, as before,
# was half the CPU of an idle --discover over 46 projects.
SAFETY_BUDGET_SECONDS = 0.01
PUBLISH_EVERY_SECONDS = 0.25


class ProjectScanner:
    """Reads one project's state, reusing whatever did not change since the last scan.

    Not thread-safe: one scanner thread owns it (``focus`` may be set from the UI thread).
    Writes nothing, anywhere.
    """

    def __init__(self, directory: str) -> None:
        # A scanner lives long and reads every run again and again: orjson's import pays for
        # itself even on small runs (short commands load it only for large state).
        canonical.plain_path()
        self.directory = directory
        self.root: str | None = None
        # The run whose full inspection the UI shows; None: the first listed run.
        self.focus: str | None = None
        # False while no pane shows this project's runs (--discover's projects not opened yet):
        # then no run is inspected for a detail pane, and no parsed run is kept (a fleet's
        # memory); its summary and needs come from every run's rows as always.
        self.shown = True
        self._memo: dict[str, _FileMemo] = {}
        self._views: dict[str, RunView] = {}
        self._hashes: dict[tuple[int, ...], str] = {}
        self._safety_cursor = 0
        self._safety_credit = 0.0
        self._seconds_per_inspection: float | None = None  # the last full inspection's (safety budget)

    def _resolve_root(self) -> str:
        if self.root is None:
            self.root = root_of(self.directory)
        return self.root

    def scopes_changed(self, run_ids: list[str]) -> set[str]:
        """The runs (of ``run_ids``) with an evidence scope, artifact or protected resource
        changed since their last full inspection began, or never fully inspected."""
        if self.root is None:
            return set(run_ids)
        changed = set()
        for run_id in run_ids:
            view, memo = self._views.get(run_id), self._memo.get(run_id)
            if view is None or memo is None or memo.inspected_ns is None:
                changed.add(run_id)
                continue
            since = memo.inspected_ns - CHANGE_SLACK_NS
            paths = (*view.evidence_scopes, *view.evidence_files)
            if any(changed_since(os.path.join(self.root, path), since) for path in paths):
                changed.add(run_id)
        return changed

    def evidence_scopes(self) -> set[str]:
        return {scope for view in self._views.values() for scope in view.evidence_scopes}

    def scan(
        self,
        reinspect: set[str] | None = None,
        everything: bool = False,
        now: int | None = None,
        publish: Callable[[ProjectSnapshot], None] | None = None,
        retime: bool = True,
        catch_up: bool = False,
    ) -> ProjectSnapshot:
        """One pass: re-stat every run file; reload those whose bytes changed and re-observe
        their changed tasks; fully re-inspect ``reinspect`` (run ids) and, with ``everything`` (the
        safety pass), the runs whose evidence paths changed and a round-robin share of the others;
        refresh the clock-derived flags of the rest.
        ``catch_up``: also fully re-inspect the runs with an evidence scope changed since their
        last full inspection began (what a watcher just started on those scopes missed).
        ``publish`` receives partial snapshots while a long first load goes on."""
        moment = now_ms() if now is None else now
        try:
            root = self._resolve_root()
            inventory = _inventory(root)
        except Exception as error:  # the project itself is unusable: show why, keep the last views
            return ProjectSnapshot(
                directory=self.directory,
                root=self.root,
                runs=tuple(self._views.values()),
                writer_lock=LockView("writer.lock", False),
                recovery_lock=LockView("recovery.lock", False),
                scanned_at_ms=moment,
                error=explained(error),
            )
        run_ids: list[str] = inventory["runIds"]
        locks = (inventory.get("lock"), inventory.get("recoveryLock"))
        focus = self.focus_among(run_ids)
        forced = set(reinspect or ())
        if everything:
            forced |= self._safety_share(run_ids)
        if everything or catch_up:  # one status walk, whichever asked it
            forced |= self.scopes_changed(run_ids)
        changed: set[str] = set()
        for gone in set(self._views) - set(run_ids):
            del self._views[gone]
            self._memo.pop(gone, None)
            changed.add(gone)

        first_load = any(r not in self._views for r in run_ids)
        if publish is not None and first_load and len(run_ids) > 1:
            publish(self._snapshot(root, inventory, moment, changed))
        last_publish = time.monotonic()
        started = time.monotonic()
        with observational_hashes(self._hashes):
            for run_id in run_ids:
                previous = self._views.get(run_id)
                view = self._refresh_run(
                    root, run_id, previous, run_id in forced, run_id == focus, locks, moment, retime
                )
                if view is not previous:
                    self._views[run_id] = view
                    changed.add(run_id)
                if publish is not None and first_load and time.monotonic() - last_publish > PUBLISH_EVERY_SECONDS:
                    publish(self._snapshot(root, inventory, moment, changed))
                    last_publish = time.monotonic()
        self.last_scan_seconds = time.monotonic() - started
        if len(self._hashes) > 200_000:  # old stat keys pile up; start over rather than grow
            self._hashes.clear()
        return self._snapshot(root, inventory, moment, changed)

    def focus_among(self, run_ids: list[str]) -> str | None:
        """The run to inspect in full for the detail pane, of these (None: no pane shows them)."""
        if not self.shown or not run_ids:
            return None
        return self.focus if self.focus in run_ids else run_ids[0]

    def look_at(self, run_ids: list[str], focus: str | None) -> Looked:
        """A first full inspection of these runs only (``focus``: the one whose inspection the UI
        shows), for a project's first load shared among processes: what ``scan`` would find of
        them, without the project's snapshot."""
        root = self._resolve_root()
        locks = (lock_snapshot(root, WRITER_LOCK), lock_snapshot(root, RECOVERY_LOCK))
        moment = now_ms()
        with observational_hashes(self._hashes):
            for run_id in run_ids:
                self._views[run_id] = self._refresh_run(root, run_id, None, False, run_id == focus, locks, moment)
        return Looked(
            root=root,
            views=dict(self._views),
            memo={run_id: self._memo[run_id] for run_id in self._views if run_id in self._memo},
            hashes=dict(self._hashes),
            seconds_per_inspection=self._seconds_per_inspection,
        )

    def adopt(self, looked: Looked) -> None:
        """Take what a look elsewhere found, for the runs this scanner has not seen itself. The
        next ``scan`` treats them as its own earlier reads: a run file changed since is read again
        (its stamp differs), an unchanged one costs a stat."""
        if self.root is None:
            self.root = looked.root
        elif self.root != looked.root:
            return  # the project resolves elsewhere now: this scanner looks for itself
        for run_id, view in looked.views.items():
            if run_id not in self._views and run_id in looked.memo:
                self._views[run_id], self._memo[run_id] = view, looked.memo[run_id]
        self._hashes.update(looked.hashes)
        if self._seconds_per_inspection is None:
            self._seconds_per_inspection = looked.seconds_per_inspection

    def never_scanned(self) -> bool:
        """No run of this project was read yet (its first scan reads them all)."""
        return not self._views

    def _snapshot(self, root: str, inventory: JsonObject, moment: int, changed: set[str]) -> ProjectSnapshot:
        """The project as far as this scanner knows its runs (the others shown loading)."""
        run_ids: list[str] = inventory["runIds"]
        locks = (inventory.get("lock"), inventory.get("recoveryLock"))
        runs = tuple(self._views.get(r) or _loading_view(r) for r in run_ids)
        return ProjectSnapshot(
            directory=self.directory,
            root=root,
            runs=runs,
            writer_lock=lock_view("writer.lock", locks[0]),
            recovery_lock=lock_view("recovery.lock", locks[1], recovery_lock_hint(locks[1], root)),
            scanned_at_ms=moment,
            stray_temp_files=int(inventory.get("strayTempFiles") or 0),
            changed=frozenset(changed),
            unsafe_directories=tuple(inventory["unsafeStateDirectories"]),
            needs=self._project_needs(root, runs, locks),
        )

    def known(self) -> ProjectSnapshot | None:
        """What this scanner knows now, reading no run (those it has not seen shown loading):
        while a first load goes on elsewhere. None if the project cannot be listed."""
        try:
            root = self._resolve_root()
            inventory = _inventory(root)
        except Exception:
            return None
        return self._snapshot(root, inventory, now_ms(), set())

    def _project_needs(self, root: str, runs: tuple[RunView, ...], locks: tuple[Any, Any]) -> tuple[Need, ...]:
        """Everything in the project that waits on a person, oldest first (the classifier's)."""
        found = needs.lock_needs(root, locks[0], locks[1])
        for view in runs:
            if view.error is not None:
                stamp = self._memo[view.run_id].stamp if view.run_id in self._memo else None
                changed = iso_from_ms(stamp[3] // 1_000_000) if stamp else None
                found.append(needs.unreadable_need(root, view.run_id, view.error, changed))
            found.extend(view.needs)
        found.extend(self._schedule_needs(root))
        return tuple(needs.oldest_first(found))

    def _schedule_needs(self, root: str) -> list[Need]:
        """Failed scheduled re-checks, read again only when the database file changed."""
        from nexus_core.schedule import DB_REL

        stamp = _stamp(os.path.join(root, DB_REL))
        cached = getattr(self, "_schedules", None)
        if cached is not None and cached[0] == stamp:
            return list(cached[1])
        found: list[Need] = []
        if stamp is not None:
            from nexus_core.attention import schedule_needs

            found = schedule_needs(root)
        self._schedules = (stamp, tuple(found))
        return found

    def _safety_share(self, run_ids: list[str]) -> set[str]:
        """Runs to re-inspect in full on this periodic pass, round-robin, within the pass's time
        budget plus what earlier passes left (a run costlier than one pass's budget is taken
        once enough is left), estimated from the last full inspection."""
        if not run_ids:
            return set()
        measured = self._seconds_per_inspection
        per_run = max(0.01 if measured is None else measured, 0.001)
        self._safety_credit = min(self._safety_credit + SAFETY_BUDGET_SECONDS, max(SAFETY_BUDGET_SECONDS, per_run))
        count = min(len(run_ids), int(self._safety_credit / per_run + 1e-9))
        self._safety_credit -= count * per_run
        share = {run_ids[(self._safety_cursor + i) % len(run_ids)] for i in range(count)}
        self._safety_cursor = (self._safety_cursor + count) % len(run_ids)
        return share

    def _read(self, root: str, run_id: str, memo: _FileMemo, stamp: tuple[int, ...] | None) -> Run | None:
        """The parsed run if its bytes changed since the last read (or ``memo.run`` is gone)."""
        _, raw = read_state_bytes(root, run_id)
        digest = hashlib.sha256(raw).hexdigest()
        memo.stamp = stamp
        if digest == memo.digest:
            return None
        run = parse_run(root, run_id, raw)
        memo.digest = digest
        return run

    def _refresh_run(
        self,
        root: str,
        run_id: str,
        previous: RunView | None,
        force: bool,
        is_focus: bool,
        locks: tuple[Any, Any],
        moment: int,
        retime: bool = True,
    ) -> RunView:
        memo = self._memo.setdefault(run_id, _FileMemo())
        stamp = _stamp(os.path.join(root, RUNS, f"{run_id}.json"))
        usable = previous is not None and not previous.loading and previous.error is None
        need_run = force or not usable or (is_focus and previous is not None and previous.inspection is None)
        try:
            run = self._load(root, run_id, memo, stamp, need_run)
        except Exception as error:
            memo.stamp, memo.digest, memo.run = stamp, None, None
            return _broken_view(run_id, previous, explained(error))
        if run is None:
            return self._unchanged(run_id, previous, memo, moment, retime)
        try:
            reusable = not force and usable and memo.plan_hash == run.get("planHash") and previous is not None
            # The focus run keeps its parsed records: compare those; the others keep keys.
            task_keys = None if is_focus else {task["id"]: _task_key(task) for task in run["tasks"]}
            inspection, unchanged_rows = self._inspect(
                root, run, memo, task_keys, previous if reusable else None, locks, moment
            )
        except Exception as error:
            return _broken_view(run_id, previous, explained(error))
        _remember(memo, run, task_keys, is_focus)
        view = build_view(run_id, inspection, is_focus, unchanged_rows, moment, root)
        if previous is not None and _same_view(previous, view):
            return previous
        return view

    def _load(
        self, root: str, run_id: str, memo: _FileMemo, stamp: tuple[int, ...] | None, need_run: bool
    ) -> Run | None:
        """The run when its bytes changed, or when ``need_run`` (from the memo if it kept it);
        None: same bytes, nothing needed."""
        run: Run | None = None
        if stamp is None or stamp != memo.stamp:
            run = self._read(root, run_id, memo, stamp)
        if run is None and need_run:
            run = memo.run
            if run is None:
                memo.digest = None  # read again even though the bytes are the same
                run = self._read(root, run_id, memo, stamp)
        return run

    def _unchanged(self, run_id: str, previous: RunView | None, memo: _FileMemo, moment: int, retime: bool) -> RunView:
        """Same bytes: only the clock moved."""
        if previous is None or not retime or not memo.clocked:
            return previous if previous is not None else _loading_view(run_id)
        if previous.clock_due_ms is None or moment < previous.clock_due_ms:
            return previous  # nothing the clock decides has changed yet
        return self._retimed(previous, memo, moment)

    def _inspect(
        self,
        root: str,
        run: Run,
        memo: _FileMemo,
        task_keys: dict[str, int] | None,
        reusable: RunView | None,
        locks: tuple[Any, Any],
        moment: int,
    ) -> tuple[Inspection, dict[str, TaskRow] | None]:
        """The run's inspection: re-observing only changed tasks when the previous view is
        ``reusable``, else in full (timed, for the safety-net budget)."""
        if reusable is not None:
            return self._reobserve(root, run, memo, task_keys, reusable, locks, moment)
        began = time.monotonic()
        memo.inspected_ns = time.time_ns()
        inspection = observe.inspect_loaded(root, run, moment)
        self._seconds_per_inspection = time.monotonic() - began
        return inspection, None

    def _reobserve(
        self,
        root: str,
        run: Run,
        memo: _FileMemo,
        task_keys: dict[str, int] | None,
        previous: RunView,
        locks: tuple[Any, Any],
        moment: int,
    ) -> tuple[Inspection, dict[str, TaskRow]]:
        """The run's inspection, calling the core's observe_task only for tasks whose record
        changed (and their dependents); the others keep their observation, re-timed. Also the
        previous rows still valid (same record, same observation object)."""
        changed = _changed_tasks(run, memo, task_keys)
        affected = _dependents(run, changed)
        old = {o["taskId"]: o for o in previous.observations}
        old_rows = {row.task_id: row for row in previous.rows}
        unchanged_rows: dict[str, TaskRow] = {}
        verified: set[str] = set()
        observations: list[Observation] = []
        for task in run["tasks"]:
            kept = old.get(task["id"])
            # A verification left running is re-observed each time: its owner may have exited
            # (or writer.lock changed) with no change to the record, and its hint says which.
            if task["id"] in affected or kept is None or "runningVerification" in kept:
                observations.append(observe.observe_task(root, run, task, verified, moment))
            else:
                observation = refresh_time_flags(kept, task, moment)
                observations.append(observation)
                row = old_rows.get(task["id"])
                if observation is kept and row is not None:
                    unchanged_rows[task["id"]] = row
        result = cast(Inspection, dict(run))  # the run, then what inspect adds
        result["observations"] = observations
        result["lock"], result["recoveryLock"] = locks
        observe.add_recovery_lock_hint(result, root)
        return result, unchanged_rows

    def _retimed(self, previous: RunView, memo: _FileMemo, moment: int) -> RunView:
        observations = [
            refresh_time_flags(o, memo.clocked[o["taskId"]], moment) if o["taskId"] in memo.clocked else o
            for o in previous.observations
        ]
        standings = self._clocked_standings(previous, memo, observations, moment)
        if all(a is b for a, b in zip(observations, previous.observations, strict=True)) and all(
            row.need == standings[row.task_id].kind for row in previous.rows if row.task_id in standings
        ):
            return previous
        if previous.inspection is not None:
            inspection = previous.inspection.copy()
            inspection["observations"] = observations
            return build_view(previous.run_id, inspection, now=moment, project=self.root or "")
        by_id = {o["taskId"]: o for o in observations}
        rows = tuple(
            dataclasses.replace(
                row,
                overdue=bool(by_id[row.task_id].get("overdue")),
                need=standings[row.task_id].kind if row.task_id in standings else row.need,
            )
            for row in previous.rows
        )
        return dataclasses.replace(
            previous,
            rows=rows,
            overdue=sum(1 for r in rows if r.overdue),
            observations=tuple(observations),
            needs=self._clocked_needs(previous, memo, standings),
            # The tasks kept for the tick are every task clock_due reads.
            clock_due_ms=needs.clock_due(memo.clocked.values(), moment),
        )

    @staticmethod
    def _clocked_standings(
        previous: RunView, memo: _FileMemo, observations: list[Observation], moment: int
    ) -> dict[str, needs.Standing]:
        """The standings of the tasks whose standing moves with the clock (each has an attempt:
        its dependencies and the run's capacity do not matter)."""
        if memo.header is None:
            return {}
        by_id = {o["taskId"]: o for o in observations}
        return {
            task_id: needs.stand(
                memo.header, task, by_id.get(task_id, {}), True, moment, memo.clocked_definitions[task_id]
            )
            for task_id, task in memo.clocked.items()
            if task_id in memo.clocked_definitions
        }

    def _clocked_needs(
        self, previous: RunView, memo: _FileMemo, standings: dict[str, needs.Standing]
    ) -> tuple[Need, ...]:
        if memo.header is None:
            return previous.needs
        found = [need for need in previous.needs if need.task not in standings]
        for task_id, standing in standings.items():
            need = needs.task_need(self.root or "", memo.header, memo.clocked[task_id], standing)
            if need is not None:
                found.append(need)
        order = {row.task_id: index for index, row in enumerate(previous.rows)}
        return tuple(sorted(found, key=lambda need: order.get(need.task or "", -1)))

    def scope_paths(self) -> list[str]:
        """Absolute paths worth watching for staleness (existing ones only); recomputed only
        when the set of evidence scopes changes (it can hold thousands of directories)."""
        if self.root is None:
            return []
        scopes = frozenset(self.evidence_scopes())
        cached = getattr(self, "_scope_paths_cache", None)
        if cached is not None and cached[0] == scopes:
            return list(cached[1])
        paths = []
        for scope in sorted(scopes):
            absolute = os.path.join(self.root, scope)
            if os.path.isdir(absolute):
                paths.append(absolute)
            elif os.path.exists(absolute):
                paths.append(os.path.dirname(absolute))
        result = sorted(set(paths))
        self._scope_paths_cache = (scopes, tuple(result))
        return result


@dataclass
class Looked:
    """What a first look at some of a project's runs found, in another process
    (:mod:`nexus_core.view.first_look`): the scanner's memory of those runs, for the project's
    own scanner to ``adopt``."""

    root: str
    views: dict[str, RunView]
    memo: dict[str, _FileMemo]
    hashes: dict[tuple[int, ...], str]
    seconds_per_inspection: float | None


def _remember(memo: _FileMemo, run: Run, task_keys: dict[str, int] | None, is_focus: bool) -> None:
    """What the next scan compares against: the plan, the task keys (or, for the focus run,
    its parsed records), and the tasks whose flags move with the clock."""
    memo.plan_hash = run.get("planHash")
    memo.task_keys = task_keys
    memo.clocked = {task["id"]: task for task in run["tasks"] if _time_dependent(task)}
    definitions = {definition["id"]: definition for definition in run["plan"]["tasks"]}
    memo.clocked_definitions = {task_id: definitions[task_id] for task_id in memo.clocked}
    memo.header = cast(Run, {key: run.get(key) for key in ("id", "createdAt", "planHash")})
    memo.run = run if is_focus else None


def _same_view(a: RunView, b: RunView) -> bool:
    if a.rows != b.rows or a.error != b.error or a.sequence != b.sequence or a.loading != b.loading:
        return False
    if (a.inspection is None) != (b.inspection is None):
        return False
    # Observations carry the stale reason, hints and heartbeat facts the rows do not.
    return a.observations == b.observations and a.updated_at == b.updated_at


__all__ = [
    "RECOVERY_LOCK",
    "WRITER_LOCK",
    "LockView",
    "Looked",
    "ProjectScanner",
    "ProjectSnapshot",
    "RunView",
    "TaskRow",
    "task_state",
]
