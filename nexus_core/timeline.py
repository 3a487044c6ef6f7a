"""A run's history on a time line: one lane per task (plan order), one bar per attempt, marks for
what happened when (reports, verifications, cancellation, reconciliation, acceptance, the
deadline, evidence gone stale), and the time axis's ticks.

Pure and shared: the dashboard's timeline view (``nexus_tui/logic/timeline.py`` lays it out in
terminal cells) and ``nexus report --format html`` (an inline SVG) draw the same facts with the
same shapes. A state is told apart by its shape (``glyph``), not only by its colour, so either
drawing reads in monochrome; colours are theme roles (``$success``...), never colour names.
Nothing here reads a file or the clock: the facts come from an inspection, "now" from the caller.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import NamedTuple

from .shapes import Attempt, Inspection, Observation, Task, Verification
from .timeutil import parse_iso_ms


class Shape(NamedTuple):
    glyph: str  # one terminal cell; the SVG draws the same character
    colour: str  # a theme role: "$success", "$error", ... ("" for the default foreground)
    words: str  # the legend's words (shapes with the same words share one legend entry)


# An attempt's bar, by its execution: the body's fill tells the outcome without colour.
BODIES: dict[str, Shape] = {
    "completed": Shape("█", "$success", "done"),
    "running": Shape("▓", "$warning", "running"),
    "blocked": Shape("▚", "$error", "blocked"),
    "ambiguous": Shape("▚", "$accent", "blocked"),
    "failed": Shape("░", "$error", "failed"),
    "cancelled": Shape("░", "$error", "failed"),
}
OVERDUE = Shape("╳", "$error", "overdue")
STALE_SPAN = Shape("┄", "$error", "stale")
AFTER = Shape("┈", "dim", "after")  # from its end to its last mark (verify, accept)
HEAD = Shape("▶", "$warning", "running")
NOW = Shape("┊", "dim", "now")

# Marks, by kind. PRIORITY: when several land in one cell, the highest wins.
MARKS: dict[str, Shape] = {
    "reported": Shape("•", "", "report"),
    "reconciled": Shape("⇄", "$accent", "reconciled"),
    "deadline": Shape("┃", "$warning", "deadline"),
    "cancel-requested": Shape("⊘", "$accent", "cancel"),
    "verify-running": Shape("⟳", "$warning", "verify"),
    "verify-passed": Shape("✔", "$success", "verify"),
    "verify-failed": Shape("✗", "$error", "verify"),
    "verify-ambiguous": Shape("?", "$accent", "verify"),
    "accepted": Shape("★", "$success", "accepted"),
    "stale": Shape("!", "$error", "stale"),
}
PRIORITY = {kind: rank for rank, kind in enumerate(MARKS)}
VERIFY_MARK = {
    "passed": "verify-passed",
    "failed": "verify-failed",
    "ambiguous": "verify-ambiguous",
    "running": "verify-running",
}


@dataclass(frozen=True)
class Mark:
    at_ms: int
    kind: str  # a key of MARKS


@dataclass(frozen=True)
class Bar:
    """One attempt, from its start to its end (None: not ended; drawn to "now")."""

    attempt_id: str
    number: int  # 1-based, in the task's order
    start_ms: int
    end_ms: int | None
    execution: str  # a key of BODIES (an unknown word is drawn as "ambiguous")
    deadline_ms: int | None
    marks: tuple[Mark, ...]

    def body(self) -> Shape:
        return BODIES.get(self.execution, BODIES["ambiguous"])

    def last_ms(self) -> int:
        """Its latest known moment: the end, or its last mark (a verification comes after it)."""
        moments = [self.start_ms, *(m.at_ms for m in self.marks if m.kind != "deadline")]
        if self.end_ms is not None:
            moments.append(self.end_ms)
        return max(moments)


@dataclass(frozen=True)
class Lane:
    task_id: str
    depends_on: tuple[str, ...]
    depth: int  # the longest chain of dependencies under it (0: none): its indent
    bars: tuple[Bar, ...]
    accepted_ms: int | None
    stale: bool
    overdue: bool

    def evidence_ms(self) -> int | None:
        """When the evidence now stale was last good: the acceptance, or the passed verification."""
        if self.accepted_ms is not None:
            return self.accepted_ms
        passed = [m.at_ms for bar in self.bars[-1:] for m in bar.marks if m.kind == "verify-passed"]
        return max(passed) if passed else None


@dataclass(frozen=True)
class Timeline:
    run_id: str
    lanes: tuple[Lane, ...]
    first_ms: int | None  # the earliest recorded moment (None: nothing happened yet)
    last_ms: int | None  # the latest recorded moment (never "now": that is the caller's)

    def open(self) -> bool:
        """Whether some attempt has not ended (its bar grows with "now")."""
        return any(bar.end_ms is None for lane in self.lanes for bar in lane.bars)


# A live view rebuilds the timeline on every change of the run: its times are parsed once.
_parse = functools.lru_cache(maxsize=65536)(parse_iso_ms)


def _ms(value: object) -> int | None:
    return _parse(value) if isinstance(value, str) else None


def _verification_marks(verification: Verification) -> list[Mark]:
    kind = VERIFY_MARK.get(str(verification.get("status")))
    at = _ms(verification.get("endedAt")) or _ms(verification.get("startedAt"))
    return [Mark(at, kind)] if kind is not None and at is not None else []


def _attempt_marks(attempt: Attempt) -> list[Mark]:
    marks: list[Mark] = []
    for entry in attempt.get("observations") or []:
        at = _ms(entry.get("at")) if isinstance(entry, dict) else None
        if at is not None:
            marks.append(Mark(at, "reported"))
    for entry in attempt.get("reconciliations") or []:
        at = _ms(entry.get("at")) if isinstance(entry, dict) else None
        if at is not None:
            marks.append(Mark(at, "reconciled"))
    cancellation = attempt.get("cancellation") or {}
    requested = _ms(cancellation.get("requestedAt"))
    if requested is not None:
        marks.append(Mark(requested, "cancel-requested"))
    for past in attempt.get("verificationHistory") or []:
        marks.extend(_verification_marks(past))
    marks.extend(_verification_marks(attempt.get("verification") or {}))
    deadline = _ms(attempt.get("deadline"))
    if deadline is not None:
        marks.append(Mark(deadline, "deadline"))
    return sorted(marks, key=lambda m: (m.at_ms, PRIORITY[m.kind]))


def _bar(attempt: Attempt, number: int) -> Bar | None:
    start = _ms(attempt.get("startedAt"))
    if start is None:
        return None
    end = _ms(attempt.get("endedAt"))
    return Bar(
        attempt_id=str(attempt.get("id") or ""),
        number=number,
        start_ms=start,
        end_ms=end if end is None else max(end, start),
        execution=str(attempt.get("execution") or "ambiguous"),
        deadline_ms=_ms(attempt.get("deadline")),
        marks=tuple(_attempt_marks(attempt)),
    )


def _depths(dependencies: dict[str, tuple[str, ...]]) -> dict[str, int]:
    """Each task's longest dependency chain (a cycle, which the plan refuses, counts once)."""
    depths: dict[str, int] = {}

    def depth(task_id: str, trail: frozenset[str]) -> int:
        if task_id in depths:
            return depths[task_id]
        below = [d for d in dependencies.get(task_id, ()) if d in dependencies and d not in trail]
        found = 1 + max((depth(d, trail | {task_id}) for d in below), default=-1)
        depths[task_id] = found
        return found

    for task_id in dependencies:
        depth(task_id, frozenset())
    return depths


