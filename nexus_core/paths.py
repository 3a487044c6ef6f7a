"""Path rules (SPEC 1.4-1.7): project-relative path validation and the symlink-free walk."""

from __future__ import annotations

import contextlib
import contextvars
import errno
import os
import re
import stat
from collections.abc import Iterator

from .errors import NexusError, fail
from .state.canonical import compact, has_lone_surrogate, js_trim, utf16_len

_UNSAFE_CHAR = re.compile(r'[\\:<>"|?*\x00-\x1f]')
_RESERVED = re.compile(r"(?:con|prn|aux|nul|com[1-9]|lpt[1-9])(?:\.|\Z)", re.IGNORECASE | re.ASCII)
_STATE_DIRS = (".bmad-plus/nexus", ".git")


def _validate_relative_file(file: str) -> None:
    if (
        not isinstance(file, str)
        or not file
        or "\\" in file
        or ":" in file
        or "\x00" in file
        or file.startswith("/")
        or any(seg in ("", ".", "..") for seg in file.split("/"))
    ):
        raise NexusError(f"Adapter file must be a relative project path: {file}")


class _LookPaths:
    """What one look of a display-only reader keeps of the paths it walked (see ``one_look``)."""

    __slots__ = ("held", "memo", "real")

    def __init__(self) -> None:
        self.held: dict[str, int] = {}  # absolute directory -> a descriptor opened safely
        self.real: set[str] = set()  # directories lstat found real (no symlink) in this look
        self.memo: dict[object, object] = {}  # see look_memo


_look_paths: contextvars.ContextVar[_LookPaths | None] = contextvars.ContextVar("nexus_look_paths", default=None)
# Descriptors one look keeps open at most (the ancestors shared by every task come first).
LOOK_HELD_DIRECTORIES = 256


@contextlib.contextmanager
def one_look() -> Iterator[None]:
    """Within: one look of a display-only reader (``snapshots.observational_hashes``). The
    directories ``open_directory`` opens stay open for the look and later opens start from the
    nearest one held, and ``safe_target`` checks each ancestor directory once: a task's scope
    was opened from ``/`` one component at a time, some ten opens each, for every task of every
    run. What the look read stays what it read (a directory replaced during the look is seen
    by the next look, as if the look had been a moment earlier); never a symlink followed.
    Mutations never run inside a look: their checks stay whole."""
    look = _LookPaths()
    token = _look_paths.set(look)
    try:
        yield
    finally:
        _look_paths.reset(token)
        for fd in look.held.values():
            os.close(fd)


def look_memo() -> dict[object, object] | None:
    """The current look's own memo (None outside a look): what a look derives from the run it
    reads, which nothing changes during the look (``preconditions.by_id``)."""
    look = _look_paths.get()
    return None if look is None else look.memo


def safe_target(root: str, file: str) -> str:
    """Absolute path of ``file`` under ``root``; every existing component must be real."""
    _validate_relative_file(file)
    target = os.path.join(root, file)
    parts = target.split("/")
    current = ""
    last = len(parts) - 1
    look = _look_paths.get()
    for index in range(1, len(parts)):
        current = current + "/" + parts[index]
        if look is not None and index < last and current in look.real:
            continue
        try:
            info = os.lstat(current)
        except FileNotFoundError:
            break
        except NotADirectoryError:
            break
        if stat.S_ISLNK(info.st_mode):
            raise NexusError(f"Adapter path contains a symlink or junction: {current}")
        if index == last:
            if not stat.S_ISREG(info.st_mode):
                raise NexusError(f"Adapter target is not a regular file: {current}")
        elif not stat.S_ISDIR(info.st_mode):
            raise NexusError(f"Adapter parent is not a directory: {current}")
        elif look is not None:
            look.real.add(current)
    return target


def _kind(path: str) -> str:
    try:
        mode = os.lstat(path).st_mode
    except OSError:
        return "unreadable"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "a file" if stat.S_ISREG(mode) else "not a directory"


def project_problem(root: str, error: NexusError) -> NexusError:
    """A path-safety refusal of the project's state directory: the SPEC's message, and as its
    hint, in plain words, what is wrong and with which path."""
    culprit = error.message.partition(": ")[2]
    if not culprit.startswith("/"):
        return error
    kind = _kind(culprit)
    if culprit != root and not root.startswith(culprit + "/"):
        words = (
            f"nexus keeps its state in the directory {root}/.bmad-plus/nexus, but {culprit} is {kind}; "
            "move it out of the way or use another project directory. Nothing was changed."
        )
    elif kind == "a symbolic link":
        words = (
            f"{culprit} is a symbolic link, and nexus never follows one in a project path; "
            f"give the real path instead: {os.path.realpath(root)}"
        )
    elif culprit == root:
        words = f"The project directory {root} is {kind}, not a directory."
    else:
        words = f"The project directory {root} cannot exist: {culprit} is {kind}, not a directory."
    return NexusError(error.message, words)


