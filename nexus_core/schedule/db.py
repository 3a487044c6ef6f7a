"""The project's schedules database: ``.bmad-plus/nexus/schedules.sqlite3``.

Standard-library ``sqlite3``, in rollback-journal mode (``journal_mode=DELETE``), not WAL:

- a read-only watcher (``nexus inspect``, the dashboard) opens it with ``mode=ro`` and creates
  nothing: WAL readers need the ``-shm`` file, which a read-only opener cannot create once the
  last writer has gone;
- the database stays one file (copy it to back it up), and every commit changes that file, so
  a watcher sees changes in its mtime or ``PRAGMA data_version``;
- writes are a few short transactions a minute, where WAL's concurrency buys nothing.

Every file is checked before SQLite opens it (regular, ours, not group/world-writable, the
SQLite magic, our ``application_id``, a schema version this code knows): a foreign, corrupt or
newer database is refused with a clear message and never rewritten. A new database is built
under a temporary name and linked into place, so no opener ever sees a half-made one. The
schema carries ``PRAGMA user_version`` and a ``migrations`` table from the first release on.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from ..errors import NexusError
from ..paths import RefusedFile, open_regular
from ..state import state_dirs
from ..state.store import make_dirs, remove_made_dirs, unsafe_reason
from ..timeutil import iso_from_ms, now_ms
from . import DB_REL

APPLICATION_ID = 0x4E585343  # "NXSC": says "a nexus schedules database" in the file header
SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 30_000
_HEADER_MAGIC = b"SQLite format 3\x00"

# version, name, statements. A new release appends; a released entry never changes.
MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (
        1,
        "schedules, occurrences and runners",
        """
        CREATE TABLE schedules (
            id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL,
            title TEXT,
            kind TEXT NOT NULL,
            rule TEXT NOT NULL,
            zone TEXT NOT NULL,
            verify INTEGER NOT NULL,
            catch_up TEXT NOT NULL,
            max_duration_ms INTEGER,
            paused INTEGER NOT NULL DEFAULT 0,
            anchor_ms INTEGER NOT NULL,
            created_at_ms INTEGER NOT NULL,
            next_due_ms INTEGER
        );
        CREATE TABLE occurrences (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            schedule_id TEXT NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
            trigger TEXT NOT NULL,
            due_ms INTEGER NOT NULL,
            missed INTEGER NOT NULL DEFAULT 0,
            status TEXT NOT NULL,
            reason TEXT,
            requested_at_ms INTEGER NOT NULL,
            claimed_at_ms INTEGER,
            finished_at_ms INTEGER,
            runner_pid INTEGER,
            runner_host TEXT,
            runner_started TEXT,
            UNIQUE (schedule_id, trigger, due_ms)
        );
        CREATE INDEX occurrences_by_schedule ON occurrences (schedule_id, id);
        CREATE INDEX occurrences_by_status ON occurrences (status);
        CREATE TABLE runners (
            id TEXT PRIMARY KEY,
            pid INTEGER NOT NULL,
            host TEXT NOT NULL,
            started TEXT,
            seen_at_ms INTEGER NOT NULL
        );
        """,
    ),
)
assert MIGRATIONS[-1][0] == SCHEMA_VERSION


def db_path(root: str) -> str:
    return os.path.join(root, DB_REL)


def _refuse(path: str, why: str) -> NexusError:
    return NexusError(
        f"The schedules database {path} {why}; it was not used or changed.",
        "Move it away to start a new one (the schedules it holds are then gone).",
    )


def _check_file(path: str) -> bool:
    """True when ``path`` is a usable schedules database; False when it does not exist."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(info.st_mode):
        raise _refuse(path, "is a symlink")
    reason = unsafe_reason(info)
    if reason:
        raise _refuse(path, f"is unsafe ({reason})")
    try:
        fd, _info = open_regular(path, checked=info)
    except RefusedFile as error:
        raise _refuse(path, f"is unsafe ({error.reason})") from None
    except OSError as error:
        raise _refuse(path, f"cannot be read ({error.strerror})") from None
    try:
        header = os.read(fd, 100)
    finally:
        os.close(fd)
    if len(header) < 100 or not header.startswith(_HEADER_MAGIC):
        raise _refuse(path, "is not an SQLite database (a foreign or corrupt file)")
    application_id = int.from_bytes(header[68:72], "big")
    version = int.from_bytes(header[60:64], "big")
    if application_id != APPLICATION_ID:
        raise _refuse(path, f"is an SQLite database that nexus did not create (application id {application_id:#x})")
    if version > SCHEMA_VERSION:
        raise _refuse(path, f"has schema version {version}, newer than this nexus knows ({SCHEMA_VERSION})")
    if version < 1:
        raise _refuse(path, "has no schema version")
    return True


