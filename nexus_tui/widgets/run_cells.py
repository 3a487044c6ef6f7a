"""The runs table's text: its columns (full and compact), each run's cells and sort values."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from nexus_core.timeutil import parse_iso_ms

from ..logic.model import ATTENTION, ProjectSnapshot, RunView
from .ages import table_age
from .plain import plain
from .styles import GLYPH, OWNER_GONE_GLYPH, OWNER_GONE_STYLE, Styles

RUN_COLUMNS = (
    ("run", "Run"),
    ("progress", "Accepted"),
    ("states", "States"),
    ("stale", "Stale"),
    ("overdue", "Overdue"),
    ("lock", "Lock"),
    ("load", "File"),
    ("updated", "Updated"),
)
# The compact form (tables narrower than project_pane.FULL_COLUMNS_WIDTH): the columns that
# decide what to do first, the rest after.
COMPACT_RUN_COLUMNS = (
    ("run", "Run"),
    ("progress", "Acc"),
    ("stale", "Stale"),
    ("overdue", "Overdue"),
    ("lock", "Lock"),
    ("states", "States"),
    ("load", "File"),
    ("updated", "Updated"),
)


def run_columns(compact: bool) -> tuple[tuple[str, str], ...]:
    return COMPACT_RUN_COLUMNS if compact else RUN_COLUMNS


def accepted_cells(accepted: int, total: int, width: int) -> int:
    """How many of ``width`` cells the "Accepted" bar fills: none at 0, all only when every task
    is accepted, and at least one for any accepted task (so 1/200 is not drawn as 0/200)."""
    if total <= 0 or accepted <= 0:
        return 0
    if accepted >= total:
        return width
    return min(width - 1, max(1, accepted * width // total))


def progress_cell(view: RunView, styles: Styles, width: int = 8) -> Text:
    """The "Accepted" column: a bar of the accepted share and ``accepted/total`` (the States
    column has the other states)."""
    total = view.total
    if view.loading:
        return Text("loading…", style="dim italic")
    if total == 0:
        return Text("no tasks" if view.error is None else "unreadable", style="dim")
    accepted = view.count("accepted")
    filled = accepted_cells(accepted, total, width)
    bar = Text()
    bar.append("█" * filled, style=styles.state("accepted", ""))
    bar.append("░" * (width - filled), style=styles.themed("$panel"))
    bar.append(f" {accepted}/{total}")
    return bar


def compact_progress_cell(view: RunView, styles: Styles) -> Text:
    """The count alone (the bar takes 8 more columns). Never wider than the count: a column only
    grows, so a wide "loading…" would keep the column wide after it (whenever it was drawn)."""
    if view.loading:
        return Text("…", style="dim italic")
    return Text(f"{view.count('accepted')}/{view.total}") if view.total else progress_cell(view, styles)


def states_cell(view: RunView, styles: Styles) -> Text:
    text = Text()
    for state, count in view.counts:
        if text:
            text.append(" ")
        text.append(f"{GLYPH.get(state, '')}{count}", style=styles.state(state, ""))
    gone = sum(1 for row in view.rows if row.owner_gone)
    if gone:
        text.append(f" {OWNER_GONE_GLYPH}{gone}", style=styles.themed(OWNER_GONE_STYLE))
    return text


def lock_badge(snapshot: ProjectSnapshot, styles: Styles) -> Text:
    if snapshot.recovery_lock.present:
        return Text("recovery", style=styles.themed("bold $accent"))
    lock = snapshot.writer_lock
    if not lock.present:
        return Text("—", style="dim")
    if lock.alive is False:
        return Text("dead", style=styles.themed("bold $error"))
    return Text("held", style=styles.themed("$warning"))


def run_cells(
    view: RunView, snapshot: ProjectSnapshot, now: int, styles: Styles, compact: bool = False
) -> dict[str, Text]:
    run_label = plain(view.run_id, "bold")
    alarm = styles.themed("bold $error")
    return {
        "run": run_label,
        "progress": compact_progress_cell(view, styles) if compact else progress_cell(view, styles),
        "states": states_cell(view, styles),
        "stale": Text(str(view.stale), style=alarm) if view.stale else Text("0", style="dim"),
        "overdue": Text(str(view.overdue), style=alarm) if view.overdue else Text("0", style="dim"),
        "lock": lock_badge(snapshot, styles),
        "load": plain("⚠ " + view.error, alarm, one_line=True)
        if view.error
        else Text("ok", style=styles.themed("$success")),
        "updated": Text(table_age(view.updated_at, now), style="dim"),
    }


def run_sort_value(view: RunView, column: str, index: int) -> Any:
    values: dict[str, Any] = {
        "run": view.run_id,
        "progress": -(view.count("accepted") / view.total if view.total else 0),
        "states": view.counts,
        "stale": -view.stale,
        "overdue": -view.overdue,
        "attention": -sum(c for s, c in view.counts if s in ATTENTION),
        "lock": 0,
        "load": view.error is None,
        "updated": -(parse_iso_ms(view.updated_at) or 0),
    }
    return (values.get(column, index), index)
