"""The timeline view (``t`` on a run): its pure layout (nexus_core/timeline.py, logic/timeline.py),
snapshots at 80x24 and 120x36 on the frozen demo, the keys (zoom, pan, now, fit, selection),
and live updates from the app's own scans."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dashboard_kit import (
    HOST,
    eventually,
    finish,
    loaded,
    quiet_app,
    select,
    small_project,
    then,
)
from textual.pilot import Pilot
from textual.widgets import Static

from nexus_core import engine, timeutil
from nexus_core.timeline import (
    BODIES,
    HEAD,
    MARKS,
    MINUTE,
    OVERDUE,
    STALE_SPAN,
    Bar,
    Lane,
    Mark,
    Timeline,
    tick_step,
)
from nexus_tui.logic import timeline as layout
from nexus_tui.screens.timeline import TimelineScreen
from nexus_tui.widgets.timeline import TimelineView

T0 = 1_796_029_200_000  # 2026-11-30T09:00:00Z


def bar(
    start_min: float, end_min: float | None, execution: str = "completed", *marks: tuple[float, str], **kw: Any
) -> Bar:
    deadline = kw.get("deadline")
    return Bar(
        attempt_id=kw.get("attempt_id", f"a{start_min}"),
        number=kw.get("number", 1),
        start_ms=T0 + int(start_min * MINUTE),
        end_ms=None if end_min is None else T0 + int(end_min * MINUTE),
        execution=execution,
        deadline_ms=None if deadline is None else T0 + int(deadline * MINUTE),
        marks=tuple(Mark(T0 + int(at * MINUTE), kind) for at, kind in marks),
    )


def lane(*bars: Bar, task_id: str = "t", **kw: Any) -> Lane:
    accepted = kw.get("accepted")
    return Lane(
        task_id=task_id,
        depends_on=tuple(kw.get("depends_on", ())),
        depth=kw.get("depth", 0),
        bars=bars,
        accepted_ms=None if accepted is None else T0 + int(accepted * MINUTE),
        stale=kw.get("stale", False),
        overdue=kw.get("overdue", False),
    )


def glyphs(cells: list[layout.Cell]) -> str:
    return "".join(glyph for glyph, _ in cells)


# ----------------------------------------------------------------- pure layout


def test_each_state_has_its_own_shape_and_a_theme_colour() -> None:
    shapes = [BODIES["completed"], BODIES["running"], BODIES["blocked"], BODIES["failed"], OVERDUE, STALE_SPAN]
    assert len({s.glyph for s in shapes}) == len(shapes)  # told apart without colour
    marks = ["reported", "verify-passed", "verify-failed", "verify-ambiguous", "cancel-requested", "accepted"]
    assert len({MARKS[m].glyph for m in marks}) == len(marks)
    for shape in [*BODIES.values(), *MARKS.values(), OVERDUE, STALE_SPAN, HEAD]:
        assert shape.colour == "" or shape.colour.startswith("$"), shape  # a theme role, never a colour name


def test_a_viewport_maps_time_to_columns_and_fits_the_run() -> None:
    view = layout.fit(T0, T0 + 60 * MINUTE, 40)
    assert view.column(T0) >= 0 and view.column(T0 + 60 * MINUTE) < 40
    assert view.ms_per_cell in layout.ZOOM_STEPS
    closer = layout.ZOOM_STEPS[layout.ZOOM_STEPS.index(view.ms_per_cell) - 1]
    assert 60 * MINUTE // closer + 3 > 40  # the closest zoom that fits
    # Zooming keeps the anchor in its column; panning moves by whole cells.
    anchor = T0 + 30 * MINUTE
    zoomed = layout.zoomed(view, True, anchor)
    assert zoomed.ms_per_cell < view.ms_per_cell
    assert abs(zoomed.column(anchor) - view.column(anchor)) <= 1
    assert layout.panned(view, 5).start_ms == view.start_ms + 5 * view.ms_per_cell
    now = T0 + 90 * MINUTE
    assert layout.showing(view, now).column(now) == int(39 * layout.NOW_AT)


def test_ticks_are_readable_at_every_zoom() -> None:
    for zoom in layout.ZOOM_STEPS:
        view = layout.Viewport(T0 - 7 * zoom, zoom, 76)
        labels, rule = layout.axis(view, T0)
        assert len(labels) == len(rule) == 76
        words = labels.split()
        assert words, zoom
        # Each label starts on a tick mark and never runs into the next one.
        for word in words:
            assert rule[labels.index(word)] in "┬▼", (zoom, word)
        assert all(len(w) in (5, 8) for w in words), words  # HH:MM, HH:MM:SS or MM-DD
        step = tick_step(zoom)
        assert step // zoom >= len(words[0]) + 3
    assert layout.axis(layout.Viewport(T0, MINUTE, 60), T0 + 61 * MINUTE)[1].count("▼") == 0  # now off screen


def test_a_lanes_cells_show_bodies_marks_deadline_overdue_and_stale() -> None:
    view = layout.Viewport(T0, MINUTE, 40)  # a cell per minute from 09:00
    done = lane(bar(2, 6, "completed", (6, "reported"), (8, "verify-passed")), accepted=10)
    assert glyphs(layout.lane_cells(done, view, T0 + 60 * MINUTE))[:12] == "  ████•┈✔┈★ "
    failed = lane(bar(0, 3, "completed", (3, "reported"), (4, "verify-failed")), bar(6, 9, "failed", number=2))
    assert glyphs(layout.lane_cells(failed, view, T0 + 60 * MINUTE))[:11] == "███•✗ ░░░░ "
    # A running attempt grows to now (▶), past its deadline (┃) drawn overdue (╳).
    running = lane(bar(1, None, "running", (11, "deadline"), deadline=11))
    cells = layout.lane_cells(running, view, T0 + 15 * MINUTE)
    assert glyphs(cells)[:17] == " ▓▓▓▓▓▓▓▓▓▓┃╳╳╳▶ "
    assert cells[13][1] == "$error" and cells[3][1] == "$warning"
    # The deadline of an attempt that ended before it is no news: not drawn.
    early = lane(bar(1, 3, "completed", (30, "deadline"), deadline=30))
    assert "┃" not in glyphs(layout.lane_cells(early, view, T0 + 35 * MINUTE))
    # Evidence gone stale after acceptance: dashed from the acceptance to now, "!" at now.
    stale = lane(bar(0, 2, "completed", (3, "verify-passed")), accepted=4, stale=True)
    assert glyphs(layout.lane_cells(stale, view, T0 + 9 * MINUTE))[:11] == "███✔★┄┄┄┄! "
    # Cancellation requested, and a blocked attempt.
    halted = lane(bar(0, None, "ambiguous", (2, "cancel-requested")))
    assert glyphs(layout.lane_cells(halted, view, T0 + 4 * MINUTE))[:6] == "▚▚⊘▚▶ "
    # The now line shows in empty cells.
    assert glyphs(layout.lane_cells(lane(), view, T0 + 5 * MINUTE))[5] == "┊"


def test_labels_indent_by_dependency_and_the_selected_tasks_ties_are_marked() -> None:
    timeline = Timeline(
        "r",
        (
            lane(task_id="schema"),
            lane(task_id="api", depends_on=["schema"], depth=1),
            lane(task_id="client", depends_on=["api"], depth=2),
        ),
        None,
        None,
    )
    assert [layout.lane_label(x, 20) for x in timeline.lanes] == ["schema", "└api", " └client"]
    assert layout.lane_label(timeline.lanes[2], 6) == " └cli…"
    assert layout.related(timeline, 1) == {0: "▲", 2: "▼"}


def test_a_click_selects_the_attempt_under_it() -> None:
    view = layout.Viewport(T0, MINUTE, 40)
    two = lane(bar(0, 3), bar(10, 14, number=2))
    assert layout.bar_at(two, view, 1, T0) == 0
    assert layout.bar_at(two, view, 12, T0) == 1
    assert layout.bar_at(two, view, 8, T0) == 1  # within two cells
    assert layout.bar_at(two, view, 30, T0) is None


# ----------------------------------------------------------------- the app


async def open_timeline(pilot: Pilot[None], run_id: str = "release", task_id: str | None = "migrate") -> TimelineScreen:
    await select(pilot, run_id, task_id)
    await pilot.press("t")
    await eventually(pilot, lambda: isinstance(pilot.app.screen, TimelineScreen) and pilot.app.screen.updates > 0)
    screen = pilot.app.screen
    assert isinstance(screen, TimelineScreen)
    await pilot.pause()
    return screen


@pytest.mark.parametrize("size", [(80, 24), (120, 36)], ids=["80x24", "120x36"])
def test_timeline_snapshot(snap_compare: Any, demo_app: Callable[[], Any], size: tuple[int, int]) -> None:
    """The demo's release run: the accepted chain (indented under its dependencies), migrate's
    failed verification then its retry (selected, its detail below), the overdue running
    backfill, the cancellation requested on cleanup, release-notes stale since acceptance."""

    async def pick(pilot: Pilot[None]) -> None:
        await open_timeline(pilot)
        await pilot.press("down")  # migrate -> backfill
        await pilot.press("up")  # and back: the retry (its latest attempt) is selected

    assert snap_compare(demo_app(), terminal_size=size, run_before=then(pick))


async def test_keys_zoom_pan_jump_and_select(demo_app: Callable[[], Any]) -> None:
    app = demo_app()
    async with app.run_test(size=(120, 36)) as pilot:
        await loaded(app, pilot)
        screen = await open_timeline(pilot)
        lanes = screen.query_one(TimelineView)
        assert lanes.view is not None
        fitted = lanes.view
        timeline = screen.timeline
        assert timeline is not None and [x.task_id for x in timeline.lanes][:2] == ["schema", "api"]
        # Selection: migrate's latest attempt, its detail below.
        assert lanes.selected_ids()[0] == "migrate"
        detail = str(screen.query_one("#timeline-attempt", Static).content)
        assert "attempt 2 of 2" in detail and "retry of" in detail
        await pilot.press("left")
        await eventually(pilot, lambda: "attempt 1 of 2" in str(screen.query_one("#timeline-attempt", Static).content))
        assert "failed" in str(screen.query_one("#timeline-attempt", Static).content)
        await pilot.press("down")
        assert lanes.selected_ids()[0] == "backfill"
        # Zoom in and out around the selection; pan; back to fit; jump to now.
        await pilot.press("plus")
        assert lanes.view.ms_per_cell < fitted.ms_per_cell
        await pilot.press("minus", "minus")
        assert lanes.view.ms_per_cell > fitted.ms_per_cell
        before = lanes.view.start_ms
        await pilot.press("shift+right")
        assert lanes.view.start_ms > before
        await pilot.press("less_than_sign")
        assert lanes.view.start_ms == before
        await pilot.press("f")
        assert lanes.view == fitted
        await pilot.press("plus", "plus", "plus", "n")
        assert lanes.view.column(lanes.now_ms) == int((lanes.view.width - 1) * layout.NOW_AT)
        title = str(screen.query_one("#timeline-title").render())
        assert "1 cell = " in title and "UTC" in title
        # A click on a lane selects the attempt drawn there.
        await pilot.press("f")
        migrate = [x.task_id for x in timeline.lanes].index("migrate")
        first = timeline.lanes[migrate].bars[0]
        column = lanes.view.column(first.start_ms) + lanes.label_width
        await pilot.click(TimelineView, offset=(column, migrate + 2 - int(lanes.scroll_y)))
        assert lanes.selected_ids() == ("migrate", first.attempt_id)
        await pilot.press("escape")
        assert not isinstance(app.screen, TimelineScreen)


async def test_the_timeline_follows_the_apps_scans_and_grows_with_the_clock(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")
    now = [timeutil.now_ms() / 1000]
    timeutil.set_clock(lambda: now[0])
    try:
        app = quiet_app([root], watch=True)
        async with app.run_test(size=(100, 30)) as pilot:
            await loaded(app, pilot)
            screen = await open_timeline(pilot, "live", "t1")
            lanes = screen.query_one(TimelineView)
            assert screen.timeline is not None
            assert [len(x.bars) for x in screen.timeline.lanes] == [1, 0, 0]
            # Another process changes the run: the app's watcher scans, the timeline follows.
            engine.start_task(root, "live", "t2", {"backend": HOST})
            await eventually(pilot, lambda: [len(x.bars) for x in screen.timeline.lanes] == [1, 1, 0])  # type: ignore[union-attr]
            finish(root, "live", "t1", accept=True)
            await eventually(pilot, lambda: screen.timeline.lanes[0].accepted_ms is not None)  # type: ignore[union-attr]
            # The clock moves: t2's open bar grows to the new now.
            await pilot.press("f")
            t2 = screen.timeline.lanes[1].bars[0]
            assert t2.end_ms is None
            lanes.auto_fit = False
            view = lanes.view
            assert view is not None
            head = layout.lane_cells(screen.timeline.lanes[1], view, lanes.now_ms).index((HEAD.glyph, HEAD.colour))
            now[0] += 10 * view.ms_per_cell / 1000
            screen.clock(timeutil.now_ms())
            grown = layout.lane_cells(screen.timeline.lanes[1], view, lanes.now_ms).index((HEAD.glyph, HEAD.colour))
            assert grown == head + 10
    finally:
        timeutil.set_clock(None)


async def test_t_needs_a_run_and_theme_moved_to_shift_t(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    app = quiet_app([str(empty)])
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(app, pilot)
        assert app.refusal_of("timeline") == "Select a run first."
        await pilot.press("t")
        await pilot.pause()
        assert not isinstance(app.screen, TimelineScreen)
        await pilot.press("T")
        await eventually(pilot, lambda: type(app.screen).__name__ != "Screen")
