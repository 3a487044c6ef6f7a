"""writer.lock and recovery.lock (SPEC 7) and recover-lock (SPEC 5.3)."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator

from ..errors import NexusError, fail
from ..hostinfo import hostname, owner_liveness, pid
from ..paths import RefusedFile, read_regular, safe_target
from ..shapes import JsonObject, LockSnapshot, Owner
from ..timeutil import now_iso
from . import canonical, state_dirs
from .store import (
    BASE,
    LOCK_RECOVERY_DIR,
    atomic_write,
    make_dirs,
    not_written,
    remove_dead_temp_files,
    remove_made_dirs,
    unsafe_reason,
)

WRITER_LOCK = BASE + "/writer.lock"
RECOVERY_LOCK = BASE + "/recovery.lock"
RECOVERY_HINT = "Inspect the owner; recover only after its process has stopped."
LOCK_LIMIT = 64 * 1024  # an owner is some 150 bytes: a larger lock is not one of ours, and is never read whole

RECOVERY_ACTIVE = "Lock recovery is active or interrupted; inspect recovery.lock and its owner before proceeding."
WRITER_BUSY = "Another mutation owns writer.lock; inspect before explicit recovery."
RECOVERY_BUSY = "Another recovery owns recovery.lock; inspect its owner and effects before any manual recovery."


def _exists(root: str, rel: str) -> bool:
    return os.path.exists(os.path.join(root, rel))


def _publish(root: str, rel: str, owner: Owner) -> bool:
    """Create the lock with its full owner JSON in one step (write a temp file, link it).

    ``link`` fails if the lock exists, so a reader never sees an empty lock. Returns False
    when another owner holds it.
    """
    target = safe_target(root, rel)
    state_dirs.check(root)  # every mutation takes a lock first: nothing is written into an unsafe directory
    made = make_dirs(os.path.dirname(target))
    published = False
    try:
        safe_target(root, rel)
        published = _link_lock(target, rel, owner)
    except OSError as error:  # a full disk, a read-only filesystem: named, and nothing is left behind
        raise not_written(target, error) from None
    finally:
        if not published:
            remove_made_dirs(made)
    return published


def _link_lock(target: str, rel: str, owner: Owner) -> bool:
    # The pid in the name lets the next lock holder tell a dead publisher's leftover from a
    # live one that is about to link (store.remove_dead_temp_files).
    temp = os.path.join(os.path.dirname(target), f".{os.path.basename(rel)}.{owner['pid']}.{owner['token']}.tmp")
    for _ in range(3):
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            try:
                data = canonical.compact(owner).encode("utf-8")
                if os.write(fd, data) != len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(temp, target)
            except FileExistsError:
                return False
            except FileNotFoundError:
                continue  # our temporary was removed by someone else: publish it again
            return True
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)
    return False


def _release(root: str, rel: str, token: str) -> None:
    path = os.path.join(root, rel)
    try:
        owner = canonical.parse(read_regular(path, LOCK_LIMIT).decode("utf-8", "replace"))
    except (OSError, ValueError, RecursionError):
        return  # not our lock any more (replaced, a FIFO, unreadable): left as it is
    if isinstance(owner, dict) and owner.get("token") == token:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)


def owner_token() -> str:
    import uuid  # here, not at the top: a read-only inspect takes no lock (start-up time)

    return str(uuid.uuid4())


def new_owner() -> Owner:
    return {"token": owner_token(), "pid": pid(), "hostname": hostname(), "createdAt": now_iso()}


def try_acquire_writer(root: str) -> str | None:
    """Take writer.lock once; the owner token, or None when another owner holds it."""
    if _exists(root, RECOVERY_LOCK):
        raise fail(RECOVERY_ACTIVE)
    owner = new_owner()
    if not _publish(root, WRITER_LOCK, owner):
        return None
    if _exists(root, RECOVERY_LOCK):
        _release(root, WRITER_LOCK, owner["token"])
        raise fail(RECOVERY_ACTIVE)
    return str(owner["token"])


@contextlib.contextmanager
def writer_lock(root: str) -> Iterator[None]:
    token = try_acquire_writer(root)
    if token is None:
        raise fail(WRITER_BUSY)
    try:
        remove_dead_temp_files(root)
        yield
    finally:
        _release(root, WRITER_LOCK, token)


def release_writer(root: str, token: str) -> None:
    _release(root, WRITER_LOCK, token)


@contextlib.contextmanager
def recovery_lock(root: str) -> Iterator[None]:
    owner = new_owner()
    if not _publish(root, RECOVERY_LOCK, owner):
        raise fail(RECOVERY_BUSY)
    try:
        yield
    finally:
        _release(root, RECOVERY_LOCK, owner["token"])


def lock_snapshot(root: str, rel: str) -> LockSnapshot | None:
    # Only the parent directories must be real: the lock itself, whatever it is, is reported.
    safe_target(root, os.path.dirname(rel) + "/.lock-probe")
    path = os.path.join(root, rel)
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    reason = unsafe_reason(info)
    if not stat.S_ISREG(info.st_mode):
        # Never opened: a symlink may point anywhere and a FIFO would block. The hash names
        # this exact entry so a later look can tell it was replaced.
        identity = f"{reason}:{info.st_mode}:{info.st_ino}:{info.st_mtime_ns}".encode()
        if stat.S_ISLNK(info.st_mode):
            identity += b":" + os.fsencode(os.readlink(path))
        assert reason is not None  # unsafe_reason names every entry that is not a regular file
        return {"hash": canonical.sha256_bytes(identity), "owner": None, "recovery": RECOVERY_HINT, "unsafe": reason}
    try:
        raw = read_regular(path, LOCK_LIMIT, checked=info)
    except FileNotFoundError:
        return None
    except OSError as error:
        # Swapped after the lstat (a FIFO, a symlink, another file) or oversized: reported, not read.
        reason = error.reason if isinstance(error, RefusedFile) else "not a regular file"
        identity = f"{reason}:{info.st_mode}:{info.st_ino}:{info.st_mtime_ns}".encode()
        return {"hash": canonical.sha256_bytes(identity), "owner": None, "recovery": RECOVERY_HINT, "unsafe": reason}
    try:
        owner = canonical.parse(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        owner = None
    snapshot: LockSnapshot = {
        "hash": canonical.sha256_bytes(raw),
        "owner": owner,
        "recovery": RECOVERY_HINT,
    }
    if reason:
        # Not in the reference: an unsafe lock is reported, never trusted.
        snapshot["unsafe"] = reason
    return snapshot


def owner_state(owner: object) -> str:
    """ "alive", "exited" or "unknown" (another host, or an owner that does not parse) for the
    owner record of a lock or a verification ({"pid", "hostname", ...}); decided by
    ``hostinfo.owner_liveness``, worded for inspect's hints."""
    if not isinstance(owner, dict):
        return "unknown"
    liveness = owner_liveness(owner.get("hostname"), owner.get("pid"))
    return "exited" if liveness == "dead" else liveness


