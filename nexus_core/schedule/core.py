"""Schedules and their occurrences: what ``nexus schedule`` and ``nexus scheduler`` do to the
database. Every function takes the moment (``now``, epoch ms) it acts at, so tests drive time.

An occurrence is claimed, and its schedule advanced, in one ``BEGIN IMMEDIATE`` transaction:
several runners can never claim the same occurrence, and a crash can never advance a schedule
without the occurrence being recorded. A claim names its runner (pid, host, process start time);
one whose runner is gone is recorded as failed ("runner died") by the next scan on that host.

Statuses: ``pending`` (a manual run, not yet claimed), ``claimed`` (a runner is on it),
``fired`` (the tick ran), ``skipped`` (the run was busy, or catch-up policy ``skip``),
``failed`` (the run was unreadable, the maximum duration passed, the runner died or stopped).
"""

from __future__ import annotations

import secrets
import sqlite3
from dataclasses import dataclass
from typing import Any

from ..errors import ENGINE_PREFIX, NexusError
from ..hostinfo import hostname, owner_gone, usable_pid
from ..paths import root_of
from ..state.store import check_state_file, run_path
from ..timeutil import iso_from_ms
from . import db
from .rules import Rule, duration_text, parse_max_duration, parse_rule

CATCH_UP_POLICIES = ("run-once", "skip")
LATE_AFTER_MS = 120_000  # an occurrence found this long after its time was missed (two scans)
CATCH_UP_COUNT_LIMIT = 100_000  # missed occurrences counted one by one, then "at least"
TITLE_LIMIT = 200
HISTORY_SHOWN = 5
# A live runner scans every project at least every runner.SCAN_SECONDS (60 s): seen within two
# scans, it is taken as running.
RUNNER_SEEN_MS = 2 * 60_000
RUNNER_DIED = "runner died"


@dataclass(frozen=True)
class Runner:
    """Who claims: enough to tell later, on this host, whether that process still exists."""

    pid: int
    host: str
    started: str | None  # the process start time (Linux /proc), so a reused pid is not it

    @property
    def id(self) -> str:
        return f"{self.host}:{self.pid}:{self.started}"


def process_started(pid: int) -> str | None:
    """The start time of ``pid`` in clock ticks since boot (Linux), or None when unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[19].decode("ascii", "replace") if len(fields) > 19 else None


def this_runner() -> Runner:
    import os

    return Runner(os.getpid(), hostname(), process_started(os.getpid()))


def runner_gone(pid: object, host: object, started: object) -> bool:
    """True when the claiming process is certainly gone; another host's cannot be told."""
    if owner_gone(host, pid):
        return True
    # Alive (a usable pid of this host) or another host's; a reused pid has another start time.
    local = usable_pid(pid)
    return local is not None and host == hostname() and started is not None and process_started(local) != started


# ----------------------------------------------------------------- shapes


def rule_of(row: sqlite3.Row) -> Rule:
    return Rule(row["kind"], row["rule"], row["zone"], row["anchor_ms"])


def _iso(ms: int | None) -> str | None:
    return iso_from_ms(ms) if ms is not None else None


def occurrence_json(row: sqlite3.Row, number: int | None = None) -> dict[str, Any]:
    """An occurrence; ``number``: its place in its schedule's history (1 for the first), an
    additive key after the others (the global ``id`` numbers every schedule's together)."""
    runner = None
    if row["runner_pid"] is not None:
        runner = {"pid": row["runner_pid"], "host": row["runner_host"]}
    return {
        "id": row["id"],
        "schedule": row["schedule_id"],
        "trigger": row["trigger"],
        "due": _iso(row["due_ms"]),
        "missed": row["missed"],
        "status": row["status"],
        "reason": row["reason"],
        "requestedAt": _iso(row["requested_at_ms"]),
        "claimedAt": _iso(row["claimed_at_ms"]),
        "finishedAt": _iso(row["finished_at_ms"]),
        "runner": runner,
    } | ({"number": number} if number is not None else {})


