"""Scan requests and their results: what the file watcher and the tick ask for (merged until
the scanner thread takes them), and the message a scan posts back to the UI thread."""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import NamedTuple

from textual.message import Message

from .logic.model import ProjectSnapshot


class ProjectScanned(Message):
    """A scanner thread finished a pass over project ``index``."""

    def __init__(
        self,
        index: int,
        snapshot: ProjectSnapshot,
        scope_paths: tuple[str, ...],
        partial: bool = False,
        answers: int | None = None,
    ) -> None:
        super().__init__()
        self.index = index
        self.snapshot = snapshot
        self.scope_paths = scope_paths
        # A first load still going on: show what is there, keep the watcher as it is.
        self.partial = partial
        # The requests this scan covers (ScanRequests.take's count), once it is applied.
        self.answers = answers


class Taken(NamedTuple):
    """One project's merged requests, as the scanner thread takes them."""

    project: int  # its index
    everything: bool
    runs: set[str]
    retime: bool
    catch_up: bool
    answers: int  # the requests it answers (see ScanRequests.applied)


class ScanRequests:
    """Scan requests per project, merged until the scanner thread takes them (thread-safe).

    Requests are counted per project: a scan taken covers every request asked before it, and
    once its result is applied (``applied``) the project has caught up to that count. Caught up
    everywhere means no scan is asked, running or waiting to be applied (tests wait for that)."""

    def __init__(self, projects: int) -> None:
        self._condition = threading.Condition()
        self._everything = [False] * projects
        self._retime = [False] * projects
        self._catch_up = [False] * projects
        self._runs: list[set[str] | None] = [None] * projects  # None: nothing asked
        self._asked = [0] * projects
        self._applied = [0] * projects
        self._closed = False

    def ask(
        self,
        index: int,
        everything: bool = False,
        runs: Iterable[str] = (),
        retime: bool = False,
        catch_up: bool = False,
    ) -> None:
        with self._condition:
            self._everything[index] |= everything
            self._retime[index] |= retime or everything
            self._catch_up[index] |= catch_up
            self._runs[index] = (self._runs[index] or set()) | set(runs)
            self._asked[index] += 1
            self._condition.notify()

    def add(self) -> int:
        """Room for one more project (``--discover`` finds projects while it runs); its index."""
        with self._condition:
            self._everything.append(False)
            self._retime.append(False)
            self._catch_up.append(False)
            self._runs.append(None)
            self._asked.append(0)
            self._applied.append(0)
            return len(self._runs) - 1

    def take(self, timeout: float) -> list[Taken]:
        """The projects to scan, each with its requests merged."""
        with self._condition:
            if not self._closed and all(runs is None for runs in self._runs):
                self._condition.wait(timeout)
            if self._closed:
                return []
            taken = [
                Taken(i, self._everything[i], runs, self._retime[i], self._catch_up[i], self._asked[i])
                for i, runs in enumerate(self._runs)
                if runs is not None
            ]
            for i, *_ in taken:
                self._everything[i], self._runs[i], self._retime[i], self._catch_up[i] = False, None, False, False
            return taken

    def applied(self, index: int, answers: int) -> None:
        """The scan answering the first ``answers`` requests of project ``index`` was applied."""
        with self._condition:
            self._applied[index] = max(self._applied[index], answers)

    @property
    def caught_up(self) -> bool:
        """No scan asked, running or waiting to be applied, in any project."""
        with self._condition:
            return self._applied == self._asked

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


def undecodable_path_changed(error: BaseException) -> bool:
    """Whether the file watcher stopped because a changed path is not valid UTF-8.

    watchfiles (1.x, the watcher where inotify cannot be had) cannot give such a path as ``str``
    (the inotify watcher escapes it as ``os.fsdecode`` does): its watcher raises and is spent. It is
    a change in the watched paths all the same (the scan reads those names as any other), so
    the caller rescans and starts watching again at once, without the back-off of a failure."""
    from watchfiles._rust_notify import WatchfilesRustInternalError

    if isinstance(error, BaseExceptionGroup):  # as watchfiles' awatch raises it, in an anyio task group
        return bool(error.exceptions) and all(undecodable_path_changed(inner) for inner in error.exceptions)
    return isinstance(error, WatchfilesRustInternalError) and str(error).startswith("Unable to decode path")
