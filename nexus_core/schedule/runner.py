"""``nexus scheduler``: the foreground runner that fires due occurrences.

It sleeps until the next due occurrence (waking at least every ``SCAN_SECONDS``, and within
``CHANGE_POLL_SECONDS`` when another process changes a database: ``PRAGMA data_version``), then
claims occurrences one at a time (``core.claim_next``), runs each as ``nexus loop``'s tick does
(``supervise.loop.run_tick``: inspect, report stale and overdue work, with ``--verify`` verify
what awaits it through ``nexus verify`` in its own process group) and records the outcome.
Events go out as the JSON lines ``nexus wait`` writes (its event types, plus ``occurrence-*`` and
``scheduler-*`` in the same shape); the tick's words go to stderr.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import NexusError, message_of
from ..paths import root_of
from ..supervise.events import Event, EventBatch, EventLog, Snapshot, check_log_path, derive_events, json_line
from ..supervise.loop import LoopStop, TickCache, run_tick, tick_summary
from ..terminal import terminal_safe
from ..timeutil import iso_from_ms
from . import core, db
from .rules import duration_text

SCAN_SECONDS = 60.0
CHANGE_POLL_SECONDS = 0.5
# A project whose database fails (a full disk, an I/O error) is retried after this long,
# doubling up to RETRY_MAX_SECONDS: the runner keeps serving its other projects, never exits.
RETRY_FIRST_SECONDS = 5.0
RETRY_MAX_SECONDS = 300.0
TEST_CLOCK_ENV = "NEXUS_SCHEDULER_TEST_CLOCK"


class Clock:
    """Wall-clock milliseconds. The documented test hook ``NEXUS_SCHEDULER_TEST_CLOCK`` =
    ``EPOCH_MS`` or ``EPOCH_MS@RATE`` starts the clock at EPOCH_MS and runs it RATE times
    faster than real time (``@0`` stops it), so tests can cross days and DST nights."""

    def __init__(self, spec: str | None = None) -> None:
        self.start_ms: int | None = None
        self.rate = 1.0
        self.origin = time.monotonic()
        if spec:
            epoch, _, rate = spec.partition("@")
            try:
                self.start_ms = int(epoch)
                self.rate = float(rate) if rate else 1.0
            except ValueError:
                raise NexusError(f"{TEST_CLOCK_ENV} must be EPOCH_MS or EPOCH_MS@RATE; got {spec!r}.") from None

    @classmethod
    def from_environment(cls) -> Clock:
        return cls(os.environ.get(TEST_CLOCK_ENV))

    def now_ms(self) -> int:
        if self.start_ms is None:
            return int(time.time() * 1000)
        return self.start_ms + int((time.monotonic() - self.origin) * self.rate * 1000)

    def real_seconds(self, span_ms: int) -> float:
        """How long to sleep for ``span_ms`` of this clock's time (a stopped clock: forever)."""
        if self.rate <= 0:
            return float("inf")
        return max(0.0, span_ms / 1000 / self.rate)


@dataclass
class Project:
    root: str
    connection: sqlite3.Connection | None = None
    inode: int | None = None
    data_version: int | None = None
    previous: dict[str, Snapshot] = field(default_factory=dict)
    caches: dict[str, TickCache] = field(default_factory=dict)
    announced_missing: bool = False
    refused: tuple[int, int, int] | None = None  # the file last refused (inode, size, mtime)
    retry_at: float | None = None  # time.monotonic() of the next try after a failure
    retry_seconds: float = 0.0  # the current back-off (0: none)
    # Outcomes of occurrences run but not yet recorded (the database failed): recorded first on
    # the next scan, so a claim of this live runner never stays "claimed" for good.
    unrecorded: list[tuple[core.Claim, str, str]] = field(default_factory=list)

    def waiting(self) -> bool:
        """True while this project backs off after a failure."""
        return self.retry_at is not None and time.monotonic() < self.retry_at

    def failed(self) -> float:
        """Back off after a failure; the seconds until the next try."""
        self.retry_seconds = min(RETRY_MAX_SECONDS, max(RETRY_FIRST_SECONDS, self.retry_seconds * 2))
        self.retry_at = time.monotonic() + self.retry_seconds
        self.close()  # reopened (and checked again) on the next try
        return self.retry_seconds

    def recovered(self) -> None:
        self.retry_at, self.retry_seconds = None, 0.0

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.connection = None
        self.inode = None

    def current(self) -> sqlite3.Connection | None:
        """The open database, reopened when its file was replaced; None while there is none."""
        path = db.db_path(self.root)
        try:
            inode = os.lstat(path).st_ino
        except FileNotFoundError:
            self.close()
            return None
        if self.connection is not None and inode == self.inode:
            return self.connection
        self.close()
        connection = db.connect_checked(self.root)
        if connection is None:
            return None
        self.connection, self.inode = connection, inode
        self.data_version = None  # set by the first claim transaction
        return connection

    def changed(self) -> bool:
        """True when another process committed since the last look (or the file came or went)."""
        path = db.db_path(self.root)
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return self.connection is not None
        if self.connection is None:
            return file_key(info) != self.refused  # a refused file counts again once it changes
        if info.st_ino != self.inode:
            return True
        version = self.connection.execute("PRAGMA data_version").fetchone()[0]
        return self.data_version is None or version != self.data_version


