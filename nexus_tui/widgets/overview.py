"""The "All projects" tab: one row per project, most urgent first; Enter opens the project.

The rows come from :func:`nexus_tui.logic.discovery.summarize` of each project's own scan (the app
calls :meth:`OverviewPane.show`); nothing here reads the disk.
"""

from __future__ import annotations

import time

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import DataTable, Static

from ..logic.discovery import ProjectSummary, order
from .keyed_table import InPlaceCells
from .plain import plain
from .styles import Styles, styles_of

# With ``show(..., soon=True)``, the overview is redrawn at most this often.
COALESCE_SECONDS = 0.5
COLUMNS = (
    ("project", "Project"),
    ("runs", "Runs"),
    ("accepted", "Accepted"),
    ("count", "Needs"),
    ("needs", "Needs an operator"),
)
# Each kind of need, coloured by how urgent it is.
NEED_STYLE = {
    "unreadable": "bold $error",
    "dead lock": "bold $error",
    "owner gone": "bold $error",
    "to reconcile": "bold $accent",
    "overdue": "bold $error",
    "blocked": "$warning",
    "stale": "$warning",
    "to decide": "$warning",
    "to collect": "$primary-lighten-2",
    "schedule failed": "$warning",
}


def summary_cells(label: str, summary: ProjectSummary | None, styles: Styles) -> dict[str, Text]:
    name = plain(label, "bold", one_line=True)
    if summary is None:
        return {
            "project": name,
            "runs": Text("…", style="dim"),
            "accepted": Text(""),
            "count": Text(""),
            "needs": Text("loading…"),
        }
    needs = Text()
    for kind, count in summary.needs():
        if needs:
            needs.append("  ")
        needs.append(f"{count} {kind}", style=styles.themed(NEED_STYLE.get(kind, "")))
    if not needs:
        needs = Text("loading…" if not summary.loaded else "nothing", style="dim" if summary.loaded else "dim italic")
    return {
        "project": name,
        "runs": Text(str(summary.runs)),
        "accepted": Text(
            f"{summary.accepted}/{summary.tasks}", style=styles.themed("$success") if summary.accepted else "dim"
        ),
        "count": Text(str(summary.total), style=styles.themed("bold $error"))
        if summary.total
        else Text("0", style="dim"),
        "needs": needs,
    }


class OverviewTable(InPlaceCells):
    """The overview's table; knows whether the operator has chosen a row (keys or mouse)."""

    chosen = False

    def _choose(self) -> None:
        self.chosen = True

    def action_cursor_up(self) -> None:
        self._choose()
        super().action_cursor_up()

    def action_cursor_down(self) -> None:
        self._choose()
        super().action_cursor_down()

    def action_page_up(self) -> None:
        self._choose()
        super().action_page_up()

    def action_page_down(self) -> None:
        self._choose()
        super().action_page_down()

    def action_scroll_top(self) -> None:
        self._choose()
        super().action_scroll_top()

    def action_scroll_bottom(self) -> None:
        self._choose()
        super().action_scroll_bottom()

    async def _on_click(self, event: events.Click) -> None:
        self._choose()  # DataTable's own click handler runs after this one and moves the cursor


