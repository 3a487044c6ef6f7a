"""Moving around a project by id and by need: the jump prompt's candidates (``:``), the search of
every run (``/``) and the next task that needs attention (``n``/``N``). Pure functions of a
snapshot; what needs attention is the core's classifier (``TaskRow.need``, nexus_core.needs),
never a second predicate."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .model import ProjectSnapshot, TaskRow
from .selection import Term, row_matches

Place = tuple[str, str | None]  # (run id, task id or None for the run itself)


@dataclass(frozen=True)
class Candidate:
    """One entry of the jump prompt: what is typed to reach it, and where it goes."""

    text: str  # "RUN", "RUN/TASK" or "TASK" (a task id found in one run only)
    run_id: str
    task_id: str | None


def jump_candidates(snapshot: ProjectSnapshot | None) -> list[Candidate]:
    """Every run, every task as RUN/TASK, and each task id that only one run has as TASK."""
    if snapshot is None:
        return []
    found: list[Candidate] = []
    runs_of: dict[str, list[str]] = {}
    for view in snapshot.runs:
        found.append(Candidate(view.run_id, view.run_id, None))
        for row in view.rows:
            found.append(Candidate(f"{view.run_id}/{row.task_id}", view.run_id, row.task_id))
            runs_of.setdefault(row.task_id, []).append(view.run_id)
    run_ids = {view.run_id for view in snapshot.runs}
    for task_id, runs in runs_of.items():
        if len(runs) == 1 and task_id not in run_ids:  # a run id of that name wins
            found.append(Candidate(task_id, runs[0], task_id))
    return found


def completions(candidates: Sequence[Candidate], typed: str, limit: int = 50) -> list[Candidate]:
    """The candidates for what is typed: those starting with it first, then those containing it
    (case-insensitive), each group in the project's order."""
    text = typed.strip().lower()
    starting = [c for c in candidates if c.text.lower().startswith(text)]
    containing = [c for c in candidates if text and text in c.text.lower() and c not in starting]
    return (starting + containing)[:limit]


def resolve_jump(candidates: Sequence[Candidate], typed: str) -> Candidate | str:
    """Where ``typed`` goes, or why it goes nowhere (the prompt shows the words)."""
    text = typed.strip()
    if not text:
        return "Type a run id, RUN/TASK, or a task id."
    exact = [c for c in candidates if c.text == text]
    if exact:
        return exact[0]
    if "/" not in text:
        runs = sorted({c.run_id for c in candidates if c.task_id == text})
        if len(runs) > 1:
            return f"Task {text} is in {len(runs)} runs ({', '.join(runs)}): type RUN/{text}."
    matches = completions(candidates, text)
    if len(matches) == 1:
        return matches[0]
    if not matches:
        return f"No run or task matches {text}."
    return f"{len(matches)} match {text}: pick one (↓) or type more."


@dataclass(frozen=True)
class Found:
    """A task of another run that the filter matches (the search of every run)."""

    run_id: str
    row: TaskRow


def search_runs(
    snapshot: ProjectSnapshot | None, terms: Sequence[Term], exclude: str | None, limit: int = 200
) -> tuple[list[Found], int]:
    """The tasks of every run but ``exclude`` that the filter's terms match, in run then plan
    order (at most ``limit``), and how many there are in all."""
    if snapshot is None or not terms:
        return [], 0
    found: list[Found] = []
    total = 0
    for view in snapshot.runs:
        if view.run_id == exclude:
            continue
        for row in view.rows:
            if row_matches(row, terms):
                total += 1
                if len(found) < limit:
                    found.append(Found(view.run_id, row))
    return found, total


def next_need(order: Iterable[tuple[str, Sequence[TaskRow]]], current: Place, step: int) -> Place | None:
    """The next (``step`` 1) or previous (-1) task after ``current`` whose row carries a need
    (the core's classifier), in the order given (runs, then their tasks as shown), wrapping
    round; None when no task needs attention."""
    places = [(run_id, row.task_id) for run_id, rows in order for row in rows if row.need is not None]
    if not places:
        return None
    everything = [(run_id, row.task_id) for run_id, rows in order for row in rows]
    position = {place: index for index, place in enumerate(everything)}
    run_id, task_id = current
    found = position.get((run_id, task_id)) if task_id is not None else None
    here: float
    if found is not None:
        here = found
    else:
        # No task selected (or it is gone): just before the run's first task, or the very start.
        firsts = [index for index, (run, _task) in enumerate(everything) if run == run_id]
        here = (firsts[0] - 0.5) if firsts else -0.5
    if step > 0:
        after = [place for place in places if position[place] > here]
        return after[0] if after else places[0]
    before = [place for place in places if position[place] < here]
    return before[-1] if before else places[-1]