def schedule_json(connection: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    last = connection.execute(
        "SELECT * FROM occurrences WHERE schedule_id = ? AND status IN ('fired', 'failed', 'skipped') "
        "ORDER BY finished_at_ms DESC, id DESC LIMIT 1",
        (row["id"],),
    ).fetchone()
    rule = rule_of(row)
    return {
        "id": row["id"],
        "run": row["run_id"],
        "title": row["title"],
        "kind": row["kind"],
        "rule": row["rule"],
        "zone": row["zone"],
        "description": rule.describe(),
        "verify": bool(row["verify"]),
        "catchUp": row["catch_up"],
        "maxDuration": duration_text(row["max_duration_ms"]) if row["max_duration_ms"] is not None else None,
        "paused": bool(row["paused"]),
        "createdAt": iso_from_ms(row["created_at_ms"]),
        "next": _iso(row["next_due_ms"]) if not row["paused"] else None,
        "lastOutcome": None
        if last is None
        else {"status": last["status"], "at": _iso(last["finished_at_ms"]), "reason": last["reason"]},
    }


# ----------------------------------------------------------------- operator commands


@dataclass(frozen=True)
class NewSchedule:
    run: str
    kind: str
    rule: str
    zone: str
    verify: bool = False
    catch_up: str = "run-once"
    max_duration: str | None = None
    title: str | None = None


def _known_run(root: str, run_id: str) -> None:
    run_path(run_id)
    try:
        check_state_file(root, run_id)
    except NexusError as error:
        raise NexusError(error.message.removeprefix(ENGINE_PREFIX)) from None


def add_schedule(directory: str, new: NewSchedule, now: int) -> dict[str, Any]:
    """Validate everything first: a refused schedule creates nothing, not even the database."""
    root = root_of(directory)
    _known_run(root, new.run)
    rule = parse_rule(new.kind, new.rule, new.zone, now)
    if new.catch_up not in CATCH_UP_POLICIES:
        raise NexusError(f"--catch-up is run-once or skip; got {new.catch_up!r}.")
    max_ms = parse_max_duration(new.max_duration) if new.max_duration is not None else None
    if new.title is not None and (not new.title.strip() or len(new.title) > TITLE_LIMIT or "\x00" in new.title):
        raise NexusError(f"--title must be 1 to {TITLE_LIMIT} characters.")
    with db.opened(root, create=True) as connection:
        assert connection is not None
        with db.transaction(connection):
            schedule_id = _new_id(connection)
            connection.execute(
                "INSERT INTO schedules (id, run_id, title, kind, rule, zone, verify, catch_up, max_duration_ms, "
                "paused, anchor_ms, created_at_ms, next_due_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?)",
                (
                    schedule_id,
                    new.run,
                    new.title,
                    rule.kind,
                    rule.text,
                    rule.zone,
                    int(new.verify),
                    new.catch_up,
                    max_ms,
                    rule.anchor_ms,
                    now,
                    rule.next_after(now),
                ),
            )
        return schedule_json(connection, _row(connection, schedule_id))


def _new_id(connection: sqlite3.Connection) -> str:
    while True:
        candidate = secrets.token_hex(4)
        if connection.execute("SELECT 1 FROM schedules WHERE id = ?", (candidate,)).fetchone() is None:
            return candidate


def _row(connection: sqlite3.Connection, schedule_id: str) -> sqlite3.Row:
    row = connection.execute("SELECT * FROM schedules WHERE id = ?", (schedule_id,)).fetchone()
    if row is None:
        raise NexusError(f"Unknown schedule: {schedule_id}", "nexus schedule list shows them.")
    return row  # type: ignore[no-any-return]


def _existing(directory: str) -> str:
    """The project root; a command about a schedule never creates the database. Reading
    commands open it read-write too: a transaction a killed writer left half-done (a hot
    journal) can only be rolled back by a writer, and they must not fail on it."""
    return root_of(directory)


def list_schedules(directory: str, *, read_only: bool = False) -> list[dict[str, Any]]:
    """Every schedule; ``read_only`` (a watcher: the dashboard) opens it ``mode=ro``, writing
    nothing at all, and then fails on a killed writer's unfinished transaction instead."""
    with db.opened(_existing(directory), read_only=read_only) as connection:
        if connection is None:
            return []
        rows = connection.execute("SELECT * FROM schedules ORDER BY created_at_ms, rowid").fetchall()
        return [schedule_json(connection, row) for row in rows]


def show_schedule(directory: str, schedule_id: str) -> dict[str, Any]:
    with db.opened(_existing(directory)) as connection:
        if connection is None:
            raise NexusError(f"Unknown schedule: {schedule_id}", "This project has no schedules.")
        shown = schedule_json(connection, _row(connection, schedule_id))
        total = _occurrence_count(connection, schedule_id)
        latest = _history(connection, schedule_id, HISTORY_SHOWN)
        shown["occurrences"] = [occurrence_json(row, total - index) for index, row in enumerate(latest)]
        return shown


def _occurrence_count(connection: sqlite3.Connection, schedule_id: str) -> int:
    return int(
        connection.execute("SELECT count(*) FROM occurrences WHERE schedule_id = ?", (schedule_id,)).fetchone()[0]
    )


def _history(connection: sqlite3.Connection, schedule_id: str, limit: int | None) -> list[sqlite3.Row]:
    query = "SELECT * FROM occurrences WHERE schedule_id = ? ORDER BY id DESC"
    if limit is not None:
        query += f" LIMIT {int(limit)}"
    return connection.execute(query, (schedule_id,)).fetchall()


def schedule_runs(directory: str, schedule_id: str) -> list[dict[str, Any]]:
    with db.opened(_existing(directory)) as connection:
        if connection is None:
            raise NexusError(f"Unknown schedule: {schedule_id}", "This project has no schedules.")
        _row(connection, schedule_id)
        oldest_first = reversed(_history(connection, schedule_id, None))
        return [occurrence_json(row, number) for number, row in enumerate(oldest_first, start=1)]


def set_paused(directory: str, schedule_id: str, paused: bool, now: int) -> dict[str, Any]:
    """Pausing stops firing; resuming counts from now (time spent paused is not caught up)."""
    with db.opened(_existing(directory)) as connection:
        if connection is None:
            raise NexusError(f"Unknown schedule: {schedule_id}", "This project has no schedules.")
        with db.transaction(connection):
            row = _row(connection, schedule_id)
            if bool(row["paused"]) != paused:
                next_due = row["next_due_ms"] if paused else rule_of(row).next_after(now)
                connection.execute(
                    "UPDATE schedules SET paused = ?, next_due_ms = ? WHERE id = ?",
                    (int(paused), next_due, schedule_id),
                )
        return schedule_json(connection, _row(connection, schedule_id))


def delete_schedule(directory: str, schedule_id: str) -> dict[str, Any]:
    with db.opened(_existing(directory)) as connection:
        if connection is None:
            raise NexusError(f"Unknown schedule: {schedule_id}", "This project has no schedules.")
        with db.transaction(connection):
            shown = schedule_json(connection, _row(connection, schedule_id))
            connection.execute("DELETE FROM schedules WHERE id = ?", (schedule_id,))
        return {"id": schedule_id, "deleted": True, "schedule": shown}


def request_run(directory: str, schedule_id: str, now: int) -> dict[str, Any]:
    """A manual occurrence, left ``pending`` for a runner: this process must not claim work it
    may not live to finish. Says whether a runner has been seen lately."""
    with db.opened(_existing(directory)) as connection:
        if connection is None:
            raise NexusError(f"Unknown schedule: {schedule_id}", "This project has no schedules.")
        with db.transaction(connection):
            _row(connection, schedule_id)
            due = now
            while connection.execute(
                "SELECT 1 FROM occurrences WHERE schedule_id = ? AND trigger = 'manual' AND due_ms = ?",
                (schedule_id, due),
            ).fetchone():
                due += 1
            cursor = connection.execute(
                "INSERT INTO occurrences (schedule_id, trigger, due_ms, status, requested_at_ms) "
                "VALUES (?, 'manual', ?, 'pending', ?)",
                (schedule_id, due, now),
            )
        row = connection.execute("SELECT * FROM occurrences WHERE id = ?", (cursor.lastrowid,)).fetchone()
        result = occurrence_json(row)
        result["runnerSeen"] = _runner_seen(connection, now)
        return result


def _runner_seen(connection: sqlite3.Connection, now: int) -> bool:
    """A runner scanned this project lately (a live one scans at least every minute) and, when
    it is on this host, its process is still there."""
    rows = connection.execute(
        "SELECT pid, host, started, seen_at_ms FROM runners WHERE seen_at_ms >= ?", (now - RUNNER_SEEN_MS,)
    ).fetchall()
    return any(not runner_gone(row["pid"], row["host"], row["started"]) for row in rows)


def scheduler_seen(directory: str, now: int) -> bool | None:
    """Whether a ``nexus scheduler`` serves this project (None: no schedules database). Read
    with a ``mode=ro`` connection: the dashboard's panel asks it while watching."""
    with db.opened(_existing(directory), read_only=True) as connection:
        if connection is None:
            return None
        return _runner_seen(connection, now)


# ----------------------------------------------------------------- runner side


@dataclass(frozen=True)
class Claim:
    """One occurrence a runner now owns, with what it needs to run it."""

    occurrence: int
    schedule: str
    run: str
    verify: bool
    max_duration_ms: int | None
    trigger: str
    due_ms: int
    missed: int


def reap_dead_claims(connection: sqlite3.Connection, now: int) -> list[int]:
    """Claims whose runner is gone become failed ("runner died"). Inside a transaction."""
    reaped = []
    for row in connection.execute(
        "SELECT id, runner_pid, runner_host, runner_started FROM occurrences WHERE status = 'claimed'"
    ).fetchall():
        if runner_gone(row["runner_pid"], row["runner_host"], row["runner_started"]):
            connection.execute(
                "UPDATE occurrences SET status = 'failed', reason = ?, finished_at_ms = ? WHERE id = ?",
                (f"{RUNNER_DIED} (pid {row['runner_pid']} on {row['runner_host']})", now, row["id"]),
            )
            reaped.append(row["id"])
    return reaped


def _claim_values(runner: Runner, now: int) -> tuple[int, int, str, str | None]:
    return (now, runner.pid, runner.host, runner.started)


@dataclass(frozen=True)
class Scan:
    """What one claim transaction found: the claim (None when nothing is due), the occurrences
    reaped or skipped on the way, and the database's ``data_version`` as that transaction saw
    it (a later change by any other process moves it on: the runner's wake-up signal)."""

    claim: Claim | None
    touched: list[int]
    data_version: int


def claim_next(connection: sqlite3.Connection, runner: Runner, now: int) -> Scan:
    """In one transaction: reap dead claims, then claim the most overdue occurrence (a manual
    request first) and advance its schedule. Missed occurrences collapse into one (catch-up
    ``run-once``) or are recorded as skipped (``skip``)."""
    with db.transaction(connection):
        # Inside the transaction: no other process can commit between this read and our COMMIT.
        version = connection.execute("PRAGMA data_version").fetchone()[0]
        touched = reap_dead_claims(connection, now)
        connection.execute(
            "INSERT OR REPLACE INTO runners (id, pid, host, started, seen_at_ms) VALUES (?, ?, ?, ?, ?)",
            (runner.id, runner.pid, runner.host, runner.started, now),
        )
        manual = connection.execute(
            "SELECT o.id AS occurrence_id, o.due_ms AS occurrence_due, s.* FROM occurrences o "
            "JOIN schedules s ON s.id = o.schedule_id "
            "WHERE o.status = 'pending' ORDER BY o.id LIMIT 1"
        ).fetchone()
        if manual is not None:
            connection.execute(
                "UPDATE occurrences SET status = 'claimed', claimed_at_ms = ?, runner_pid = ?, runner_host = ?, "
                "runner_started = ? WHERE id = ?",
                (*_claim_values(runner, now), manual["occurrence_id"]),
            )
            return Scan(
                _claim(manual, manual["occurrence_id"], "manual", manual["occurrence_due"], 0), touched, version
            )
        while True:
            row = connection.execute(
                "SELECT * FROM schedules WHERE paused = 0 AND next_due_ms IS NOT NULL AND next_due_ms <= ? "
                "ORDER BY next_due_ms, id LIMIT 1",
                (now,),
            ).fetchone()
            if row is None:
                return Scan(None, touched, version)
            claim, skipped = _advance(connection, row, runner, now)
            touched.extend(skipped)
            if claim is not None:
                return Scan(claim, touched, version)


def _advance(
    connection: sqlite3.Connection, row: sqlite3.Row, runner: Runner, now: int
) -> tuple[Claim | None, list[int]]:
    rule = rule_of(row)
    first = int(row["next_due_ms"])
    later, cut_short = rule.occurrences_between(first, now, CATCH_UP_COUNT_LIMIT)
    due_times = [first, *later]
    latest = due_times[-1]
    on_time = now - latest <= LATE_AFTER_MS
    late = due_times[:-1] if on_time else due_times
    connection.execute("UPDATE schedules SET next_due_ms = ? WHERE id = ?", (rule.next_after(now), row["id"]))
    skipped: list[int] = []
    collapsed = len(due_times) - 1  # run-once: every missed occurrence folds into the one that fires
    if row["catch_up"] == "skip":
        if late:
            count = f"at least {len(late)}" if cut_short else str(len(late))
            cursor = connection.execute(
                "INSERT INTO occurrences (schedule_id, trigger, due_ms, missed, status, reason, requested_at_ms, "
                "finished_at_ms) VALUES (?, 'schedule', ?, ?, 'skipped', ?, ?, ?)",
                (
                    row["id"],
                    first,
                    len(late),
                    f"{count} missed occurrence(s) from {iso_from_ms(first)} skipped (catch-up policy skip)",
                    now,
                    now,
                ),
            )
            assert cursor.lastrowid is not None
            skipped.append(cursor.lastrowid)
        if not on_time:
            return None, skipped
        collapsed = 0
    cursor = connection.execute(
        "INSERT INTO occurrences (schedule_id, trigger, due_ms, missed, status, requested_at_ms, claimed_at_ms, "
        "runner_pid, runner_host, runner_started) VALUES (?, 'schedule', ?, ?, 'claimed', ?, ?, ?, ?, ?)",
        (row["id"], latest, collapsed, now, *_claim_values(runner, now)),
    )
    assert cursor.lastrowid is not None
    return _claim(row, cursor.lastrowid, "schedule", latest, collapsed), skipped


def _claim(row: sqlite3.Row, occurrence: int, trigger: str, due_ms: int, missed: int) -> Claim:
    return Claim(
        occurrence, row["id"], row["run_id"], bool(row["verify"]), row["max_duration_ms"], trigger, due_ms, missed
    )


def finish(connection: sqlite3.Connection, claim: Claim, runner: Runner, status: str, reason: str, now: int) -> bool:
    """Record the outcome; False when the claim is no longer this runner's (deleted, or reaped)."""
    with db.transaction(connection):
        cursor = connection.execute(
            "UPDATE occurrences SET status = ?, reason = ?, finished_at_ms = ? "
            "WHERE id = ? AND status = 'claimed' AND runner_pid = ? AND runner_host = ?",
            (status, reason, now, claim.occurrence, runner.pid, runner.host),
        )
        return cursor.rowcount == 1


def next_wake_ms(connection: sqlite3.Connection) -> int | None:
    """The earliest due time of an active schedule (a pending manual run counts as now)."""
    if connection.execute("SELECT 1 FROM occurrences WHERE status = 'pending' LIMIT 1").fetchone():
        return 0
    value = connection.execute(
        "SELECT min(next_due_ms) FROM schedules WHERE paused = 0 AND next_due_ms IS NOT NULL"
    ).fetchone()[0]
    return int(value) if value is not None else None


def occurrence_row(connection: sqlite3.Connection, occurrence: int) -> dict[str, Any] | None:
    row = connection.execute("SELECT * FROM occurrences WHERE id = ?", (occurrence,)).fetchone()
    return occurrence_json(row) if row is not None else None
