"""State directories only their user can write: the one rule, and its words.

Everything nexus writes lives under ``.bmad-plus/nexus`` (run state, locks, receipts, the
schedules database). A directory there that another user owns, or that group or others can
write, lets that user delete or replace state, plant a lock or a FIFO, or swap a file between
two steps of a mutation. Mutations refuse such a directory (``check``), naming it and the
command that fixes it, and change nothing; reads (inspect, wait, the dashboard) show the same
words as a warning (``problems``). Not in the reference, whose mutations write there silently.
"""

from __future__ import annotations

import os
import stat
from typing import NamedTuple

from ..errors import NexusError

BMAD = ".bmad-plus"
NEXUS = ".bmad-plus/nexus"
RECEIPTS = "receipts"  # its subdirectories (one per run) are checked too


def directory_problem(info: os.stat_result) -> str | None:
    """Why a directory must not hold state or a file nexus writes, or None: the rule the
    dashboard's fresh-plan save applies too."""
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not by you (uid {os.geteuid()})"
    if info.st_mode & 0o022:
        return f"writable by group or others (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


class UnsafeDirectory(NamedTuple):
    """One state directory that fails ``directory_problem``, with the way out."""

    path: str
    problem: str

    @property
    def message(self) -> str:
        return (
            f"The state directory {self.path} is {self.problem}: another user could delete, replace or plant "
            "state there."
        )

    @property
    def hint(self) -> str:
        import shlex  # only on a refusal or a warning (start-up time of every mutation)

        quoted = shlex.quote(self.path)
        if self.problem.startswith("owned by"):
            return (
                f"Check its contents, then have it given to you (as root: chown {os.geteuid()} {quoted}) "
                f"and run chmod go-w {quoted}."
            )
        return f"Check its contents, then remove that write access: chmod go-w {quoted}"

    def refusal(self) -> NexusError:
        """Our own refusal (not the reference's): the problem, what did not happen, the fix."""
        return NexusError(f"{self.message} Nothing was changed.", self.hint)

    def warning(self) -> str:
        return f"{self.message} Mutations are refused until it is fixed. {self.hint}"


def as_json(found: list[UnsafeDirectory]) -> list[dict[str, str]]:
    """Our additive ``unsafeStateDirectories`` (inspect --json, wait's watch-started)."""
    return [{"directory": d.path, "problem": d.problem, "hint": d.hint} for d in found]


def problems(root: str) -> list[UnsafeDirectory]:
    """Every unsafe state directory of the project: ``.bmad-plus``, ``.bmad-plus/nexus``, each
    directory in it, and each run's directory under ``receipts``. Symlinks are left to the
    path checks (they refuse them with the reference's messages); missing ones are fine."""
    found: list[UnsafeDirectory] = []
    if not _check_one(os.path.join(root, BMAD), found):
        return found
    nexus = os.path.join(root, NEXUS)
    if not _check_one(nexus, found):
        return found
    for name in _subdirectories(nexus):
        path = os.path.join(nexus, name)
        if _check_one(path, found) and name == RECEIPTS:
            for run in _subdirectories(path):
                _check_one(os.path.join(path, run), found)
    return found


def check(root: str) -> None:
    """Refuse a mutation while a state directory is unsafe (the first one found)."""
    found = problems(root)
    if found:
        raise found[0].refusal()


def _check_one(path: str, found: list[UnsafeDirectory]) -> bool:
    """Adds ``path`` to ``found`` when it is unsafe; True when it is a real directory (never a
    symlink) whose entries may be looked at."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(info.st_mode):
        return False
    problem = directory_problem(info)
    if problem is not None:
        found.append(UnsafeDirectory(path, problem))
    return True


def _subdirectories(path: str) -> list[str]:
    try:
        with os.scandir(path) as listing:
            return sorted(e.name for e in listing if e.is_dir(follow_symlinks=False))
    except OSError:
        return []
