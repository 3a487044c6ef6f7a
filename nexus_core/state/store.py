"""Run files: the checksummed envelope, atomic writes and every integrity check of loadRun."""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from _thread import get_ident  # not threading: a read-only inspect never needs it (start-up)
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple, cast

from ..errors import NexusError, fail
from ..paths import FileTooLarge, RefusedFile, probe_state_dir, read_regular, safe_target
from ..shapes import JsonObject, Run
from ..timeutil import now_iso
from . import canonical, state_dirs

BASE = ".bmad-plus/nexus"
RUNS = BASE + "/runs"
RUN_ID = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\Z")
RUN_FILE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}\.json\Z")
STATE_LIMIT = 16 * 1024 * 1024
LOAD_LIMIT = 2 * STATE_LIMIT
TEMP_SUFFIX = ".tmp"


def fresh_run_advice(run_id: str) -> str:
    """The way out of an unreadable run, the hint of every refusal of its load."""
    # Every run file is loaded by a start's capacity check (SPEC 2.4), so the unreadable one
    # must leave runs/ before the fresh run can start; it is kept, never repaired.
    return (
        f"Nothing was repaired. Inspect earlier workspace changes, then create a fresh run from the "
        f"same plan under a new, unused id (a fresh run may redo work). Keep {RUNS}/{run_id}.json as "
        f"evidence outside {RUNS}/: while it is there, every start in this project is refused."
    )


def run_path(run_id: object) -> str:
    if not isinstance(run_id, str) or not RUN_ID.match(run_id):
        raise fail("Run ID must use 1-64 lowercase letters, numbers, _ or -.")
    return f"{RUNS}/{run_id}.json"


def make_dirs(path: str) -> list[str]:
    """mkdir -p with 0700 for every directory we create (``os.makedirs`` would give the
    intermediate ones the umask's default, e.g. 0755 for .bmad-plus). Returns the directories
    it created, outermost first (a failed write removes them again: ``remove_made_dirs``)."""
    if os.path.isdir(path):
        return []
    parent = os.path.dirname(path)
    made = make_dirs(parent) if parent and parent != path else []
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        return made
    return [*made, path]


def remove_made_dirs(made: list[str]) -> None:
    """Undo ``make_dirs``: a refused or failed write leaves no directory behind (only empty
    ones are removed: another writer may have used one meanwhile)."""
    for path in reversed(made):
        try:
            os.rmdir(path)
        except OSError:
            return


class StateNotWritten(NexusError):
    """A file under the state directory could not be written (a full disk, a read-only or
    failing filesystem): our own refusal, naming the file; the write left it as it was, and a
    command of one save therefore changed nothing. Not a refusal by the registry's rules: a
    caller that keeps work aside when a save fails (launch's receipt) treats it like a busy
    lock, and one that saved before (verify) says what stays on disk (``path``, ``reason``,
    ``fix``: the parts of the message)."""

    def __init__(self, path: str, reason: str, fix: str) -> None:
        super().__init__(f"Could not write {path} ({reason}); nothing was changed.", fix)
        self.path, self.reason, self.fix = path, reason, fix


def not_written(path: str, error: OSError) -> StateNotWritten:
    """The refusal for ``path`` (the file that could not be written) after ``error``."""
    full = error.errno in (errno.ENOSPC, errno.EDQUOT)
    fix = "Free space on the filesystem that holds it, then" if full else "Fix the cause, then"
    return StateNotWritten(path, error.strerror or str(error), f"{fix} run the command again.")


def unsafe_reason(info: os.stat_result, *, root_may_own: bool = False) -> str | None:
    """Why a state, lock or input file must not be trusted for a mutation, or None.

    ``root_may_own``: a file root owns (and only root can write) is trusted too; root can act
    as anyone already (an example plan installed system-wide)."""
    if not stat.S_ISREG(info.st_mode):
        return "not a regular file"
    if info.st_uid != os.geteuid() and not (root_may_own and info.st_uid == 0):
        return f"owned by uid {info.st_uid}, not by the current user"
    if info.st_mode & 0o022:
        return "group- or world-writable"
    return None


