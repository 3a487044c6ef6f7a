"""The tasks table's text: its columns (full and compact), each task's cells and sort values."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from nexus_core import needs
from nexus_core.timeutil import parse_iso_ms

from ..logic.model import NOT_STARTED, TaskRow
from .ages import table_age
from .plain import plain
from .styles import GLYPH, OWNER_GONE_GLYPH, OWNER_GONE_STYLE, VALUE_GLYPH, Styles, value_cell

TASK_COLUMNS = (
    ("task", "Task"),
    ("depends", "Depends on"),
    ("execution", "Execution"),
    ("verification", "Verify"),
    ("acceptance", "Accept"),
    ("attempts", "Tries"),
    ("stale", "Stale"),
    ("overdue", "Overdue"),
    ("observed", "Observed"),
)
# The compact form (tables narrower than project_pane.FULL_COLUMNS_WIDTH): those that decide what
# to do first (the task's state, Accept, Tries, Stale, Overdue), values as glyphs, the rest after;
# no "Depends on" (the detail pane and the timeline show it), so that the table fits its pane at
# 120 columns.
COMPACT_TASK_COLUMNS = (
    ("task", "Task"),
    ("acceptance", "Acc"),
    ("attempts", "Tries"),
    ("stale", "Stale"),
    ("overdue", "Overdue"),
    ("execution", "Exe"),
    ("verification", "Ver"),
    ("observed", "Observed"),
)


def task_columns(compact: bool) -> tuple[tuple[str, str], ...]:
    return COMPACT_TASK_COLUMNS if compact else TASK_COLUMNS


def flag_cell(on: bool, word: str, styles: Styles) -> Text:
    return Text(word, style=styles.themed("bold $error")) if on else Text("—", style="dim")


def glyph_cell(value: str, styles: Styles) -> Text:
    return Text(VALUE_GLYPH.get(value, value[:3]), style=styles.value(value, ""))


def owner_gone_cell(compact: bool, styles: Styles) -> Text:
    """The Exe or Ver cell of work whose owner is gone: it runs no more, whatever it says."""
    return Text(OWNER_GONE_GLYPH if compact else f"{OWNER_GONE_GLYPH} gone", style=styles.themed(OWNER_GONE_STYLE))


def task_cells(row: TaskRow, now: int, styles: Styles, compact: bool = False) -> dict[str, Text]:
    gone = row.owner_gone
    if gone:
        task = Text(OWNER_GONE_GLYPH + " ", style=styles.themed(OWNER_GONE_STYLE))
    else:
        task = Text(GLYPH.get(row.state, " ") + " ", style=styles.state(row.state, ""))
    task.append(plain(row.task_id, "bold" if row.state not in (NOT_STARTED,) else ""))
    value = glyph_cell if compact else value_cell
    execution = value(row.execution, styles)
    verification = value(row.verification, styles)
    if row.need == needs.SUPERVISOR_GONE:
        execution = owner_gone_cell(compact, styles)
    elif row.need == needs.VERIFIER_GONE:
        verification = owner_gone_cell(compact, styles)
    spent = row.max_attempts and row.attempts_used >= row.max_attempts
    return {
        "task": task,
        "depends": plain(", ".join(row.depends_on) if row.depends_on else "—", "" if row.depends_on else "dim"),
        "execution": execution,
        "verification": verification,
        "acceptance": value(row.acceptance, styles),
        "attempts": Text(
            f"{row.attempts_used}/{row.max_attempts}",
            style=styles.themed("bold $error") if spent or gone else "",
        ),
        "stale": flag_cell(row.stale, "STALE", styles),
        "overdue": flag_cell(row.overdue, "OVERDUE", styles),
        "observed": Text(table_age(row.last_observed, now), style="dim"),
    }


def task_sort_value(row: TaskRow, column: str, plan_index: int) -> Any:
    values: dict[str, Any] = {
        "task": row.task_id,
        "depends": (len(row.depends_on), row.depends_on),
        "execution": row.execution,
        "verification": row.verification,
        "acceptance": row.acceptance,
        "attempts": (row.attempts_used, row.max_attempts),
        "stale": not row.stale,
        "overdue": not row.overdue,
        "observed": -(parse_iso_ms(row.last_observed) or 0),
    }
    return (values.get(column, plan_index), plan_index)