def probe_state_dir(root: str, probe: str) -> None:
    """safe_target for a probe under the project's state directory, explained on refusal."""
    try:
        safe_target(root, probe)
    except NexusError as error:
        raise project_problem(root, error) from None


# Descriptor-relative opens: each component is opened relative to its parent's descriptor and
# never through a symlink, so a symlink swapped in at any depth after a check is never followed.
# O_PATH (where there is one) needs no read permission, like the lstat walk above.
_PASSING = getattr(os, "O_PATH", os.O_RDONLY) | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
_LISTING = os.O_RDONLY | os.O_NOFOLLOW | os.O_DIRECTORY | os.O_CLOEXEC
# O_NONBLOCK: a file swapped for a FIFO never blocks the open; fstat then refuses it.
# O_NOCTTY: a terminal device planted under a checked name never becomes ours.
_READING = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY


class RefusedFile(OSError):
    """A file opened by name that must not be read: not a regular file, no longer the file an
    earlier lstat checked, or over its size cap. An OSError, so a reader's handling of a
    failed open covers it; ``message_of`` gives "<reason>: <path>"."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(None, reason, path)
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.reason}: {self.filename}"


class FileTooLarge(RefusedFile):
    """``RefusedFile`` for a regular file over the reader's size cap."""


def open_regular(
    path: str, *, dir_fd: int | None = None, checked: os.stat_result | None = None, limit: int | None = None
) -> tuple[int, os.stat_result]:
    """The one way to open a file by name under ``.bmad-plus`` or a scope for reading.

    ``O_NOFOLLOW|O_NONBLOCK`` (a symlink fails with ELOOP, a FIFO never blocks the open), then
    ``fstat`` on the descriptor: only a regular file passes, the same inode as ``checked`` (an
    lstat taken before, so a file swapped between that check and this open is refused), no
    larger than ``limit`` bytes. O_NONBLOCK stays set: it has no effect on a regular file.
    Returns the descriptor (the caller closes it) and its fstat. Raises ``RefusedFile`` (or the
    open's OSError: ENOENT, ELOOP, ENXIO for a socket...)."""
    if checked is not None and not stat.S_ISREG(checked.st_mode):
        raise RefusedFile(path, "not a regular file")  # known already: never opened (a device may act on open)
    fd = os.open(path, _READING, dir_fd=dir_fd)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise RefusedFile(path, "not a regular file")
        if checked is not None and (info.st_dev, info.st_ino) != (checked.st_dev, checked.st_ino):
            raise RefusedFile(path, "replaced since it was checked")
        if limit is not None and info.st_size > limit:
            raise FileTooLarge(path, f"larger than {limit} bytes")
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def read_regular(path: str, limit: int, *, dir_fd: int | None = None, checked: os.stat_result | None = None) -> bytes:
    """The bytes of ``open_regular(path, ...)``: at most ``limit``, else ``FileTooLarge`` (the
    file may grow after the fstat: what is read is capped too)."""
    fd, _info = open_regular(path, dir_fd=dir_fd, checked=checked, limit=limit)
    try:
        chunks: list[bytes] = []
        wanted = limit + 1
        while wanted > 0:
            chunk = os.read(fd, wanted)
            if not chunk:
                break
            chunks.append(chunk)
            wanted -= len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit:
        raise FileTooLarge(path, f"larger than {limit} bytes")
    return data


def _kind_at(dir_fd: int, name: str) -> int | None:
    """The lstat mode of ``name`` in ``dir_fd``, None when it is gone."""
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
    except FileNotFoundError:
        return None