def file_key(info: os.stat_result) -> tuple[int, int, int]:
    return (info.st_ino, info.st_size, info.st_mtime_ns)


@dataclass
class SchedulerResult:
    fired: int = 0
    skipped: int = 0
    failed: int = 0

    @property
    def occurrences(self) -> int:
        return self.fired + self.skipped + self.failed


def run_scheduler(
    directories: list[str],
    *,
    emit: Callable[[str], None],
    say: Callable[[str], None],
    event_log: str | None = None,
    clock: Clock | None = None,
    stop: LoopStop | None = None,
    scan_seconds: float = SCAN_SECONDS,
) -> SchedulerResult:
    """Run until ``stop`` is requested. Raises NexusError for a project it cannot use at start."""
    clock = clock or Clock()
    stop = stop or LoopStop()
    projects: list[Project] = []
    for directory in directories:
        root = root_of(directory)
        if all(p.root != root for p in projects):
            projects.append(Project(root))
    if event_log is not None:
        for project in projects:
            check_log_path(event_log, project.root)
    for project in projects:
        if db.exists(project.root):
            project.current()  # a foreign or corrupt database is refused now, before anything runs
    log = EventLog(event_log) if event_log is not None else None
    runner = core.this_runner()
    result = SchedulerResult()

    def send(event: Event) -> None:
        line = json_line(event)
        emit(line)
        if log is not None:
            log.write(line)

    def talk(text: str) -> None:
        say(f"[{iso_from_ms(clock.now_ms())}] {terminal_safe(text, one_line=True)}\n")

    try:
        send(
            _event(
                "scheduler-started",
                clock.now_ms(),
                projects=[p.root for p in projects],
                pid=runner.pid,
                host=runner.host,
            )
        )
        while not stop.requests:
            soonest: int | None = None
            for project in projects:
                if project.waiting():
                    continue
                try:
                    wake = _scan(project, runner, clock, stop, send, talk, result)
                except (sqlite3.Error, OSError) as error:
                    _project_failed(project, error, clock, send, talk)
                    continue
                project.recovered()
                if wake is not None:
                    soonest = wake if soonest is None else min(soonest, wake)
            if stop.requests:
                break
            _sleep(projects, clock, stop, soonest, scan_seconds)
        send(
            _event(
                "scheduler-stopped", clock.now_ms(), fired=result.fired, skipped=result.skipped, failed=result.failed
            )
        )
    finally:
        for project in projects:
            project.close()
        if log is not None:
            log.close()
    return result


def _project_failed(
    project: Project,
    error: sqlite3.Error | OSError,
    clock: Clock,
    send: Callable[[Event], None],
    talk: Callable[[str], None],
) -> None:
    """A project's database failed (a full disk...): say so, back off, retry; never exit (under
    systemd an exit would only restart into the same failure)."""
    words = db.failure_words(error, project.root) if isinstance(error, sqlite3.Error) else message_of(error)
    seconds = project.failed()
    pending = f"; {len(project.unrecorded)} outcome(s) wait to be recorded" if project.unrecorded else ""
    send(_event("scheduler-error", clock.now_ms(), project=project.root, error=words, retryIn=seconds))
    talk(f"{project.root}: {words}{pending}; trying again in {seconds:g} s")


