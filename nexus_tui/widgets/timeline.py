"""The timeline of one run, drawn line by line (Textual's Line API): a fixed two-line time axis,
then one lane per task with its attempts' bars and marks. Only the lanes on screen are drawn
(a run of 200 tasks costs the ~20 lines in view), each from ``logic/timeline.py``'s cells.

Task ids reach the screen through ``plain``'s rule (widgets/plain.py: terminal_safe, never markup): a Strip
of plain Segments is never parsed as markup anyway.
"""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from nexus_core.terminal import terminal_safe
from nexus_core.timeline import Bar, Timeline

from ..logic import timeline as layout
from ..logic.timeline import Viewport
from .styles import GLYPH, STATE_STYLE, styles_of

AXIS_LINES = 2
MIN_LABEL = 10
MAX_LABEL = 24


class TimelineView(ScrollView, can_focus=True):
    """Lanes of a :class:`~nexus_core.timeline.Timeline`; the screen owns the keys."""

    DEFAULT_CSS = """
    TimelineView { height: 1fr; scrollbar-size-vertical: 1; }
    """

    class Changed(Message):
        """The view moved (zoom, pan, fit) or, with ``selection``, the selected attempt changed."""

        def __init__(self, selection: bool) -> None:
            super().__init__()
            self.selection = selection

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.timeline: Timeline | None = None
        self.states: dict[str, str] = {}
        self.view: Viewport | None = None
        self.now_ms = 0
        self.lane: int | None = None
        self.bar: int | None = None
        self._longest_label = 0
        self.auto_fit = True  # the whole run fits, until the operator zooms or pans
        self._strips: dict[int, Strip] = {}
        self._styles: dict[str, Style] = {}
        self.lines_drawn = 0  # lane lines drawn since the start (the bench counts them)

    # -- data
    def show(self, timeline: Timeline, states: dict[str, str], now_ms: int, task_id: str | None = None) -> None:
        """A new timeline (or the same one re-read); the zoom, pan and selection stay when they
        still apply. ``task_id``: the task to select first (its latest attempt)."""
        first_time = self.timeline is None
        kept = self.selected_ids() if not first_time else (task_id, None)
        self.timeline, self.states, self.now_ms = timeline, states, now_ms
        self._longest_label = max((len(layout.lane_label(lane, 99)) for lane in timeline.lanes), default=0)
        if first_time or self.view is None or self.auto_fit:
            self.view = self._fitted()
        self._select_ids(*kept)
        if first_time and self.lane is None and timeline.lanes:
            self.lane = 0
            self.bar = len(timeline.lanes[0].bars) - 1 if timeline.lanes[0].bars else None
        self.virtual_size = Size(self.size.width, len(timeline.lanes) + AXIS_LINES)
        self._changed()

    def tick(self, now_ms: int) -> None:
        """The clock moved: open bars grow, the now line moves (a fitted view refits to keep
        the growing bars whole)."""
        if now_ms != self.now_ms:
            self.now_ms = now_ms
            if self.auto_fit and self.timeline is not None and self.timeline.open():
                self.view = self._fitted()
            self._strips.clear()
            self.refresh()

    def restyle(self) -> None:
        """The theme changed: styles come from it."""
        self._styles.clear()
        self._changed(selection=False)

    def _changed(self, selection: bool = True) -> None:
        self._strips.clear()
        self.refresh()
        self.post_message(self.Changed(selection))

    def _fitted(self) -> Viewport:
        timeline = self.timeline
        width = self.lanes_width
        if timeline is None or timeline.first_ms is None:
            return layout.fit(self.now_ms - 60_000, self.now_ms, width)
        last = max(timeline.last_ms or self.now_ms, self.now_ms if timeline.open() else 0)
        return layout.fit(timeline.first_ms, last, width)

    # -- geometry
    @property
    def label_width(self) -> int:
        return max(MIN_LABEL, min(MAX_LABEL, self._longest_label + 4, max(self.size.width // 4, MIN_LABEL)))

    @property
    def lanes_width(self) -> int:
        return max(4, self.scrollable_content_region.width - self.label_width)

    def on_resize(self, event: events.Resize) -> None:
        if self.auto_fit and self.timeline is not None:
            self.view = self._fitted()
            self.post_message(self.Changed(False))
        elif self.view is not None:
            self.view = layout.resized(self.view, self.lanes_width)
        if self.timeline is not None:
            self.virtual_size = Size(self.size.width, len(self.timeline.lanes) + AXIS_LINES)
        self._strips.clear()
        self.refresh()

    # -- the operator's moves
    def zoom(self, closer: bool) -> None:
        if self.view is None:
            return
        anchor = self._anchor()
        self.auto_fit = False
        self.view = layout.zoomed(self.view, closer, anchor)
        self._changed(selection=False)

    def pan(self, fraction: float) -> None:
        if self.view is not None:
            self.auto_fit = False
            self.view = layout.panned(self.view, int(self.view.width * fraction) or (1 if fraction > 0 else -1))
            self._changed(selection=False)

    def jump_to_now(self) -> None:
        if self.view is not None:
            self.auto_fit = False
            self.view = layout.showing(self.view, self.now_ms)
            self._changed(selection=False)

    def fit_all(self) -> None:
        self.auto_fit = True
        self.view = self._fitted()
        self._changed(selection=False)

    def move_lane(self, step: int) -> None:
        if not self.timeline or not self.timeline.lanes:
            return
        current = self.lane if self.lane is not None else 0
        self.lane = max(0, min(len(self.timeline.lanes) - 1, current + step))
        bars = self.timeline.lanes[self.lane].bars
        self.bar = len(bars) - 1 if bars else None
        self._reveal()

    def move_bar(self, step: int) -> None:
        if self.timeline is None or self.lane is None:
            return
        bars = self.timeline.lanes[self.lane].bars
        if not bars:
            return
        self.bar = max(0, min(len(bars) - 1, (self.bar if self.bar is not None else 0) + step))
        self._reveal()

    def select(self, lane: int, bar: int | None) -> None:
        self.lane, self.bar = lane, bar
        self._reveal()

    def _reveal(self) -> None:
        """Scroll and pan so that the selected lane and bar are on screen."""
        if self.lane is not None:
            rows = max(1, self.scrollable_content_region.height - AXIS_LINES)
            top = int(self.scroll_y)
            if self.lane < top:
                self.scroll_to(y=self.lane, animate=False, immediate=True)
            elif self.lane >= top + rows:
                self.scroll_to(y=self.lane - rows + 1, animate=False, immediate=True)
        bar = self.selected_bar()
        if bar is not None and self.view is not None:
            moved = layout.revealing(self.view, *layout.bar_extent(bar, self.now_ms))
            self.auto_fit = self.auto_fit and moved == self.view
            self.view = moved
        self._changed()

    def _anchor(self) -> int:
        """Zoom around the selected attempt when it is on screen, else around the middle."""
        assert self.view is not None
        bar = self.selected_bar()
        if bar is not None and 0 <= self.view.column(bar.start_ms) < self.view.width:
            return bar.start_ms
        return self.view.moment(self.view.width // 2)

    def selected_ids(self) -> tuple[str | None, str | None]:
        """(task id, attempt id) of the selection: what survives a re-read of the run."""
        lane = self.timeline.lanes[self.lane] if self.timeline and self.lane is not None else None
        if lane is None or self.lane is None or self.lane >= len(self.timeline.lanes if self.timeline else ()):
            return None, None
        bar = lane.bars[self.bar] if self.bar is not None and self.bar < len(lane.bars) else None
        return lane.task_id, bar.attempt_id if bar else None

    def _select_ids(self, task_id: str | None, attempt_id: str | None) -> None:
        if self.timeline is None or task_id is None:
            return
        for index, lane in enumerate(self.timeline.lanes):
            if lane.task_id == task_id:
                self.lane = index
                ids = [bar.attempt_id for bar in lane.bars]
                self.bar = ids.index(attempt_id) if attempt_id in ids else (len(ids) - 1 if ids else None)
                return
        self.lane = 0 if self.timeline.lanes else None
        self.bar = None

    def selected_bar(self) -> Bar | None:
        if self.timeline is None or self.lane is None or self.lane >= len(self.timeline.lanes):
            return None
        bars = self.timeline.lanes[self.lane].bars
        return bars[self.bar] if self.bar is not None and self.bar < len(bars) else None

    def on_click(self, event: events.Click) -> None:
        if self.timeline is None or self.view is None:
            return
        lane = int(self.scroll_y) + event.y - AXIS_LINES
        if event.y < AXIS_LINES or not 0 <= lane < len(self.timeline.lanes):
            return
        column = event.x - self.label_width
        bar = layout.bar_at(self.timeline.lanes[lane], self.view, column, self.now_ms) if column >= 0 else None
        bars = self.timeline.lanes[lane].bars
        self.select(lane, bar if bar is not None else (len(bars) - 1 if bars else None))

    # -- drawing
    def _style(self, spec: str) -> Style:
        style = self._styles.get(spec)
        if style is None:
            style = Style.parse(styles_of(self.app).themed(spec)) if spec else Style()
            self._styles[spec] = style
        return style

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if self.timeline is None or self.view is None:
            return Strip.blank(width)
        if y < AXIS_LINES:
            return self._axis_line(y, width)
        lane = int(self.scroll_y) + y - AXIS_LINES
        if not 0 <= lane < len(self.timeline.lanes):
            return Strip.blank(width)
        strip = self._strips.get(lane)
        if strip is None:
            strip = self._lane_strip(lane, width)
            self._strips[lane] = strip
            self.lines_drawn += 1
        return strip

    def _axis_line(self, y: int, width: int) -> Strip:
        assert self.view is not None
        labels, rule = layout.axis(self.view, self.now_ms)
        label_width = self.label_width
        if y == 0:
            head = "task".ljust(label_width)
            segments = [Segment(head, self._style("bold dim")), Segment(labels, self._style("dim"))]
        else:
            segments = [Segment("─" * label_width, self._style("dim")), Segment(rule, self._style("dim"))]
        return Strip(segments).crop_extend(0, width, None)

    def _lane_strip(self, index: int, width: int) -> Strip:
        assert self.timeline is not None and self.view is not None
        lane = self.timeline.lanes[index]
        label_width = self.label_width
        selected = index == self.lane
        ties = layout.related(self.timeline, self.lane) if self.lane is not None else {}
        state = self.states.get(lane.task_id, "")
        segments = [
            Segment("›" if selected else ties.get(index, " "), self._style("bold $accent")),
            Segment(GLYPH.get(state, " "), self._style(STATE_STYLE.get(state, ""))),
            Segment(" "),
        ]
        label = terminal_safe(layout.lane_label(lane, label_width - 4), one_line=True)
        segments.append(Segment(label.ljust(label_width - 4), self._style("bold reverse" if selected else "bold")))
        segments.append(Segment(" "))
        cells = layout.lane_cells(lane, self.view, self.now_ms)
        marked = range(0)
        bar = self.selected_bar() if selected else None
        if bar is not None:
            first, last = layout.bar_extent(bar, self.now_ms)
            marked = range(self.view.column(first), self.view.column(last) + 1)
        run_text, run_spec = "", None
        for column, (glyph, spec) in enumerate(cells):
            spec = f"{spec} on $panel-lighten-3" if column in marked else spec
            if spec != run_spec and run_text:
                segments.append(Segment(run_text, self._style(run_spec or "")))
                run_text = ""
            run_text += glyph
            run_spec = spec
        if run_text:
            segments.append(Segment(run_text, self._style(run_spec or "")))
        return Strip(segments).crop_extend(0, width, None)