class OverviewPane(Vertical):
    """Every discovered project, one row each, sorted by urgency."""

    class Opened(Message):
        """The operator chose a project's row (Enter): open its tab."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, root: str) -> None:
        super().__init__(id="overview")
        self.root = root
        self.labels: dict[int, str] = {}
        self.summaries: dict[int, ProjectSummary] = {}  # as shown
        self._order: list[int] = []
        self.updates = 0  # rows redrawn (for tests and the benchmark)
        # Summaries waiting for the next redraw (``show(..., soon=True)``), and when it runs.
        self._waiting: dict[int, ProjectSummary] = {}
        self._redraw_timer: Timer | None = None
        self._redrawn_at = 0.0
        self._unsorted = False  # rows shown out of urgency order (while loading)

    def compose(self) -> ComposeResult:
        yield Static(self._title(), classes="overview-title", id="overview-title")
        yield OverviewTable(id="overview-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        for key, label in COLUMNS:
            self.table.add_column(label, key=key)

    @property
    def table(self) -> OverviewTable:
        return self.query_one("#overview-table", OverviewTable)

    def _title(self) -> Text:
        return plain(f"All projects under {self.root} ({len(self.labels)})", one_line=True)

    def highlighted(self) -> int | None:
        """The project index of the row under the cursor."""
        table = self.table
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key((table.cursor_row, 0))  # type: ignore[arg-type]
        return int(row_key.value) if row_key.value is not None else None

    def add(self, index: int, label: str) -> None:
        self.add_all([(index, label)])

    def add_all(self, projects: list[tuple[int, str]]) -> None:
        """Rows for (index, label) pairs: one redraw for all (a redraw per row is quadratic)."""
        for index, label in projects:
            self.labels[index] = label
        self.query_one("#overview-title", Static).update(self._title())
        self._redraw()

    def restyle(self) -> None:
        """Redraw every row (the theme changed: its colours are in the cells)."""
        self._order = []
        self._redraw()

    def show(self, index: int, summary: ProjectSummary, soon: bool = False) -> None:
        """Project ``index`` now stands as ``summary`` (a no-op when nothing changed).

        ``soon`` (a first load): the redraw may wait up to ``COALESCE_SECONDS`` for other
        projects' rows, and the rows keep their places until ``flush(sort=True)``. A re-sort
        renders every visible row again (each cell's style carries its row index); fifty of
        them one by one were a third of a --discover start's time on the UI thread."""
        if index not in self._waiting and self.summaries.get(index) == summary:
            return
        self._waiting[index] = summary
        self._unsorted |= soon
        wait = self._redrawn_at + COALESCE_SECONDS - time.monotonic() if soon else 0.0
        if wait <= 0:
            self.flush(sort=not soon)
        elif self._redraw_timer is None:
            self._redraw_timer = self.set_timer(wait, lambda: self.flush(sort=False))

    def flush(self, sort: bool = True) -> None:
        """Show every summary still waiting (one redraw); ``sort``: the rows in urgency order."""
        if self._redraw_timer is not None:
            self._redraw_timer.stop()
            self._redraw_timer = None
        waiting, self._waiting = self._waiting, {}
        changed = {index for index, summary in waiting.items() if self.summaries.get(index) != summary}
        if not changed and not (sort and self._unsorted):
            return
        self.summaries.update(waiting)
        self._redraw(changed=changed, sort=sort)
        self._unsorted &= not sort
        self._redrawn_at = time.monotonic()

    def _sorted(self) -> list[int]:
        ranked = order(self.summaries, self.labels)
        return ranked + sorted((i for i in self.labels if i not in self.summaries), key=lambda i: self.labels[i])

    def _redraw(self, changed: set[int] | None = None, sort: bool = True) -> None:
        table = self.table
        wanted = self._sorted() if sort or len(self._order) != len(self.labels) else list(self._order)
        if changed is not None and len(wanted) == len(self._order):
            # The same rows: the changed rows' cells, then (if the urgency order moved) a sort,
            # never a rebuild (with a thousand projects, rebuilds made the load quadratic).
            styles = styles_of(self.app)
            for index in sorted(changed):
                cells = summary_cells(self.labels[index], self.summaries.get(index), styles)
                for key, value in cells.items():
                    # A wider value widens its column (measured only then: measuring reads the
                    # whole column), or "Needs an operator" is cut at the first summary's width.
                    width = table.columns[key].content_width  # type: ignore[index]
                    table.update_cell(str(index), key, value, update_width=value.cell_len > width)
            if wanted != self._order:
                keep = self.highlighted() if table.chosen else None
                position = {id(table.get_cell(str(index), "project")): n for n, index in enumerate(wanted)}
                table.sort("project", key=lambda cell: position[id(cell)])
                self._order = wanted
                if keep is not None:
                    table.move_cursor(row=wanted.index(keep), animate=False)
            self.updates += 1
            return
        # Until the operator picks a row, the cursor stays on the most urgent project; after,
        # on the project picked, wherever the re-sort moves it.
        keep = self.highlighted() if table.chosen else None
        table.clear()
        for index in wanted:
            cells = summary_cells(self.labels[index], self.summaries.get(index), styles_of(self.app))
            table.add_row(*(cells[key] for key, _ in COLUMNS), key=str(index))
        self._order = wanted
        if keep is not None and keep in wanted:
            table.move_cursor(row=wanted.index(keep), animate=False)
        self.updates += 1

    @on(DataTable.RowSelected, "#overview-table")
    def _opened(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.Opened(int(event.row_key.value)))
