"""The schedules panel's knowledge (no widgets): the operator's actions on a schedule (their
keys, words and destructiveness, which the action registry turns into bindings, help and gate
entries), the cells of a schedule's row and the one call per confirmed action."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nexus_core.schedule import core
from nexus_core.terminal import terminal_safe
from nexus_core.timeutil import now_ms, parse_iso_ms

# Paused first: whatever the width, what the operator can change is on screen.
COLUMNS = ("Paused", "Title", "Next", "Last outcome", "Rule", "Zone")
NO_SCHEDULER = "past due, no scheduler"


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


def stranded(schedule: dict[str, Any], now: int, scheduler: bool | None) -> bool:
    """Its next occurrence is in the past and no scheduler is running to fire it."""
    due = parse_iso_ms(schedule["next"]) if schedule["next"] else None
    return scheduler is False and not schedule["paused"] and due is not None and due < now


def row_cells(schedule: dict[str, Any], now: int = 0, scheduler: bool | None = None) -> tuple[str, ...]:
    """The panel's row for one schedule of ``core.list_schedules`` (terminal-safe text);
    ``scheduler``: whether a scheduler serves the project (``core.scheduler_seen``)."""
    last = schedule["lastOutcome"]
    outcome = "-" if last is None else f"{last['status']}: {last['reason'] or ''}".rstrip(": ")
    following = schedule["next"] or ("-" if schedule["paused"] else "none left")
    if stranded(schedule, now, scheduler):
        following = f"{following} ({NO_SCHEDULER})"
    return tuple(
        terminal_safe(value, one_line=True)
        for value in (
            "yes" if schedule["paused"] else "no",
            schedule["title"] or "",
            following,
            outcome,
            schedule["description"],
            schedule["zone"],
        )
    )


def scheduler_words(schedules: list[dict[str, Any]], now: int, scheduler: bool | None) -> str | None:
    """What the panel says when no scheduler serves the project and a schedule waits on one."""
    if scheduler is not False or all(schedule["paused"] for schedule in schedules):
        return None
    late = sum(stranded(schedule, now, scheduler) for schedule in schedules)
    minutes = core.RUNNER_SEEN_MS // 60_000
    head = f"No nexus scheduler is running for this project (none seen in the last {minutes} minutes)"
    if late:
        schedules_words = f"{late} schedule{'s' if late != 1 else ''}"
        return f"{head}: {schedules_words} past due, nobody fires them. Start one: nexus scheduler."
    return f"{head}: nothing fires until one runs (nexus scheduler)."


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