def _event(kind: str, at_ms: int, run: str | None = None, sequence: int | None = None, **extra: Any) -> Event:
    out = EventBatch(run or "", sequence, at_ms)
    out.add(kind, **extra)
    event = out.items[0]
    event["run"] = run
    return event


def _scan(
    project: Project,
    runner: core.Runner,
    clock: Clock,
    stop: LoopStop,
    send: Callable[[Event], None],
    talk: Callable[[str], None],
    result: SchedulerResult,
) -> int | None:
    """Claim and run every due occurrence of one project; the next due time, or None."""
    try:
        connection = project.current()
    except NexusError as error:
        try:
            key: tuple[int, int, int] | None = file_key(os.lstat(db.db_path(project.root)))
        except OSError:
            key = None
        if key != project.refused:
            talk(f"{project.root}: {error.message}")
        project.refused = key
        return None
    project.refused = None
    if connection is None:
        if not project.announced_missing:
            talk(f"{project.root}: no schedules yet (nexus schedule add creates them); watching for them")
            project.announced_missing = True
        return None
    project.announced_missing = False
    while project.unrecorded:
        waiting, status, reason = project.unrecorded[0]
        if core.finish(connection, waiting, runner, status, reason, clock.now_ms()):
            talk(f"occurrence {waiting.occurrence} of schedule {waiting.schedule} recorded at last: {status}: {reason}")
        else:
            talk(f"  occurrence {waiting.occurrence} was no longer ours (schedule deleted?); outcome not recorded")
        project.unrecorded.pop(0)
        _count(result, status)
        recorded = core.occurrence_row(connection, waiting.occurrence) or _claim_row(waiting, status, reason)
        send(_finished_event(recorded, clock.now_ms(), waiting.run, None))
    while not stop.requests:
        scan = core.claim_next(connection, runner, clock.now_ms())
        project.data_version = scan.data_version
        claim = scan.claim
        for occurrence in scan.touched:
            row = core.occurrence_row(connection, occurrence)
            if row is not None:
                _count(result, row["status"])
                send(_finished_event(row, clock.now_ms(), None, None))
                talk(f"occurrence {occurrence} of schedule {row['schedule']}: {row['status']}: {row['reason']}")
        if claim is None:
            break
        _run_occurrence(project, connection, claim, runner, clock, stop, send, talk, result)
    return core.next_wake_ms(connection)


def _count(result: SchedulerResult, status: str) -> None:
    if status == "fired":
        result.fired += 1
    elif status == "skipped":
        result.skipped += 1
    else:
        result.failed += 1


def _finished_event(row: dict[str, Any], at_ms: int, run: str | None, sequence: int | None) -> Event:
    return _event(
        "occurrence-finished",
        at_ms,
        run,
        sequence,
        schedule=row["schedule"],
        occurrence=row["id"],
        trigger=row["trigger"],
        due=row["due"],
        status=row["status"],
        reason=row["reason"],
    )


def _run_occurrence(
    project: Project,
    connection: sqlite3.Connection,
    claim: core.Claim,
    runner: core.Runner,
    clock: Clock,
    stop: LoopStop,
    send: Callable[[Event], None],
    talk: Callable[[str], None],
    result: SchedulerResult,
) -> None:
    run_id = claim.run
    send(
        _event(
            "occurrence-started",
            clock.now_ms(),
            run_id,
            None,
            schedule=claim.schedule,
            occurrence=claim.occurrence,
            trigger=claim.trigger,
            due=iso_from_ms(claim.due_ms),
            missed=claim.missed,
        )
    )
    folded = f", {claim.missed} missed occurrence(s) folded in" if claim.missed else ""
    talk(f"schedule {claim.schedule}: occurrence {claim.occurrence} ({claim.trigger}) of run {run_id}{folded}")
    started = time.monotonic()
    deadline = started + claim.max_duration_ms / 1000 if claim.max_duration_ms is not None else None
    previous = project.previous.get(run_id)
    cache = project.caches.setdefault(run_id, TickCache())
    outcome = run_tick(
        project.root,
        run_id,
        claim.occurrence,
        previous,
        talk,
        verify=claim.verify,
        stop=stop,
        cache=cache,
        deadline=deadline,
    )
    snapshot = outcome.snapshot
    for event in _tick_events(previous, snapshot, run_id):
        send(event)
    status, reason = _verdict(claim, outcome, started)
    if snapshot.view is not None and outcome.busy is None:
        project.previous[run_id] = snapshot
    try:
        finished = core.finish(connection, claim, runner, status, reason, clock.now_ms())
    except sqlite3.Error:
        project.unrecorded.append((claim, status, reason))  # recorded once the database works again
        talk(f"  {status}: {reason} (not recorded yet)")
        raise
    if not finished:
        talk(f"  occurrence {claim.occurrence} was no longer ours (schedule deleted?); outcome not recorded")
    _count(result, status)
    row = core.occurrence_row(connection, claim.occurrence) or _claim_row(claim, status, reason)
    send(_finished_event(row, clock.now_ms(), run_id, snapshot.sequence))
    talk(f"  {status}: {reason}")


