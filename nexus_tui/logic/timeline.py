"""The timeline view's layout in terminal cells: which moment each column shows (the viewport,
zoomed and panned by the operator), the time axis's ticks and labels, which glyph fills each
cell of a task's lane, and which attempt a cell or a key selects.

The facts (lanes, bars, marks) and the shapes (one glyph per state, a theme role per colour)
come from ``nexus_core.timeline``, which ``nexus report --format html`` draws as SVG. No textual
here: the widget (``widgets/timeline.py``) turns cells into styled strips.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from nexus_core.timeline import (
    AFTER,
    DAY,
    HEAD,
    HOUR,
    MARKS,
    MINUTE,
    NOW,
    OVERDUE,
    PRIORITY,
    SECOND,
    STALE_SPAN,
    Bar,
    Lane,
    Mark,
    Shape,
    Timeline,
    tick_label,
    tick_step,
    ticks,
)

# How many milliseconds one cell shows, from the closest zoom to the widest.
ZOOM_STEPS = (
    SECOND,
    2 * SECOND,
    5 * SECOND,
    10 * SECOND,
    15 * SECOND,
    30 * SECOND,
    MINUTE,
    2 * MINUTE,
    5 * MINUTE,
    10 * MINUTE,
    15 * MINUTE,
    30 * MINUTE,
    HOUR,
    2 * HOUR,
    3 * HOUR,
    6 * HOUR,
    12 * HOUR,
    DAY,
    2 * DAY,
    7 * DAY,
)
NOW_AT = 0.8  # "jump to now" puts now at this fraction of the width
MAX_INDENT = 4  # dependency depth shown as indent, at most this many levels

Cell = tuple[str, str]  # (glyph, colour role or style: "$success", "dim", "")
BLANK: Cell = (" ", "")


@dataclass(frozen=True)
class Viewport:
    """The moments the lanes' cells show: cell ``c`` covers [start + c*zoom, start + (c+1)*zoom)."""

    start_ms: int
    ms_per_cell: int
    width: int

    def column(self, ms: int) -> int:
        return (ms - self.start_ms) // self.ms_per_cell

    def moment(self, column: int) -> int:
        return self.start_ms + column * self.ms_per_cell

    @property
    def end_ms(self) -> int:
        return self.start_ms + self.width * self.ms_per_cell


