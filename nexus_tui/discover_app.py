"""``nexus-tui --discover ROOT``: the dashboard over every project under ROOT.

An "All projects" tab first (:class:`~nexus_tui.widgets.overview.OverviewPane`), then one tab per
project, each exactly as in the plain dashboard (same scanner thread, the same one watcher over
every project's paths). A project's pane is composed when its tab is first shown (mounting dozens
of panes up front cost seconds before the first frame, and memory): until then its scans only
feed the overview and its session. A fleet of more than TABS_UP_FRONT projects starts with the
overview's tab alone, and a project gets its tab when it is first opened (a strip of a thousand
tabs was a second of the UI thread's work before the first frame, and more each time labels
changed, for a strip no one scrolls). A discovery thread walks ROOT again every few seconds and
posts the projects it had not seen; they get a row in the overview, and a tab of their own while
the projects are few.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable
from typing import Any

from textual import on
from textual.app import ComposeResult
from textual.message import Message
from textual.theme import Theme
from textual.widgets import TabbedContent, TabPane

from nexus_core.terminal import terminal_safe

from .app import NexusApp
from .logic.discovery import DEFAULT_DEPTH, discover_projects, summarize
from .logic.selection import Selection
from .logic.session import ProjectSession
from .scanning import ProjectScanned, ScanRequests
from .screens.inbox import Entry
from .widgets.footer import FittingFooter
from .widgets.overview import OverviewPane
from .widgets.plain import plain_content
from .widgets.project_pane import ProjectPane

REDISCOVER_SECONDS = 2.0
# The rediscovery walk may take this share of a core: a tree whose walk costs more is walked
# less often than every REDISCOVER_SECONDS (46 projects' trees, 9,400 directories: 23 ms of CPU,
# walked every 2 s, was a third of an idle --discover's CPU). r walks it at once.
REDISCOVER_SHARE_OF_A_CORE = 0.002
OVERVIEW_TAB = "tab-overview"
# A fleet of more projects than this gets a project's tab when the project is first opened;
# fewer get theirs from the start (a wide terminal shows about ten).
TABS_UP_FRONT = 20
# What keys may do while the overview is shown (the rest act on a project's pane).
OVERVIEW_ACTIONS = frozenset(
    {
        "help",
        "quit",
        "change_theme",
        "next_project",
        "previous_project",
        "refresh",
        "toggle_follow",
        "focus_next_pane",
        "inbox",
        "oldest_need",
    }
)

OVERVIEW_REFUSAL = "The overview lists projects: open one (Enter on its row, or ]) to act on it."


class ProjectsFound(Message):
    """The discovery thread found projects it had not reported before."""

    def __init__(self, directories: list[str]) -> None:
        super().__init__()
        self.directories = directories


class DiscoverApp(NexusApp):
    labels_wait_while_loading = True  # dozens of tabs whose counts arrive one project at a time
    tabs_up_front = TABS_UP_FRONT

    def __init__(
        self,
        root: str,
        *,
        depth: int = DEFAULT_DEPTH,
        directories: Iterable[str] = (),
        rediscover_seconds: float = REDISCOVER_SECONDS,
        **options: Any,
    ) -> None:
        self.root = os.path.realpath(root)
        self.depth = depth
        self.rediscover_seconds = rediscover_seconds
        fixed = [os.path.realpath(d) for d in directories]
        initial = list(dict.fromkeys([*fixed, *discover_projects(self.root, depth)]))
        remote = bool(options.get("remote"))
        super().__init__(initial or ([] if remote else [self.root]), **options)
        if not initial and not remote:  # NexusApp falls back to one directory: the overview waits for projects
            self.directories, self.sessions = [], []
            self._requests = ScanRequests(0)
        self._known = set(self.directories)
        self._stop_discovery = threading.Event()
        self._rediscover_now = threading.Event()  # r: walk again without waiting
        self.discovery_passes = 0  # walks done by the discovery thread (tests wait on it)
        self._tabbed: list[int] = []  # the projects with a tab, in the strip's order

    def label_of(self, directory: str) -> str:
        relative = os.path.relpath(directory, self.root)
        return terminal_safe(relative if not relative.startswith("..") else directory, one_line=True)

    def open_session(self, index: int, directory: str) -> ProjectSession:
        session = super().open_session(index, directory)
        # No run of it is inspected for a detail pane until its pane is composed (compose_pane):
        # a thousand projects' focus runs, parsed and kept, were most of a fleet's memory.
        session.scanner.shown = False
        return session

    def _pane_of(self, session: ProjectSession) -> ProjectPane:
        pane = ProjectPane(session, display_path=self.display_path, jobs=self.jobs)
        pane.following, pane.read_only = self.following, self.read_only
        return pane

    # -- layout
    def compose(self) -> ComposeResult:
        self._overview = OverviewPane(self.root)
        self._project_panes = [self._pane_of(session) for session in self.sessions]
        if len(self.sessions) <= self.tabs_up_front:
            self._tabbed = [session.index for session in self.sessions]
        with TabbedContent(id="projects", initial=OVERVIEW_TAB):
            with TabPane("All projects", id=OVERVIEW_TAB):
                yield self._overview
            for index in self._tabbed:
                yield self._tab_of(self.sessions[index])
        yield FittingFooter()

    @staticmethod
    def _tab_of(session: ProjectSession) -> TabPane:
        return TabPane(plain_content(session.shown_label or session.label), id=f"tab-{session.index}")

    async def _add_tab(self, session: ProjectSession) -> None:
        """The project's tab, at the end of the strip."""
        self._tabbed.append(session.index)
        await self.query_one("#projects", TabbedContent).add_pane(self._tab_of(session))

    def has_tab(self, index: int) -> bool:
        return index in self._tabbed

    async def compose_pane(self, index: int) -> ProjectPane:
        """Project ``index``'s pane, composed into its tab if it was not yet (then shown with
        the session's latest snapshot), the tab made first if it has none."""
        if index not in self._tabbed:
            await self._add_tab(self.sessions[index])
        pane = self._project_panes[index]
        if pane.parent is None:
            session = self.sessions[index]
            if session.remote is None and not session.scanner.shown:
                session.scanner.shown = True
                self.request_scan(index)  # its focus run, inspected for the detail
            await self.query_one(f"#tab-{index}", TabPane).mount(pane)
        return pane

    @property
    def overview(self) -> OverviewPane:
        return self._overview

    @property
    def panes(self) -> list[ProjectPane]:
        # Kept, not queried: with dozens of projects a DOM query per scan message costs more
        # than the scan's own update.
        return self._project_panes

    def on_mount(self) -> None:
        self.overview.add_all([(session.index, session.label) for session in self.sessions])
        self.run_worker(self._discover_loop, thread=True, group="discovery", name="discovery", exit_on_error=False)

    def on_unmount(self) -> None:
        self._stop_discovery.set()
        self._rediscover_now.set()

    def _theme_changed(self, theme: Theme) -> None:
        super()._theme_changed(theme)
        self.overview.restyle()

    def focus_start(self) -> None:
        self.overview.table.focus()

    # -- discovery
    def _discover_loop(self) -> None:
        reported = set(self._known)
        interval = self.rediscover_seconds
        while True:
            self._rediscover_now.wait(interval)
            self._rediscover_now.clear()
            if self._stop_discovery.is_set():
                return
            began = time.thread_time()
            found = [d for d in discover_projects(self.root, self.depth) if d not in reported]
            interval = max(self.rediscover_seconds, (time.thread_time() - began) / REDISCOVER_SHARE_OF_A_CORE)
            self.discovery_passes += 1
            if found:
                reported.update(found)
                self.post_message(ProjectsFound(found))

    def action_refresh(self) -> None:
        super().action_refresh()
        self._rediscover_now.set()

    async def on_projects_found(self, message: ProjectsFound) -> None:
        for directory in message.directories:
            if directory not in self._known and self.is_running:
                await self.add_project(directory)

    async def add_project(self, directory: str) -> int:
        """An overview row and a scan for a new project, and its tab while the projects are
        few (the watcher takes its paths once its first scan names them)."""
        self._known.add(directory)
        index = self._requests.add()
        session = self.open_session(index, directory)
        pane = self._pane_of(session)
        if len(self._tabbed) == index and index < self.tabs_up_front:  # every project so far has one
            await self._add_tab(session)
        # Listed once its tab exists (if it gets one), all at once: every list indexed by project
        # then agrees, its overview row included.
        self._project_panes.append(pane)
        self.sessions.append(session)
        self.directories.append(directory)
        self.overview.add(index, session.label)
        self._requests.ask(index, everything=True)
        return index

    # -- the overview follows every project's scans
    def on_project_scanned(self, message: ProjectScanned) -> None:
        if message.partial or not self.following or not self.is_running or message.index >= len(self.sessions):
            return
        if self._overview.is_mounted:
            # While the first load goes on, rows are shown a few at a time (see show).
            self._overview.show(message.index, summarize(message.snapshot), soon=not self.loaded.is_set())

    def first_load_done(self) -> None:
        super().first_load_done()
        if self._overview.is_mounted:
            self._overview.flush()  # the rows still waiting, at once

    @on(OverviewPane.Opened)
    async def _open_project(self, message: OverviewPane.Opened) -> None:
        pane = await self.compose_pane(message.index)
        self.query_one("#projects", TabbedContent).active = f"tab-{message.index}"
        pane.runs.focus()

    @on(TabbedContent.TabActivated)
    async def _overview_activated(self, event: TabbedContent.TabActivated) -> None:
        if event.pane.id == OVERVIEW_TAB:
            self.overview.table.focus()
        elif event.pane.id is not None and not event.pane.query(ProjectPane):
            # First shown (a tab clicked, or ] / [): compose its pane, then focus inside it.
            pane = await self.compose_pane(int(event.pane.id.removeprefix("tab-")))
            if self.query_one("#projects", TabbedContent).active == event.pane.id:
                pane.runs.focus()

    async def go_to_need(self, entry: Entry | None) -> None:  # type: ignore[override]
        if entry is not None:
            await self.compose_pane(entry[0])
        super().go_to_need(entry)

    async def action_oldest_need(self) -> None:  # type: ignore[override]
        entries = self.inbox_entries()
        if not entries:
            self.notify("Nothing needs a person.", timeout=3)
            return
        await self.go_to_need(entries[0])

    # -- the overview is not a project: keys that act on a project's pane are off there
    def _on_overview(self) -> bool:
        return self.query_one("#projects", TabbedContent).active == OVERVIEW_TAB

    @property
    def pane(self) -> ProjectPane:
        if self._on_overview():
            index = self.overview.highlighted()
            return self.panes[index if index is not None else 0]
        return super().pane

    def selection(self) -> Selection:
        if self._on_overview():
            index = self.overview.highlighted()
            return Selection(project=self.sessions[index].directory if index is not None else None)
        return super().selection()

    def allowed_actions(self) -> frozenset[str]:
        return OVERVIEW_ACTIONS if self._on_overview() else super().allowed_actions()

    def refusal_of(self, action_id: str) -> str | None:
        if self._on_overview() and action_id not in OVERVIEW_ACTIONS:
            return OVERVIEW_REFUSAL
        return super().refusal_of(action_id)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        entry = self.registry_entry(action, parameters)
        if entry is not None and entry.id not in OVERVIEW_ACTIONS and self._on_overview():
            return None
        return super().check_action(action, parameters)

    def _switch_project(self, step: int) -> None:
        tabs = self.query_one("#projects", TabbedContent)
        order = [OVERVIEW_TAB, *(f"tab-{index}" for index in self._tabbed)]  # along the strip
        target = order[(order.index(tabs.active or OVERVIEW_TAB) + step) % len(order)]
        tabs.active = target
        if target == OVERVIEW_TAB:
            self.overview.table.focus()
            return
        pane = self.panes[int(target.removeprefix("tab-"))]
        if pane.parent is not None:
            pane.runs.focus()
        else:
            # Its pane is composed on activation (_overview_activated focuses inside it): let no
            # hidden widget keep the focus meanwhile, or the tabs switch back to it.
            self.set_focus(None)
