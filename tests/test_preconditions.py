"""``preconditions.state_allows`` agrees with the core: on every task of a project holding each
host situation, an action is allowed exactly when the engine then accepts it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from project_kit import HOST, SITUATIONS, Project
from project_kit import host_situations as situations

from nexus_core import engine
from nexus_core.errors import NexusError
from nexus_core.preconditions import CHECKED_ACTIONS, state_allows
from nexus_core.store import load_run


def attempt_id(run: dict[str, Any], task_id: str) -> str | None:
    task = next(t for t in run["tasks"] if t["id"] == task_id)
    return task["attempts"][-1]["id"] if task["attempts"] else None


def attempt(project: Project, action: str, task_id: str) -> bool:
    """Whether the engine accepts ``action`` on ``task_id`` with a well-formed input."""
    bound = {"attemptId": attempt_id(load_run(project.dir, "r1"), task_id), "backend": HOST}
    calls = {
        "start": lambda: engine.start_task(project.dir, "r1", task_id, {"backend": HOST}),
        "retry": lambda: engine.retry_task(project.dir, "r1", task_id, {"backend": HOST}),
        "record": lambda: engine.record_attempt(
            project.dir, "r1", task_id, {**bound, "outcome": "completed", "summary": "done"}
        ),
        "reconcile": lambda: engine.reconcile_attempt(
            project.dir, "r1", task_id, {**bound, "outcome": "failed", "ownerStopped": True, "summary": "checked"}
        ),
        "cancel": lambda: engine.cancel_task(project.dir, "r1", task_id, {"reason": "stop"}),
        "verify": lambda: engine.verify_task(project.dir, "r1", task_id),
        "accept": lambda: engine.accept_task(project.dir, "r1", task_id),
    }
    try:
        calls[action]()
    except NexusError:
        return False
    return True


@pytest.mark.parametrize("action", ["start", "retry", "record", "reconcile", "cancel", "verify", "accept"])
def test_state_allows_exactly_what_the_engine_accepts(tmp_path: Path, action: str) -> None:
    assert action in CHECKED_ACTIONS
    accepted = []
    for task_id in SITUATIONS:
        project = situations(tmp_path / task_id)  # a fresh project per try: an accepted try changes it
        run = load_run(project.dir, "r1")
        task = next(t for t in run["tasks"] if t["id"] == task_id)
        predicted = state_allows(action, run, task)
        assert predicted == attempt(project, action, task_id), (action, task_id, predicted)
        accepted += [task_id] if predicted else []
    assert accepted and len(accepted) < len(SITUATIONS)  # the situations tell some apart


def test_any_shape_is_refused_without_raising() -> None:
    for action in CHECKED_ACTIONS:
        for task in ({}, {"id": "a", "attempts": "x"}, {"id": "a", "attempts": [None, 3]}):
            assert state_allows(action, {"plan": "x", "tasks": None}, task) is False
    assert state_allows("frobnicate", {}, {}) is False
