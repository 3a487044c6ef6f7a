"""``nexus-tui``: the live, read-only dashboard over one or more nexus projects.

Threads: one scanner thread owns every project's :class:`~nexus_tui.logic.model.ProjectScanner`
and posts :class:`ProjectScanned` messages; the file watchers over the projects' paths
(``watching.py``) only ask for scans. Widgets are touched on the UI thread only, when a message arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shlex
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, NamedTuple

from textual import events, on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.drivers.web_driver import WebDriver
from textual.screen import Screen
from textual.theme import Theme
from textual.timer import Timer
from textual.widgets import DataTable, Footer, TabbedContent, TabPane
from textual.worker import get_current_worker

from nexus_core import needs
from nexus_core.errors import explained
from nexus_core.terminal import is_terminal_safe, terminal_safe
from nexus_core.timeutil import now_ms
from nexus_core.view import first_look
from nexus_core.view.model import PUBLISH_EVERY_SECONDS

from . import actions
from .action_flow import ActionFlow
from .job_flow import JobChanged
from .logic.demo import DemoBuild
from .logic.jobs import Jobs
from .logic.model import ProjectSnapshot
from .logic.notify import COALESCE_SECONDS, Notifier
from .logic.operations import OPERATIONS
from .logic.operations.place import Place
from .logic.remote import RemoteLink
from .logic.selection import Selection
from .logic.session import ProjectSession
from .logic.settings import Settings
from .logic.ssh import DEFAULT_REMOTE_NEXUS, RemoteProject
from .remote_tabs import RemoteStatusChanged, RemoteTabs
from .scanning import ProjectScanned, ScanRequests, Taken, undecodable_path_changed
from .screens.help import HelpScreen
from .screens.inbox import Entry, InboxScreen
from .screens.jobs import JobsScreen
from .screens.quit import QuitScreen
from .serve_pages import PAGE_TITLE_META
from .watching import watched_changes
from .widgets.action_log import ActionLogPanel
from .widgets.demo_progress import DemoProgress
from .widgets.footer import FittingFooter
from .widgets.plain import markup_literal, plain_content
from .widgets.project_pane import ProjectPane, RunFocused

TICK_SECONDS = 1.0
SAFETY_RESCAN_SECONDS = 5.0
POLL_RESCAN_SECONDS = 1.0
WATCH_DEBOUNCE_MS = 50
# A burst of events ends after a step without one: 5 ms is the watcher's share of a change's
# latency (10 ms made it 11 ms, 5 ms makes it 6 ms). inotify sleeps until an event whatever the
# step; watchfiles' fallback wakes every step (200 times a second, where inotify is missing).
WATCH_STEP_MS = 5
MAX_WATCHED_SCOPES = 1000
# Path changes of several projects (a --discover start) are taken together: one new watcher.
REWATCH_COALESCE_SECONDS = 0.1
# The watchers of projects whose paths changed are merged into one once the paths have stayed
# the same this long, or at once when this many run (each costs a thread and wake-ups).
MERGE_AFTER_SECONDS = 2.0
MAX_WATCHERS = 8
LOG_PANEL_ID = "action-log"
# A tab label's count changing lays the whole tab strip out again (10 ms with 50 tabs, 120 ms
# with 1,000): label changes are shown at once, then at most this often while they keep coming
# (the overview's rows and the title follow every change at once).
LABELS_AT_MOST_EVERY_SECONDS = 0.5
# Middle-generation collections between two full ones (CPython's default is 10).
FULL_COLLECTION_EVERY = 100


# ----------------------------------------------------------------- the app


class Availability(NamedTuple):
    allowed: frozenset[str]  # registry ids the gate lets through
    refused: dict[str, str]  # the others: id -> why (actions.refusal)


class NexusApp(App[None]):
    TITLE = "nexus"
    CSS_PATH = "nexus.tcss"
    BINDINGS: ClassVar[list[Any]] = actions.bindings()
    labels_wait_while_loading = False  # see _show_labels

    def __init__(
        self,
        directories: list[str],
        *,
        poll: bool = False,
        read_only: bool = False,
        watch: bool | None = None,
        rescan_seconds: float | None = None,
        tick: bool = True,
        display_path: Callable[[str], str] | None = None,
        demo: DemoBuild | None = None,
        remote: Sequence[RemoteProject] = (),
        remote_nexus: str = DEFAULT_REMOTE_NEXUS,
        settings: Settings | None = None,
    ) -> None:
        super().__init__()
        self.settings = settings or Settings()
        self.notifier = Notifier(self.settings)
        self._notify_timer: Any = None
        self.demo = demo  # --demo: built by a worker once the first frame is drawn
        self.demo_error: str | None = None
        self.directories = [os.path.abspath(d) for d in directories] or ([] if remote else [os.getcwd()])
        self.poll = poll
        self.read_only = read_only
        self.use_watcher = (not poll) if watch is None else watch
        if rescan_seconds is None:
            rescan_seconds = POLL_RESCAN_SECONDS if poll else SAFETY_RESCAN_SECONDS
        self.rescan_seconds = rescan_seconds if rescan_seconds > 0 else None
        self.tick = tick
        self.display_path = display_path or (lambda path: path)
        self.following = True
        # One owner per open project; everything per project lives in its session.
        self.sessions = [self.open_session(index, directory) for index, directory in enumerate(self.directories)]
        # --ssh HOST:PATH: the projects on other hosts, after the local ones (remote_tabs.py).
        self.remote_tabs = RemoteTabs(self, remote, len(self.sessions), remote_nexus)
        for session in self.remote_tabs.sessions:
            session.run_sort, session.task_sort = self.settings.run_sort, self.settings.task_sort
        self.sessions += self.remote_tabs.sessions
        self._requests = ScanRequests(len(self.sessions))
        # A first load of at least this many bytes of run files is shared with worker processes.
        self.share_first_look_from_bytes = first_look.SHARE_FROM_BYTES
        self.first_looks_shared = 0  # projects whose first look came from worker processes
        self._local_loaded = 0  # local projects whose first scan was applied
        self._published_at: dict[int, float] = {}  # partial snapshots of a shared first look
        self.first_look_workers_failed = 0  # units the workers could not answer (the scanner did)
        self.scans_applied = 0
        self.ticks = 0  # 1 s ticks run so far (the ages moved; a test waits on it)
        self._rescan_turn = -1  # the project whose runs the next safety rescan re-inspects
        self.watch_backoffs = 0  # the watcher stopped on an error and waited (tests count them)
        self._rewatch = asyncio.Event()  # set: the watched paths changed, or the watcher failed
        self._watch_failed = False
        self._watch_failures = 0  # in a row (the back-off doubles)
        self._watchers: list[asyncio.Event] = []  # the stop events of the live watchers, oldest first
        self._composed_panes: list[ProjectPane] = []  # one per session, in order (compose)
        self._merging: asyncio.Event | None = None  # the watcher over everything not armed yet
        self.loaded = asyncio.Event()
        # Tab labels changed since shown; while loading (labels_wait_while_loading: --discover's
        # many tabs) shown together once the load ends: each label change lays the whole tab
        # strip out again (120 ms with 1,000 tabs, and a label batch every 0.5 s was a quarter
        # of the UI thread's load).
        self._labels_waiting: set[int] = set()
        self._labels_timer: Timer | None = None
        self._labels_shown_at = -LABELS_AT_MOST_EVERY_SECONDS
        self.label_passes = 0  # times waiting tab labels were shown (tests count them)
        self._need_counts: dict[int, int] = {}  # per project, for the title's total
        self._flow: ActionFlow | None = None
        self.jobs = Jobs()  # the verify and launch runs of this session (logic/jobs.py)
        self._availability: tuple[tuple[Any, ...], Availability] | None = None
        self.availability_computations = 0  # (tests count them)

    def label_of(self, directory: str) -> str:
        """A project's tab label (terminal-safe: a directory name is anyone's text)."""
        return terminal_safe(_label(directory), one_line=True)

    def open_session(self, index: int, directory: str) -> ProjectSession:
        """A project's session, with the settings' default sort."""
        session = ProjectSession.open(index, directory, self.label_of(directory))
        session.run_sort, session.task_sort = self.settings.run_sort, self.settings.task_sort
        return session

    @property
    def read_only(self) -> bool:
        return self._read_only

    @read_only.setter
    def read_only(self, value: bool) -> None:
        self._read_only = value
        for pane in self.panes if self.is_running else ():  # composed or not (--discover)
            pane.read_only = value  # goes down to the status bar
            pane.sync_status(now_ms())

    # -- layout
    def compose(self) -> ComposeResult:
        with TabbedContent(id="projects"):
            for session in self.sessions:
                with TabPane(plain_content(session.label), id=f"tab-{session.index}"):
                    pane = ProjectPane(session, display_path=self.display_path, jobs=self.jobs)
                    pane.following, pane.read_only = self.following, self.read_only
                    self._composed_panes.append(pane)
                    yield pane
        yield FittingFooter()

    def on_load(self) -> None:
        # The first scans start before the tabs are composed: composing, mounting and drawing
        # the first frame keep the UI thread busy while the first load's workers can use the
        # other cores (with 1,000 tabs the looks began 1.4 s late). What the scans post waits
        # in the app's queue until the app is mounted.
        self._rare_full_collections()
        self._start_scanner()
        for session in self.sessions:
            if session.remote is None:  # else its host's observer feeds it
                self._requests.ask(session.index, everything=True)

    def on_mount(self) -> None:
        if self.settings.theme is not None:
            self.theme = self.settings.theme
        if self.settings.keys:
            self.set_keymap(dict(self.settings.keys))
        self.theme_changed_signal.subscribe(self, self._theme_changed)
        self.remote_tabs.start()
        if self.use_watcher:
            self._watch_projects()
        if self.demo is not None:
            # Mounted here, not composed: every app's layout (--discover's too) gets the line.
            self.mount(DemoProgress(), before=self.query_one("#projects"))
            self._build_demo(self.demo)
        if self.tick:
            self.set_interval(TICK_SECONDS, self._on_tick)
        if self.rescan_seconds:
            self.set_interval(self.rescan_seconds, self._on_rescan)
        self.focus_start()

    def focus_start(self) -> None:
        """Where the focus goes at start (a hook: ``--discover`` starts on its overview)."""
        self.panes[0].runs.focus()

    def _theme_changed(self, theme: Theme) -> None:
        """The theme picker (T): every state colour comes from the theme (widgets/styles.py), so
        redraw them all."""
        now = now_ms()
        for pane in self.panes:
            pane.restyle(now)
        for screen in self._timelines():
            screen.restyle()

    def on_unmount(self) -> None:
        if self.demo is not None:
            self.demo.stop()
        self._requests.close()
        self._rewatch.set()
        for stop in self._watchers:
            stop.set()
        self.remote_tabs.close()

    @property
    def panes(self) -> list[ProjectPane]:
        # Kept from compose, not queried: the 1 s tick asks it, and a DOM query each second was
        # a tenth of an idle demo's UI thread.
        return list(self._composed_panes)

    @property
    def pane(self) -> ProjectPane:
        active = self.query_one("#projects", TabbedContent).active_pane
        panes = active.query(ProjectPane) if active is not None else None
        return panes.first() if panes else self.panes[0]

    def selection(self) -> Selection:
        return self.pane.selection()

    # -- scanning
    def _start_scanner(self) -> None:
        """One thread scans every project (a thread per project would exhaust the executor
        that Textual's thread workers share); a large first load is shared with worker
        processes first (nexus_core.view.first_look)."""
        requests = self._requests

        def scan(request: Taken, everything: bool) -> None:
            index = request.project
            scanner = self.sessions[index].scanner

            def publish(partial: ProjectSnapshot) -> None:
                self.post_message(ProjectScanned(index, partial, (), partial=True))

            snapshot = scanner.scan(
                reinspect=request.runs,
                everything=everything,
                publish=publish,
                retime=request.retime,  # ScanRequests.ask counts everything as a retime too
                catch_up=request.catch_up,
            )
            self.post_message(ProjectScanned(index, snapshot, tuple(scanner.scope_paths()), answers=request.answers))

        def loop() -> None:
            worker = get_current_worker()
            while not worker.is_cancelled and not requests.closed:
                taken = {request.project: request for request in requests.take(0.25)}
                for answer in self._first_looks_shared(taken):
                    scanner = self.sessions[answer.project].scanner
                    if answer.looked is not None:
                        scanner.adopt(answer.looked)
                    if answer.last:
                        self.first_looks_shared += not scanner.never_scanned()
                        # Just looked at in full: the safety pass's status walk would find nothing.
                        scan(taken.pop(answer.project), everything=False)
                    else:
                        self._publish_known(answer.project)
                    if worker.is_cancelled:
                        return
                for request in taken.values():
                    scan(request, request.everything)

        self.run_worker(loop, thread=True, group="scanner", name="scanner", exit_on_error=True)

    def _first_looks_shared(self, taken: dict[int, Taken]) -> Iterator[first_look.Answer]:
        """For the taken projects never scanned, when their runs are many: what worker processes
        found of them, unit by unit as it comes back. Nothing for a small load."""
        processes = min(first_look.usable_cores(), first_look.MAX_PROCESSES)
        if processes < 2:
            return
        firsts = [
            (index, self.sessions[index].scanner)
            for index in taken
            if self.sessions[index].remote is None and self.sessions[index].scanner.never_scanned()
        ]
        if not firsts:
            return
        units = first_look.plan(firsts)
        if not first_look.worth_sharing(units, processes, self.share_first_look_from_bytes):
            return
        self._published_at.clear()
        units_of = Counter(unit.project for unit in units)
        for project in (project for project, count in units_of.items() if count > 1):
            self._publish_known(project)  # a project of many units: its runs listed, loading, at once
        with first_look.FirstLooks(processes) as looks:
            try:
                yield from looks.look(units, stopped=lambda: self._requests.closed)
            finally:
                self.first_look_workers_failed += looks.failed_units

    def _publish_known(self, index: int) -> None:
        """A project whose first load is shared: what its scanner knows so far, shown as a partial
        scan (at once the first time, then at most every PUBLISH_EVERY_SECONDS)."""
        now = time.monotonic()
        if now - self._published_at.get(index, -PUBLISH_EVERY_SECONDS) < PUBLISH_EVERY_SECONDS:
            return
        snapshot = self.sessions[index].scanner.known()
        if snapshot is not None:
            self._published_at[index] = now
            self.post_message(ProjectScanned(index, snapshot, (), partial=True))

    # -- the demo (--demo): built after the first frame, its steps shown as they come
    @work(thread=True, group="demo", exit_on_error=False)
    def _build_demo(self, demo: DemoBuild) -> None:
        try:
            notes = demo.run(lambda text: self.post_message(DemoProgress.Step(text)))
        except Exception as error:
            self.post_message(DemoProgress.Built([], explained(error)))
        else:
            self.post_message(DemoProgress.Built(notes, None))

    def on_demo_progress_step(self, message: DemoProgress.Step) -> None:
        self.query_one(DemoProgress).show_step(message.text)

    def on_demo_progress_built(self, message: DemoProgress.Built) -> None:
        self.demo_error = message.error
        if message.error is not None:
            self.query_one(DemoProgress).show_failure(message.error)
            self.notify(terminal_safe(message.error), title="demo", severity="error", markup=False)
            return
        self.query_one(DemoProgress).remove()
        for note in message.notes:
            self.notify(terminal_safe(note), title="demo", severity="warning", markup=False)
        self.request_scan(everything=True)

    @on(RunFocused)
    def _run_focused(self, message: RunFocused) -> None:
        session = self.sessions[message.index]
        if session.remote is not None:
            session.remote.set_focus(message.run_id)  # the host sends that run's full inspection
            return
        session.scanner.focus = message.run_id
        self.request_scan(message.index)

    def request_scan(
        self,
        index: int | None = None,
        everything: bool = False,
        runs: Iterable[str] = (),
        retime: bool = False,
        catch_up: bool = False,
    ) -> None:
        """``retime``: recompute the clock-derived flags of unchanged runs too (the tick);
        ``catch_up``: re-inspect the runs whose scopes changed since their last inspection."""
        for i in range(len(self.sessions)) if index is None else (index,):
            if self.sessions[i].remote is None:  # a remote project's host scans it
                self._requests.ask(i, everything=everything, runs=runs, retime=retime, catch_up=catch_up)

    def on_project_scanned(self, message: ProjectScanned) -> None:
        try:
            self._apply_scan(message)
        finally:
            if message.answers is not None:
                self._requests.applied(message.index, message.answers)

    @property
    def scans_caught_up(self) -> bool:
        """Every scan asked so far ran and its result was applied (nothing in flight)."""
        return self._requests.caught_up

    def _apply_scan(self, message: ProjectScanned) -> None:
        panes = self.panes
        if message.index >= len(panes) or not self.is_running:
            return  # shutting down
        session, pane = self.sessions[message.index], panes[message.index]
        if message.partial:
            if self.following:
                pane.apply(message.snapshot, now_ms())
            return
        if session.remote is None:
            appeared = session.base_appeared(message.snapshot.root)  # also kept for watched_paths
            if appeared or message.scope_paths != session.scope_paths:
                session.scope_paths = message.scope_paths
                self._rewatch.set()  # a new watcher on the new set of paths
        if not self.following:
            session.pending = message.snapshot
            pane.sync_status(now_ms())
            return
        session.pending = None
        pane.apply(message.snapshot, now_ms())
        for screen in self._timelines(session):
            screen.follow(now_ms())
        self.scans_applied += 1
        if not session.loaded and session.remote is None:
            self._local_loaded += 1
        session.loaded = True
        self.needs_changed(session)
        # A remote project loads when its host answers (maybe never): "loaded" is this machine's.
        local = len(self.sessions) - len(self.remote_tabs.sessions)
        if not self.loaded.is_set() and self._local_loaded >= local:
            self.first_load_done()

    def first_load_done(self) -> None:
        """Every local project had its first look."""
        self._show_labels()
        self._settle_memory()
        self.loaded.set()
        self._rewatch.set()  # the scopes are watched from now on
        self.notifier.start(self.open_needs())
        self._schedule_notification()

    # -- what needs a person (nexus_core.needs): counts, the inbox, notifications
    def open_needs(self) -> list[tuple[str, Any]]:
        """(project label, need) of every open project, as on screen."""
        return [
            (session.label, need)
            for session in self.sessions
            if session.snapshot is not None
            for need in session.snapshot.needs
        ]

    def inbox_entries(self) -> list[Entry]:
        """Every need of every project, oldest first (the inbox's rows)."""
        from nexus_core.needs import oldest_first

        where = {
            id(need): (session.index, session.label)
            for session in self.sessions
            if session.snapshot
            for need in session.snapshot.needs
        }
        ordered = oldest_first(need for session in self.sessions if session.snapshot for need in session.snapshot.needs)
        return [(*where[id(need)], need) for need in ordered]

    def needs_changed(self, session: ProjectSession) -> None:
        """A project's scan was applied: its tab's count, the title, and perhaps a notification."""
        count = len(session.snapshot.needs) if session.snapshot is not None else 0
        label = f"{session.label} ({count})" if count else session.label
        if session.shown_label != label:
            session.shown_label = label
            if self.has_tab(session.index):  # else its tab shows the label once made
                self._labels_waiting.add(session.index)
                if not self.labels_wait_while_loading or self.loaded.is_set():
                    self._show_labels_soon()
        self._need_counts[session.index] = count
        total = sum(self._need_counts.values())
        title = f"nexus ({total} need{'s' if total != 1 else ''} you)" if total else "nexus"
        if self.title != title:
            # Set without App.title's repaint of the whole screen (with a thousand projects
            # loading, each count moved it: a full repaint a frame). No widget of ours shows it;
            # the browser's page title follows it (watch_title).
            self.set_reactive(App.title, title)
            self.watch_title(title)
        # Before the load ends the notifier takes nothing (first_load_done starts it with all).
        if self.notifier.started and self.notifier.observe(self.open_needs()):
            self._schedule_notification()

    def has_tab(self, index: int) -> bool:
        """Whether project ``index`` has a tab in the strip (a hook: a large ``--discover`` fleet
        gets a project's tab when the project is first opened)."""
        return True

    def _show_labels_soon(self) -> None:
        """The waiting tab labels at once, or when LABELS_AT_MOST_EVERY_SECONDS have passed since
        the last ones were shown."""
        if self._labels_timer is not None:
            return  # already due
        wait = self._labels_shown_at + LABELS_AT_MOST_EVERY_SECONDS - time.monotonic()
        if wait <= 0:
            self._show_labels()
        else:
            self._labels_timer = self.set_timer(wait, self._show_labels)

    def _show_labels(self) -> None:
        """The tab labels waiting (one layout of the tab strip for all of them)."""
        if self._labels_timer is not None:
            self._labels_timer.stop()
            self._labels_timer = None
        self._labels_shown_at = time.monotonic()
        self.label_passes += 1
        waiting, self._labels_waiting = self._labels_waiting, set()
        for index in sorted(waiting):
            with contextlib.suppress(Exception):  # the tab may be going away (shutdown)
                tabs = self.query_one("#projects", TabbedContent)
                tabs.get_tab(f"tab-{index}").label = plain_content(self.sessions[index].shown_label)

    @property
    def notification_due(self) -> bool:
        """Needs wait to be told (the coalescing window is open): once not, nothing more is
        written until a scan finds a new need."""
        return self._notify_timer is not None or bool(self.notifier.pending)

    def watch_title(self, title: str) -> None:
        """In a browser (``nexus-tui serve``) the page's title follows the app's, needs count
        included: a meta packet that serve.py relays to the page (a tab in the background shows it)."""
        if isinstance(self._driver, WebDriver):
            self._driver.write_meta({"type": PAGE_TITLE_META, "title": title})

    def _schedule_notification(self) -> None:
        if self.notifier.pending and self._notify_timer is None:
            self._notify_timer = self.set_timer(COALESCE_SECONDS, self._notify_now)

    def _notify_now(self) -> None:
        self._notify_timer = None
        data = self.notifier.flush()
        if data:
            self.write_to_terminal(data)

    def write_to_terminal(self, data: str) -> None:
        """Raw bytes for the terminal (a bell, an OSC 9 / 777 notification), through the driver
        as Textual's own ``bell`` does; nothing when headless."""
        driver = self._driver
        if driver is not None and not self.is_headless:
            driver.write(data)

    def on_app_blur(self, _event: events.AppBlur) -> None:
        self.notifier.background = True

    def on_app_focus(self, _event: events.AppFocus) -> None:
        self.notifier.background = False

    def action_inbox(self) -> None:
        if isinstance(self.screen, InboxScreen):
            return
        keys = actions.keys_by_id(self.settings.keys)
        self.push_screen(InboxScreen(self.inbox_entries(), now_ms(), keys), callback=self.go_to_need)

    def action_oldest_need(self) -> None:
        entries = self.inbox_entries()
        if not entries:
            self.notify("Nothing needs a person.", timeout=3)
            return
        self.go_to_need(entries[0])

    def go_to_need(self, entry: Entry | None) -> None:
        """The need's project tab, its run and task selected, and its guided action opened (its
        dialog starts on Cancel): the Operation's dialog, or the guide when there is none (or
        the dashboard is read-only)."""
        if entry is None:
            return
        index, _label, need = entry
        self.show_project(index)
        pane = self.panes[index]
        if need.run is not None:
            pane.select(need.run, need.task)
        project = (
            pane.session.snapshot.root
            if pane.session.snapshot and pane.session.snapshot.root
            else pane.session.directory
        )
        remote = pane.session.remote
        where: str | Place = remote.place() if remote is not None else project
        if need.kind == "schedule-failed":
            self._open_or_refuse("schedules", remote, self.action_schedules)
        elif need.action in OPERATIONS and not self.read_only:
            operation = OPERATIONS[need.action]
            if operation.per_task:
                self.flow.open(need.action, where, need.run, need.task)
            else:
                self.flow.open(need.action, where)
        else:
            guide = lambda: self.flow.open_recovery(project, need.run, need.task)  # noqa: E731
            self._open_or_refuse("recovery_guide", remote, guide)

    def _open_or_refuse(self, action_id: str, remote: RemoteLink | None, opening: Callable[[], None]) -> None:
        """Open a view that reads the project's files itself, or say why not on a remote project."""
        entry = actions.spec(action_id)
        if remote is not None and entry is not None:
            host = terminal_safe(remote.project.host, one_line=True)
            actions.notify_refusal(self, entry, actions.remote_files_refusal(entry, host))
            return
        opening()

    def show_project(self, index: int) -> None:
        """Show project ``index``'s tab, with the focus inside it."""
        self.query_one("#projects", TabbedContent).active = f"tab-{index}"
        self.panes[index].runs.focus()

    @staticmethod
    def _rare_full_collections() -> None:
        """Full collections 10x rarer, from the start: parsing run files allocates much (no
        cycles: reference counting frees it), yet each full pass walks everything loaded so
        far; a --discover start over 50 projects spent 0.6 s in eight of them, and live updates
        had full passes of 20-90 ms every second or so."""
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)

    @staticmethod
    def _settle_memory() -> None:
        """Once everything is loaded: tune the garbage collector for live updates."""
        # Everything loaded so far (runs, views, widgets) lives as long as the app: keep it out
        # of the cyclic collector, whose full passes over a large project otherwise stall a live
        # update by hundreds of ms. Reference counting still frees it.
        gc.freeze()

    def _on_tick(self) -> None:
        """Each second: the projects where the clock has changed something are looked at again
        (a deadline or a heartbeat passed, an owner's liveness to probe: ``next_look_ms``); the
        others change only with their files, which the watcher and the rescans follow (asking
        every project each second kept a core busy with an idle fleet). The shown ages move."""
        now = now_ms()
        self.ticks += 1
        for session in self.sessions:
            latest = session.pending or session.snapshot
            due = needs.EVERY_LOOK if latest is None else latest.next_look_ms
            if due is not None and now >= due:
                self.request_scan(session.index, retime=True)
        if self.following:
            for pane in self.panes:
                pane.refresh_times(now)

    def _on_rescan(self) -> None:
        """The safety net: every project is re-read (a stat of its run files); the runs of one
        project are re-inspected in part (a round-robin share within a time budget, see
        ``ProjectScanner``). One project per pass, in turn, unless polling (then every pass is
        the whole mechanism): each project's share every 5 s kept a core busy with a fleet."""
        local = [session.index for session in self.sessions if session.remote is None]
        if self.poll or len(local) <= 1:
            self.request_scan(everything=True)
            return
        self._rescan_turn = (self._rescan_turn + 1) % len(local)
        for index in local:
            self.request_scan(index, everything=index == local[self._rescan_turn])

    # -- watching: one watcher over every local project's paths
    @work(group="watch-paths", exclusive=True, exit_on_error=False)
    async def _watch_projects(self) -> None:
        """Watches every local project's paths (a watcher's paths are fixed when it starts).
        Projects whose paths changed get a watcher of their own at once (the others'
        watchers keep running: a --discover start does not re-watch every project each time one
        more is scanned); once the paths have stayed the same for a while, or too many watchers
        run, one watcher over every path replaces them all, and the old ones keep watching until
        it is armed, so no change falls between them. A watcher, once armed, asks a catch-up
        rescan of the projects it is the first to watch so (as a project's own watcher did when
        it was restarted)."""
        loop = asyncio.get_running_loop()
        watched: dict[int, tuple[str, ...]] = {}
        merged, changed_at = True, loop.time()
        while not self._requests.closed:
            # Until every project had its first look, only the state directories: arming a
            # recursive watch over scopes walks them (watchfiles held the GIL for it, 0.3 s for
            # 50 projects' scopes, paid again by each re-arming while projects arrive), and the
            # scopes' catch-up rescan once they are watched covers what changed before.
            scopes = MAX_WATCHED_SCOPES if self.loaded.is_set() else 0
            wanted = {
                session.index: tuple(session.watched_paths(scopes))
                for session in self.sessions
                if session.remote is None
            }
            wanted = {index: paths for index, paths in wanted.items() if paths}
            newly = set(wanted) if self._watch_failed else {i for i in wanted if wanted[i] != watched.get(i)}
            if newly or set(watched) - set(wanted):
                merged, changed_at = False, loop.time()
            merging = self._merging is not None  # a watcher over everything is being armed
            # Every project's paths new (the first arming, the scopes once loaded): one watcher
            # over them all at once, not one now and a merged one again later.
            everyone = bool(newly) and newly == set(wanted)
            whole = self._watch_failed or everyone or (len(self._watchers) >= MAX_WATCHERS and not merging)
            if newly and not whole:
                self._start_watcher({index: wanted[index] for index in newly}, newly, replaces=False)
            elif whole or (not merged and not merging and loop.time() - changed_at >= MERGE_AFTER_SECONDS):
                self._start_watcher(wanted, newly, replaces=True)
                merged = True
            self._watch_failed = False
            watched = wanted
            # Until a project's root is known it has nothing to watch: look again each second.
            await self._sleep_or_stop(self._rewatch, 1.0)
            self._rewatch.clear()
            await asyncio.sleep(REWATCH_COALESCE_SECONDS)

    def _start_watcher(self, paths: dict[int, tuple[str, ...]], newly: set[int], *, replaces: bool) -> None:
        """``replaces``: once armed, the watchers started before it stop (it watches everything)."""
        stop = asyncio.Event()
        self._watchers.append(stop)
        if replaces:
            self._merging = stop
        self.run_worker(self._watch(paths, newly, stop, replaces), group="watch", name="watcher", exit_on_error=False)

    async def _watch(
        self, wanted: dict[int, tuple[str, ...]], newly: set[int], stop: asyncio.Event, replaces: bool
    ) -> None:
        if not wanted:
            if replaces:
                self._retire(stop)
                if self._merging is stop:
                    self._merging = None
            self._watchers.remove(stop)
            return
        owners: dict[str, set[int]] = {}
        for index, project in wanted.items():
            for path in project:
                owners.setdefault(path.rstrip("/") or "/", set()).add(index)
        armed = False
        try:
            async for changes in watched_changes(
                sorted(owners), stop=stop, debounce_ms=WATCH_DEBOUNCE_MS, step_ms=WATCH_STEP_MS, keep=_not_a_temp_file
            ):
                if not armed:
                    # Live now: the older watchers may stop, and the projects first watched
                    # here are rescanned once for whatever changed while this one started.
                    armed = True
                    if replaces:
                        self._retire(stop)
                        if self._merging is stop:
                            self._merging = None
                    for index in sorted(newly):
                        self.request_scan(index, catch_up=True)
                if changes:
                    self._on_changes(owners, changes)
            self._watch_failures = 0
            if stop in self._watchers:
                self._watchers.remove(stop)
        except Exception as error:
            if stop in self._watchers:
                self._watchers.remove(stop)
            if self._merging is stop:
                self._merging = None
            self._watch_failed = True  # the next watcher rescans every project it watches
            if not undecodable_path_changed(error):
                # A watched scope vanished, or no watch left: the rescan covers; wait a little.
                self._watch_failures += 1
                self.watch_backoffs += 1
                await asyncio.sleep(min(30.0, 2.0**self._watch_failures))
            else:
                for index in wanted:  # which path is unknown: every run
                    self.request_scan(index, everything=True)
            self._rewatch.set()

    def _retire(self, armed: asyncio.Event) -> None:
        """Stop every watcher started before ``armed``'s."""
        while self._watchers and self._watchers[0] is not armed:
            self._watchers.pop(0).set()

    @staticmethod
    async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)

    def _on_changes(self, owners: dict[str, set[int]], paths: set[str]) -> None:
        """Each project whose watched paths hold a changed path is rescanned (``owners``: the
        projects of each watched path): run files need no matching (every scan re-stats them);
        scopes are looked up by prefix. A watched path itself reported (the watcher lost events
        to an overflow, or the path moved or went): what changed under it is unknown, so the
        project catches up (the runs whose scopes changed since their last inspection)."""
        changed: dict[int, set[str]] = {}
        for path in paths:
            for index in _owners_of(owners, path):
                changed.setdefault(index, set()).add(path)
        for index, mine in changed.items():
            session = self.sessions[index]
            root = session.snapshot.root if session.snapshot else None
            lost = not mine.isdisjoint(owners)
            self.request_scan(index, runs=session.runs_touched(root or "", mine), catch_up=lost)

    # -- actions (the registry in actions.py binds keys to these)
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "explain":
            return True
        entry = self.registry_entry(action, parameters)
        if entry is None:
            return True
        return True if entry.id in self.allowed_actions() else None

    @staticmethod
    def registry_entry(action: str, parameters: tuple[object, ...]) -> actions.ActionSpec | None:
        """The registry's entry for a binding's action (``act('start')`` is the entry "start")."""
        return actions.spec(str(parameters[0]) if action == "act" and parameters else action)

    def availability(self) -> Availability:
        """What the gate lets through for the current selection and why it refuses the rest,
        computed once per selection, snapshot and mode (Textual asks check_action for every
        binding on every refresh)."""
        pane = self.pane
        key = (pane.index, pane.selection_key(), self.read_only, tuple(map(id, actions.REGISTRY)))
        if self._availability is None or self._availability[0] != key:
            selection = pane.selection()
            reasons = {e.id: actions.refusal(e, self.read_only, selection) for e in actions.REGISTRY}
            refused = {action_id: reason for action_id, reason in reasons.items() if reason}
            allowed = frozenset(action_id for action_id in reasons if action_id not in refused)
            self._availability = (key, Availability(allowed, refused))
            self.availability_computations += 1
        return self._availability[1]

    def allowed_actions(self) -> frozenset[str]:
        """The ids the gate lets through for the current selection."""
        return self.availability().allowed

    def refusal_of(self, action_id: str) -> str | None:
        """Why the gate refuses ``action_id`` for the current selection, or None."""
        return self.availability().refused.get(action_id)

    def action_explain(self, action_id: str) -> None:
        """The key of an action the gate refuses (its hidden second binding): say why, in the
        palette's words for it."""
        entry = actions.spec(action_id)
        if entry is not None:
            actions.notify_refusal(self, entry, self.refusal_of(action_id))

    @property
    def flow(self) -> ActionFlow:
        if self._flow is None:
            self._flow = ActionFlow(
                self, read_only=lambda: bool(self.read_only), on_done=self._after_action, jobs=self.jobs
            )
        return self._flow

    def action_act(self, name: str) -> None:
        """Every mutating action: its Operation's dialog for the selection (the core's state)."""
        selection = self.selection()
        remote = self.pane.session.remote
        where: str | Place = remote.place() if remote is not None else selection.project or ""
        if OPERATIONS[name].per_task:
            self.flow.open(name, where, selection.run_id, selection.task_id)
        else:
            self.flow.open(name, where)

    def on_remote_status_changed(self, message: RemoteStatusChanged) -> None:
        """A remote project connected, was lost or retries: its status bar says so, and the
        gate reads the new state (the selection's key holds the status)."""
        panes = self.panes
        if message.index < len(panes) and self.is_running:
            panes[message.index].sync_status(now_ms())
            if self.pane.index == message.index:
                self.refresh_bindings()

    def _after_action(self) -> None:
        self.request_scan(everything=True)
        self.remote_tabs.rescan()
        if any(isinstance(screen, QuitScreen) for screen in self.screen_stack):
            return  # the app quits once this work has ended: no panel to mount on the way out
        self._show_log(True)

    async def action_quit(self) -> None:
        """Ctrl+Q, q and the palette's Quit: at once, unless a verify or a launch still runs;
        then the quit dialog says what runs and offers stop, wait or cancel."""
        if isinstance(self.screen, QuitScreen):
            return
        running = self.jobs.running()  # in their dialogs or in the background
        if running:
            self.push_screen(QuitScreen(running))
        else:
            self.exit()

    def on_job_changed(self, message: JobChanged) -> None:
        """A job's worker has news: its views catch up, its end is notified (``ActionFlow``), the
        task rows show it running or no longer."""
        self.flow.job_changed(message.job)
        if self.following:
            now = now_ms()
            for pane in self.panes:
                pane.sync_job_marks(now)

    def action_jobs(self, number: int | None = None) -> None:
        """The jobs view (J): this session's verify and launch runs, with their live output."""
        if isinstance(self.screen, JobsScreen):
            return
        self.push_screen(JobsScreen(self.jobs, number, read_only=self.read_only))

    def action_help_quit(self) -> None:
        """Ctrl+C (Textual binds it to a "press Ctrl+Q" hint): quits like q, the way an operator
        expects a terminal program to stop."""
        self.call_next(self.action_quit)

    def action_recovery_guide(self) -> None:
        self.flow.open_recovery(self.selection().project or "")

    # -- the action log panel (mounted on first use, above the footer)
    def _log_panel(self) -> ActionLogPanel | None:
        found = self.query(ActionLogPanel)
        return found.first() if found else None

    def _show_log(self, visible: bool) -> None:
        panel = self._log_panel()
        if panel is None:
            if visible:
                self.mount(ActionLogPanel(self.flow.log, id=LOG_PANEL_ID), before=self.query_one(Footer))
            return
        panel.display = visible

    def action_toggle_action_log(self) -> None:
        panel = self._log_panel()
        self._show_log(panel is None or not panel.display)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        # A panel (the schedules, a timeline) names its registry screen: its actions run on it.
        panel_name = getattr(screen, "REGISTRY_SCREEN", None)
        for entry in actions.REGISTRY:
            if not entry.palette or entry.id in ("quit", "change_theme", "help"):
                continue
            if entry.screen != actions.MAIN:
                # A panel's action runs on the panel, and only while it is open.
                if entry.screen == panel_name:
                    yield _command(self, entry, screen.refusal(entry), screen)  # type: ignore[attr-defined]
                continue
            yield _command(self, entry, self.refusal_of(entry.id))

    def action_schedules(self) -> None:
        from .screens.schedules import SchedulesScreen

        self.push_screen(SchedulesScreen(self.pane.session.directory, self.pane.session.label, self.read_only))

    def action_timeline(self) -> None:
        from .screens.timeline import TimelineScreen

        selection = self.selection()
        if selection.run_id is not None:
            self.push_screen(TimelineScreen(self.pane.session, selection.run_id, selection.task_id, tick=self.tick))

    def _timelines(self, session: ProjectSession | None = None) -> list[Any]:
        """The open timeline screens (of ``session``): they follow its scans and the theme."""
        from .screens.timeline import TimelineScreen

        return [
            screen
            for screen in self.screen_stack
            if isinstance(screen, TimelineScreen) and (session is None or screen.session is session)
        ]

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.settings.keys))

    def action_jump(self) -> None:
        """``:``: a run or a task by id, with completion (screens/jump.py)."""
        from .logic.navigation import jump_candidates
        from .screens.jump import JumpScreen

        pane = self.pane
        candidates = jump_candidates(pane.session.snapshot)
        if not candidates:
            self.notify("No run to jump to yet.", timeout=3)
            return

        def go(chosen: Any) -> None:
            if chosen is not None and self.pane is pane:
                pane.select(chosen.run_id, chosen.task_id)
                if chosen.task_id is None:
                    pane.runs.focus()

        self.push_screen(JumpScreen(candidates, pane.session.label), callback=go)

    def action_next_need(self) -> None:
        self._step_need(1)

    def action_previous_need(self) -> None:
        self._step_need(-1)

    def _step_need(self, step: int) -> None:
        """``n``/``N``: the next or previous task whose row carries a need (the core's classifier,
        the inbox's needs), across the project's runs in the order shown."""
        from .logic.navigation import next_need

        pane = self.pane
        found = next_need(pane.shown_order(), (pane.run_id or "", pane.task_id), step)
        if found is None:
            self.notify("No task needs attention in this project.", timeout=3)
            return
        pane.select(*found)

    def action_filter(self) -> None:
        self.pane.open_filter()

    def action_clear_filter(self) -> None:
        self.pane.clear_filter()

    def _focused_table(self) -> DataTable[Any]:
        pane = self.pane
        return pane.runs if self.focused is pane.runs else pane.tasks

    def action_sort(self) -> None:
        self.pane.cycle_sort(self._focused_table())

    def action_reverse_sort(self) -> None:
        self.pane.reverse_sort(self._focused_table())

    def action_toggle_follow(self) -> None:
        self.following = not self.following
        now = now_ms()
        for pane in self.panes:
            pane.following = self.following
            session = pane.session
            if self.following and session.pending is not None:
                pending, session.pending = session.pending, None
                pane.apply(pending, now)
            pane.sync_status(now)
        self.notify("Following live updates." if self.following else "Paused: the view is frozen.", timeout=2)

    def action_refresh(self) -> None:
        # Every run of every project is inspected again in full (the periodic safety pass
        # re-inspects only a budgeted share of them).
        for session in self.sessions:
            runs = [view.run_id for view in session.snapshot.runs] if session.snapshot is not None else []
            self.request_scan(session.index, everything=True, runs=runs)
        self.remote_tabs.rescan(self.pane.index)

    def action_focus_next_pane(self) -> None:
        self.screen.focus_next()

    def action_next_project(self) -> None:
        self._switch_project(1)

    def action_previous_project(self) -> None:
        self._switch_project(-1)

    def _switch_project(self, step: int) -> None:
        tabs = self.query_one("#projects", TabbedContent)
        target = (self.pane.index + step) % len(self.sessions)
        tabs.active = f"tab-{target}"
        # Focus inside the shown pane, or Textual refocuses the hidden one and switches back.
        self.panes[target].runs.focus()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self, event: TabbedContent.TabActivated) -> None:
        if not event.pane.query(ProjectPane):
            return  # not a project's tab (the --discover overview)
        pane = self.pane
        if self.focused is None or pane not in self.focused.ancestors:
            pane.runs.focus()

    def _copy(self, what: str, value: str | None, *, path: bool = False) -> None:
        """Copy ``value``; a ``path`` shell-quoted (as the recovery command is). Anything with a
        control character, bidi control or separator is refused: pasted into a shell, a newline
        in a directory name would run its second line."""
        if not value:
            self.notify(f"No {what} to copy here.", severity="warning", timeout=2)
            return
        if not is_terminal_safe(value, one_line=True):
            shown = terminal_safe(value, one_line=True)
            words = f"Not copied: the {what} holds control characters (shown escaped): {shown}"
            self.notify(words, severity="warning", timeout=6, markup=False)
            return
        copied = shlex.quote(value) if path else value
        self.copy_to_clipboard(copied)
        self.notify(terminal_safe(f"Copied {what}: {copied}"), timeout=3, markup=False)

    def action_copy_focused(self) -> None:
        selection = self.selection()
        if self.focused is self.pane.runs:
            self._copy("run id", selection.run_id)
        elif selection.attempt_id:
            self._copy("attempt id", selection.attempt_id)
        else:
            self._copy("task id", selection.task_id)

    def action_copy_run_id(self) -> None:
        self._copy("run id", self.selection().run_id)

    def action_copy_task_id(self) -> None:
        self._copy("task id", self.selection().task_id)

    def action_copy_attempt_id(self) -> None:
        self._copy("attempt id", self.selection().attempt_id)

    def action_copy_lock_fingerprint(self) -> None:
        self._copy("writer.lock fingerprint", self.selection().lock_fingerprint)

    def action_copy_state_path(self) -> None:
        self._copy("state file path", self.selection().state_path, path=True)

    def action_copy_project_path(self) -> None:
        self._copy("project path", self.selection().project, path=True)