def _claim_row(claim: core.Claim, status: str, reason: str) -> dict[str, Any]:
    """An occurrence's row as the database would give it (when it no longer has it)."""
    return {
        "schedule": claim.schedule,
        "id": claim.occurrence,
        "trigger": claim.trigger,
        "due": iso_from_ms(claim.due_ms),
        "status": status,
        "reason": reason,
    }


def _tick_events(previous: Snapshot | None, snapshot: Snapshot, run_id: str) -> list[Event]:
    """What changed since this runner's previous tick of the run, as ``nexus wait`` reports it;
    on the first tick, the stale and overdue work (wait's events for them)."""
    if previous is not None:
        return derive_events(previous, snapshot, run_id)
    if snapshot.view is None:
        return []
    out = EventBatch(run_id, snapshot.sequence, snapshot.at_ms)
    for observation in snapshot.view.get("observations") or []:
        if observation.get("overdue"):
            out.add("attempt-overdue", observation["taskId"], observation.get("attemptId"))
        if observation.get("stale"):
            out.add(
                "evidence-stale",
                observation["taskId"],
                observation.get("attemptId"),
                reason=observation.get("staleReason"),
            )
    return out.items


def _verdict(claim: core.Claim, outcome: Any, started: float) -> tuple[str, str]:
    snapshot = outcome.snapshot
    limit = duration_text(claim.max_duration_ms) if claim.max_duration_ms is not None else None
    if outcome.busy is not None:
        return "skipped", f"run busy ({outcome.busy})"
    if snapshot.view is None:
        return "failed", f"run unreadable: {snapshot.error}"
    if outcome.timed_out is not None:
        return "failed", f"maximum duration {limit} exceeded: the verification of {outcome.timed_out} was stopped"
    if outcome.stopped:
        return "failed", "the runner was stopped during a verification, which goes on by itself"
    if claim.max_duration_ms is not None and (time.monotonic() - started) * 1000 > claim.max_duration_ms:
        return "failed", f"maximum duration {limit} exceeded"
    verified = "".join(
        f"; verify {task} refused: {outcome.refused[task]}"
        if task in outcome.refused
        else f"; verified {task}: {status}"
        for task, status in outcome.verified.items()
    )
    # A verification asked for and refused (a full disk, a verification left running...) is a
    # failed occurrence: what it was scheduled to do did not happen.
    return ("failed" if outcome.refused else "fired"), tick_summary(snapshot) + verified


def _sleep(projects: list[Project], clock: Clock, stop: LoopStop, soonest: int | None, scan_seconds: float) -> None:
    """Until the soonest due time (at most ``scan_seconds``), a change to a database, or stop."""
    limit = time.monotonic() + scan_seconds
    while not stop.requests:
        now = clock.now_ms()
        if soonest is not None and now >= soonest:
            return
        remaining = limit - time.monotonic()
        if soonest is not None:
            remaining = min(remaining, clock.real_seconds(soonest - now))
        if remaining <= 0:
            return
        retry = min((p.retry_at for p in projects if p.retry_at is not None), default=None)
        if retry is not None:
            remaining = min(remaining, retry - time.monotonic())
            if remaining <= 0:
                return
        stop.event.wait(min(CHANGE_POLL_SECONDS, remaining))
        for project in projects:
            if project.waiting():
                continue  # its database failed: looked at again when its back-off ends
            try:
                if project.changed():
                    return
            except sqlite3.Error:
                return