def open_directory_at(dir_fd: int, name: str, absolute: str, *, listing: bool = False) -> int | None:
    """Directory ``name`` of ``dir_fd`` opened without following a symlink (``listing``: readable
    for ``os.scandir``); None when it is missing. A symlink or a non-directory raises SPEC 1.4's
    messages for ``absolute``."""
    try:
        return os.open(name, _LISTING if listing else _PASSING, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as error:
        if error.errno not in (errno.ENOTDIR, errno.ELOOP):
            raise
    mode = _kind_at(dir_fd, name)
    if mode is None:
        return None
    if stat.S_ISLNK(mode):
        raise NexusError(f"Adapter path contains a symlink or junction: {absolute}")
    raise NexusError(f"Adapter parent is not a directory: {absolute}")


def open_directory(path: str) -> int | None:
    """Absolute ``path`` opened one component at a time from ``/`` (never through a symlink);
    None when a component is missing. Within ``one_look``, from the nearest directory the look
    holds, and the directories opened are held. The caller closes what it gets."""
    names = [name for name in path.split("/") if name]
    look = _look_paths.get()
    start, fd, held = 0, -1, False
    if look is not None:
        for index in range(len(names), -1, -1):
            kept = look.held.get("/" + "/".join(names[:index]))
            if kept is not None:
                start, fd, held = index, kept, True
                break
    if fd < 0:
        fd = os.open("/", _PASSING)
        held = _hold(look, "/", fd)
    current = "/" + "/".join(names[:start]) if start else ""
    for name in names[start:]:
        current += "/" + name
        try:
            child = open_directory_at(fd, name, current)
        finally:
            if not held:
                os.close(fd)
        if child is None:
            return None
        fd = child
        held = _hold(look, current, fd)
    return os.open(".", _PASSING, dir_fd=fd) if held else fd


def _hold(look: _LookPaths | None, path: str, fd: int) -> bool:
    """Keep ``fd`` (directory ``path``) for the rest of the look, room permitting."""
    if look is None or len(look.held) >= LOOK_HELD_DIRECTORIES:
        return False
    look.held[path] = fd
    return True


def open_file_at(dir_fd: int, name: str, absolute: str) -> tuple[int, os.stat_result] | None:
    """File ``name`` of ``dir_fd`` opened for reading (``open_regular``: the descriptor and its
    fstat); None when it is missing. A symlink or anything but a regular file raises SPEC 1.4's
    messages."""
    try:
        return open_regular(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except RefusedFile:
        raise NexusError(f"Adapter target is not a regular file: {absolute}") from None
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise NexusError(f"Adapter path contains a symlink or junction: {absolute}") from None
        if error.errno == errno.ENXIO:  # a socket
            raise NexusError(f"Adapter target is not a regular file: {absolute}") from None
        raise


def open_project_file(root: str, file: str) -> tuple[int, os.stat_result] | None:
    """Project file ``file`` opened with every component checked on its descriptor (SPEC 1.4's
    rules and messages, without the race between check and open); None when it is missing."""
    _validate_relative_file(file)
    target = os.path.join(root, file)
    parent, name = target.rsplit("/", 1)
    dir_fd = open_directory(parent)
    if dir_fd is None:
        return None
    try:
        return open_file_at(dir_fd, name, target)
    finally:
        os.close(dir_fd)


def root_of(directory: str) -> str:
    root = os.path.abspath(directory)
    probe_state_dir(root, ".bmad-plus/nexus/.probe")
    try:
        info = os.stat(root)
    except FileNotFoundError:
        raise fail(f"Project directory does not exist: {root}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise fail("Project directory is not a directory.")
    return os.path.realpath(root)


def text_ok(value: object, limit: int) -> bool:
    return isinstance(value, str) and js_trim(value) != "" and utf16_len(value) <= limit and "\x00" not in value


def _is_unsafe(value: str) -> bool:
    if _UNSAFE_CHAR.search(value):
        return True
    if value.startswith("/"):
        return True
    if value == ".." or value.startswith("../"):
        return True
    # Equivalent of path.posix.normalize(value) !== value.
    if "//" in value:
        return True
    segments = value.split("/")
    if ".." in segments:
        return True
    return "." in segments and value not in (".", "./")


def relative(value: object, allow_dot: bool = False) -> str:
    if allow_dot and value == ".":
        return "."
    if not text_ok(value, 500):
        raise fail("Relative path must be a nonempty bounded string.")
    assert isinstance(value, str)
    if has_lone_surrogate(value):
        # No file can have this name on a UTF-8 filesystem (the reference would look up a
        # replacement character instead); refuse it, naming it the way JSON escapes it.
        raise fail(f"Nonportable path: {compact(value)[1:-1]}")
    if _is_unsafe(value):
        raise fail(f"Unsafe relative path: {value}")
    for segment in value.split("/"):
        if segment in ("", ".") or segment.endswith(".") or segment.endswith(" ") or _RESERVED.match(segment):
            raise fail(f"Nonportable path: {value}")
    return value


# A segment with none of relative()'s unsafe characters (SPEC 1.6), and not "." or "..".
_PLAIN_SEGMENT = re.compile(r'(?!\.\.?\Z)[^\\:<>"|?*/\x00-\x1f]+')


def portable_child(name: str, child: str) -> bool:
    """True when ``relative(child)`` accepts ``child``, a directory entry ``name`` appended to a
    path it already accepted: only the new segment and the length can then fail. False sends
    the child to ``relative`` itself, which decides (with its exact message)."""
    return (
        name.isascii()
        and utf16_len(child) <= 500
        and _PLAIN_SEGMENT.fullmatch(name) is not None
        and not name.endswith((".", " "))
        and _RESERVED.match(name) is None
    )


def directory_at(root: str, rel: object) -> str:
    rel = relative(rel, allow_dot=True)
    if rel == ".":
        safe_target(root, ".nexus-directory-probe")
        path = root
    else:
        safe_target(root, rel + "/.nexus-directory-probe")
        path = os.path.join(root, rel)
    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise fail(f"Directory is missing: {rel}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise fail(f"Check cwd is not a directory: {rel}")
    return path


def in_scope(file: str, scope: str) -> bool:
    f, s = file.lower(), scope.lower()
    return f == s or f.startswith(s + "/")


def overlap(a: str, b: str) -> bool:
    return in_scope(a, b) or in_scope(b, a)


def touches_state(scope: str) -> bool:
    return any(overlap(scope, protected) for protected in _STATE_DIRS)


def project_relative(root: str, absolute: str) -> str:
    return os.path.relpath(absolute, root).replace(os.sep, "/")
