"""One project on the main screen: runs list, task table, detail pane and status bar."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Input, OptionList, Static, Tree
from textual.widgets.option_list import Option

from nexus_core.terminal import terminal_safe
from nexus_core.timeutil import now_ms

from .. import actions
from ..logic.jobs import Jobs
from ..logic.model import ProjectSnapshot, RunView, TaskRow
from ..logic.navigation import Found, search_runs
from ..logic.selection import Selection, parse_filter, row_matches
from ..logic.session import ProjectSession
from .ages import age_changes_at
from .job_mark import job_mark, with_mark
from .keyed_table import KeyedTable
from .plain import plain
from .run_cells import RUN_COLUMNS, run_cells, run_columns, run_sort_value
from .shown import update_changed
from .status_bar import StatusBar
from .styles import GLYPH, Styles, styles_of
from .task_cells import TASK_COLUMNS, task_cells, task_columns, task_sort_value
from .task_detail import TaskDetail

# Under NARROW_COLUMNS the detail pane goes below the tables. Tables narrower than
# FULL_COLUMNS_WIDTH take their compact columns (run_cells.py, task_cells.py).
NARROW_COLUMNS = 120
NEVER = 2**63  # an age shown as "—" never changes
FULL_COLUMNS_WIDTH = 96


class RunFocused(Message):
    """The runs cursor moved to ``run_id`` in project ``index`` (its full inspection is wanted)."""

    def __init__(self, index: int, run_id: str | None) -> None:
        super().__init__()
        self.index = index
        self.run_id = run_id


class ProjectPane(Vertical):
    """One project: runs list, task table, detail pane and status bar."""

    def __init__(
        self, session: ProjectSession, *, display_path: Callable[[str], str] | None = None, jobs: Jobs | None = None
    ) -> None:
        super().__init__(id=f"project-{session.index}", classes="project")
        self.session = session
        self.display_path = display_path or (lambda path: path)
        self.jobs = jobs if jobs is not None else Jobs()  # the app's: a running job marks its task's row
        self._task_marks: dict[str, str | None] = {}
        # Set by the app (they go down, never pulled up): live updates followed, actions disabled.
        self.following = True
        self.read_only = True
        self._task_rows: dict[str, TaskRow] = {}
        # Per row key: when (ms) its shown age next reads differently (NEVER: it never does).
        # The tick redraws a row only then, and only while it is in view.
        self._task_due: dict[str, int] = {}
        self._run_views: dict[str, RunView] = {}
        self._run_locks: tuple[Any, ...] | None = None
        self._run_due: dict[str, int] = {}
        self._selection: tuple[tuple[Any, ...], Selection] | None = None
        self.narrow = False  # under NARROW_COLUMNS: the detail below the tables
        self.compact = False  # the tables narrower than FULL_COLUMNS_WIDTH: compact columns
        self._filter_problem: str | None = None  # shown under the filter input
        self._found: list[Found] = []  # the search list's entries (the other runs' matches)
        # Composed: until then (--discover composes a pane when its tab is first shown) a scan
        # only stores its snapshot in the session, and nothing else touches the widgets.
        self._composed = False

    # -- the session's facts, read by the tests and the app
    @property
    def index(self) -> int:
        return self.session.index

    @property
    def snapshot(self) -> ProjectSnapshot | None:
        return self.session.snapshot

    @property
    def run_id(self) -> str | None:
        return self.session.run_id

    @property
    def task_id(self) -> str | None:
        return self.session.task_id

    def compose(self) -> ComposeResult:
        with Horizontal(classes="main"):
            with Vertical(classes="left"):
                yield Static("Runs", classes="title", id=f"runs-title-{self.index}")
                runs = KeyedTable(RUN_COLUMNS, id=f"runs-{self.index}", classes="runs")
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
                # Why part of the filter is not applied (an unknown state:WORD), shown under it.
                problem = Static("", id=f"filter-problem-{self.index}", classes="filter-problem")
                problem.display = False
                yield problem
                # The search of every run: the other runs' tasks the filter matches (↓ from the
                # filter picks one, Enter goes there).
                search = OptionList(id=f"search-{self.index}", classes="search")
                search.display = False
                yield search
                yield KeyedTable(TASK_COLUMNS, id=f"tasks-{self.index}", classes="tasks")
            yield TaskDetail(self.index)
        yield StatusBar(self.session, self.display_path, id=f"status-{self.index}")

    # -- handy queries
    @property
    def runs(self) -> KeyedTable:
        return self.query_one(f"#runs-{self.index}", KeyedTable)

    @property
    def tasks(self) -> KeyedTable:
        return self.query_one(f"#tasks-{self.index}", KeyedTable)

    @property
    def attempts_tree(self) -> Tree[None]:
        return self.query_one(TaskDetail).attempts_tree

    @property
    def filter_input(self) -> Input:
        return self.query_one(f"#filter-{self.index}", Input)

    @property
    def search_list(self) -> OptionList:
        return self.query_one(f"#search-{self.index}", OptionList)

    def current_view(self) -> RunView | None:
        return self.session.current_view()

    def selection_key(self) -> tuple[Any, ...]:
        """What the selection depends on: a new snapshot (every scan makes one), the cursor, the
        filter (a task filtered out is not selected)."""
        return (
            id(self.session.snapshot),
            self.session.run_id,
            self.session.task_id,
            self.session.task_id in self._task_rows,
            self.session.remote.status if self.session.remote is not None else None,
        )

    def selection(self) -> Selection:
        """The selection, rebuilt only when its key changed (check_action asks many times a key)."""
        key = self.selection_key()
        if self._selection is None or self._selection[0] != key:
            self._selection = (key, self._build_selection())
        return self._selection[1]

    def _build_selection(self) -> Selection:
        view = self.current_view()
        attempt_id = None
        if view and view.inspection and self.session.task_id:
            task = next((t for t in view.inspection["tasks"] if t["id"] == self.session.task_id), None)
            if task and task["attempts"]:
                attempt_id = task["attempts"][-1]["id"]
        root = self.session.snapshot.root if self.session.snapshot else None
        remote = self.session.remote
        return Selection(
            project=root or self.session.directory,
            run_id=self.session.run_id if view else None,
            task_id=self.session.task_id if view and self.session.task_id in self._task_rows else None,
            attempt_id=attempt_id,
            lock_fingerprint=self.session.snapshot.writer_lock.fingerprint if self.session.snapshot else None,
            state_path=f"{root}/{view.state_path}" if root and view else None,
            inspection=view.inspection if view else None,
            remote_host=terminal_safe(remote.project.host, one_line=True) if remote is not None else None,
            remote_refusal=remote.refusal() if remote is not None else None,
        )

    def on_mount(self) -> None:
        self._composed = True
        if self.session.snapshot is not None:  # scanned before it was shown
            self.apply(self.session.snapshot, now_ms())

    # -- applying snapshots
    def apply(self, snapshot: ProjectSnapshot, now: int) -> None:
        self.session.snapshot = snapshot
        if not self._composed:
            return
        with self.app.batch_update():
            self._sync_runs(now)
            self._sync_tasks(now)
            self._sync_detail(now)
            self.sync_status(now)

    def restyle(self, now: int) -> None:
        """The theme changed: recompute every cell, text and tree node with its colours."""
        if not self._composed:
            return
        self._run_views.clear()
        self._task_rows.clear()
        self.query_one(TaskDetail).forget()
        if self.session.snapshot is not None:
            self.apply(self.session.snapshot, now)

    def refresh_times(self, now: int) -> None:
        """The 1 s tick: only the time-derived cells and texts."""
        if not self._composed:
            return
        if self.session.snapshot is None:
            if self.session.remote is not None:
                self.sync_status(now)  # a host not reached yet: its "retrying in N s" counts down
            return
        with self.app.batch_update():
            self._sync_runs(now, retime=True)
            self._sync_tasks(now, retime=True)
            self._sync_detail(now)
            self.sync_status(now)

    @on(KeyedTable.Scrolled)
    def _rows_came_into_view(self, message: KeyedTable.Scrolled) -> None:
        message.stop()
        if self.following:
            self.refresh_times(now_ms())

    # -- the compact forms (80 to 160 columns)
    def on_resize(self, event: events.Resize) -> None:
        width = event.size.width
        below = width < NARROW_COLUMNS
        # The tables get the whole width with the detail below, else 3/5 of it (.left 3fr, .detail 2fr).
        tables = width if below else width * 3 // 5
        self.use_layout(narrow=below, compact=tables < FULL_COLUMNS_WIDTH)

    def use_layout(self, *, narrow: bool, compact: bool) -> None:
        """``narrow``: the detail pane below the tables and a shorter status bar. ``compact``:
        the tables' compact columns (what decides the next step first, values as glyphs)."""
        if (narrow, compact) == (self.narrow, self.compact):
            return
        self.narrow, self.compact = narrow, compact
        self.set_class(narrow, "-narrow")
        self.query_one(f"#status-{self.index}", StatusBar).narrow = narrow
        self.runs.use_columns(run_columns(compact))
        self.tasks.use_columns(task_columns(compact))
        self._run_views.clear()
        self._task_rows.clear()
        if self.session.snapshot is not None:
            self.apply(self.session.snapshot, now_ms())

    def _sync_runs(self, now: int, retime: bool = False) -> None:
        """``retime`` (the 1 s tick): recompute the age cells of unchanged runs too; a
        scan-driven update touches only the runs that changed, whatever the clock says."""
        assert self.session.snapshot is not None
        table = self.runs
        cursor = table.cursor_key() if table.cells else self.session.run_id
        wanted = {view.run_id: view for view in self.session.snapshot.runs}
        for gone in table.drop_missing(wanted):
            self._run_views.pop(gone, None)
            self._run_due.pop(gone, None)
        added = False
        locks = (self.session.snapshot.writer_lock, self.session.snapshot.recovery_lock)
        same_locks = locks == self._run_locks
        self._run_locks = locks
        styles = styles_of(self.app)
        in_view = table.in_view()
        for view in self.session.snapshot.runs:
            key = view.run_id
            if (
                same_locks
                and self._run_views.get(key) is view
                and key in table.cells
                and (not retime or self._run_due.get(key, NEVER) > now or not in_view(key))
            ):
                continue
            self._run_views[key] = view
            self._run_due[key] = age_changes_at(view.updated_at, now) or NEVER
            added |= table.put(key, run_cells(view, self.session.snapshot, now, styles, self.compact))
        if added or self.session.run_sort[0]:
            order = {view.run_id: i for i, view in enumerate(self.session.snapshot.runs)}
            column, reverse = self.session.run_sort
            table.sort_rows(lambda key: run_sort_value(wanted[key], column or "", order[key]), reverse)
        if self.session.run_id not in wanted:
            self.session.run_id = self.session.snapshot.runs[0].run_id if self.session.snapshot.runs else None
            cursor = self.session.run_id
            if self.session.run_id is not None:
                # Picked here, not highlighted: the scanner must still be told (it keeps the full
                # inspection of its focus run only, and runs added later may sort before this one).
                self.post_message(RunFocused(self.index, self.session.run_id))
        table.restore_cursor(cursor)
        title = f"Runs ({len(self.session.snapshot.runs)})"
        if self.session.run_sort[0]:
            title += f" sorted by {self.session.run_sort[0]}{' ↓' if self.session.run_sort[1] else ''}"
        update_changed(self.query_one(f"#runs-title-{self.index}", Static), Text(title, style="bold"))

    def _sync_tasks(self, now: int, retime: bool = False) -> None:
        """``retime`` (the 1 s tick): recompute the age cells of unchanged rows too."""
        table = self.tasks
        view = self.current_view()
        rows = view.rows if view else ()
        task_filter = parse_filter(self.session.filter_text)
        self._show_filter_problem(task_filter.problem)
        visible = [row for row in rows if row_matches(row, task_filter.terms)]
        wanted = {row.task_id: row for row in visible}
        cursor = table.cursor_key() if table.cells else self.session.task_id
        for gone in table.drop_missing(wanted):
            self._task_rows.pop(gone, None)
            self._task_due.pop(gone, None)
        added = False
        # Only the tick moves ages: outside it (a scan, a selection) an unchanged row keeps its
        # cells, so one changed task costs one row; the tick redraws an unchanged row only when
        # its age reads differently and it is in view (KeyedTable.Scrolled brings the rest).
        styles = styles_of(self.app)
        in_view = table.in_view()
        for row in visible:
            key = row.task_id
            mark = self._job_mark(view, key)
            if (
                self._task_rows.get(key) == row
                and self._task_marks.get(key) == mark
                and key in table.cells
                and (not retime or self._task_due.get(key, NEVER) > now or not in_view(key))
            ):
                continue
            cells = task_cells(row, now, styles, self.compact)
            if mark is not None:
                cells["task"] = with_mark(cells["task"], mark, styles)
            added |= table.put(key, cells)
            self._task_rows[key] = row
            self._task_marks[key] = mark
            self._task_due[key] = age_changes_at(row.last_observed, now) or NEVER
        if added or self.session.task_sort[0]:
            plan_index = {row.task_id: i for i, row in enumerate(rows)}
            column, reverse = self.session.task_sort
            table.sort_rows(lambda key: task_sort_value(wanted[key], column or "", plan_index[key]), reverse)
        if self.session.task_id not in wanted:
            if cursor in wanted:
                self.session.task_id = cursor
            else:
                self.session.task_id = table.row_key_at(min(table.cursor_row, table.row_count - 1))
            cursor = self.session.task_id
        table.restore_cursor(cursor)
        title = Text("Tasks", style="bold")
        if view:
            title.append(" of ")
            title.append(plain(view.run_id, "bold"))
            title.append(f"  ({len(visible)}/{len(rows)})")
        if self.session.filter_text:
            title.append("  filter: ", style="dim")
            title.append(plain(self.session.filter_text, styles_of(self.app).themed("$warning")))
        if self.session.task_sort[0]:
            title.append(
                f"  sorted by {self.session.task_sort[0]}{' ↓' if self.session.task_sort[1] else ''}", style="dim"
            )
        update_changed(self.query_one(f"#tasks-title-{self.index}", Static), title)

    def sync_job_marks(self, now: int) -> None:
        """A job of this session started or ended: re-put only the rows whose mark changed (the
        1 s tick moves the elapsed times)."""
        if not self._composed:
            return
        view = self.current_view()
        table = self.tasks
        styles = styles_of(self.app)
        for task_id, row in self._task_rows.items():
            mark = self._job_mark(view, task_id)
            if mark != self._task_marks.get(task_id) and task_id in table.cells:
                cells = task_cells(row, now, styles, self.compact)
                if mark is not None:
                    cells["task"] = with_mark(cells["task"], mark, styles)
                table.put(task_id, cells)
                self._task_marks[task_id] = mark

    def _job_mark(self, view: RunView | None, task_id: str) -> str | None:
        """The mark of a task whose verify or launch runs from this session (widgets/job_mark.py)."""
        if view is None or self.session.snapshot is None or not self.jobs.any_running:
            return None
        job = self.jobs.running_on(self.session.snapshot.root, view.run_id, task_id)
        return job_mark(job, self.compact)

    def _show_filter_problem(self, problem: str | None) -> None:
        widget = self.query_one(f"#filter-problem-{self.index}", Static)
        if problem != self._filter_problem:
            self._filter_problem = problem
            update_changed(widget, plain(problem or "", styles_of(self.app).themed("$warning")))
            widget.display = problem is not None

    def _sync_detail(self, now: int) -> None:
        self.query_one(TaskDetail).sync(self.session, now, self.display_path)

    def sync_status(self, now: int) -> None:
        if not self._composed:
            return
        read_only = self.read_only or not any(entry.mutating for entry in actions.REGISTRY)
        self.query_one(f"#status-{self.index}", StatusBar).sync(now, following=self.following, read_only=read_only)

    # -- events
    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        key = event.row_key.value
        table = event.data_table
        if event.cursor_row != table.cursor_row or (isinstance(table, KeyedTable) and table.cursor_key() != key):
            # Stale: the cursor moved on since (a column switch clears, then restores it), or the
            # rows moved under it (a run switch keeps a task id both runs have, then sorts).
            return
        now = now_ms()
        if event.data_table is self.runs:
            if key != self.session.run_id:
                self.session.run_id = key
                self.session.task_id = None
                # The scanner keeps the full inspection of the focus run only: ask for it.
                self.post_message(RunFocused(self.index, key))
                self._sync_tasks(now)
                self._sync_detail(now)
        elif event.data_table is self.tasks and key != self.session.task_id:
            self.session.task_id = key
            self._sync_detail(now)

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        column = str(event.column_key.value)
        self.sort_by(event.data_table, column)

    def sort_by(self, table: DataTable[Any], column: str | None, reverse: bool | None = None) -> None:
        current = self.session.run_sort if table is self.runs else self.session.task_sort
        if reverse is None:
            reverse = (not current[1]) if current[0] == column else False
        if table is self.runs:
            self.session.run_sort = (column, reverse)
            self._sync_runs(now_ms())
        else:
            self.session.task_sort = (column, reverse)
            self._sync_tasks(now_ms())

    def cycle_sort(self, table: DataTable[Any]) -> None:
        columns = list(table.column_keys) if isinstance(table, KeyedTable) else []
        current = (self.session.run_sort if table is self.runs else self.session.task_sort)[0]
        following = columns[(columns.index(current) + 1) % len(columns)] if current in columns else columns[0]
        self.sort_by(table, following, reverse=False)

    def reverse_sort(self, table: DataTable[Any]) -> None:
        column, reverse = self.session.run_sort if table is self.runs else self.session.task_sort
        self.sort_by(table, column or ("run" if table is self.runs else "task"), reverse=not reverse)

    @on(Input.Changed)
    def _filter_changed(self, event: Input.Changed) -> None:
        self.session.filter_text = event.value.strip()
        self._sync_tasks(now_ms())
        self._sync_detail(now_ms())
        self._sync_search()

    @on(Input.Submitted)
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self.filter_input.display = bool(self.session.filter_text)
        self._show_search(False)
        self.tasks.focus()

    def open_filter(self) -> None:
        self.filter_input.display = True
        self.filter_input.focus()
        self._sync_search()

    def clear_filter(self) -> None:
        self.filter_input.value = ""
        self.session.filter_text = ""
        self.filter_input.display = False
        self._show_search(False)
        self._sync_tasks(now_ms())
        self._sync_detail(now_ms())
        self.tasks.focus()

    def select(self, run_id: str, task_id: str | None) -> None:
        """Put the cursors on ``run_id`` and ``task_id`` (the inbox's jump); a filter that hides
        the task is cleared. The scanner is told the run (its full inspection is wanted)."""
        now = now_ms()
        if task_id is not None and self.session.filter_text:
            view = self.session.snapshot.run(run_id) if self.session.snapshot else None
            row = next((r for r in view.rows if r.task_id == task_id), None) if view else None
            if row is None or not row_matches(row, parse_filter(self.session.filter_text).terms):
                self.filter_input.value = ""
                self.session.filter_text = ""
                self.filter_input.display = False
        if run_id != self.session.run_id:
            self.session.run_id = run_id
            self.post_message(RunFocused(self.index, run_id))
        self.session.task_id = task_id
        self.runs.restore_cursor(run_id)
        self._sync_tasks(now)
        if task_id is not None:
            self.tasks.restore_cursor(task_id)
            self.tasks.focus()
        self._sync_detail(now)

    # -- the search of every run (under the filter)
    def _sync_search(self) -> None:
        """List the other runs' tasks the filter matches (the current run's are in the table)."""
        terms = parse_filter(self.session.filter_text).terms
        self._found, total = search_runs(self.session.snapshot, terms, exclude=self.session.run_id)
        search = self.search_list
        search.clear_options()
        if not self._found:
            self._show_search(False)
            return
        runs = len({found.run_id for found in self._found})
        more = f", the first {len(self._found)} listed" if total > len(self._found) else ""
        tasks_words = f"{total} task{'s' if total != 1 else ''} in {runs} run{'s' if runs != 1 else ''}"
        search.border_title = f"In other runs: {tasks_words}{more} (↓ picks, Enter goes there)"
        styles = styles_of(self.app)
        search.add_options(
            [Option(self._found_prompt(found, styles), id=str(i)) for i, found in enumerate(self._found)]
        )
        self._show_search(True)

    @staticmethod
    def _found_prompt(found: Found, styles: Styles) -> Text:
        row = found.row
        text = Text(GLYPH.get(row.state, " ") + " ", style=styles.state(row.state, ""))
        text.append(plain(found.run_id, "bold", one_line=True))
        text.append(" › ", style="dim")
        text.append(plain(row.task_id, one_line=True))
        text.append(f"  {row.state}", style="dim")
        if row.need is not None:
            text.append("  needs attention", style=styles.themed("$warning"))
        return text

    def _show_search(self, visible: bool) -> None:
        self.search_list.display = visible

    def on_key(self, event: events.Key) -> None:
        """↓ in the filter goes down into the other runs' matches."""
        if event.key == "down" and self.filter_input.has_focus and self.search_list.display:
            event.stop()
            self.search_list.focus()
            if self.search_list.highlighted is None:
                self.search_list.highlighted = 0

    @on(OptionList.OptionSelected)
    def _found_selected(self, event: OptionList.OptionSelected) -> None:
        if event.option_list is not self.search_list:
            return
        event.stop()
        found = self._found[int(event.option.id or 0)]
        self._show_search(False)
        self.select(found.run_id, found.row.task_id)

    def shown_order(self) -> list[tuple[str, list[TaskRow]]]:
        """Every run as the runs list orders it, each with its tasks as the task table orders
        them (its sort; plan order without one): the order ``n``/``N`` walk in."""
        snapshot = self.session.snapshot
        if snapshot is None:
            return []
        views = {view.run_id: view for view in snapshot.runs}
        keys = [self.runs.row_key_at(index) for index in range(self.runs.row_count)]
        shown = [key for key in keys if key in views] or list(views)
        column, reverse = self.session.task_sort
        order = []
        for run_id in shown:
            rows = views[run_id].rows
            plan = {row.task_id: index for index, row in enumerate(rows)}
            ranked = sorted(rows, key=lambda r: task_sort_value(r, column or "", plan[r.task_id]), reverse=reverse)
            order.append((run_id, ranked))
        return order

    def key_escape(self) -> None:
        if self.filter_input.has_focus or self.session.filter_text:
            self.clear_filter()