def _connect(path: str, read_only: bool) -> sqlite3.Connection:
    mode = "ro" if read_only else "rw"
    connection = sqlite3.connect(
        f"file:{quote(path)}?mode={mode}", uri=True, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
    )
    connection.row_factory = sqlite3.Row
    try:
        connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        connection.execute("PRAGMA foreign_keys = ON")
        if not read_only:
            connection.execute("PRAGMA synchronous = FULL")
    except sqlite3.Error:
        connection.close()
        raise
    return connection


def _verify_contents(connection: sqlite3.Connection, path: str) -> None:
    try:
        check = connection.execute("PRAGMA quick_check").fetchone()[0]
        tables = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        applied = (
            connection.execute("SELECT max(version) FROM migrations").fetchone()[0] if "migrations" in tables else None
        )
    except sqlite3.DatabaseError as error:
        raise _refuse(path, f"is corrupt ({error})") from None
    if check != "ok":
        raise _refuse(path, f"is corrupt (integrity check: {check})")
    if not {"migrations", "schedules", "occurrences", "runners"} <= tables or applied != version:
        raise _refuse(path, "does not have the nexus schedules schema")


def _migrate(connection: sqlite3.Connection, upto: int = SCHEMA_VERSION) -> None:
    """Apply what is missing, each migration in its own transaction with its record."""
    if connection.execute("PRAGMA user_version").fetchone()[0] >= upto:
        return  # up to date: no write lock taken
    for version, name, statements in MIGRATIONS:
        if version > upto:
            break
        connection.execute("BEGIN IMMEDIATE")
        try:
            current = connection.execute("PRAGMA user_version").fetchone()[0]
            if current >= version:
                connection.execute("ROLLBACK")
                continue
            for statement in statements.split(";"):
                if statement.strip():
                    connection.execute(statement)
            connection.execute(
                "INSERT INTO migrations (version, name, applied_at) VALUES (?, ?, ?)",
                (version, name, iso_from_ms(now_ms())),
            )
            connection.execute(f"PRAGMA user_version = {version}")
            connection.execute("COMMIT")
        except BaseException:
            rollback(connection)
            raise


def _create(path: str) -> None:
    """A complete new database, linked into place; losing the race to another creator is fine."""
    made = make_dirs(os.path.dirname(path))
    temporary = f"{path}.{uuid.uuid4()}.tmp"
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except OSError:
        remove_made_dirs(made)  # a refusal leaves nothing behind
        raise
    os.close(fd)
    linked = False
    try:
        connection = _connect(temporary, read_only=False)
        try:
            connection.execute("PRAGMA journal_mode = DELETE")
            connection.execute(f"PRAGMA application_id = {APPLICATION_ID}")
            connection.execute(
                "CREATE TABLE migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
            )
            _migrate(connection)
        finally:
            connection.close()
        fd = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        with contextlib.suppress(FileExistsError):
            os.link(temporary, path)
        linked = True
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        if not linked:
            remove_made_dirs(made)


def exists(root: str) -> bool:
    return os.path.lexists(db_path(root))


def connect_checked(root: str, *, create: bool = False, read_only: bool = False) -> sqlite3.Connection | None:
    """The checked database, open (None when it does not exist and ``create`` is False); the
    caller closes it."""
    path = db_path(root)
    if not read_only:
        state_dirs.check(root)  # a database another user's directory holds could be swapped under us
    if not _check_file(path):
        if not create:
            return None
        _create(path)
        _check_file(path)
    try:
        connection = _connect(path, read_only)
    except sqlite3.Error as error:
        raise _refuse(path, f"cannot be opened ({error})") from None
    try:
        _verify_contents(connection, path)
        if not read_only:
            _migrate(connection)
    except BaseException:
        connection.close()
        raise
    return connection