def fit(first_ms: int, last_ms: int, width: int) -> Viewport:
    """The closest zoom that shows [first_ms, last_ms] whole, a cell to spare on each side."""
    width = max(width, 4)
    span = max(last_ms - first_ms, 0)
    zoom = next((z for z in ZOOM_STEPS if span // z + 3 <= width), ZOOM_STEPS[-1])
    start = (first_ms // zoom - 1) * zoom
    return Viewport(start, zoom, width)


def zoomed(view: Viewport, closer: bool, anchor_ms: int) -> Viewport:
    """One zoom step closer or wider, ``anchor_ms`` staying in its column (clamped on screen)."""
    index = ZOOM_STEPS.index(view.ms_per_cell) if view.ms_per_cell in ZOOM_STEPS else len(ZOOM_STEPS) // 2
    index = max(0, min(len(ZOOM_STEPS) - 1, index + (-1 if closer else 1)))
    zoom = ZOOM_STEPS[index]
    column = max(0, min(view.width - 1, view.column(anchor_ms)))
    start = (anchor_ms - column * zoom) // zoom * zoom
    return Viewport(start, zoom, view.width)


def panned(view: Viewport, cells: int) -> Viewport:
    return replace(view, start_ms=view.start_ms + cells * view.ms_per_cell)


def showing(view: Viewport, ms: int, at: float = NOW_AT) -> Viewport:
    """The same zoom, moved so that ``ms`` stands at fraction ``at`` of the width."""
    column = int((view.width - 1) * at)
    return replace(view, start_ms=(ms // view.ms_per_cell - column) * view.ms_per_cell)


def revealing(view: Viewport, start_ms: int, end_ms: int) -> Viewport:
    """The same zoom, moved as little as needed to show [start_ms, end_ms] (its start first)."""
    if view.column(start_ms) < 0:
        return showing(view, start_ms, 0.1)
    if view.column(end_ms) >= view.width:
        moved = showing(view, end_ms, 0.9)
        return moved if moved.column(start_ms) >= 0 else showing(view, start_ms, 0.1)
    return view


def resized(view: Viewport, width: int) -> Viewport:
    return replace(view, width=max(width, 4))


# ----------------------------------------------------------------- the axis


def zoom_words(view: Viewport) -> str:
    """ "1 cell = 1 min" for the title."""
    ms = view.ms_per_cell
    for unit, name in ((DAY, "d"), (HOUR, "h"), (MINUTE, "min"), (SECOND, "s")):
        if ms >= unit and ms % unit == 0:
            return f"1 cell = {ms // unit} {name}"
    return f"1 cell = {ms} ms"


def date_words(view: Viewport) -> str:
    """The date (UTC) of the first column, for the title (tick labels carry no date)."""
    return datetime.fromtimestamp(view.start_ms / 1000, tz=UTC).strftime("%Y-%m-%d")


def axis(view: Viewport, now_ms: int) -> tuple[str, str]:
    """Two lines of ``view.width`` characters: tick labels (each starting at its tick), then the
    rule with a tick mark per label and ``▼`` at now."""
    step = tick_step(view.ms_per_cell)
    labels = [" "] * view.width
    rule = ["─"] * view.width
    free_from = 0
    for moment in ticks(view.start_ms, view.end_ms - 1, step):
        column = view.column(moment)
        rule[column] = "┬"
        text = tick_label(moment, step)
        if column >= free_from and column + len(text) <= view.width:
            labels[column : column + len(text)] = list(text)
            free_from = column + len(text) + 1
    now_column = view.column(now_ms)
    if 0 <= now_column < view.width:
        rule[now_column] = "▼"
    return "".join(labels), "".join(rule)


# ----------------------------------------------------------------- a lane's cells


def _paint(cells: list[Cell], column: int, shape: Shape, over: bool = True) -> None:
    if 0 <= column < len(cells) and (over or cells[column] == BLANK or cells[column][0] == NOW.glyph):
        cells[column] = (shape.glyph, shape.colour)


def _span(view: Viewport, start_ms: int, end_ms: int) -> range:
    first = max(0, view.column(start_ms))
    last = min(view.width - 1, view.column(end_ms))
    return range(first, last + 1)


def _visible_marks(bar: Bar, end_ms: int) -> list[Mark]:
    """The bar's marks, lowest priority first (the highest is painted last, so it shows); the
    deadline only while it matters: the attempt is open, or it ran past it."""
    shown = [m for m in bar.marks if m.kind != "deadline" or bar.end_ms is None or end_ms > m.at_ms]
    return sorted(shown, key=lambda m: PRIORITY[m.kind])


def lane_cells(lane: Lane, view: Viewport, now_ms: int) -> list[Cell]:
    """What each cell of the lane shows: bodies, then what follows them, then marks."""
    cells: list[Cell] = [BLANK] * view.width
    now_column = view.column(now_ms)
    _paint(cells, now_column, NOW)
    for index, bar in enumerate(lane.bars):
        end = bar.end_ms if bar.end_ms is not None else max(now_ms, bar.start_ms)
        body = bar.body()
        for column in _span(view, bar.start_ms, end):
            overdue = bar.deadline_ms is not None and view.moment(column) >= bar.deadline_ms
            _paint(cells, column, OVERDUE if overdue else body)
        # The attempt's life goes on after its end: verification, and for the last, acceptance.
        after = bar.last_ms()
        if index == len(lane.bars) - 1 and lane.accepted_ms is not None:
            after = max(after, lane.accepted_ms)
        for column in _span(view, end + view.ms_per_cell, after):
            _paint(cells, column, AFTER, over=False)
        if bar.end_ms is None and 0 <= view.column(end) < view.width:
            _paint(cells, view.column(end), HEAD)
    if lane.stale:
        since = lane.evidence_ms()
        if since is not None:
            for column in _span(view, since + view.ms_per_cell, now_ms):
                _paint(cells, column, STALE_SPAN, over=cells[column][0] in (AFTER.glyph, NOW.glyph, " "))
    marks: list[Mark] = []
    for bar in lane.bars:
        marks.extend(_visible_marks(bar, bar.end_ms if bar.end_ms is not None else now_ms))
    if lane.accepted_ms is not None:
        marks.append(Mark(lane.accepted_ms, "accepted"))
    if lane.stale:
        marks.append(Mark(now_ms, "stale"))
    for mark in sorted(marks, key=lambda m: PRIORITY[m.kind]):
        _paint(cells, view.column(mark.at_ms), MARKS[mark.kind])
    return cells


def legend() -> list[tuple[list[tuple[str, str]], str]]:
    """The legend's entries: ([(glyph, colour), ...], words), shapes sharing words together
    (``✔✗?⟳ verify``), in the order bodies, then marks."""
    from nexus_core.timeline import BODIES

    entries: dict[str, list[tuple[str, str]]] = {}
    for shape in [*BODIES.values(), HEAD, OVERDUE, STALE_SPAN, *MARKS.values()]:
        glyphs = entries.setdefault(shape.words, [])
        if shape.glyph not in [glyph for glyph, _ in glyphs]:
            glyphs.append((shape.glyph, shape.colour))
    return [(glyphs, words) for words, glyphs in entries.items()]


# ----------------------------------------------------------------- labels and selection


def lane_label(lane: Lane, width: int) -> str:
    """The task id, indented by its dependency depth (``└`` under what it depends on), cut to
    ``width`` with an ellipsis."""
    indent = min(lane.depth, MAX_INDENT)
    text = (" " * (indent - 1) + "└" if indent else "") + lane.task_id
    return text if len(text) <= width else text[: max(width - 1, 0)] + "…"


def related(timeline: Timeline, index: int) -> dict[int, str]:
    """The lanes tied to lane ``index``: "▲" for what it depends on, "▼" for what depends on it."""
    if not 0 <= index < len(timeline.lanes):
        return {}
    chosen = timeline.lanes[index]
    found: dict[int, str] = {}
    for other, lane in enumerate(timeline.lanes):
        if lane.task_id in chosen.depends_on:
            found[other] = "▲"
        elif chosen.task_id in lane.depends_on:
            found[other] = "▼"
    return found


def bar_at(lane: Lane, view: Viewport, column: int, now_ms: int) -> int | None:
    """The attempt (index) drawn at ``column``, or the closest one within two cells."""
    best: tuple[int, int] | None = None
    for index, bar in enumerate(lane.bars):
        first = view.column(bar.start_ms)
        last = view.column(max(bar.last_ms(), bar.end_ms if bar.end_ms is not None else now_ms))
        distance = 0 if first <= column <= last else min(abs(column - first), abs(column - last))
        if distance <= 2 and (best is None or distance < best[0]):
            best = (distance, index)
    return best[1] if best is not None else None


def bar_extent(bar: Bar, now_ms: int) -> tuple[int, int]:
    """The moments a bar and its marks cover (to show it whole when selected)."""
    end = bar.end_ms if bar.end_ms is not None else now_ms
    return bar.start_ms, max(end, bar.last_ms())
