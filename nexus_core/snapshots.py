"""File, scope and protected-resource snapshots (SPEC 5.0.2, 5.0.4) and executables (4.1)."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import stat
import sys
from collections.abc import Iterator
from typing import Any

from . import canonical
from .errors import fail
from .paths import directory_at, portable_child, relative, safe_target

FILE_LIMIT = 16 * 1024 * 1024
SCOPE_FILE_LIMIT = 10000
_CHUNK = 1024 * 1024


_observed: contextvars.ContextVar[dict[tuple[int, ...], str] | None] = contextvars.ContextVar(
    "nexus_observed_hashes", default=None
)


@contextlib.contextmanager
def observational_hashes(cache: dict[tuple[int, ...], str]) -> Iterator[None]:
    """Display-only reads (the dashboard) reuse a file's hash while its device, inode, size,
    mtime and ctime are unchanged. Mutations (verify, accept...) never run inside this, so
    they always hash for real."""
    token = _observed.set(cache)
    try:
        yield
    finally:
        _observed.reset(token)


def _cache_key(info: os.stat_result) -> tuple[int, ...]:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def hash_file(path: str) -> str:
    cache = _observed.get()
    if cache is not None:
        key = _cache_key(os.stat(path))
        hit = cache.get(key)
        if hit is None:
            hit = cache[key] = _digest_path(path)
        return hit
    return _digest_path(path)


def _digest_path(path: str) -> str:
    with open(path, "rb", buffering=0) as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def file_hash(root: str, file: str, required: bool, trusted_dir: str | None = None) -> str | None:
    relative(file)
    path = safe_target(root, file, trusted_dir)
    try:
        # O_NONBLOCK: should the path turn into a FIFO after the check, never wait on it.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        if required:
            raise fail(f"Required file is missing: {file}") from None
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise fail(f"Adapter target is not a regular file: {path}")
        if info.st_size > FILE_LIMIT:
            raise fail(f"File exceeds the 16 MiB snapshot limit: {file}")
        cache = _observed.get()
        if cache is not None:
            hit = cache.get(_cache_key(info))
            if hit is not None:
                return hit
        digest = _digest_fd(fd, info.st_size)
    finally:
        os.close(fd)
    if cache is not None:
        cache[_cache_key(info)] = digest
    return digest


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
    return {f: file_hash(root, f, required) for f in ordered}


def _is_regular_file(root: str, rel: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(os.path.join(root, rel)).st_mode)
    except OSError:
        return False


def scope_files(root: str, scopes: list[str]) -> list[tuple[str, str | None]]:
    """Files of a scope as (relative path, trusted directory already walked)."""
    found: list[tuple[str, str | None]] = []
    walked = 0

    def walk(rel: str) -> None:
        relative(rel)
        absolute = os.path.join(root, rel)
        try:
            info = os.lstat(absolute)
        except FileNotFoundError:
            return
        mode = info.st_mode
        if stat.S_ISLNK(mode):
            raise fail(f"Scope contains a symlink or junction: {rel}")
        if stat.S_ISDIR(mode):
            directory_at(root, rel)
            children(rel, absolute)
        elif stat.S_ISREG(mode):
            add(rel, os.path.dirname(absolute))
        else:
            raise fail(f"Scope contains a non-regular file: {rel}")

    def add(rel: str, directory: str) -> None:
        nonlocal walked
        found.append((rel, directory))
        walked += 1
        if walked > SCOPE_FILE_LIMIT:
            raise fail("Scope exceeds the 10000 file snapshot limit.")

    def children(rel: str, absolute: str) -> None:
        # The directory's entries with their types (no lstat per file where the file system
        # reports types); names sorted as the reference sorts them.
        with os.scandir(absolute) as listing:
            entries = {entry.name: entry for entry in listing}
        for name in canonical.js_sorted(entries):
            child = rel + "/" + name
            entry = entries[name]
            if not portable_child(name, child):
                relative(child)
            if entry.is_symlink():
                raise fail(f"Scope contains a symlink or junction: {child}")
            if entry.is_dir(follow_symlinks=False):
                directory_at(root, child)
                children(child, entry.path)
            elif entry.is_file(follow_symlinks=False):
                add(child, absolute)
            else:
                raise fail(f"Scope contains a non-regular file: {child}")

    for scope in scopes:
        if _is_regular_file(root, scope):
            safe_target(root, scope)
            found.append((scope, None))
        else:
            safe_target(root, scope + "/.nexus-scope-probe")
            walk(scope)
    return found


def scope_snapshot(root: str, scopes: list[str]) -> dict[str, str | None]:
    entries = scope_files(root, scopes)
    trusted: dict[str, str | None] = {}
    for rel, directory in entries:
        trusted.setdefault(rel, directory)
    ordered = canonical.js_sorted(trusted)
    return {rel: _walked_file_hash(root, rel, trusted[rel]) for rel in ordered}


def _walked_file_hash(root: str, rel: str, directory: str | None) -> str | None:
    """``file_hash(root, rel, True, directory)`` for a file the scope walk has just validated
    (its path accepted by ``relative``, every directory above it lstat'ed): the open refuses a
    symlink put in its place since (O_NOFOLLOW), the fstat anything but a regular file."""
    if directory is None or _observed.get() is not None:
        return file_hash(root, rel, True, directory)
    try:
        fd = os.open(os.path.join(root, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise fail(f"Required file is missing: {rel}") from None
    except OSError:
        return file_hash(root, rel, True, directory)  # whatever it is now, the full checks say so
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise fail(f"Adapter target is not a regular file: {os.path.join(root, rel)}")
        if info.st_size > FILE_LIMIT:
            raise fail(f"File exceeds the 16 MiB snapshot limit: {rel}")
        return _digest_fd(fd, info.st_size)
    finally:
        os.close(fd)


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


def protected_snapshot(root: str, definition: dict[str, Any]) -> dict[str, str | None]:
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
