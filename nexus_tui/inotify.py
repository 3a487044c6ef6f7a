"""A recursive inotify watcher (Linux) that sleeps in the kernel until something happens.

Each directory under the given paths gets a watch (symlinks are never followed inside them);
``wait`` blocks in ``poll`` on the inotify descriptor and a wake-up pipe without a timeout, so
an idle watcher costs no wakeup at all, then gathers a burst of events in steps and returns the
changed paths. ``arm`` and ``wait`` run in a thread of the caller's (the walk of a large tree
releases the GIL at each system call); ``close`` may come from any thread.

Pure logic: no widget, no event loop."""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import select
import struct
import threading
import time
from collections.abc import Sequence
from functools import cache

IN_MODIFY = 0x00000002
IN_ATTRIB = 0x00000004
IN_CLOSE_WRITE = 0x00000008
IN_MOVED_FROM = 0x00000040
IN_MOVED_TO = 0x00000080
IN_CREATE = 0x00000100
IN_DELETE = 0x00000200
IN_DELETE_SELF = 0x00000400
IN_MOVE_SELF = 0x00000800
IN_Q_OVERFLOW = 0x00004000
IN_IGNORED = 0x00008000
IN_ONLYDIR = 0x01000000
IN_DONT_FOLLOW = 0x02000000
IN_EXCL_UNLINK = 0x04000000
IN_ISDIR = 0x40000000
IN_NONBLOCK = os.O_NONBLOCK
IN_CLOEXEC = os.O_CLOEXEC

EVENTS = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
)
_DIRECTORY = EVENTS | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK
_GIVEN_DIRECTORY = _DIRECTORY & ~IN_DONT_FOLLOW  # a given path is followed: it was asked for
_GIVEN_FILE = EVENTS | IN_EXCL_UNLINK
# A path left out of the watch, silently: gone, not a directory, or not ours to read.
_LEFT_OUT = {errno.ENOENT, errno.EACCES, errno.ENOTDIR, errno.ELOOP}
_HEADER = struct.Struct("iIII")  # struct inotify_event: wd, mask, cookie, len (then the name)
_READ_SIZE = 64 * 1024


@cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.inotify_init1.argtypes = [ctypes.c_int]
    libc.inotify_init1.restype = ctypes.c_int
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    libc.inotify_add_watch.restype = ctypes.c_int
    libc.inotify_rm_watch.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.inotify_rm_watch.restype = ctypes.c_int
    return libc


@cache
def available() -> bool:
    """Whether this system gives inotify instances (Linux, with a libc that has them)."""
    try:
        fd = _init()
    except (OSError, AttributeError):
        return False
    os.close(fd)
    return True


def _init() -> int:
    fd: int = _libc().inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
    if fd < 0:
        number = ctypes.get_errno()
        raise OSError(number, f"inotify_init1: {os.strerror(number)}")
    return fd


def parse_events(buffer: bytes) -> list[tuple[int, int, bytes]]:
    """The events a read of an inotify descriptor gave: (wd, mask, name) each, the name without
    its NUL padding (empty for an event on the watched path itself)."""
    events = []
    offset = 0
    while offset + _HEADER.size <= len(buffer):
        wd, mask, _cookie, length = _HEADER.unpack_from(buffer, offset)
        offset += _HEADER.size
        events.append((wd, mask, buffer[offset : offset + length].rstrip(b"\0")))
        offset += length
    return events


