"""Every project of a machine: the discovery walk and the urgency summary of a project.

Pure logic (no textual, no rich): ``nexus-tui --discover ROOT`` runs :func:`discover_projects`
again every few seconds, and the "All projects" tab shows one :func:`summarize` per project.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from nexus_core import needs
from nexus_core.projects import DEFAULT_DEPTH, SKIPPED_NAMES, discover_projects, is_project

from .model import ProjectSnapshot

__all__ = ["DEFAULT_DEPTH", "SKIPPED_NAMES", "ProjectSummary", "discover_projects", "is_project", "order", "summarize"]

# What needs an operator, most urgent first (the overview's order and its columns): each group
# counts the needs of some kinds (nexus_core.needs, the one classifier).
NEEDS = (
    ("unreadable", "unreadable"),  # runs (or the project) that cannot be read: nothing else is known
    ("dead_lock", "dead lock"),  # a writer.lock/recovery.lock whose owner is gone blocks every write
    ("owner_gone", "owner gone"),  # a verifier or a launch supervisor that died mid-work
    ("ambiguous", "to reconcile"),
    ("overdue", "overdue"),
    ("blocked", "blocked"),
    ("stale", "stale"),
    ("to_decide", "to decide"),
    ("receipts", "to collect"),
    ("schedules", "schedule failed"),
)
GROUP_OF_KIND = {
    needs.RUN_UNREADABLE: "unreadable",
    needs.WRITER_LOCK_DEAD: "dead_lock",
    needs.RECOVERY_LOCK_LEFT: "dead_lock",
    needs.LOCK_UNSAFE: "dead_lock",
    needs.VERIFIER_GONE: "owner_gone",
    needs.SUPERVISOR_GONE: "owner_gone",
    needs.EXECUTION_AMBIGUOUS: "ambiguous",
    needs.VERIFICATION_AMBIGUOUS: "ambiguous",
    needs.CANCEL_REQUESTED: "ambiguous",
    needs.OVERDUE: "overdue",
    needs.BLOCKED: "blocked",
    needs.DEPENDENCY_STALE: "blocked",
    needs.EVIDENCE_STALE: "stale",
    needs.ACCEPTED_STALE: "stale",
    needs.RESOURCE_CHANGED: "stale",
    needs.ATTEMPT_FAILED: "to_decide",
    needs.BUDGET_SPENT: "to_decide",
    needs.VERIFICATION_LIMIT: "to_decide",
    needs.RECEIPT: "receipts",
    needs.SCHEDULE_FAILED: "schedules",
}


@dataclass(frozen=True)
class ProjectSummary:
    """One row of the "All projects" tab: plain values, compared to decide what to redraw."""

    directory: str
    runs: int
    tasks: int
    accepted: int
    unreadable: int = 0
    dead_lock: int = 0
    owner_gone: int = 0
    ambiguous: int = 0
    overdue: int = 0
    blocked: int = 0
    stale: int = 0
    to_decide: int = 0
    receipts: int = 0
    schedules: int = 0
    loaded: bool = True

    @property
    def total(self) -> int:
        """How many things need a person in the project."""
        return sum(getattr(self, key) for key, _ in NEEDS)

    def needs(self) -> list[tuple[str, int]]:
        """(label, count) of each thing that needs an operator, most urgent first."""
        return [(label, getattr(self, key)) for key, label in NEEDS if getattr(self, key)]

    def urgency(self) -> tuple[int, ...]:
        """Sort key: the most urgent kind present first, then the counts (smaller sorts first)."""
        return self._urgency

    @functools.cached_property
    def _urgency(self) -> tuple[int, ...]:
        # Computed once per summary: the overview re-sorts every project on each scan.
        counts = [getattr(self, key) for key, _ in NEEDS]
        first = next((i for i, count in enumerate(counts) if count), len(counts))
        return (first, *(-count for count in counts))


def summarize(snapshot: ProjectSnapshot) -> ProjectSummary:
    """What an operator must know of one project, from the dashboard's own scan: its needs
    (``snapshot.needs``, the classifier's), counted by group."""
    runs = snapshot.runs
    counts: dict[str, int] = {}
    for need in snapshot.needs:
        group = GROUP_OF_KIND[need.kind]
        counts[group] = counts.get(group, 0) + 1
    if snapshot.error:
        counts["unreadable"] = counts.get("unreadable", 0) + 1
    return ProjectSummary(
        directory=snapshot.root or snapshot.directory,
        runs=len(runs),
        tasks=sum(view.total for view in runs),
        accepted=sum(view.count("accepted") for view in runs),
        loaded=not any(view.loading for view in runs),
        **counts,
    )


def order(summaries: dict[int, ProjectSummary], labels: dict[int, str]) -> list[int]:
    """Project indices, most urgent first; ties by label."""
    return sorted(summaries, key=lambda index: (summaries[index].urgency(), labels.get(index, ""), index))
