"""``nexus-tui``: the live, read-only dashboard over one or more nexus projects.

Threads: one scanner thread per project owns its :class:`~nexus_tui.model.ProjectScanner`
and posts :class:`ProjectScanned` messages; a watchfiles task per project only asks for
scans. Widgets are touched on the UI thread only, when a message arrives.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.widgets import DataTable, Footer, Input, Static, TabbedContent, TabPane, Tree
from textual.worker import get_current_worker

from nexus_core.store import BASE
from nexus_core.terminal import terminal_safe
from nexus_core.timeutil import now_ms

from . import actions, render
from .action_wiring import ActionsMixin
from .model import ProjectScanner, ProjectSnapshot, RunView, ScopeIndex, TaskRow

TICK_SECONDS = 1.0
SAFETY_RESCAN_SECONDS = 5.0
POLL_RESCAN_SECONDS = 1.0
WATCH_DEBOUNCE_MS = 50
WATCH_STEP_MS = 10
WATCH_ARMED_MS = 300
MAX_WATCHED_SCOPES = 1000
# Middle-generation collections between two full ones (CPython's default is 10).
FULL_COLLECTION_EVERY = 100


# ----------------------------------------------------------------- plumbing


class ProjectScanned(Message):
    """A scanner thread finished a pass over project ``index``."""

    def __init__(
        self, index: int, snapshot: ProjectSnapshot, scope_paths: tuple[str, ...], partial: bool = False
    ) -> None:
        super().__init__()
        self.index = index
        self.snapshot = snapshot
        self.scope_paths = scope_paths
        # A first load still going on: show what is there, keep the watcher as it is.
        self.partial = partial


class ScanRequests:
    """Scan requests per project, merged until the scanner thread takes them (thread-safe)."""

    def __init__(self, projects: int) -> None:
        self._condition = threading.Condition()
        self._everything = [False] * projects
        self._retime = [False] * projects
        self._runs: list[set[str] | None] = [None] * projects  # None: nothing asked
        self._closed = False

    def ask(self, index: int, everything: bool = False, runs: Iterable[str] = (), retime: bool = False) -> None:
        with self._condition:
            self._everything[index] |= everything
            self._retime[index] |= retime or everything
            self._runs[index] = (self._runs[index] or set()) | set(runs)
            self._condition.notify()

    def take(self, timeout: float) -> list[tuple[int, bool, set[str], bool]]:
        with self._condition:
            if not self._closed and all(runs is None for runs in self._runs):
                self._condition.wait(timeout)
            if self._closed:
                return []
            taken = [
                (i, self._everything[i], runs, self._retime[i]) for i, runs in enumerate(self._runs) if runs is not None
            ]
            for i, _, _, _ in taken:
                self._everything[i], self._runs[i], self._retime[i] = False, None, False
            return taken

    def close(self) -> None:
        with self._condition:
            self._closed = True
            self._condition.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed


@dataclass(frozen=True)
class Selection:
    project: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    attempt_id: str | None = None
    lock_fingerprint: str | None = None
    state_path: str | None = None
    # The selected run as inspected (for the availability of actions); not part of equality.
    inspection: Any = field(default=None, compare=False, repr=False)


def parse_filter(text: str) -> list[tuple[str, str]]:
    terms = []
    for token in text.split():
        kind, sep, value = token.partition(":")
        if sep and kind.lower() in ("state", "task") and value:
            terms.append((kind.lower(), value.lower()))
        else:
            terms.append(("text", token.lower()))
    return terms


def row_matches(row: TaskRow, terms: list[tuple[str, str]]) -> bool:
    for kind, value in terms:
        if kind == "state":
            if value not in {word.lower() for word in row.flags()} and value.replace("-", " ") not in row.flags():
                return False
        elif kind == "task":
            if value not in row.task_id.lower():
                return False
        else:
            haystack = " ".join([row.task_id, row.objective, *row.flags(), *row.depends_on]).lower()
            if value not in haystack:
                return False
    return True


# ----------------------------------------------------------------- widgets


class StatusBar(Static):
    pass


class ProjectPane(Vertical):
    """One project: runs list, task table, detail pane and status bar."""

    def __init__(self, index: int, directory: str, label: str) -> None:
        super().__init__(id=f"project-{index}", classes="project")
        self.index = index
        self.directory = directory
        self.label = label
        self.snapshot: ProjectSnapshot | None = None
        self.pending: ProjectSnapshot | None = None
        self.run_id: str | None = None
        self.task_id: str | None = None
        self.filter_text = ""
        self.task_sort: tuple[str | None, bool] = (None, False)
        self.run_sort: tuple[str | None, bool] = (None, False)
        self._run_cells: dict[str, dict[str, Text]] = {}
        self._task_cells: dict[str, dict[str, Text]] = {}
        self._task_rows: dict[str, TaskRow] = {}
        self._task_second = -1
        self._run_views: dict[str, RunView] = {}
        self._run_locks: tuple[Any, ...] | None = None
        self._run_second = -1
        self._scope_index = ScopeIndex()
        self._detail_key: tuple[Any, ...] | None = None
        self.scope_paths: tuple[str, ...] = ()
        self.has_base = False

    def compose(self) -> ComposeResult:
        with Horizontal(classes="main"):
            with Vertical(classes="left"):
                yield Static("Runs", classes="title", id=f"runs-title-{self.index}")
                runs: DataTable[Any] = DataTable(
                    id=f"runs-{self.index}", classes="runs", cursor_type="row", zebra_stripes=True
                )
                runs.border_title = "Runs"
                yield runs
                yield Static("Tasks", classes="title", id=f"tasks-title-{self.index}")
                filter_input = Input(
                    placeholder="filter: state:stale  state:overdue  task:NAME  free text  (Enter keeps, Esc clears)",
                    id=f"filter-{self.index}",
                    classes="filter",
                )
                filter_input.display = False
                yield filter_input
                yield DataTable(id=f"tasks-{self.index}", classes="tasks", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(classes="detail", id=f"detail-{self.index}"):
                yield Static(Text("Loading…", style="dim"), classes="detail-head", id=f"detail-head-{self.index}")
                tree: Tree[None] = Tree(Text("attempts"), id=f"attempts-{self.index}", classes="attempts")
                tree.show_root = False
                tree.guide_depth = 2
                yield tree
                yield Static("", classes="detail-verification", id=f"detail-verification-{self.index}")
        yield StatusBar(Text("loading…", style="dim"), classes="status", id=f"status-{self.index}")

    def on_mount(self) -> None:
        for key, label in render.RUN_COLUMNS:
            self.runs.add_column(label, key=key)
        for key, label in render.TASK_COLUMNS:
            self.tasks.add_column(label, key=key)

    # -- handy queries
    @property
    def runs(self) -> DataTable[Any]:
        return self.query_one(f"#runs-{self.index}", DataTable)

    @property
    def tasks(self) -> DataTable[Any]:
        return self.query_one(f"#tasks-{self.index}", DataTable)

    @property
    def attempts_tree(self) -> Tree[None]:
        return self.query_one(f"#attempts-{self.index}", Tree)

    @property
    def filter_input(self) -> Input:
        return self.query_one(f"#filter-{self.index}", Input)

    def current_view(self) -> RunView | None:
        return self.snapshot.run(self.run_id) if self.snapshot else None

    def selection(self) -> Selection:
        view = self.current_view()
        attempt_id = None
        if view and view.inspection and self.task_id:
            task = next((t for t in view.inspection["tasks"] if t["id"] == self.task_id), None)
            if task and task["attempts"]:
                attempt_id = task["attempts"][-1]["id"]
        root = self.snapshot.root if self.snapshot else None
        return Selection(
            project=root or self.directory,
            run_id=self.run_id if view else None,
            task_id=self.task_id if view and self.task_id in self._task_rows else None,
            attempt_id=attempt_id,
            lock_fingerprint=self.snapshot.writer_lock.fingerprint if self.snapshot else None,
            state_path=f"{root}/{view.state_path}" if root and view else None,
            inspection=view.inspection if view else None,
        )

    # -- applying snapshots
    def apply(self, snapshot: ProjectSnapshot, now: int) -> None:
        self.snapshot = snapshot
        with self.app.batch_update():
            self._sync_runs(now)
            self._sync_tasks(now)
            self._sync_detail(now)
            self._sync_status(now)

    def refresh_times(self, now: int) -> None:
        """The 1 s tick: only the time-derived cells and texts."""
        if self.snapshot is None:
            return
        with self.app.batch_update():
            self._sync_runs(now, retime=True)
            self._sync_tasks(now, retime=True)
            self._sync_detail(now, times_only=True)
            self._sync_status(now)

    def _sync_runs(self, now: int, retime: bool = False) -> None:
        """``retime`` (the 1 s tick): recompute the age cells of unchanged runs too; a
        scan-driven update touches only the runs that changed, whatever the clock says."""
        assert self.snapshot is not None
        table = self.runs
        cursor = self._cursor_key(table)
        wanted = {view.run_id: view for view in self.snapshot.runs}
        for gone in [key for key in self._run_cells if key not in wanted]:
            table.remove_row(gone)
            del self._run_cells[gone]
            self._run_views.pop(gone, None)
        added = False
        locks = (self.snapshot.writer_lock, self.snapshot.recovery_lock)
        same_moment = locks == self._run_locks
        self._run_locks = locks
        if retime:
            same_moment = same_moment and now // 1000 == self._run_second
            self._run_second = now // 1000
        for view in self.snapshot.runs:
            if same_moment and self._run_views.get(view.run_id) is view and view.run_id in self._run_cells:
                continue
            self._run_views[view.run_id] = view
            cells = render.run_cells(view, self.snapshot, now)
            old = self._run_cells.get(view.run_id)
            if old is None:
                table.add_row(*(cells[key] for key, _ in render.RUN_COLUMNS), key=view.run_id)
                added = True
            else:
                for key, cell in cells.items():
                    if old[key] != cell:
                        _update_cell(table, view.run_id, key, cell)
            self._run_cells[view.run_id] = cells
        if added or self.run_sort[0]:
            order = {view.run_id: i for i, view in enumerate(self.snapshot.runs)}
            column, reverse = self.run_sort
            table.sort(
                "run",
                key=lambda cell: render.run_sort_value(wanted[cell.plain], column or "", order[cell.plain]),
                reverse=reverse,
            )
        if self.run_id not in wanted:
            self.run_id = self.snapshot.runs[0].run_id if self.snapshot.runs else None
            cursor = self.run_id
        self._restore_cursor(table, cursor)
        title = f"Runs ({len(self.snapshot.runs)})"
        if self.run_sort[0]:
            title += f" sorted by {self.run_sort[0]}{' ↓' if self.run_sort[1] else ''}"
        self.query_one(f"#runs-title-{self.index}", Static).update(Text(title, style="bold"))

    def _sync_tasks(self, now: int, retime: bool = False) -> None:
        """``retime`` (the 1 s tick): recompute the age cells of unchanged rows too."""
        table = self.tasks
        view = self.current_view()
        rows = view.rows if view else ()
        terms = parse_filter(self.filter_text)
        visible = [row for row in rows if row_matches(row, terms)]
        wanted = {row.task_id: row for row in visible}
        cursor = self._cursor_key(table)
        for gone in [key for key in self._task_cells if key not in wanted]:
            table.remove_row(gone)
            del self._task_cells[gone]
            self._task_rows.pop(gone, None)
        added = False
        # Ages are shown to the second and only the tick moves them: outside the tick (a scan,
        # a selection) an unchanged row keeps its cells, so one changed task costs one row.
        same_second = True
        if retime:
            same_second = now // 1000 == self._task_second
            self._task_second = now // 1000
        for row in visible:
            if same_second and self._task_rows.get(row.task_id) == row and row.task_id in self._task_cells:
                continue
            cells = render.task_cells(row, now)
            old = self._task_cells.get(row.task_id)
            if old is None:
                table.add_row(*(cells[key] for key, _ in render.TASK_COLUMNS), key=row.task_id)
                added = True
            else:
                for key, cell in cells.items():
                    if old[key] != cell:
                        _update_cell(table, row.task_id, key, cell)
            self._task_cells[row.task_id] = cells
            self._task_rows[row.task_id] = row
        if added or self.task_sort[0]:
            plan_index = {row.task_id: i for i, row in enumerate(rows)}
            column, reverse = self.task_sort

            def sort_key(cell: Text) -> Any:
                task_id = cell.plain[2:]
                return render.task_sort_value(wanted[task_id], column or "", plan_index[task_id])

            table.sort("task", key=sort_key, reverse=reverse)
        if self.task_id not in wanted:
            if cursor in wanted:
                self.task_id = cursor
            else:
                self.task_id = self._row_key_at(table, min(table.cursor_row, table.row_count - 1))
            cursor = self.task_id
        self._restore_cursor(table, cursor)
        title = Text("Tasks", style="bold")
        if view:
            title.append(" of ")
            title.append(render.plain(view.run_id, "bold"))
            title.append(f"  ({len(visible)}/{len(rows)})")
        if self.filter_text:
            title.append("  filter: ", style="dim")
            title.append(render.plain(self.filter_text, "yellow"))
        if self.task_sort[0]:
            title.append(f"  sorted by {self.task_sort[0]}{' ↓' if self.task_sort[1] else ''}", style="dim")
        self.query_one(f"#tasks-title-{self.index}", Static).update(title)

    def _sync_detail(self, now: int, times_only: bool = False) -> None:
        view = self.current_view()
        head = self.query_one(f"#detail-head-{self.index}", Static)
        verification = self.query_one(f"#detail-verification-{self.index}", Static)
        tree = self.attempts_tree
        if self.snapshot is None:
            return
        if view is None:
            head.update(Text("No run in this project yet." if not self.snapshot.error else "", style="dim"))
            tree.clear()
            verification.update("")
            self._detail_key = None
            return
        detail = render.task_detail(view, self.task_id, now) if self.task_id else None
        if detail is None:
            head.update(render.run_header(view, self.snapshot, now, getattr(self.app, "display_path", None)))
            if self._detail_key is not None:
                tree.clear()
            verification.update("")
            self._detail_key = None
            return
        header, nodes, verification_body = detail
        run_head = Text()
        if view.error:
            run_head = render.run_header(view, self.snapshot, now, getattr(self.app, "display_path", None))
        head.update(run_head + header if view.error else header)
        verification.update(verification_body)
        key = (view.run_id, self.task_id, id(view.inspection))
        if times_only and key == self._detail_key:
            return
        if key != self._detail_key:
            tree.clear()
            for node in nodes:
                _add_node(tree.root, node)
            self._detail_key = key

    def _sync_status(self, now: int) -> None:
        app = self.app
        following = getattr(app, "following", True)
        read_only = getattr(app, "read_only", True) or not any(entry.mutating for entry in actions.REGISTRY)
        display = getattr(app, "display_path", lambda p: p)
        label = display(self.snapshot.root or self.directory) if self.snapshot else display(self.directory)
        self.query_one(f"#status-{self.index}", StatusBar).update(
            render.status_text(self.snapshot, now, following, read_only, label, pending=self.pending is not None)
        )

    # -- cursor helpers
    @staticmethod
    def _cursor_key(table: DataTable[Any]) -> str | None:
        if table.row_count == 0:
            return None
        return ProjectPane._row_key_at(table, table.cursor_row)

    @staticmethod
    def _row_key_at(table: DataTable[Any], index: int) -> str | None:
        if index < 0 or index >= table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key((index, 0))  # type: ignore[arg-type]
        return row_key.value

    @staticmethod
    def _restore_cursor(table: DataTable[Any], key: str | None) -> None:
        if key is None or table.row_count == 0:
            return
        try:
            index = table.get_row_index(key)
        except Exception:
            return
        if table.cursor_row != index:
            table.move_cursor(row=index, animate=False, scroll=True)

    # -- events
    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        now = now_ms()
        if event.data_table is self.runs:
            if key != self.run_id:
                self.run_id = key
                self.task_id = None
                # The scanner keeps the full inspection of the focus run only: ask for it.
                request_focus = getattr(self.app, "request_focus", None)
                if request_focus is not None:
                    request_focus(self.index, key)
                self._sync_tasks(now)
                self._sync_detail(now)
        elif event.data_table is self.tasks and key != self.task_id:
            self.task_id = key
            self._sync_detail(now)

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        self.sort_by(event.data_table, column)

    def sort_by(self, table: DataTable[Any], column: str | None, reverse: bool | None = None) -> None:
        current = self.run_sort if table is self.runs else self.task_sort
        if reverse is None:
            reverse = (not current[1]) if current[0] == column else False
        if table is self.runs:
            self.run_sort = (column, reverse)
            self._sync_runs(now_ms())
        else:
            self.task_sort = (column, reverse)
            self._sync_tasks(now_ms())

    def cycle_sort(self, table: DataTable[Any]) -> None:
        columns = [key for key, _ in (render.RUN_COLUMNS if table is self.runs else render.TASK_COLUMNS)]
        current = (self.run_sort if table is self.runs else self.task_sort)[0]
        following = columns[(columns.index(current) + 1) % len(columns)] if current in columns else columns[0]
        self.sort_by(table, following, reverse=False)

    def reverse_sort(self, table: DataTable[Any]) -> None:
        column, reverse = self.run_sort if table is self.runs else self.task_sort
        self.sort_by(table, column or ("run" if table is self.runs else "task"), reverse=not reverse)

    @on(Input.Changed)
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self._sync_tasks(now_ms())
        self._sync_detail(now_ms())

    @on(Input.Submitted)
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.filter_input.display = bool(self.filter_text)
        self.tasks.focus()

    def open_filter(self) -> None:
        self.filter_input.display = True
        self.filter_input.focus()

    def clear_filter(self) -> None:
        self.filter_input.value = ""
        self.filter_text = ""
        self.filter_input.display = False
        self._sync_tasks(now_ms())
        self._sync_detail(now_ms())
        self.tasks.focus()

    def key_escape(self) -> None:
        if self.filter_input.has_focus or self.filter_text:
            self.clear_filter()


def _update_cell(table: DataTable[Any], row: str, column: str, cell: Text) -> None:
    """Update one cell; re-measure the column only when the new value is wider (measuring
    re-reads every row of the column: far too slow on each change of a 200-row table)."""
    width = table.columns[column].content_width  # type: ignore[index]
    table.update_cell(row, column, cell, update_width=cell.cell_len > width)


def _add_node(parent: Any, node: render.Node) -> None:
    if node.children:
        child = parent.add(node.label, expand=node.expand)
        for grandchild in node.children:
            _add_node(child, grandchild)
    else:
        parent.add_leaf(node.label)


# ----------------------------------------------------------------- help


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape,q,question_mark,f1", "dismiss", "Close", show=True),
    ]

    def compose(self) -> ComposeResult:
        text = Text()
        text.append("nexus-tui: a live, read-only view of nexus runs\n\n", style="bold")
        groups: dict[str, list[actions.ActionSpec]] = {}
        for entry in actions.REGISTRY:
            groups.setdefault(entry.group, []).append(entry)
        for group, entries in groups.items():
            text.append(f"{group}\n", style="bold underline")
            for entry in entries:
                keys = actions.key_label(entry.keys) or "palette"
                text.append(f"  {keys:<14}", style="bold cyan")
                text.append(f"{entry.label:<22}")
                text.append(entry.help, style="dim")
                if entry.mutating:
                    text.append("  (changes state)", style="yellow")
                text.append("\n")
            text.append("\n")
        text.append("Also\n", style="bold underline")
        for keys, what in (
            ("Ctrl+P", "command palette: every action valid for the selection, themes, copy"),
            ("Tab", "move focus: runs → tasks → detail"),
            ("↑ ↓ PgUp PgDn", "move in the focused table; the detail follows the task cursor"),
            ("mouse", "click rows, headers (sort), tabs and tree nodes; scroll the detail"),
        ):
            text.append(f"  {keys:<14}", style="bold cyan")
            text.append(f"{what}\n", style="dim")
        text.append("\nFilter syntax\n", style="bold underline")
        text.append("  state:stale  state:overdue  state:active  state:attention  state:accepted  state:running ...\n")
        text.append("  task:NAME (part of the task id)   anything else: free text over id, objective, states\n\n")
        text.append("Task states\n", style="bold underline")
        for state, glyph in render.GLYPH.items():
            text.append(f"  {glyph} ", style=render.STATE_STYLE.get(state, ""))
            text.append(f"{state}\n")
        text.append(
            "\nEverything shown comes from the same core functions as `nexus inspect --json`.\n"
            "Watching writes nothing: no lock, no temporary file.\n",
            style="dim",
        )
        with VerticalScroll(id="help-body"):
            yield Static(text)

    def action_dismiss(self, result: None = None) -> None:  # type: ignore[override]
        self.dismiss(None)


# ----------------------------------------------------------------- the app


class NexusApp(ActionsMixin, App[None]):
    TITLE = "nexus"
    CSS = """
    Screen { layout: vertical; }
    TabbedContent { height: 1fr; }
    TabPane { padding: 0; }
    .project { height: 1fr; }
    .main { height: 1fr; }
    .left { width: 3fr; }
    .title { height: 1; padding: 0 1; background: $panel; }
    .runs { height: auto; max-height: 40%; }
    .tasks { height: 1fr; }
    .filter { height: 3; }
    .detail { width: 2fr; border-left: solid $primary-darken-2; padding: 0 1; }
    .attempts { height: auto; max-height: 100%; scrollbar-size-horizontal: 0; }
    .detail-verification { margin-top: 1; }
    .status { height: 2; padding: 0 1; background: $panel; }
    HelpScreen { align: center middle; }
    #help-body { width: 90%; height: 90%; border: round $primary; padding: 1 2; background: $surface; }
    """
    BINDINGS: ClassVar[list[Any]] = [*actions.bindings(), Binding("w", "schedules", "Schedules", show=False)]

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
    ) -> None:
        super().__init__()
        self.directories = [os.path.abspath(d) for d in directories] or [os.getcwd()]
        self.poll = poll
        self.read_only = read_only
        self.use_watcher = (not poll) if watch is None else watch
        if rescan_seconds is None:
            rescan_seconds = POLL_RESCAN_SECONDS if poll else SAFETY_RESCAN_SECONDS
        self.rescan_seconds = rescan_seconds if rescan_seconds > 0 else None
        self.tick = tick
        self.display_path = display_path or (lambda path: path)
        self.following = True
        self._scanners = [ProjectScanner(d) for d in self.directories]
        self._requests = ScanRequests(len(self.directories))
        self._watch_stops: dict[int, asyncio.Event] = {}
        self.scans_applied = 0
        self.loaded = asyncio.Event()
        self._loaded_panes: set[int] = set()

    # -- layout
    def compose(self) -> ComposeResult:
        with TabbedContent(id="projects"):
            for index, directory in enumerate(self.directories):
                label = terminal_safe(os.path.basename(directory.rstrip("/")) or directory, one_line=True)
                with TabPane(label, id=f"tab-{index}"):
                    yield ProjectPane(index, directory, label)
        yield Footer()

    def on_mount(self) -> None:
        self._start_scanner()
        for index in range(len(self.directories)):
            self._requests.ask(index, everything=True)
            if self.use_watcher:
                self._watch_project(index)
        if self.tick:
            self.set_interval(TICK_SECONDS, self._on_tick)
        if self.rescan_seconds:
            self.set_interval(self.rescan_seconds, self._on_rescan)
        self.focus_start()

    def focus_start(self) -> None:
        """Where the focus goes at start (a hook: ``--discover`` starts on its overview)."""
        self.panes[0].runs.focus()

    def on_unmount(self) -> None:
        self._requests.close()
        for stop in self._watch_stops.values():
            stop.set()

    @property
    def panes(self) -> list[ProjectPane]:
        return list(self.query(ProjectPane))

    @property
    def pane(self) -> ProjectPane:
        tabs = self.query_one("#projects", TabbedContent)
        active = tabs.active or "tab-0"
        return self.query_one(f"#project-{active.split('-')[-1]}", ProjectPane)

    def selection(self) -> Selection:
        return self.pane.selection()

    # -- scanning
    def _start_scanner(self) -> None:
        """One thread scans every project (a thread per project would exhaust the executor
        that Textual's thread workers share)."""
        requests = self._requests

        def loop() -> None:
            worker = get_current_worker()
            while not worker.is_cancelled and not requests.closed:
                for index, everything, runs, retime in requests.take(0.25):
                    scanner = self._scanners[index]

                    def publish(partial: ProjectSnapshot, index: int = index) -> None:
                        self.post_message(ProjectScanned(index, partial, (), partial=True))

                    snapshot = scanner.scan(reinspect=runs, everything=everything, publish=publish, retime=retime)
                    self.post_message(ProjectScanned(index, snapshot, tuple(scanner.scope_paths())))

        self.run_worker(loop, thread=True, group="scanner", name="scanner", exit_on_error=True)

    def request_focus(self, index: int, run_id: str | None) -> None:
        self._scanners[index].focus = run_id
        self.request_scan(index)

    def request_scan(
        self, index: int | None = None, everything: bool = False, runs: Iterable[str] = (), retime: bool = False
    ) -> None:
        """``retime``: recompute the clock-derived flags of unchanged runs too (the tick)."""
        for i in range(len(self.directories)) if index is None else (index,):
            self._requests.ask(i, everything=everything, runs=runs, retime=retime)

    def on_project_scanned(self, message: ProjectScanned) -> None:
        panes = self.panes
        if message.index >= len(panes) or not self.is_running:
            return  # shutting down
        pane = panes[message.index]
        if message.partial:
            if self.following:
                pane.apply(message.snapshot, now_ms())
            return
        if message.scope_paths != pane.scope_paths or (message.snapshot.root and self._base_appeared(pane, message)):
            pane.scope_paths = message.scope_paths
            stop = self._watch_stops.get(message.index)
            if stop is not None:
                stop.set()  # the watcher restarts on the new set of paths
        if not self.following:
            pane.pending = message.snapshot
            pane._sync_status(now_ms())
            return
        pane.pending = None
        pane.apply(message.snapshot, now_ms())
        self.scans_applied += 1
        self._loaded_panes.add(message.index)
        if len(self._loaded_panes) == len(self.directories) and not self.loaded.is_set():
            # Everything loaded so far (runs, views, widgets) lives as long as the app: keep it
            # out of the cyclic collector, whose full passes over a large project otherwise
            # stall a live update by hundreds of ms. Reference counting still frees it.
            gc.freeze()
            # Each live update parses a whole run file (no cycles: reference counting frees
            # it), yet its allocations still trigger full collections of 20-90 ms every second
            # or so, which then land inside an update: make full collections 10x rarer.
            young, middle, _ = gc.get_threshold()
            gc.set_threshold(young, middle, FULL_COLLECTION_EVERY)
            self.loaded.set()

    @staticmethod
    def _base_appeared(pane: ProjectPane, message: ProjectScanned) -> bool:
        root = message.snapshot.root
        exists = bool(root) and os.path.isdir(os.path.join(root, BASE))  # type: ignore[arg-type]
        appeared = exists and not pane.has_base
        pane.has_base = exists
        return appeared

    def _on_tick(self) -> None:
        now = now_ms()
        self.request_scan(retime=True)
        if self.following:
            for pane in self.panes:
                pane.refresh_times(now)

    def _on_rescan(self) -> None:
        self.request_scan(everything=True)

    # -- watching
    @work(group="watch", exclusive=False, exit_on_error=False)
    async def _watch_project(self, index: int) -> None:
        from watchfiles import awatch

        pane = self.panes[index]
        failures = 0
        while not self._requests.closed:
            root = pane.snapshot.root if pane.snapshot else None
            paths = []
            if root and os.path.isdir(os.path.join(root, BASE)):
                paths.append(os.path.join(root, BASE))
            # Each watched directory costs inotify watches; past a limit the periodic rescan
            # (which re-inspects every run in turn) is what notices edits inside scopes.
            if len(pane.scope_paths) <= MAX_WATCHED_SCOPES:
                paths.extend(pane.scope_paths)
            stop = asyncio.Event()
            self._watch_stops[index] = stop
            if not paths:
                await self._sleep_or_stop(stop, 1.0)
                continue
            armed = False
            try:
                async for changes in awatch(
                    *paths,
                    watch_filter=_ignore_temp_files,
                    debounce=WATCH_DEBOUNCE_MS,
                    step=WATCH_STEP_MS,
                    stop_event=stop,
                    recursive=True,
                    ignore_permission_denied=True,
                    rust_timeout=WATCH_ARMED_MS,
                    yield_on_timeout=True,
                ):
                    if not armed:
                        # The watcher is live now: rescan once for whatever changed while it
                        # was being (re)started.
                        armed = True
                        self.request_scan(index, everything=True)
                    if changes:
                        self._on_changes(index, root or "", {path for _, path in changes})
                failures = 0
            except Exception:  # a watched scope vanished, or no watch left: the rescan covers
                failures += 1
                await self._sleep_or_stop(stop, min(30.0, 2.0**failures))

    @staticmethod
    async def _sleep_or_stop(stop: asyncio.Event, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)

    def _on_changes(self, index: int, root: str, paths: set[str]) -> None:
        pane = self.panes[index]
        relative = {os.path.relpath(path, root) for path in paths} if root else set()
        touched: set[str] = set()
        if pane.snapshot is not None and relative:
            # Run files need no matching (every scan re-stats them); scopes are looked up by
            # path prefix in an index kept in step with the runs, not scanned one by one.
            index_of_scopes = pane._scope_index
            index_of_scopes.update(pane.snapshot.runs)
            for rel in relative:
                touched |= index_of_scopes.runs_covering(rel)
        self.request_scan(index, runs=touched)

    # -- actions (the registry in actions.py binds keys to these)
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        entry = actions.spec(action)
        if entry is None:
            return True
        return actions.gate(entry, self.read_only, self.selection())

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        selection = self.selection()
        for entry in actions.REGISTRY:
            if not entry.palette or entry.id in ("quit", "change_theme", "help"):
                continue
            if actions.gate(entry, self.read_only, selection) is not True:
                continue
            yield SystemCommand(entry.label, entry.help, _runner(self, entry.id))

    def action_schedules(self) -> None:
        from .schedules_screen import SchedulesScreen

        self.push_screen(SchedulesScreen(self.pane.directory, self.pane.label, self.read_only))

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

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
            if self.following and pane.pending is not None:
                pending, pane.pending = pane.pending, None
                pane.apply(pending, now)
            pane._sync_status(now)
        self.notify("Following live updates." if self.following else "Paused: the view is frozen.", timeout=2)

    def action_refresh(self) -> None:
        self.request_scan(everything=True)

    def action_focus_next_pane(self) -> None:
        self.screen.focus_next()

    def action_next_project(self) -> None:
        self._switch_project(1)

    def action_previous_project(self) -> None:
        self._switch_project(-1)

    def _switch_project(self, step: int) -> None:
        tabs = self.query_one("#projects", TabbedContent)
        index = int((tabs.active or "tab-0").split("-")[-1])
        target = (index + step) % len(self.directories)
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

    def _copy(self, what: str, value: str | None) -> None:
        if not value:
            self.notify(f"No {what} to copy here.", severity="warning", timeout=2)
            return
        self.copy_to_clipboard(value)
        self.notify(terminal_safe(f"Copied {what}: {value}"), timeout=3, markup=False)

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
        self._copy("state file path", self.selection().state_path)

    def action_copy_project_path(self) -> None:
        self._copy("project path", self.selection().project)


def _runner(app: NexusApp, action_id: str) -> Callable[[], Any]:
    async def run() -> None:
        await app.run_action(action_id)

    return run


def _ignore_temp_files(change: Any, path: str) -> bool:
    return not path.endswith(".tmp")


# ----------------------------------------------------------------- entry point


def main(argv: list[str] | None = None) -> int:
    """``nexus-tui``: the command line lives in :mod:`nexus_tui.cli` (kept here for ``python -m``)."""
    from .cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())
