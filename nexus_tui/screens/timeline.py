"""A run's timeline (``t``): the lanes (widgets/timeline.py), a legend, and the selected attempt's
detail. Live: it shows the project session's snapshot (the app's scans, never a read of its own)
and follows each new one; the 1 s tick grows the running bars. Its keys are registry entries
(``actions.TIMELINE``), so help, footer and palette list them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from nexus_core.shapes import Inspection
from nexus_core.timeline import Timeline, timeline_of
from nexus_core.timeutil import now_ms

from .. import actions
from ..logic import timeline as layout
from ..logic.selection import Selection
from ..logic.session import ProjectSession
from ..widgets.attempt_tree import Node, attempt_node
from ..widgets.detail_text import verification_text
from ..widgets.footer import FittingFooter
from ..widgets.plain import plain
from ..widgets.styles import Styles, styles_of
from ..widgets.timeline import TimelineView

TICK_SECONDS = 1.0


class TimelineScreen(ModalScreen[None]):
    REGISTRY_SCREEN = actions.TIMELINE
    BINDINGS: ClassVar[list[Any]] = actions.bindings(screen=actions.TIMELINE)

    def __init__(self, session: ProjectSession, run_id: str, task_id: str | None = None, tick: bool = True) -> None:
        super().__init__()
        self.session = session
        self.run_id = run_id
        self.task_id = task_id  # selected first (the dashboard's selected task)
        self.tick = tick
        self._inspection: Inspection | None = None
        self.timeline: Timeline | None = None
        self.updates = 0  # snapshots shown (tests wait on it)
        self._title_words = ""

    def compose(self) -> ComposeResult:
        yield Label("", id="timeline-title")
        yield TimelineView(id="timeline-lanes")
        yield Static("", id="timeline-legend")
        with VerticalScroll(id="timeline-detail"):
            yield Static("", id="timeline-attempt")
        yield FittingFooter()

    def on_mount(self) -> None:
        self.query_one("#timeline-legend", Static).update(legend_text(styles_of(self.app)))
        self.query_one(TimelineView).focus()
        self.follow(now_ms())
        if self.tick:
            self.set_interval(TICK_SECONDS, lambda: self.clock(now_ms()))

    # -- live
    def follow(self, now: int) -> None:
        """Show the session's snapshot of the run (the app calls it after each applied scan)."""
        snapshot = self.session.snapshot
        view = snapshot.run(self.run_id) if snapshot else None
        lanes = self.query_one(TimelineView)
        title = self.query_one("#timeline-title", Label)
        if view is None or view.inspection is None:
            words = "gone from the project" if snapshot is not None and view is None else "loading…"
            if view is not None and view.error:
                words = f"unreadable: {view.error}"
            title.update(plain(f"Timeline of {self.run_id}: {words}", one_line=True))
            return
        if view.inspection is not self._inspection:
            self._inspection = view.inspection
            self.timeline = timeline_of(view.inspection)
            states = {row.task_id: row.state for row in view.rows}
            lanes.show(self.timeline, states, now, self.task_id)
            self.updates += 1
        else:
            lanes.tick(now)
        self._title(now)

    def clock(self, now: int) -> None:
        if getattr(self.app, "following", True):
            self.query_one(TimelineView).tick(now)
            self._title(now)

    def restyle(self) -> None:
        self._title_words = ""
        self.query_one("#timeline-legend", Static).update(legend_text(styles_of(self.app)))
        self.query_one(TimelineView).restyle()
        self._show_detail()

    def _title(self, now: int) -> None:
        lanes = self.query_one(TimelineView)
        text = Text()
        text.append("Timeline of ", style="bold")
        text.append(plain(self.run_id, "bold", one_line=True))
        if lanes.view is not None:
            text.append(f"  {layout.date_words(lanes.view)} UTC  {layout.zoom_words(lanes.view)}", style="dim")
        snapshot = self.session.snapshot
        view = snapshot.run(self.run_id) if snapshot else None
        if view is not None and view.error:
            text.append(
                "  ⚠ the state file failed to load: last good view", style=styles_of(self.app).themed("bold $error")
            )
        if not getattr(self.app, "following", True):
            text.append("  ❚❚ paused", style=styles_of(self.app).themed("bold $warning"))
        if text.plain != self._title_words:  # an update lays the screen out again: only on a change
            self._title_words = text.plain
            self.query_one("#timeline-title", Label).update(text)

    # -- selection
    @on(TimelineView.Changed)
    def _changed(self, message: TimelineView.Changed) -> None:
        self._title(self.query_one(TimelineView).now_ms)
        if message.selection:
            self._show_detail()

    def _show_detail(self) -> None:
        lanes = self.query_one(TimelineView)
        self.query_one("#timeline-attempt", Static).update(
            attempt_text(self._inspection, *lanes.selected_ids(), lanes.now_ms, styles_of(self.app))
        )

    # -- keys (registry entries, actions.TIMELINE)
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return True

    def refusal(self, entry: actions.ActionSpec) -> str | None:
        return actions.refusal(entry, False, Selection())

    def action_timeline_lane_up(self) -> None:
        self.query_one(TimelineView).move_lane(-1)

    def action_timeline_lane_down(self) -> None:
        self.query_one(TimelineView).move_lane(1)

    def action_timeline_previous_attempt(self) -> None:
        self.query_one(TimelineView).move_bar(-1)

    def action_timeline_next_attempt(self) -> None:
        self.query_one(TimelineView).move_bar(1)

    def action_timeline_zoom_in(self) -> None:
        self.query_one(TimelineView).zoom(closer=True)

    def action_timeline_zoom_out(self) -> None:
        self.query_one(TimelineView).zoom(closer=False)

    def action_timeline_earlier(self) -> None:
        self.query_one(TimelineView).pan(-0.25)

    def action_timeline_later(self) -> None:
        self.query_one(TimelineView).pan(0.25)

    def action_timeline_now(self) -> None:
        self.query_one(TimelineView).jump_to_now()

    def action_timeline_fit(self) -> None:
        self.query_one(TimelineView).fit_all()

    def action_timeline_close(self) -> None:
        self.dismiss(None)