def atomic_write(root: str, file: str, text: str | bytes, *, keep_open: bool = False) -> int | None:
    """Write ``file`` whole or not at all: a temporary, fsync, rename, fsync of the directory.

    ``keep_open``: return the written file's descriptor, still open (the caller closes it), so
    its inode cannot be freed and given to another file while the caller relies on it."""
    target = safe_target(root, file)
    if not file.startswith(RUNS + "/"):
        # Run state is written only under writer.lock, whose publication checked already.
        state_dirs.check(root)
    made = make_dirs(os.path.dirname(target))
    import uuid  # here, not at the top: a read-only inspect never writes (start-up time)

    temp_rel = temp_name(file, str(uuid.uuid4()))
    temp = safe_target(root, temp_rel)
    fd = -1
    renamed = False
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        data = text.encode("utf-8") if isinstance(text, str) else text
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
        if not keep_open:
            os.close(fd)
            fd = -1
        safe_target(root, file)
        os.rename(temp, target)
        renamed = True
        _fsync_dir(os.path.dirname(target))
        if not keep_open:
            return None
        kept, fd = fd, -1
        return kept
    except OSError as error:
        raise not_written(target, error) from None
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        if not renamed:
            remove_made_dirs(made)


def temp_name(file: str, token: str) -> str:
    """The temporary file of an atomic write of ``file``. Run state keeps the reference's name
    (SPEC 1.1; only writer.lock holders write it, so any left over is a dead writer's). Files
    written under another lock or none (lock-recovery receipts, kept process receipts) carry
    the writer's pid, so the next lock holder can tell a dead writer's leftover from a live one."""
    if file.startswith(RUNS + "/"):
        return f"{file}.{token}{TEMP_SUFFIX}"
    return f"{file}.{os.getpid()}.{token}{TEMP_SUFFIX}"


def _fsync_dir(path: str) -> None:
    # Beyond the reference: make the rename itself durable.
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def envelope_data(run: Run) -> tuple[bytes, bytes]:
    """(payload, file content) as UTF-8 for a run; raises when over the state limit."""
    payload, data, _plain = _envelope_parts(run)
    return payload, data


def _envelope_parts(run: Run) -> tuple[bytes, bytes, bool]:
    """``envelope_data`` and whether the plain path wrote it (``canonical.envelope_parts``)."""
    payload, data, plain = canonical.envelope_parts(run, items_key="tasks", newline=True)
    if len(payload) > STATE_LIMIT:
        raise fail("Run exceeds the 16 MiB state limit.")
    return payload, data, plain


def envelope_text(run: Run) -> tuple[str, str]:
    """``envelope_data`` as text."""
    payload, data = envelope_data(run)
    return payload.decode("utf-8"), data.decode("utf-8")


def save_run(root: str, run: Run, *, keep: bool = False) -> Run:
    """Save ``run`` (atomically, durably) and return it.

    ``keep``: remember this save, so that ``load_run(root, id, saved=run)`` may hand the same
    object back while the file is still the one written here (see ``load_run``)."""
    forget_own_save()
    run["updatedAt"] = now_iso()
    run["sequence"] += 1
    try:
        _payload, data, plain = _envelope_parts(run)
    except NexusError:
        run["sequence"] -= 1
        raise
    # Only a plain save is kept: its run serialises to the same bytes as a parse of the file
    # (no float, no big integer, no index-like key, no lone surrogate to respell).
    written_fd = atomic_write(root, run_path(run["id"]), data, keep_open=keep and plain)
    if written_fd is not None:
        _remember_own_save(root, run, written_fd)
    # The caller gets the run it just saved, not a re-parsed copy (that copy cost a full parse
    # of up to 16 MiB per save); it serialises to exactly the bytes on disk.
    return run


class _OwnSave(NamedTuple):
    """The last save of this thread that its caller asked to keep."""

    root: str
    run_id: str
    run: Run
    identity: tuple[int, int, int, int, int]
    fd: int  # the written file, kept open: its inode number cannot go to another file


# Per thread (the dashboard verifies in worker threads): one thread's save or forget never
# closes the descriptor another thread's reuse relies on.
_own_saves: dict[int, _OwnSave] = {}


def _identity(info: os.stat_result) -> tuple[int, int, int, int, int]:
    # ctime too: any later write, chmod or utime of this inode moves it (and no call sets it).
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _remember_own_save(root: str, run: Run, fd: int) -> None:
    try:
        info = os.fstat(fd)  # after the rename, which moved the inode's ctime
    except OSError:
        os.close(fd)
        return
    _own_saves[get_ident()] = _OwnSave(root, run["id"], run, _identity(info), fd)