def describe_owner(owner: object) -> str:
    if not isinstance(owner, dict):
        return "an owner that cannot be read"
    since = f", since {owner['createdAt']}" if isinstance(owner.get("createdAt"), str) else ""
    return f"pid {owner.get('pid')!r} on {owner.get('hostname')!r}{since}"


def recovery_lock_removal(root: str) -> str:
    """The exact shell command that removes ``root``'s recovery.lock by hand (SPEC 7.2 has none)."""
    import shlex  # only when a recovery.lock is reported: not on every mutation's import path

    return f"rm -- {shlex.quote(os.path.join(root, RECOVERY_LOCK))}"


def recovery_lock_hint(snapshot: LockSnapshot | None, root: str) -> str | None:
    """What to do about ``root``'s recovery.lock (additive inspect output, not in the reference):
    SPEC 7.2 has no command for it, so the way out is spelled out, with its owner: inspect what
    it left, then the exact command that removes it."""
    if snapshot is None:
        return None
    owner = snapshot.get("owner")
    who = describe_owner(owner)
    state = "unknown" if "unsafe" in snapshot else owner_state(owner)
    if state == "alive":
        return f"recover-lock ({who}) is running: wait for it to end; mutations are refused until it does."
    way_out = (
        f"first run nexus inspect (is writer.lock still there? Any receipt it left in {LOCK_RECOVERY_DIR}/ is "
        f"complete and stays as evidence), then remove {RECOVERY_LOCK} by hand with `{recovery_lock_removal(root)}`. "
        "If writer.lock is still there, recover it with nexus recover-lock --input FILE and the hash inspect "
        "shows. Its temporary files are removed by the next mutation."
    )
    if state == "exited":
        return (
            f"recover-lock ({who}) was interrupted: that process has exited and left {RECOVERY_LOCK}, which refuses "
            f"every mutation. It changed nothing else but, at most, one receipt and writer.lock. Way out: {way_out}"
        )
    return (
        f"{RECOVERY_LOCK} is held by {who}, which cannot be probed from here. Once you have made sure that "
        f"recover-lock has stopped: {way_out}"
    )


def recover_lock(root: str, options: JsonObject) -> JsonObject:
    from ..validate import text

    note = text(options.get("note"), "Recovery observation")
    with recovery_lock(root):
        observed = lock_snapshot(root, WRITER_LOCK)
        if (
            observed is None
            or observed["hash"] != options.get("expectedHash")
            or options.get("ownerStopped") is not True
        ):
            raise fail("Exact lock hash and an explicit stopped-owner observation are required.")
        if "unsafe" in observed:
            raise fail(f"writer.lock is unsafe ({observed['unsafe']}); inspect it by hand, nothing was removed.")
        owner = observed["owner"]
        # "unknown" (another host, no usable pid) does not block: ownerStopped is the operator's word.
        if isinstance(owner, dict) and owner_liveness(owner.get("hostname"), owner.get("pid")) == "alive":
            raise fail("Lock owner process is still alive; no lock was removed.")
        receipt = {
            "schemaVersion": 1,
            "observed": observed,
            "note": note,
            "ownerStopped": True,
            "recoveredAt": now_iso(),
            "evidenceClass": "operator-observation",
        }
        atomic_write(root, f"{LOCK_RECOVERY_DIR}/{owner_token()}.json", canonical.pretty(receipt) + "\n")
        again = lock_snapshot(root, WRITER_LOCK)
        if again is None or again["hash"] != observed["hash"]:
            raise fail("Lock changed during recovery.")
        os.unlink(safe_target(root, WRITER_LOCK))
        return receipt


__all__ = [
    "LOCK_RECOVERY_DIR",
    "RECOVERY_LOCK",
    "WRITER_LOCK",
    "NexusError",
    "lock_snapshot",
    "recover_lock",
    "writer_lock",
]