class Watcher:
    """inotify over ``paths``, recursively. ``arm`` adds the watches, ``wait`` returns changed
    paths; both from one thread at a time. ``close`` from any thread: a running ``arm`` or
    ``wait`` returns at once, and the descriptors are closed once, by whoever is last."""

    def __init__(self, paths: Sequence[str]) -> None:
        self.roots = [path.rstrip("/") or "/" for path in paths]
        self._fd = _init()
        try:
            self._wake_read, self._wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            os.close(self._fd)
            raise
        self._lock = threading.Lock()
        self._closed = False
        self._busy = False  # a thread is in arm or wait: it closes the descriptors
        self._released = False
        self._path_of: dict[int, str] = {}  # watch descriptor -> the path it watches
        self._wd_of: dict[str, int] = {}

    # -- the descriptors' life
    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._busy:  # its thread is in poll on them: wake it, it closes them on its way out
                with contextlib.suppress(BlockingIOError):  # the pipe is full: it is woken anyway
                    os.write(self._wake_write, b"\0")
            else:
                self._release()

    @property
    def closed(self) -> bool:
        return self._closed

    def _enter(self) -> bool:
        with self._lock:
            if self._closed:
                return False
            self._busy = True
            return True

    def _leave(self) -> None:
        with self._lock:
            self._busy = False
            if self._closed:
                self._release()

    def _release(self) -> None:
        if not self._released:
            self._released = True
            for fd in (self._fd, self._wake_read, self._wake_write):
                os.close(fd)

    # -- arming
    def arm(self) -> bool:
        """Watch every directory under the paths (a path missing or unreadable is left out).
        False: closed meanwhile. Raises OSError when the per-user watch limit is reached."""
        if not self._enter():
            return False
        try:
            for root in self.roots:
                if self._closed:
                    return False
                if os.path.isdir(root):
                    if self._add(root, _GIVEN_DIRECTORY):
                        self._walk(root, None)
                else:  # a given file is watched itself
                    self._add(root, _GIVEN_FILE)
            return not self._closed
        finally:
            self._leave()

    def _walk(self, top: str, found: set[str] | None) -> None:
        """Watch ``top``'s subdirectories (``top`` watched already); ``found``: every path
        seen inside is added (a directory that arrived: what was made before its watch)."""
        stack = [top]
        while stack and not self._closed:
            directory = stack.pop()
            try:
                with os.scandir(directory) as entries:
                    for entry in entries:
                        if found is not None:
                            found.add(entry.path)
                        try:
                            is_directory = entry.is_dir(follow_symlinks=False)
                        except OSError:
                            continue
                        # The watch first, then the listing: what is made in between is an event.
                        if is_directory and self._add(entry.path, _DIRECTORY):
                            stack.append(entry.path)
            except OSError as error:
                if error.errno not in _LEFT_OUT:
                    raise

    def _add(self, path: str, mask: int) -> bool:
        """Whether ``path`` is watched now (False: left out)."""
        wd = _libc().inotify_add_watch(self._fd, os.fsencode(path), mask)
        if wd < 0:
            number = ctypes.get_errno()
            if number == errno.ENOSPC:
                raise OSError(
                    number,
                    "inotify watch limit reached (fs.inotify.max_user_watches): "
                    f"{len(self._path_of)} watches here, cannot watch {path!r}",
                )
            if number in _LEFT_OUT:
                return False
            raise OSError(number, f"inotify_add_watch: {os.strerror(number)}", path)
        old = self._path_of.get(wd)
        if old is not None and self._wd_of.get(old) == wd:
            del self._wd_of[old]
        self._path_of[wd] = path
        self._wd_of[path] = wd
        return True

    # -- waiting
    def wait(self, debounce_ms: int, step_ms: int) -> set[str] | None:
        """The paths changed: blocks without a timeout until a first event, then reads on
        until a step passes without one or ``debounce_ms`` has passed. None: closed."""
        if not self._enter():
            return None
        try:
            poller = select.poll()
            poller.register(self._fd, select.POLLIN)
            poller.register(self._wake_read, select.POLLIN)
            changed: set[str] = set()
            first: float | None = None
            while True:
                ready = poller.poll(None if first is None else step_ms)
                if self._closed:
                    return None
                if not ready:  # a quiet step after the burst
                    return changed
                changed |= self.paths_of(self._read())
                if changed and first is None:
                    first = time.monotonic()
                if first is not None and (time.monotonic() - first) * 1000 >= debounce_ms:
                    return changed
        finally:
            self._leave()

    def _read(self) -> list[tuple[int, int, bytes]]:
        events: list[tuple[int, int, bytes]] = []
        while True:
            try:
                buffer = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                return events
            events.extend(parse_events(buffer))

    def paths_of(self, events: list[tuple[int, int, bytes]]) -> set[str]:
        """The changed paths the events tell, following the tree: a directory that arrives is
        watched (and everything in it reported), one that leaves is forgotten."""
        changed: set[str] = set()
        for wd, mask, name in events:
            if mask & IN_Q_OVERFLOW:  # events were lost: every given path may have changed
                changed.update(self.roots)
                continue
            base = self._path_of.get(wd)
            if base is None:  # a watch forgotten already (its directory moved away)
                continue
            if mask & IN_IGNORED:
                self._forget(wd)
                continue
            path = os.path.join(base, os.fsdecode(name)) if name else base
            changed.add(path)
            if not mask & IN_ISDIR:
                continue
            if mask & (IN_CREATE | IN_MOVED_TO) and self._add(path, _DIRECTORY):
                self._walk(path, changed)
            elif mask & IN_MOVED_FROM:
                # Its watches would go on reporting under the old path: dropped (a directory
                # moved within the tree is watched again by its IN_MOVED_TO, just after).
                self._drop_tree(path)
        return changed

    def _forget(self, wd: int) -> None:
        path = self._path_of.pop(wd)
        if self._wd_of.get(path) == wd:
            del self._wd_of[path]

    def _drop_tree(self, top: str) -> None:
        inside = top + "/"
        for path in [p for p in self._wd_of if p == top or p.startswith(inside)]:
            wd = self._wd_of.pop(path)
            del self._path_of[wd]
            _libc().inotify_rm_watch(self._fd, wd)

    @property
    def watches(self) -> int:
        return len(self._path_of)
