"""Where the projects are: the walk that finds every nexus project under a root.

``nexus attention --discover ROOT`` and ``nexus-tui --discover ROOT`` both use it: a project is a
directory holding ``.bmad-plus/nexus`` (each part a real directory, not a symlink).
"""

from __future__ import annotations

import os
import stat

from .state.store import BASE

DEFAULT_DEPTH = 4
# Never entered: version control, dependency trees, caches. Virtual environments are also
# recognised by their pyvenv.cfg, whatever their name.
SKIPPED_NAMES = frozenset(
    {".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".nox", ".mypy_cache"}
)
_BASE_PARTS = BASE.split("/")


def _is_real_dir(path: str) -> bool:
    """A directory itself, not a symlink to one (a symlink could lead out of ROOT)."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def is_project(directory: str) -> bool:
    """Whether ``directory`` holds ``.bmad-plus/nexus`` (each part a real directory)."""
    path = directory
    for part in _BASE_PARTS:
        path = os.path.join(path, part)
        if not _is_real_dir(path):
            return False
    return True


def discover_projects(root: str, max_depth: int = DEFAULT_DEPTH) -> list[str]:
    """Every project directory under ``root`` (``root`` itself at depth 0), sorted.

    Follows no symlink, enters no skipped or unreadable directory (without failing), and no
    deeper than ``max_depth`` levels below ``root``."""
    top = os.path.realpath(root)
    found: list[str] = []
    pending = [(top, 0)]
    while pending:
        directory, depth = pending.pop()
        if is_project(directory):
            found.append(directory)
        if depth >= max_depth:
            continue
        try:
            with os.scandir(directory) as entries:
                children = [
                    entry.path
                    for entry in entries
                    if entry.name not in SKIPPED_NAMES
                    and entry.name != _BASE_PARTS[0]
                    and entry.is_dir(follow_symlinks=False)
                ]
        except OSError:
            continue  # unreadable, or gone since it was listed
        for child in children:
            if not os.path.exists(os.path.join(child, "pyvenv.cfg")):
                pending.append((child, depth + 1))
    return sorted(found)