@contextlib.contextmanager
def opened(root: str, *, create: bool = False, read_only: bool = False) -> Iterator[sqlite3.Connection | None]:
    """``connect_checked`` for one block."""
    connection = connect_checked(root, create=create, read_only=read_only)
    try:
        yield connection
    finally:
        if connection is not None:
            connection.close()


@contextlib.contextmanager
def transaction(connection: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE: the write lock from the start, so a read-then-write never races."""
    connection.execute("BEGIN IMMEDIATE")
    try:
        yield connection
    except BaseException:
        rollback(connection)
        raise
    connection.execute("COMMIT")


def rollback(connection: sqlite3.Connection) -> None:
    """Roll back the open transaction, if SQLite has not already: after "database or disk is
    full" (and other I/O errors) it rolls back by itself, and a second ROLLBACK would raise
    "cannot rollback - no transaction is active" over the real cause."""
    if connection.in_transaction:
        connection.execute("ROLLBACK")


def failure_words(error: sqlite3.Error, root: str | None = None) -> str:
    """What went wrong with the schedules database (of ``root``, when known), in words: a full
    disk (SQLITE_FULL) named plainly, else SQLite's message. The one wording of the schedule
    commands and the runner."""
    name = "The schedules database" if root is None else f"The schedules database {db_path(root)}"
    if getattr(error, "sqlite_errorname", None) == "SQLITE_FULL" or "database or disk is full" in str(error):
        return f"{name} could not be written: the disk that holds it is full (SQLite: {error})"
    return f"{name} could not be used ({error})"


def inventory_summary(root: str) -> dict[str, Any] | None:
    """``nexus inspect``'s ``schedules`` key: counts, read through a read-only connection; None
    when there is no database (inspect never creates it). One that cannot be used is named."""
    if not exists(root):
        return None
    try:
        with opened(root, read_only=True) as connection:
            assert connection is not None
            total, paused = connection.execute("SELECT count(*), coalesce(sum(paused), 0) FROM schedules").fetchone()
            next_due = connection.execute(
                "SELECT min(next_due_ms) FROM schedules WHERE paused = 0 AND next_due_ms IS NOT NULL"
            ).fetchone()[0]
            statuses = dict(connection.execute("SELECT status, count(*) FROM occurrences GROUP BY status").fetchall())
    except NexusError as error:
        return {"error": error.message}
    except sqlite3.OperationalError as error:
        # Read-only cannot roll back a transaction a killed writer left (a hot journal).
        return {
            "error": f"The schedules database {db_path(root)} could not be read now ({error}); the next "
            "nexus schedule command or scheduler completes any interrupted transaction."
        }
    except sqlite3.Error as error:
        return {"error": f"The schedules database {db_path(root)} could not be read ({error})."}
    return {
        "total": total,
        "paused": paused,
        "next": iso_from_ms(next_due) if next_due is not None else None,
        "occurrences": {name: statuses.get(name, 0) for name in ("pending", "claimed", "fired", "skipped", "failed")},
    }


def failed_schedules(root: str) -> list[dict[str, Any]]:
    """The schedules whose latest finished occurrence failed (``nexus attention`` and the
    dashboard's needs), read-only; [] without a database. A database that cannot be read raises
    NexusError (or sqlite3.Error), as every reader does."""
    if not exists(root):
        return []
    with opened(root, read_only=True) as connection:
        assert connection is not None
        rows = connection.execute(
            "SELECT s.id AS schedule, s.run_id AS run, o.id AS occurrence, o.finished_at_ms AS finished "
            "FROM schedules s JOIN occurrences o ON o.id = ("
            "  SELECT id FROM occurrences WHERE schedule_id = s.id AND status IN ('fired', 'failed', 'skipped') "
            "  ORDER BY finished_at_ms DESC, id DESC LIMIT 1"
            ") WHERE o.status = 'failed' ORDER BY s.id"
        ).fetchall()
    return [
        {
            "schedule": row["schedule"],
            "run": row["run"],
            "occurrence": row["occurrence"],
            "finishedAt": iso_from_ms(row["finished"]) if row["finished"] is not None else None,
        }
        for row in rows
    ]
