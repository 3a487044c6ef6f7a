"""The schedules panel's knowledge (no widgets): the operator's actions on a schedule (their
keys, words and destructiveness, which the action registry turns into bindings, help and gate
entries), the cells of a schedule's row and the one call per confirmed action."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nexus_core.schedule import core
from nexus_core.terminal import terminal_safe
from nexus_core.timeutil import now_ms

COLUMNS = ("Title", "Rule", "Zone", "Next", "Last outcome", "Paused")


@dataclass(frozen=True)
class ScheduleAction:
    """One operator action on the selected schedule."""

    id: str
    key: str  # Textual key name, bound on the schedules panel only
    label: str
    help: str  # one sentence, for the help screen and the palette
    statement: str  # what the confirmation says will change ({id}: the schedule's id)
    destructive: bool = False


SCHEDULE_ACTIONS = {
    action.id: action
    for action in (
        ScheduleAction(
            "pause",
            "p",
            "Pause",
            "Pause the selected schedule (it stops firing until resumed).",
            "Schedule {id} stops firing until it is resumed.",
        ),
        ScheduleAction(
            "resume",
            "r",
            "Resume",
            "Resume the selected schedule, counting from now.",
            "Schedule {id} fires again, counting from now.",
        ),
        ScheduleAction(
            "run",
            "n",
            "Run now",
            "Request an occurrence of the selected schedule now (a running nexus scheduler fires it).",
            "An occurrence of schedule {id} is requested; a running nexus scheduler fires it.",
        ),
        ScheduleAction(
            "delete",
            "d",
            "Delete",
            "Delete the selected schedule and its whole history.",
            "Schedule {id} and its whole history are deleted. This cannot be undone.",
            destructive=True,
        ),
    )
}


def row_cells(schedule: dict[str, Any]) -> tuple[str, ...]:
    """The panel's row for one schedule of ``core.list_schedules`` (terminal-safe text)."""
    last = schedule["lastOutcome"]
    outcome = "-" if last is None else f"{last['status']}: {last['reason'] or ''}".rstrip(": ")
    return tuple(
        terminal_safe(value, one_line=True)
        for value in (
            schedule["title"] or "",
            schedule["description"],
            schedule["zone"],
            schedule["next"] or ("-" if schedule["paused"] else "none left"),
            outcome,
            "yes" if schedule["paused"] else "no",
        )
    )


def status_line(count: int, read_only: bool) -> str:
    gate = " (read-only: no action)" if read_only else ""
    keys = ", ".join(f"{action.key} {action.label.lower()}" for action in SCHEDULE_ACTIONS.values())
    return f"{count} schedule{'s' if count != 1 else ''}{gate}. {keys}."


def perform(directory: str, action: str, schedule_id: str) -> str:
    """Carry out one confirmed action through the core; the words for the notification."""
    if action in ("pause", "resume"):
        core.set_paused(directory, schedule_id, action == "pause", now_ms())
        return f"Schedule {schedule_id} {'paused' if action == 'pause' else 'resumed'}."
    if action == "run":
        occurrence = core.request_run(directory, schedule_id, now_ms())
        return f"Occurrence {occurrence['id']} of schedule {schedule_id} requested."
    core.delete_schedule(directory, schedule_id)
    return f"Schedule {schedule_id} deleted."