def legend_text(styles: Styles) -> Text:
    text = Text()
    for glyphs, words in layout.legend():
        if text:
            text.append("  ")
        for glyph, colour in glyphs:
            text.append(glyph, style=styles.themed(colour) if colour else "")
        text.append(f" {words}", style="dim")
    return text


def attempt_text(
    inspection: Inspection | None, task_id: str | None, attempt_id: str | None, now: int, styles: Styles
) -> Text:
    """The selected attempt as the detail pane's tree shows it (attempt_tree.attempt_node), flattened."""
    if inspection is None or task_id is None:
        return Text("")
    task = next((t for t in inspection["tasks"] if t["id"] == task_id), None)
    text = Text()
    text.append(plain(task_id, "bold", one_line=True))
    attempts = task["attempts"] if task else []
    ids = [str(a.get("id")) for a in attempts]
    if task is None or attempt_id not in ids:
        text.append("  no attempt yet", style="dim")
        return text
    index = ids.index(attempt_id)
    text.append(f"  attempt {index + 1} of {len(attempts)}", style="dim")
    if task.get("integration") == "accepted":
        text.append("  accepted ", style=styles.themed("bold $success"))
        text.append(plain(task.get("acceptedAt"), "dim"))
    text.append("\n")
    node = attempt_node(attempts[index], index, len(attempts), now, styles)
    _flatten(text, node, 0)
    if index == len(attempts) - 1:
        text.append(verification_text(attempts[index], now, styles))
    return text


def _flatten(text: Text, node: Node, depth: int) -> None:
    text.append("  " * depth)
    text.append(node.label)
    text.append("\n")
    for child in node.children:
        _flatten(text, child, depth + 1)