def forget_own_save() -> None:
    """Drop this thread's kept save (its run may be about to change, or is no longer needed)."""
    entry = _own_saves.pop(get_ident(), None)
    if entry is not None:
        with contextlib.suppress(OSError):
            os.close(entry.fd)


def check_state_file(root: str, run_id: str) -> str:
    """The run's state file path, refused when missing, unsafe or too large (no read)."""
    return _state_file(root, run_id)[0]


def _state_file(root: str, run_id: str) -> tuple[str, os.stat_result]:
    """``check_state_file`` and what its lstat found."""
    rel = run_path(run_id)
    path = safe_target(root, rel)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise fail(f"Unknown run: {run_id} (no state file {path})") from None
    reason = unsafe_reason(info)
    if reason:
        raise fail(f"Unsafe run state file {path}: {reason}; it was not used or changed.")
    if info.st_size > LOAD_LIMIT:
        raise fail("Run state exceeds the size limit.")
    return path, info


def read_state_bytes(root: str, run_id: str) -> tuple[str, bytes]:
    """(path, bytes) of the run's state file, checked by lstat and again on the file opened:
    one swapped for a FIFO, a symlink or another file after the check is refused, never read."""
    path, info = _state_file(root, run_id)
    try:
        return path, read_regular(path, LOAD_LIMIT, checked=info)
    except FileTooLarge:
        raise fail("Run state exceeds the size limit.") from None
    except FileNotFoundError:
        raise fail(f"Unknown run: {run_id} (no state file {path})") from None
    except RefusedFile as error:
        raise fail(f"Unsafe run state file {path}: {error.reason}; it was not used or changed.") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise fail(f"Unsafe run state file {path}: not a regular file; it was not used or changed.") from None
        raise


def _is_int(value: object) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and value.is_integer()


def parse_run(root: str, run_id: str, raw: bytes) -> Run:
    """Every integrity check of loadRun (SPEC 2.3) on bytes already read.

    A refusal is the SPEC's message, with the way out (a fresh run) as its hint, since
    nothing here is ever repaired.
    """
    with _advised(run_id):
        return _checked_run(root, run_id, raw)


@contextlib.contextmanager
def _advised(run_id: str) -> Iterator[None]:
    """A refusal of a load: the SPEC's message, and the way out as its hint."""
    try:
        yield
    except NexusError as error:
        raise NexusError(error.message, fresh_run_advice(run_id)) from None


def _checked_run(root: str, run_id: str, raw: bytes) -> Run:
    if len(raw) > LOAD_LIMIT:
        raise fail("Run state exceeds the size limit.")
    foreign = fail("Corrupt or foreign run state; original bytes were preserved.")
    plain = canonical.parse_plain(raw)
    if plain is not None:
        # Everyday state: orjson parses it and writes both hashed texts (canonical proves when
        # that is exact); anything else takes the general path below.
        envelope, whole = plain
        run = envelope.get("run") if isinstance(envelope, dict) else None
        if not run or not isinstance(run, dict):
            raise foreign
        canonical.note_plain_items(run.get("tasks"), len(whole))  # what the next save proves against
        run_hash = canonical.sha256_bytes(canonical.last_member_plain(envelope, whole, "run"))
        plan_hash = canonical.sha256_bytes(canonical.compact_plain(run["plan"])) if "plan" in run else None
    else:
        envelope, run, run_hash, plan_hash = _general_hashes(raw)
    if (
        envelope.get("schemaVersion") != 1
        or isinstance(envelope.get("schemaVersion"), bool)
        or envelope.get("sha256") != run_hash
    ):
        raise foreign
    _check_run(root, run_id, run, plan_hash)
    return cast(Run, run)  # checked just above


