"""Every project of a machine: the discovery walk and the urgency summary of a project.

Pure logic (no textual, no rich): ``nexus-tui --discover ROOT`` runs :func:`discover_projects`
again every few seconds, and the "All projects" tab shows one :func:`summarize` per project.
"""

from __future__ import annotations

from dataclasses import dataclass

from nexus_core.projects import DEFAULT_DEPTH, SKIPPED_NAMES, discover_projects, is_project

from .model import LockView, ProjectSnapshot

__all__ = ["DEFAULT_DEPTH", "SKIPPED_NAMES", "ProjectSummary", "discover_projects", "is_project", "order", "summarize"]

# What needs an operator, most urgent first (the overview's order and its columns).
NEEDS = (
    ("unreadable", "unreadable"),  # runs (or the project) that cannot be read: nothing else is known
    ("dead_lock", "dead lock"),  # a writer.lock/recovery.lock whose owner is gone blocks every write
    ("ambiguous", "ambiguous"),
    ("overdue", "overdue"),
    ("blocked", "blocked"),
    ("stale", "stale"),
    ("receipts", "to collect"),
)


@dataclass(frozen=True)
class ProjectSummary:
    """One row of the "All projects" tab: plain values, compared to decide what to redraw."""

    directory: str
    runs: int
    tasks: int
    accepted: int
    unreadable: int
    dead_lock: int
    ambiguous: int
    overdue: int
    blocked: int
    stale: int
    receipts: int
    loaded: bool = True

    def needs(self) -> list[tuple[str, int]]:
        """(label, count) of each thing that needs an operator, most urgent first."""
        return [(label, getattr(self, key)) for key, label in NEEDS if getattr(self, key)]

    def urgency(self) -> tuple[int, ...]:
        """Sort key: the most urgent kind present first, then the counts (smaller sorts first)."""
        counts = [getattr(self, key) for key, _ in NEEDS]
        first = next((i for i, count in enumerate(counts) if count), len(counts))
        return (first, *(-count for count in counts))


def _dead(lock: LockView) -> bool:
    return lock.present and lock.alive is False


def summarize(snapshot: ProjectSnapshot) -> ProjectSummary:
    """What an operator must know of one project, from the dashboard's own scan."""
    runs = snapshot.runs
    states: dict[str, int] = {}
    receipts = 0
    for view in runs:
        for state, count in view.counts:
            states[state] = states.get(state, 0) + count
        for observation in view.observations:
            process = observation.get("process")
            if isinstance(process, dict) and process.get("receiptReady"):
                receipts += 1
    unreadable = sum(1 for view in runs if view.error) + (1 if snapshot.error else 0)
    return ProjectSummary(
        directory=snapshot.root or snapshot.directory,
        runs=len(runs),
        tasks=sum(view.total for view in runs),
        accepted=states.get("accepted", 0),
        unreadable=unreadable,
        dead_lock=int(_dead(snapshot.writer_lock)) + int(_dead(snapshot.recovery_lock)),
        ambiguous=states.get("ambiguous", 0),
        overdue=sum(view.overdue for view in runs),
        blocked=states.get("blocked", 0),
        stale=sum(view.stale for view in runs),
        receipts=receipts,
        loaded=not any(view.loading for view in runs),
    )


def order(summaries: dict[int, ProjectSummary], labels: dict[int, str]) -> list[int]:
    """Project indices, most urgent first; ties by label."""
    return sorted(summaries, key=lambda index: (summaries[index].urgency(), labels.get(index, ""), index))
