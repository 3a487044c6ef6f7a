"""``nexus report RUN``: one run's state as a document for the places teams already look, a
pull request comment or CI step summary (``markdown``), a CI test report (``junit``), a
self-contained page (``html``).

This module reads the run (read-only: the same snapshot ``nexus wait`` takes, no lock, no
write) and gathers what every format shows: where each task stands, the failed checks with the
tail of their output, and what needs a person (:func:`needs_a_person`, the one place that
decides it here). The formats only lay it out, each escaping every string from the state for
itself. Nothing in a report comes from the clock: the same state gives the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import __version__
from ..errors import NexusError
from ..paths import root_of
from ..shapes import Attempt, CheckReceipt, Inspection, Task
from ..supervise.classify import BUDGET, DONE, MOVING, OPERATOR, UNFINISHED, WAITING, TaskState, lock_problem
from ..supervise.classify import classify_run as _classify_run
from ..supervise.events import Snapshot, take_snapshot
from ..timeline import Timeline, timeline_of
from ..timeutil import iso_from_ms, parse_iso_ms

FORMATS = ("markdown", "junit", "html")
TAIL_LINES = 20
TAIL_CHARS = 3000
# The order categories are listed in (a state's words come from supervise.classify).
CATEGORY_ORDER = (DONE, UNFINISHED, MOVING, WAITING, OPERATOR, BUDGET)
GENERATOR = f"nexus report (nexus-registry {__version__})"


@dataclass(frozen=True)
class TaskLine:
    """One task: where it stands (``wait``'s words) and its latest attempt's facts."""

    task_id: str
    state: str  # supervise.classify's state: accepted, awaiting-verify, overdue, ...
    category: str  # done, unfinished, moving, waiting, operator, budget
    detail: str | None  # worker-controlled in part (a blocked request, a stale reason)
    attempts_used: int
    max_attempts: int
    execution: str  # the latest attempt's, or "not started"
    verification: str  # the latest attempt's verification status, or "pending"
    acceptance: str  # pending, accepted, rejected
    summary: str | None  # the latest report's summary (worker text)
    seconds: float  # the ended attempts' durations, added up


@dataclass(frozen=True)
class FailedCheck:
    task_id: str
    attempt: int  # 1-based
    attempts: int
    check_id: str
    exit_code: int | None
    signal: str | None
    timed_out: bool
    error: str | None
    command: str  # the check's command line as recorded
    stdout_tail: str
    stderr_tail: str

    def words(self) -> str:
        """``exit 1``, ``timed out``, ``signal SIGKILL``, ``error: ...``: how it failed."""
        parts = []
        if self.timed_out:
            parts.append("timed out")
        if self.signal:
            parts.append(f"signal {self.signal}")
        if self.error:
            parts.append(f"error: {self.error}")
        if self.exit_code is not None or not parts:
            parts.append(f"exit {self.exit_code}")
        return ", ".join(parts)


@dataclass(frozen=True)
class Need:
    """Something a person must look at: a task (``task_id``) or the run's locks (None)."""

    task_id: str | None
    state: str
    detail: str | None


@dataclass(frozen=True)
class Report:
    run_id: str
    sequence: int
    created_at: str
    updated_at: str
    plan_hash: str
    outcome: str  # accepted, needs-operator, budget-spent, unfinished, in-progress
    tasks: tuple[TaskLine, ...]
    counts: tuple[tuple[str, int], ...]  # (state, tasks), in CATEGORY_ORDER then by name
    failed: tuple[FailedCheck, ...]
    needs: tuple[Need, ...]
    timeline: Timeline

    @property
    def accepted(self) -> int:
        """Tasks accepted (with current evidence or not: stale evidence is its own state)."""
        return sum(1 for t in self.tasks if t.acceptance == "accepted")


def tail(text: object, lines: int = TAIL_LINES, chars: int = TAIL_CHARS) -> str:
    """The last lines of an output, at most ``chars`` characters (an ellipsis says it was cut)."""
    if not isinstance(text, str) or not text.strip():
        return ""
    kept = text.rstrip("\n").split("\n")
    shown = "\n".join(kept[-lines:])
    if len(shown) > chars:
        return "…" + shown[-chars:]
    return ("…\n" if len(kept) > lines else "") + shown


def needs_a_person(snapshot: Snapshot, states: list[TaskState]) -> list[Need]:
    """What needs a person: a lock that blocks every change, then each task ``nexus wait``
    would stop for with exit 3 (an operator's decision) or 4 (its budget spent).

    The one place the report decides this: it asks ``supervise.classify``, whose categories come
    from the core's one classifier (``nexus_core.needs.stand``), so the report, ``wait`` and the
    dashboard agree on who must act."""
    needs: list[Need] = []
    stuck = lock_problem(snapshot)
    if stuck is not None:
        needs.append(Need(None, "lock", stuck))
    needs.extend(Need(s.task, s.state, s.detail) for s in states if s.category in (OPERATOR, BUDGET))
    return needs


def _outcome(snapshot: Snapshot, states: list[TaskState]) -> str:
    categories = {s.category for s in states}
    if lock_problem(snapshot) is not None:
        return "needs-operator"
    if MOVING in categories:
        return "in-progress"
    if categories <= {DONE}:
        return "accepted"
    if BUDGET in categories:
        return "budget-spent"
    if OPERATOR in categories:
        return "needs-operator"
    return "unfinished"


def _seconds(task: Task) -> float:
    total = 0
    for attempt in task["attempts"]:
        start, end = parse_iso_ms(attempt.get("startedAt")), parse_iso_ms(attempt.get("endedAt"))
        if start is not None and end is not None and end >= start:
            total += end - start
    return total / 1000


def _command(receipt: CheckReceipt) -> str:
    return " ".join([str(receipt.get("command") or ""), *(str(a) for a in receipt.get("args") or [])]).strip()


def _failed_checks(task: Task) -> list[FailedCheck]:
    """The failing checks of the task's latest verification, when it failed."""
    attempts = task["attempts"]
    attempt: Attempt | None = attempts[-1] if attempts else None
    if attempt is None or attempt["verification"].get("status") != "failed":
        return []
    found = []
    for receipt in attempt["verification"].get("checks") or []:
        exit_code = receipt.get("exitCode")
        if exit_code == 0 and not receipt.get("error") and not receipt.get("timedOut") and not receipt.get("signal"):
            continue
        found.append(
            FailedCheck(
                task_id=task["id"],
                attempt=len(attempts),
                attempts=len(attempts),
                check_id=str(receipt.get("id")),
                exit_code=exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
                signal=str(receipt["signal"]) if receipt.get("signal") else None,
                timed_out=bool(receipt.get("timedOut")),
                error=str(receipt["error"]) if receipt.get("error") else None,
                command=_command(receipt),
                stdout_tail=tail(receipt.get("stdout")),
                stderr_tail=tail(receipt.get("stderr")),
            )
        )
    return found


def _summary(attempt: Attempt | None) -> str | None:
    observations = (attempt or {}).get("observations") or []
    for entry in reversed(observations):
        if isinstance(entry, dict) and isinstance(entry.get("summary"), str):
            return str(entry["summary"])
    return None


def _moment(value: object) -> str:
    """A stored time, re-written in the one ISO form (so it needs no escaping), or "unknown"."""
    ms = parse_iso_ms(value)
    return iso_from_ms(ms) if ms is not None else "unknown"


def _count_order(item: tuple[str, int], categories: dict[str, str]) -> tuple[int, str]:
    return (CATEGORY_ORDER.index(categories[item[0]]), item[0])


def report_of(snapshot: Snapshot) -> Report:
    """The report of a snapshot whose run was read (``snapshot.view``)."""
    view: Inspection | None = snapshot.view
    if view is None:
        raise NexusError(snapshot.error or "The run could not be read.")
    states = _classify_run(view, None, snapshot.at_ms)
    by_id = {t["id"]: t for t in view["tasks"]}
    lines: list[TaskLine] = []
    failed: list[FailedCheck] = []
    for state in states:
        task = by_id[state.task]
        attempt = task["attempts"][-1] if task["attempts"] else None
        lines.append(
            TaskLine(
                task_id=state.task,
                state=state.state,
                category=state.category,
                detail=state.detail,
                attempts_used=state.attempts_used,
                max_attempts=state.max_attempts,
                execution=attempt["execution"] if attempt else "not started",
                verification=str(attempt["verification"].get("status")) if attempt else "pending",
                acceptance=task["integration"],
                summary=_summary(attempt),
                seconds=_seconds(task),
            )
        )
        failed.extend(_failed_checks(task))
    counted: dict[str, int] = {}
    categories: dict[str, str] = {}
    for line in lines:
        counted[line.state] = counted.get(line.state, 0) + 1
        categories[line.state] = line.category
    counts = tuple(sorted(counted.items(), key=lambda item: _count_order(item, categories)))
    return Report(
        run_id=view["id"],
        sequence=int(view["sequence"]),
        created_at=_moment(view.get("createdAt")),
        updated_at=_moment(view.get("updatedAt")),
        plan_hash=str(view.get("planHash")),
        outcome=_outcome(snapshot, states),
        tasks=tuple(lines),
        counts=counts,
        failed=tuple(failed),
        needs=tuple(needs_a_person(snapshot, states)),
        timeline=timeline_of(view),
    )


def build_report(directory: str, run_id: str) -> Report:
    """Read the run (read-only) and gather its report. An unknown or unreadable run is refused
    with ``inspect``'s own words."""
    root = root_of(directory)
    return report_of(take_snapshot(root, run_id))