def timeline_of(inspection: Inspection) -> Timeline:
    """The run's timeline, from the same inspection as ``nexus inspect --json`` (its
    observations give stale and overdue, as of the moment the inspection was made)."""
    definitions = {str(d.get("id")): d for d in inspection["plan"]["tasks"]}
    dependencies = {
        task_id: tuple(str(d) for d in definition.get("dependsOn") or ()) for task_id, definition in definitions.items()
    }
    depths = _depths(dependencies)
    observations: dict[str, Observation] = {
        str(o.get("taskId")): o for o in inspection.get("observations") or [] if isinstance(o, dict)
    }
    tasks: dict[str, Task] = {str(t["id"]): t for t in inspection["tasks"]}
    lanes: list[Lane] = []
    moments: list[int] = []
    for task_id in [str(d.get("id")) for d in inspection["plan"]["tasks"]]:
        task = tasks.get(task_id, Task())
        bars = [bar for n, a in enumerate(task.get("attempts") or []) if (bar := _bar(a, n + 1)) is not None]
        accepted = _ms(task.get("acceptedAt")) if task.get("integration") == "accepted" else None
        observation = observations.get(task_id, Observation())
        lanes.append(
            Lane(
                task_id=task_id,
                depends_on=dependencies.get(task_id, ()),
                depth=depths.get(task_id, 0),
                bars=tuple(bars),
                accepted_ms=accepted,
                stale=bool(observation.get("stale")),
                overdue=bool(observation.get("overdue")),
            )
        )
        for bar in bars:
            moments.extend((bar.start_ms, bar.last_ms()))
        if accepted is not None:
            moments.append(accepted)
    created = _ms(inspection.get("createdAt"))
    if created is not None:
        moments.append(created)
    return Timeline(
        run_id=str(inspection.get("id")),
        lanes=tuple(lanes),
        first_ms=min(moments) if moments else None,
        last_ms=max(moments) if moments else None,
    )


# ----------------------------------------------------------------- the time axis

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DAY = 24 * HOUR
# Tick intervals people read at a glance (each divides the next day boundary evenly).
TICK_STEPS = (
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


def label_width(step_ms: int) -> int:
    return len(tick_label(0, step_ms))


def tick_step(ms_per_unit: float, unit_per_char: float = 1.0, gap_chars: int = 3) -> int:
    """The smallest tick interval whose labels fit between ticks with ``gap_chars`` to spare
    (units: terminal cells, one per character, or SVG pixels, ``unit_per_char`` a character)."""
    for step in TICK_STEPS:
        if step / ms_per_unit >= (label_width(step) + gap_chars) * unit_per_char:
            return step
    needed = (label_width(DAY) + gap_chars) * unit_per_char * ms_per_unit
    return TICK_STEPS[-1] * (int(needed // TICK_STEPS[-1]) + 1)


def tick_label(ms: int, step_ms: int) -> str:
    """A tick's label in UTC (the stored times are UTC): HH:MM:SS under a minute, HH:MM under a
    day, then the date."""
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    if step_ms < MINUTE:
        return moment.strftime("%H:%M:%S")
    if step_ms < DAY:
        return moment.strftime("%H:%M")
    return moment.strftime("%m-%d")


def ticks(start_ms: int, end_ms: int, step_ms: int) -> list[int]:
    """The tick moments in [start_ms, end_ms], on multiples of the step (whole minutes, hours)."""
    first = -(-start_ms // step_ms) * step_ms
    return list(range(first, end_ms + 1, step_ms))