def _check_run(root: str, run_id: str, run: Mapping[str, Any], plan_hash: str | None) -> None:
    """The checks of loadRun past the envelope's: identity, plan integrity, lifecycle records."""
    foreign = fail("Corrupt or foreign run state; original bytes were preserved.")
    if (
        run.get("schemaVersion") != 1
        or run.get("id") != run_id
        or run.get("project") != root
        or not _is_int(run.get("sequence"))
        or not isinstance(run.get("tasks"), list)
    ):
        raise foreign
    plan = run.get("plan")
    if (
        not isinstance(plan, dict)
        or not isinstance(plan.get("tasks"), list)
        or run.get("planHash") != plan_hash
        or [t.get("id") if isinstance(t, dict) else None for t in run["tasks"]]
        != [t.get("id") if isinstance(t, dict) else None for t in plan["tasks"]]
    ):
        raise fail("Run plan integrity mismatch.")
    seen: set[str] = set()
    for task in run["tasks"]:
        if (
            not isinstance(task, dict)
            or not isinstance(task.get("attempts"), list)
            or task.get("integration") not in INTEGRATIONS
        ):
            raise fail("Invalid task lifecycle record.")
        for attempt in task["attempts"]:
            if not _valid_attempt(attempt, task["id"], run_id, seen):
                raise fail("Invalid attempt lifecycle record.")


