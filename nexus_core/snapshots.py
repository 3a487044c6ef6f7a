"""File, scope and protected-resource snapshots (SPEC 5.0.2, 5.0.4) and executables (4.1)."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import stat
import sys
import time
from collections.abc import Iterator
from typing import cast

from .errors import ENGINE_PREFIX, NexusError, fail
from .paths import (
    directory_at,
    look_memo,
    one_look,
    open_directory,
    open_directory_at,
    open_file_at,
    open_project_file,
    open_regular,
    portable_child,
    relative,
    safe_target,
)
from .shapes import TaskDefinition
from .state import canonical

FILE_LIMIT = 16 * 1024 * 1024
SCOPE_FILE_LIMIT = 10000
# Ours, not the reference's (README, "Differences from the reference"): the bytes one snapshot
# may hash. The reference's limits alone let a worker's scope cost 10000 x 16 MiB (160 GB) of
# hashing on every inspect; real scopes (and the benchmarks' 10 x 16 MiB) stay far below it.
SNAPSHOT_BYTE_BUDGET = 1024 * 1024 * 1024
_CHUNK = 1024 * 1024


class SnapshotTooLarge(NexusError):
    """One snapshot would hash more than SNAPSHOT_BYTE_BUDGET bytes: raised at once, never
    deferred like a file's own refusal, so nothing past the budget is read."""


class _Budget:
    """The bytes one snapshot has hashed so far, refused past SNAPSHOT_BYTE_BUDGET."""

    def __init__(self) -> None:
        self.spent = 0

    def spend(self, size: int, rel: str, subject: str) -> None:
        """``subject``: what is refused, with its verb ("Scope work exceeds")."""
        self.spent += size
        if self.spent > SNAPSHOT_BYTE_BUDGET:
            raise SnapshotTooLarge(
                f"{ENGINE_PREFIX}{subject} the snapshot byte budget of 1 GiB ({SNAPSHOT_BYTE_BUDGET} bytes): "
                f"{self.spent} bytes with {rel}; nothing past the budget was read. Move large files out of it or "
                "split the task (nexus hashes at most 1 GiB per snapshot, a limit the reference does not have)."
            )


_observed: contextvars.ContextVar[dict[tuple[int, ...], str] | None] = contextvars.ContextVar(
    "nexus_observed_hashes", default=None
)
# One look's protected-resource answers (``protected_snapshot``, kept in the look's memo), by
# what the answer depends on: the tasks of a project's runs mostly protect the same files and
# run the same executables.
_ProtectedKey = tuple[object, ...]


@contextlib.contextmanager
def observational_hashes(cache: dict[tuple[int, ...], str]) -> Iterator[None]:
    """Display-only reads (the dashboard, ``wait``, ``loop``, the scheduler) reuse a file's hash
    while its device, inode, size, mtime and ctime are unchanged (an unchanged scope then costs
    a walk, not a hash pass). Mutations (verify, accept...) never run inside this, so they
    always hash for real.

    One entry is one look: within it, the protected resources of tasks that protect the same
    files with the same executables are checked once (a file changed during the look is seen
    by the next look, as if the look had been a moment earlier), and the directories walked are
    opened and checked once (``paths.one_look``)."""
    token = _observed.set(cache)
    try:
        with one_look():
            yield
    finally:
        _observed.reset(token)


# File systems stamp mtime and ctime from a coarse clock (a few ms on Linux, up to 2 s on some
# file systems): a same-size rewrite within one tick of a hash keeps the whole key. As git does
# with "racily clean" entries, a file stamped within this window of the moment its hash was
# taken is not remembered, so every look hashes it again until it is older.
RACY_NANOSECONDS = 2_000_000_000


