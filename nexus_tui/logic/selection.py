"""What the operator has selected (the target of an action) and the task filter."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from nexus_core.shapes import Inspection
from nexus_core.state.store import EXECUTIONS, INTEGRATIONS, VERIFICATIONS

from .model import STATE_ORDER, TaskRow


@dataclass(frozen=True)
class Selection:
    project: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    attempt_id: str | None = None
    lock_fingerprint: str | None = None
    state_path: str | None = None
    # The selected run as inspected (for the availability of actions); not part of equality.
    inspection: Inspection | None = field(default=None, compare=False, repr=False)
    # A project on another host (--ssh): the host, and why its actions cannot run now (the
    # connection is being made or was lost); both None for a local project.
    remote_host: str | None = None
    remote_refusal: str | None = None


# Every word that state:WORD matches (TaskRow.flags): the derived flags, the task states
# (spaces typed as "-"), then the stored execution, verification and acceptance values. The
# parser refuses any other word and the help screen lists these.
FILTER_STATES: tuple[str, ...] = tuple(
    dict.fromkeys(
        [
            "stale",
            "overdue",
            "active",
            "attention",
            *(state.replace(" ", "-") for state in STATE_ORDER),
            *EXECUTIONS,
            *VERIFICATIONS,
            *INTEGRATIONS,
        ]
    )
)
Term = tuple[str, str]  # (kind: "state", "task" or "text", lowercased value)


@dataclass(frozen=True)
class TaskFilter:
    """The task filter as typed: the terms it applies and the state words it does not know."""

    terms: tuple[Term, ...] = ()
    unknown_states: tuple[str, ...] = ()  # not applied: a typo must not hide every task

    @property
    def problem(self) -> str | None:
        """What to tell the operator about the unknown words, or None."""
        if not self.unknown_states:
            return None
        words = ", ".join(f"state:{word}" for word in self.unknown_states)
        return f"Unknown {words} (not applied). Valid states: {', '.join(FILTER_STATES)}."


def parse_filter(text: str) -> TaskFilter:
    terms: list[Term] = []
    unknown: list[str] = []
    for token in text.split():
        kind, sep, value = token.partition(":")
        kind, value = kind.lower(), value.lower()
        if sep and kind == "state" and value:
            if value in FILTER_STATES:
                terms.append((kind, value))
            else:
                unknown.append(value)
        elif sep and kind == "task" and value:
            terms.append((kind, value))
        else:
            terms.append(("text", token.lower()))
    return TaskFilter(tuple(terms), tuple(unknown))


def row_matches(row: TaskRow, terms: Iterable[Term]) -> bool:
    for kind, value in terms:
        if kind == "state":
            if value not in {word.lower() for word in row.flags()} and value.replace("-", " ") not in row.flags():
                return False
        elif kind == "task":
            if value not in row.task_id.lower():
                return False
        else:
            haystack = " ".join([row.task_id, row.objective, *row.flags(), *row.depends_on]).lower()
            if value not in haystack:
                return False
    return True
