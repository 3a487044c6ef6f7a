"""The jobs view (``J``): every verify and launch of this dashboard session, running or finished,
and the selected one's output as it is captured (the habit of ``gh run watch`` and k9s's logs):
followed by default, paused with ``p`` (the view stays where it is, lines keep arriving), searched
with ``f`` (only the lines containing the text, the text highlighted), stopped with ``x`` (asks
first). Its keys come from the registry (``actions.JOBS`` entries).

It reads the app's :class:`~nexus_tui.logic.jobs.Jobs` (the job's worker feeds each job; the app
forwards ``JobChanged``). Output is untrusted text: made terminal-safe and written to a plain-text
``Log`` (never markup); a stderr line starts with STDERR_MARK."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.highlighter import Highlighter
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Footer, Input, Label, Log, Static

from nexus_core.terminal import terminal_safe

from .. import actions
from ..logic.jobs import OUTPUT_LINES_KEPT, Job, Jobs, OutputLine, short_elapsed
from ..logic.selection import Selection
from ..widgets.plain import plain
from ..widgets.styles import Styles, styles_of
from .dialogs import Display
from .stop import ConfirmStop

TICK_SECONDS = 0.5
COLUMNS = (("number", "#"), ("action", "Action"), ("task", "Task"), ("state", "State"), ("elapsed", "Elapsed"))
STATE_STYLE = {
    "running": "$accent",
    "stopping": "$warning",
    "passed": "$success",
    "completed": "$success",
    "failed": "$error",
    "refused": "$error",
    "ambiguous": "$warning",
    "blocked": "$warning",
}


STDERR_MARK = "▌"  # before a stderr line (also coloured): the streams apart without colour too


class LineStyles(Highlighter):
    """Styles a line of the log as it is drawn: stderr in the warning colour, the dashboard's own
    lines bold, the searched text highlighted. (Textual's ``Log`` draws only the lines on
    screen, so a job's 5,000 lines cost nothing until they are seen.)"""

    def __init__(self, styles: Callable[[], Styles]) -> None:
        self.search = ""
        self.styles = styles  # the log's app's, asked at each line: a theme change recolours

    def highlight(self, text: Text) -> None:
        line = text.plain
        styles = self.styles()
        if line.startswith(STDERR_MARK):
            text.stylize(styles.themed("$warning"))
        elif line.startswith("── "):
            text.stylize("bold")
        if self.search:
            text.highlight_words([self.search], styles.themed("reverse $accent"), case_sensitive=False)


class JobLog(Log):
    """The selected job's output (plain lines: never markup). A Tab stop only when there is
    something to scroll."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(highlight=True, max_lines=OUTPUT_LINES_KEPT, id=id)
        self.styles_of_lines = LineStyles(lambda: styles_of(self.app))
        self.highlighter = self.styles_of_lines

    def allow_focus(self) -> bool:
        return self.max_scroll_y > 0 or self.max_scroll_x > 0


class JobsScreen(ModalScreen[None]):
    """The session's jobs and the selected one's live output."""

    REGISTRY_SCREEN = actions.JOBS  # its actions' registry entries (the palette over it offers them)

    DEFAULT_CSS = """
    JobsScreen { align: center middle; }
    JobsScreen > #panel { width: 96%; height: 90%; border: thick $primary; background: $surface; }
    JobsScreen #panel-title { text-style: bold; padding: 0 1; }
    JobsScreen #jobs { height: auto; max-height: 8; }
    JobsScreen #job-heading { background: $panel; padding: 0 1; }
    JobsScreen JobLog { height: 1fr; padding: 0 1; overflow: auto auto; }
    """
    BINDINGS: ClassVar[list[Any]] = [
        Binding("escape,J,q", "dismiss_panel", "Close"),
        *actions.bindings(screen=actions.JOBS),
    ]

    def __init__(
        self, jobs: Jobs, selected: int | None = None, *, read_only: bool = False, display: Display | None = None
    ) -> None:
        super().__init__()
        self.jobs = jobs
        self.read_only = read_only
        self.shown_text = display or (lambda text: text)
        listed = jobs.all()
        chosen = jobs.get(selected) if selected is not None else None
        # The one asked for, else the newest running, else the newest.
        self.job: Job | None = chosen or next(reversed(jobs.running()), None) or (listed[-1] if listed else None)
        self.following = True
        self.search = ""
        self.shown_up_to = 0  # the job's next output line number not yet written to the log
        self.matches = 0

    def compose(self) -> ComposeResult:
        with Vertical(id="panel"):
            yield Label(plain("Jobs of this session: verify and launch, running and finished"), id="panel-title")
            yield DataTable(id="jobs", cursor_type="row", zebra_stripes=True)
            yield Static("", id="job-heading")
            search = Input(
                placeholder="find: only the lines containing this text (Enter keeps, Esc clears)", id="job-search"
            )
            search.display = False
            yield search
            yield JobLog(id="job-output")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#jobs", DataTable)
        for key, label in COLUMNS:
            table.add_column(label, key=key)
        self.sync()
        self._show_job(self.job)
        self.set_interval(TICK_SECONDS, self.sync)
        table.focus()

    # -- the list
    def sync(self) -> None:
        """Rows by job number (cells updated in place), then the selected job's new lines."""
        table = self.query_one("#jobs", DataTable)
        listed = self.jobs.all()
        keys = {str(job.number) for job in listed}
        for row_key in list(table.rows):
            if row_key.value not in keys:
                table.remove_row(row_key)
        for job in listed:
            cells = self._cells(job)
            key = str(job.number)
            if key in {k.value for k in table.rows}:
                for column, value in cells.items():
                    table.update_cell(key, column, value)
            else:
                table.add_row(*cells.values(), key=key)
        if self.job is not None and str(self.job.number) in keys:
            index = table.get_row_index(str(self.job.number))
            if table.cursor_row != index:
                table.move_cursor(row=index, animate=False)
        self._catch_up()
        self._heading()

    def _cells(self, job: Job) -> dict[str, Text]:
        state = job.state()
        return {
            "number": Text(str(job.number)),
            "action": Text(job.action),
            "task": plain(self.shown_text(f"{job.target.run_id}/{job.target.task_id}"), one_line=True),
            "state": Text(state, style=styles_of(self.app).themed(STATE_STYLE.get(state, ""))),
            "elapsed": Text(short_elapsed(job.elapsed())),
        }

    @on(DataTable.RowHighlighted, "#jobs")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        number = int(event.row_key.value) if event.row_key.value else None
        job = self.jobs.get(number) if number is not None else None
        if job is not None and job is not self.job:
            self._show_job(job)

    def job_changed(self, job: Job) -> None:
        """The app's word that a job has news (``JobChanged``)."""
        self.sync()

    # -- the log
    def _show_job(self, job: Job | None) -> None:
        self.job = job
        log = self.query_one(JobLog)
        log.clear()
        log.styles_of_lines.search = self.search
        self.shown_up_to = 0
        self.matches = 0
        if job is None:
            log.write_line("No verify or launch has run in this session yet (v verifies, l launches).")
        self._catch_up()
        self._heading()

    def _catch_up(self) -> None:
        if self.job is None:
            return
        lines, self.shown_up_to = self.job.lines_since(self.shown_up_to)
        shown = [text for text in map(self._line, lines) if text is not None]
        log = self.query_one(JobLog)
        if shown:
            log.write_lines(shown, scroll_end=False)
        # Following keeps the end in view, also once the log's width (measured later) adds a
        # horizontal scrollbar; paused, the view stays where the operator put it.
        if self.following and log.scroll_y != log.max_scroll_y:
            log.scroll_end(animate=False, immediate=True, x_axis=False)

    def _line(self, line: OutputLine) -> str | None:
        """The line as shown (terminal-safe), or None when the search leaves it out."""
        text = terminal_safe(self.shown_text(line.text), one_line=True)
        if line.stream == "stderr":
            text = STDERR_MARK + text
        if self.search:
            if self.search.casefold() not in text.casefold():
                return None
            self.matches += 1
        return text

    def _heading(self) -> None:
        heading = self.query_one("#job-heading", Static)
        job = self.job
        if job is None:
            heading.update("")
            return
        words = f"{job.label} · {job.state()} · {short_elapsed(job.elapsed())}"
        if job.child_pid:
            words += f" · pid {job.child_pid}"
        words += f" · {job.output.count} lines"
        if job.output.dropped:
            words += f" (the first {job.output.dropped} no longer kept)"
        words += " · following" if self.following else " · paused (p follows)"
        if self.search:
            words += f" · find {self.search!r}: {self.matches} line{'s' if self.matches != 1 else ''}"
        heading.update(plain(self.shown_text(words), one_line=True))

    # -- the panel's actions (registry entries with screen=JOBS)
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The registry's gate: Stop is off in --read-only and when nothing runs."""
        if action != "job" or not parameters:
            return True
        entry = actions.spec(f"jobs_{parameters[0]}")
        return True if entry is not None and self.refusal(entry) is None else None

    def refusal(self, entry: actions.ActionSpec) -> str | None:
        reason = actions.refusal(entry, self.read_only, Selection())
        if reason is None and entry.id == "jobs_stop" and (self.job is None or self.job.finished):
            reason = "The selected job is not running."
        return reason

    def action_explain(self, action_id: str) -> None:
        entry = actions.spec(action_id)
        if entry is not None:
            actions.notify_refusal(self, entry, self.refusal(entry))

    def action_job(self, name: str) -> None:
        if name == "follow":
            self.toggle_follow()
        elif name == "find":
            self.open_search()
        elif name == "stop":
            self.ask_stop()

    def toggle_follow(self) -> None:
        self.following = not self.following
        log = self.query_one(JobLog)
        log.auto_scroll = self.following
        if self.following:
            log.scroll_end(animate=False)
        self._heading()

    def open_search(self) -> None:
        search = self.query_one("#job-search", Input)
        search.display = True
        search.focus()

    @on(Input.Changed, "#job-search")
    def _search_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._apply_search(event.value)

    @on(Input.Submitted, "#job-search")
    def _search_kept(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#jobs", DataTable).focus()

    def clear_search(self) -> bool:
        """Esc: a search shown is cleared first (True); the next Esc closes the view."""
        search = self.query_one("#job-search", Input)
        if not search.display:
            return False
        search.value = ""
        search.display = False
        self._apply_search("")
        self.query_one("#jobs", DataTable).focus()
        return True

    def _apply_search(self, text: str) -> None:
        if text == self.search:
            return
        self.search = text
        self._show_job(self.job)

    def ask_stop(self) -> None:
        job = self.job
        if job is None or job.finished or job.stop_requested.is_set():
            return

        def answered(stop: bool | None) -> None:
            if stop and job.request_stop():
                self.sync()

        self.app.push_screen(ConfirmStop(job, display=self.shown_text), answered)

    def action_dismiss_panel(self) -> None:
        if not self.clear_search():
            self.dismiss(None)
