"""What the operator has selected (the target of an action) and the task filter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .model import TaskRow


@dataclass(frozen=True)
class Selection:
    project: str | None = None
    run_id: str | None = None
    task_id: str | None = None
    attempt_id: str | None = None
    lock_fingerprint: str | None = None
    state_path: str | None = None
    # The selected run as inspected (for the availability of actions); not part of equality.
    inspection: Any = field(default=None, compare=False, repr=False)


def parse_filter(text: str) -> list[tuple[str, str]]:
    terms = []
    for token in text.split():
        kind, sep, value = token.partition(":")
        if sep and kind.lower() in ("state", "task") and value:
            terms.append((kind.lower(), value.lower()))
        else:
            terms.append(("text", token.lower()))
    return terms


def row_matches(row: TaskRow, terms: list[tuple[str, str]]) -> bool:
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
