"""One open project: the one object that owns its scanner, its scope index and watched paths,
the snapshot on screen (and one held back while paused), the selection, the filter and the
sort. The app holds a list of them; the project's widgets render from it. No widgets here."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from nexus_core.state.store import BASE

from .model import ProjectScanner, ProjectSnapshot, RunView, ScopeIndex

if TYPE_CHECKING:
    from .remote import RemoteLink

Sort = tuple[str | None, bool]  # (column key or None, descending)


@dataclass(eq=False)
class ProjectSession:
    index: int
    directory: str
    label: str
    scanner: ProjectScanner
    scope_index: ScopeIndex = field(default_factory=ScopeIndex)
    scope_paths: tuple[str, ...] = ()  # the scopes the watcher watches
    has_base: bool = False  # .bmad-plus/nexus existed at the last scan
    snapshot: ProjectSnapshot | None = None  # what is on screen
    pending: ProjectSnapshot | None = None  # the latest scan, held back while paused
    loaded: bool = False
    run_id: str | None = None
    task_id: str | None = None
    filter_text: str = ""
    run_sort: Sort = (None, False)
    task_sort: Sort = (None, False)
    shown_label: str = ""  # the tab's label as last shown (the label and its count of needs)
    # A project on another host (--ssh): its snapshots come from the host's observer, never
    # from ``scanner``, and its actions run there (logic/remote.py).
    remote: RemoteLink | None = None
    # watched_paths' last answer and what it depended on (the watcher asks every project's
    # paths each time one project's change: a status per project each time, with a thousand).
    _watched: tuple[tuple[object, ...], tuple[str, ...]] | None = field(default=None, repr=False)

    def __repr__(self) -> str:  # short: worker descriptions name the session they watch
        return f"ProjectSession({self.index}, {self.directory!r})"

    @classmethod
    def open(cls, index: int, directory: str, label: str) -> ProjectSession:
        return cls(index, directory, label, ProjectScanner(directory))

    @classmethod
    def open_remote(cls, index: int, link: RemoteLink) -> ProjectSession:
        return cls(index, link.project.remote_path, link.label, ProjectScanner(link.project.remote_path), remote=link)

    def current_view(self) -> RunView | None:
        return self.snapshot.run(self.run_id) if self.snapshot else None

    def base_appeared(self, root: str | None) -> bool:
        """Whether the state directory appeared since the last scan (the watcher must add it)."""
        exists = bool(root) and os.path.isdir(os.path.join(root or "", BASE))
        appeared = exists and not self.has_base
        self.has_base = exists
        return appeared

    def watched_paths(self, max_scopes: int) -> list[str]:
        """The state directory and, within the inotify budget, the scopes of the runs shown (the
        same answer while the root and the scopes stay and the state directory was there at the
        last scan; without one, its appearing is looked for each time)."""
        root = self.snapshot.root if self.snapshot else None
        key = (root, self.has_base, self.scope_paths, max_scopes)
        if self.has_base and self._watched is not None and self._watched[0] == key:
            return list(self._watched[1])
        paths = []
        if root and os.path.isdir(os.path.join(root, BASE)):
            paths.append(os.path.join(root, BASE))
        # Each watched directory costs inotify watches; past a limit the periodic rescan (which
        # re-inspects every run in turn) is what notices edits inside scopes.
        if len(self.scope_paths) <= max_scopes:
            paths.extend(self.scope_paths)
        self._watched = (key, tuple(paths))
        return paths

    def runs_touched(self, root: str, changed: set[str]) -> set[str]:
        """The runs whose scopes cover one of the changed absolute paths (a prefix index kept in
        step with the runs, not a scan over every scope)."""
        if self.snapshot is None or not root:
            return set()
        self.scope_index.update(self.snapshot.runs)
        touched: set[str] = set()
        for path in changed:
            touched |= self.scope_index.runs_covering(os.path.relpath(path, root))
        return touched
