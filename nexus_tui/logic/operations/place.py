"""Where a project's state lives, for an action: read it (the root, a lock, a run) and call the
core there. :class:`LocalPlace` reads the files and calls ``nexus_core.actions``; a remote
project's place (``logic/remote.py``) reads the snapshot its host's observer sent and runs the
remote ``nexus``. Operations read and call only through a place, so a dialog, its re-check and
its call are the same code for both."""

from __future__ import annotations

from typing import Any, Protocol

from nexus_core import actions as mutations
from nexus_core.actions import Progress, Result, StopAsked
from nexus_core.paths import root_of
from nexus_core.shapes import LockSnapshot, Run
from nexus_core.state.locks import lock_snapshot
from nexus_core.state.store import load_run


class Place(Protocol):
    def root(self) -> str:
        """The project's root (on its host)."""
        ...

    def lock(self, name: str) -> LockSnapshot | None:
        """writer.lock or recovery.lock as the core's ``lock_snapshot`` gives it, or None."""
        ...

    def run(self, run_id: str) -> Run:
        """The run as stored (a remote place: its inspection, a superset of the run's keys)."""
        ...

    def refresh(self, run_id: str | None) -> None:
        """Read again before a re-check (a remote place asks its host for a fresh read)."""
        ...

    def call(
        self,
        action: str,
        run_id: str | None,
        task_id: str | None,
        options: Any,
        progress: Progress | None = None,
        should_stop: StopAsked | None = None,
    ) -> Result:
        """Run mutation ``action`` there: the core's result, or its refusal raised."""
        ...


class LocalPlace:
    """A project on this machine: every read is a fresh read of its files."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._root: str | None = None

    def root(self) -> str:
        if self._root is None:
            self._root = root_of(self.directory)
        return self._root

    def lock(self, name: str) -> LockSnapshot | None:
        return lock_snapshot(self.root(), name)

    def run(self, run_id: str) -> Run:
        return load_run(self.root(), run_id)

    def refresh(self, run_id: str | None) -> None:
        """Nothing to do: each read reads the files."""

    def call(
        self,
        action: str,
        run_id: str | None,
        task_id: str | None,
        options: Any,
        progress: Progress | None = None,
        should_stop: StopAsked | None = None,
    ) -> Result:
        return mutations.call(action, self.root(), run_id, task_id, options, progress=progress, should_stop=should_stop)


def place_of(where: str | Place) -> Place:
    """``where`` as a place: a directory is a local project."""
    return LocalPlace(where) if isinstance(where, str) else where