def _cache_key(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def _remember(cache: dict[tuple[int, ...], str], info: os.stat_result, digest: str, read_at_ns: int) -> str:
    """``digest`` of the file ``info`` describes, read from ``read_at_ns`` on: kept unless racy."""
    if max(info.st_mtime_ns, info.st_ctime_ns) < read_at_ns - RACY_NANOSECONDS:
        cache[_cache_key(info)] = digest
    return digest


def hash_file(path: str) -> str:
    cache = _observed.get()
    if cache is None:
        return _digest_path(path)
    hit = cache.get(_cache_key(os.stat(path)))
    if hit is not None:
        return hit
    read_at = time.time_ns()
    fd, info = open_regular(path)
    try:
        return _remember(cache, info, _digest_fd(fd, info.st_size), read_at)
    finally:
        os.close(fd)


def _digest_path(path: str) -> str:
    fd, info = open_regular(path)
    try:
        return _digest_fd(fd, info.st_size)
    finally:
        os.close(fd)


def file_hash(root: str, file: str, required: bool, budget: _Budget | None = None) -> str | None:
    relative(file)
    opened = open_project_file(root, file)
    if opened is None:
        if required:
            raise fail(f"Required file is missing: {file}")
        return None
    fd, info = opened
    try:
        if budget is not None and info.st_size <= FILE_LIMIT:
            budget.spend(info.st_size, file, "The task's files exceed")
        return _digest_regular(fd, info, file)
    finally:
        os.close(fd)


def _digest_regular(fd: int, info: os.stat_result, file: str) -> str:
    """sha256 of the open regular file ``fd`` (``info``: its fstat), refused over the size limit."""
    if info.st_size > FILE_LIMIT:
        raise fail(f"File exceeds the 16 MiB snapshot limit: {file}")
    cache = _observed.get()
    if cache is None:
        return _digest_fd(fd, info.st_size)
    hit = cache.get(_cache_key(info))
    if hit is not None:
        return hit
    read_at = time.time_ns()
    return _remember(cache, info, _digest_fd(fd, info.st_size), read_at)


def _digest_fd(fd: int, size: int) -> str:
    """sha256 of an open file: one read for a small file (no per-file 256 KiB buffer as
    ``hashlib.file_digest`` allocates), 1 MiB chunks otherwise."""
    if size < _CHUNK:
        chunk = os.read(fd, size + 1)
        if len(chunk) <= size:
            # A regular file gives a short read only at its end: this is the whole file.
            return hashlib.sha256(chunk).hexdigest()
        digest = hashlib.sha256()
        while chunk:
            digest.update(chunk)
            chunk = os.read(fd, _CHUNK)
        return digest.hexdigest()
    digest = hashlib.sha256()
    buffer = bytearray(_CHUNK)
    view = memoryview(buffer)
    while True:
        count = os.readv(fd, [buffer])
        if not count:
            return digest.hexdigest()
        digest.update(view[:count])


def files_snapshot(root: str, files: list[str], required: bool = True) -> dict[str, str | None]:
    ordered = canonical.js_sorted(set(files))
    budget = _Budget()
    return {f: file_hash(root, f, required, budget) for f in ordered}


_DIRECTORY_PROBE = ".nexus-directory-probe"


class _ScopeWalk:
    """SPEC 5.0.2's scope walk, every directory and file opened relative to its parent's
    descriptor without following a symlink: a directory swapped for a symlink after its check
    can never lead the walk (or a hash) outside the project.

    Files are hashed as they are found, while their directory is open; a file's own refusal
    (missing, not regular, too large) waits until the walk is done and is raised in sorted
    order, so results and errors are those of the reference's walk-then-hash.

    Bounded work (ours): the file limit is enforced as directories are listed (regular files
    counted as they come, so a scope of 300,000 files is refused after some 10,000 entries,
    never listed whole), and the bytes hashed are bounded by SNAPSHOT_BYTE_BUDGET. Either
    refusal comes as soon as it is known, before another error the reference would have met
    first in sorted order (the only difference in results)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.hashes: dict[str, str | Exception] = {}
        self.walked = 0
        self.listed = 0  # regular files seen in listings so far (each will be walked)
        self.budget = _Budget()
        self.current = ""  # the scope being walked (named by a budget refusal)

    def file(self, dir_fd: int, name: str, rel: str) -> None:
        if rel in self.hashes:
            return
        if self._cached(dir_fd, name, rel):
            return
        absolute = os.path.join(self.root, rel)
        try:
            opened = open_file_at(dir_fd, name, absolute)
            if opened is None:
                raise fail(f"Required file is missing: {rel}")
            fd, info = opened
            try:
                if info.st_size <= FILE_LIMIT:  # a larger one is refused below, unread
                    self.budget.spend(info.st_size, rel, f"Scope {self.current} exceeds")
                self.hashes[rel] = _digest_regular(fd, info, rel)
            finally:
                os.close(fd)
        except SnapshotTooLarge:
            raise
        except (NexusError, OSError) as error:
            self.hashes[rel] = error

    def _cached(self, dir_fd: int, name: str, rel: str) -> bool:
        """Inside observational_hashes: a regular file whose version has a kept hash costs one
        lstat relative to its open directory (no open). Anything else (a symlink, a FIFO, a
        file too large, a missing one, a new version) takes the full path below."""
        cache = _observed.get()
        if cache is None:
            return False
        try:
            info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            return False
        hit = cache.get(_cache_key(info)) if stat.S_ISREG(info.st_mode) and info.st_size <= FILE_LIMIT else None
        if hit is None:
            return False
        self.budget.spend(info.st_size, rel, f"Scope {self.current} exceeds")
        self.hashes[rel] = hit
        return True

    def count(self) -> None:
        self.walked += 1
        if self.walked > SCOPE_FILE_LIMIT:
            raise fail("Scope exceeds the 10000 file snapshot limit.")

    def scope(self, scope: str) -> None:
        self.current = scope
        target = os.path.join(self.root, scope)
        if _is_regular_file(target):
            safe_target(self.root, scope)
            parent_fd = open_directory(os.path.dirname(target))
            if parent_fd is None:
                self.hashes.setdefault(scope, fail(f"Required file is missing: {scope}"))
                return
            try:
                self.file(parent_fd, os.path.basename(target), scope)
            finally:
                os.close(parent_fd)
            return
        safe_target(self.root, scope + "/.nexus-scope-probe")
        relative(scope)
        parent_fd = open_directory(os.path.dirname(target))
        if parent_fd is None:
            return
        try:
            self.entry(parent_fd, os.path.basename(target), scope, None)
        finally:
            os.close(parent_fd)

    def entry(self, dir_fd: int, name: str, rel: str, kind: int | None) -> None:
        """``kind``: the entry's file type as listed, or None to look."""
        if kind is None:
            try:
                kind = stat.S_IFMT(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
            except FileNotFoundError:
                return
        if kind == stat.S_IFLNK:
            raise fail(f"Scope contains a symlink or junction: {rel}")
        if kind == stat.S_IFDIR:
            absolute = os.path.join(self.root, rel)
            fd = open_directory_at(dir_fd, name, absolute, listing=True)
            if fd is None:
                raise fail(f"Directory is missing: {rel}")
            try:
                self.directory(fd, rel, absolute)
            finally:
                os.close(fd)
        elif kind == stat.S_IFREG:
            self.file(dir_fd, name, rel)
            self.count()
        else:
            raise fail(f"Scope contains a non-regular file: {rel}")

    def directory(self, fd: int, rel: str, absolute: str) -> None:
        entries: dict[str, os.DirEntry[str]] = {}
        with os.scandir(fd) as listing:
            for entry in listing:
                entries[entry.name] = entry
                if entry.is_file(follow_symlinks=False):
                    self.listed += 1
                    if self.listed > SCOPE_FILE_LIMIT:  # the walk would count past it: say so now
                        raise fail("Scope exceeds the 10000 file snapshot limit.")
        if _DIRECTORY_PROBE in entries:  # directoryAt's probe: a real one must be a regular file
            safe_target(absolute, _DIRECTORY_PROBE)
        for name in canonical.js_sorted(entries):
            child = rel + "/" + name
            if not portable_child(name, child):  # the common case without the full rule
                relative(child)
            self.entry(fd, name, child, _listed_kind(entries[name]))


def _listed_kind(entry: os.DirEntry[str]) -> int | None:
    """The file type the directory listing gives (no system call), or None when it gives none."""
    if entry.is_symlink():
        return stat.S_IFLNK
    if entry.is_dir(follow_symlinks=False):
        return stat.S_IFDIR
    if entry.is_file(follow_symlinks=False):
        return stat.S_IFREG
    return None


def _is_regular_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def scope_snapshot(root: str, scopes: list[str]) -> dict[str, str | None]:
    walk = _ScopeWalk(root)
    for scope in scopes:
        walk.scope(scope)
    snapshot: dict[str, str | None] = {}
    for rel in canonical.js_sorted(walk.hashes):
        digest = walk.hashes[rel]
        if isinstance(digest, Exception):
            raise digest
        snapshot[rel] = digest
    return snapshot


def resolve_command(command: object) -> str:
    """``node`` is the node on PATH and ``python`` this interpreter (an extension)."""
    if command == "node":
        import shutil  # here: it imports bz2 and lzma (start-up time of every command)

        found = shutil.which("node")
        if found:
            return os.path.abspath(found)
    if command == "python":
        return os.path.realpath(sys.executable)
    if not isinstance(command, str) or not os.path.isabs(command):
        raise fail("Check command must be node or an absolute executable path.")
    return command


def executable(command: object) -> dict[str, str]:
    path = resolve_command(command)
    real = os.path.realpath(path)
    try:
        info = os.stat(real)
    except FileNotFoundError:
        raise fail(f"Executable is missing: {path}") from None
    if not stat.S_ISREG(info.st_mode):
        raise fail("Check command is not a regular executable.")
    return {"command": real, "commandHash": hash_file(real)}


def protected_snapshot(root: str, definition: TaskDefinition) -> dict[str, str | None]:
    memo = look_memo()
    if memo is None:
        return _protected_snapshot(root, definition)
    look = cast(dict[_ProtectedKey, dict[str, str | None] | NexusError], memo.setdefault("protected", {}))
    key = _protected_key(root, definition)
    answer = look.get(key)
    if answer is None:
        try:
            answer = _protected_snapshot(root, definition)
        except NexusError as error:
            answer = error
        look[key] = answer
    if isinstance(answer, NexusError):
        raise answer.with_traceback(None)
    return dict(answer)


def _protected_key(root: str, definition: TaskDefinition) -> _ProtectedKey:
    """Everything ``_protected_snapshot``'s answer depends on, besides the files themselves."""
    execution = definition.get("execution")
    return (
        root,
        tuple(definition["resourceHashes"].items()),
        tuple((check.get("cwd"), check.get("command"), check.get("commandHash")) for check in definition["checks"]),
        (execution.get("cwd"), execution.get("command"), execution.get("commandHash")) if execution else None,
    )


def _protected_snapshot(root: str, definition: TaskDefinition) -> dict[str, str | None]:
    expected = definition["resourceHashes"]
    current = files_snapshot(root, list(expected), True)
    if not canonical.same(current, expected):
        raise fail("Protected verifier or agent resource changed since the plan was created.")
    for check in definition["checks"]:
        directory_at(root, check["cwd"])
        if executable(check["command"])["commandHash"] != check["commandHash"]:
            raise fail("Verifier executable changed since plan creation.")
    execution = definition.get("execution")
    if execution:
        directory_at(root, execution["cwd"])
        if executable(execution["command"])["commandHash"] != execution["commandHash"]:
            raise fail("Worker executable changed since plan creation.")
    return current