def _label(directory: str) -> str:
    return os.path.basename(directory.rstrip("/")) or directory


def _command(
    app: NexusApp, entry: actions.ActionSpec, refusal: str | None, namespace: Screen[Any] | None = None
) -> SystemCommand:
    """The palette's entry for ``entry``; a refused one is found by a search, not listed, and
    says why (selecting it shows that reason again). The palette reads both as markup."""
    title = markup_literal(entry.label)
    if refusal is None:
        keys = actions.key_label(actions.effective_keys(entry, app.settings.keys))
        words = f"{entry.help} Key: {keys}." if keys else entry.help
        return SystemCommand(title, markup_literal(words), _runner(app, entry.action, namespace))
    words = markup_literal(actions.refused_words(refusal))
    return SystemCommand(title, words, _runner(app, f"explain({entry.id!r})", namespace), discover=False)


def _runner(app: NexusApp, action: str, namespace: Screen[Any] | None = None) -> Callable[[], Any]:
    async def run() -> None:
        await app.run_action(action, namespace)

    return run


def _owners_of(owners: dict[str, set[int]], path: str) -> set[int]:
    """The projects watching ``path`` or one of its parent directories (a lookup per parent,
    not a scan over every watched path: a fleet watches thousands)."""
    found: set[int] = set()
    while True:
        found |= owners.get(path, set())
        parent = os.path.dirname(path)
        if parent == path:
            return found
        path = parent


def _not_a_temp_file(path: str) -> bool:
    return not path.endswith(".tmp")