def _general_hashes(raw: bytes) -> tuple[JsonObject, JsonObject, str, str | None]:
    """(envelope, run, run hash, plan hash) through the stdlib parser and the normalising walk."""
    try:
        envelope, needs_walk = canonical.parse_for_hashing(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        raise fail("Corrupt run state; original bytes were preserved.") from None
    foreign = fail("Corrupt or foreign run state; original bytes were preserved.")
    if not isinstance(envelope, dict):
        raise foreign
    run = envelope.get("run")
    if not run or not isinstance(run, dict):
        raise foreign
    # Both hashes cover JS-compatible compact JSON; the run's contains the plan's verbatim, so
    # the plan is serialised once, and the normalising walk is skipped when the text needs none.
    plan_text = canonical.compact_parsed(run.get("plan"), needs_walk) if "plan" in run else None
    if plan_text is None:
        run_text = canonical.compact_parsed(run, needs_walk)
    else:
        run_text = canonical.compact_with_member(run, "plan", plan_text, needs_walk)
    plan_hash = canonical.sha256_text(plan_text) if plan_text is not None else None
    return envelope, run, canonical.sha256_text(run_text), plan_hash


# The values a stored task and attempt may carry (SPEC 3.x); the dashboard's filter lists them too.
INTEGRATIONS = ("pending", "accepted", "rejected")
EXECUTIONS = ("running", "blocked", "ambiguous", "completed", "failed", "cancelled")
VERIFICATIONS = ("pending", "running", "passed", "failed", "ambiguous")


def _valid_attempt(attempt: object, task_id: str, run_id: str, seen: set[str]) -> bool:
    if not isinstance(attempt, dict):
        return False
    attempt_id = attempt.get("id")
    if not isinstance(attempt_id, str) or attempt_id in seen:
        return False
    seen.add(attempt_id)
    rounds = attempt.get("verificationRounds")
    verification = attempt.get("verification")
    return (
        attempt.get("taskId") == task_id
        and attempt.get("runId") == run_id
        and _is_int(rounds)
        and rounds >= 0  # type: ignore[operator]
        and isinstance(attempt.get("verificationHistory"), list)
        and isinstance(attempt.get("reconciliations"), list)
        and attempt.get("execution") in EXECUTIONS
        and isinstance(verification, dict)
        and verification.get("status") in VERIFICATIONS
    )


def load_run(root: str, run_id: str, *, saved: Run | None = None) -> Run:
    """The run, with every integrity check of loadRun (SPEC 2.3).

    ``saved``: a run this process saved with ``save_run(..., keep=True)`` and has not changed
    since (the caller vouches for that). While the state file is still the very file that save
    wrote, ``saved`` itself is returned instead of a parse of the same bytes: same device,
    inode, size, mtime and ctime as our write left it. Another writer replaces the file by a
    rename, so it has another inode (ours cannot be reused while the save keeps it open), and
    any write, chmod or utime of our inode moves its ctime. The checks past the checksum still
    run on ``saved``; the checksum holds by construction (a plain save's run serialises to the
    bytes it wrote, property-tested in test_canonical_fast_path)."""
    if saved is not None and _is_own_save(root, run_id, saved):
        # Plain as a whole (a kept save was), so every part is: orjson writes it exactly.
        plan_hash = canonical.sha256_bytes(canonical.compact_plain(saved["plan"])) if "plan" in saved else None
        with _advised(run_id):
            _check_run(root, run_id, saved, plan_hash)
        return saved
    _, raw = read_state_bytes(root, run_id)
    return parse_run(root, run_id, raw)


def _is_own_save(root: str, run_id: str, run: Run) -> bool:
    entry = _own_saves.get(get_ident())
    if entry is None or entry.run is not run or entry.root != root or entry.run_id != run_id:
        return False
    _path, info = _state_file(root, run_id)  # the refusals of a full load, in the same order
    return _identity(info) == entry.identity


def list_run_ids(root: str) -> list[str]:
    probe_state_dir(root, RUNS + "/.inventory-probe")
    try:
        names = os.listdir(os.path.join(root, RUNS))
    except (FileNotFoundError, NotADirectoryError):
        return []
    ids = [name[:-5] for name in names if RUN_FILE_NAME.match(name)]
    return canonical.js_sorted(ids)


# A lock being published: ".writer.lock.<pid>.<token>.tmp" (see locks._publish).
LOCK_TEMP = re.compile(r"\.(?:writer|recovery)\.lock\.([0-9]{1,10})\.[0-9a-f-]{36}\.tmp\Z")


def _dead_lock_temps(root: str) -> list[str]:
    """Lock temporaries whose publishing process has exited. A live one is never listed: its
    owner may still be about to link it into place."""
    from ..hostinfo import pid_liveness

    try:
        names = os.listdir(os.path.join(root, BASE))
    except (FileNotFoundError, NotADirectoryError):
        return []
    dead = []
    for name in names:
        match = LOCK_TEMP.match(name)
        if match and pid_liveness(int(match.group(1))) == "dead":
            dead.append(f"{BASE}/{name}")
    return dead


# An atomic write's temporary outside runs/: "<file>.<pid>.<uuid>.tmp" (see temp_name).
OWNED_TEMP = re.compile(r".+\.json\.([0-9]{1,10})\.[0-9a-f-]{36}\.tmp\Z")
LOCK_RECOVERY_DIR = BASE + "/lock-recovery"
RECEIPTS_DIR = BASE + "/receipts"


def _directory_entries(root: str, rel: str) -> tuple[int, list[str]] | None:
    """(descriptor, names) of a real directory under the project, never through a symlink."""
    try:
        fd = os.open(os.path.join(root, rel), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        return fd, os.listdir(fd)
    except OSError:
        os.close(fd)
        return None


def _dead_owned_temps(root: str, rel: str, depth: int) -> list[str]:
    """Temporaries of dead writers in ``rel`` (and, with depth 1, its subdirectories)."""
    entries = _directory_entries(root, rel)
    if entries is None:
        return []
    from ..hostinfo import pid_liveness

    fd, names = entries
    found: list[str] = []
    try:
        for name in names:
            match = OWNED_TEMP.match(name)
            if match and pid_liveness(int(match.group(1))) == "dead":
                found.append(f"{rel}/{name}")
            elif depth and not name.endswith(TEMP_SUFFIX):
                found += _dead_owned_temps(root, f"{rel}/{name}", depth - 1)
    finally:
        os.close(fd)
    return found


def list_temp_files(root: str) -> list[str]:
    """Temporary files left by killed writers: run-state temporaries, dead lock temporaries, and
    dead writers' temporaries of lock-recovery receipts and kept process receipts."""
    try:
        names = os.listdir(os.path.join(root, RUNS))
    except (FileNotFoundError, NotADirectoryError):
        names = []
    runs = [f"{RUNS}/{n}" for n in names if n.endswith(TEMP_SUFFIX) and ".json." in n]
    owned = _dead_owned_temps(root, LOCK_RECOVERY_DIR, 0) + _dead_owned_temps(root, RECEIPTS_DIR, 1)
    return sorted(runs + _dead_lock_temps(root) + owned)


def remove_dead_temp_files(root: str) -> None:
    """Called only while holding writer.lock: any run-state temporary then belongs to a dead
    writer (state is written only under that lock); the others only when their pid died."""
    for rel in list_temp_files(root):
        folder, name = rel.rsplit("/", 1)
        entries = _directory_entries(root, folder)  # the unlink never goes through a symlink
        if entries is None:
            continue
        fd, _ = entries
        try:
            with contextlib.suppress(OSError):
                os.unlink(name, dir_fd=fd)
        finally:
            os.close(fd)
