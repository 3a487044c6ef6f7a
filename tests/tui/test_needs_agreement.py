"""One classifier, read everywhere: over generated run states (hypothesis), where each task stands
(``nexus_core.needs``) agrees with ``wait``'s verdict, the dashboard's rows and run needs, the
guided recovery's situations (one per need, its next step the need's action), the overview's
counts, and the core's own preconditions (a guided action is one the core would accept, the
order completion offers).

The states are the ones the core writes (attempt by attempt: running, blocked, ambiguous,
completed and verified or not, failed, cancelled, reconciled, process attempts starting,
running, finished or collected, owners alive, dead or on another host), on a real project made
by ``create``, so the guide's file-reading parts (evidence, resources, fresh run) run for real."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tui_actions_support import make_project, process_task_plan, task_plan

from nexus_core import needs
from nexus_core.actions import MUTATIONS, allows
from nexus_core.cli.completion import awaiting_tasks
from nexus_core.observe import process_observation
from nexus_core.shapes import Attempt
from nexus_core.state.store import load_run
from nexus_core.supervise.classify import classify_run
from nexus_core.timeutil import iso_from_ms
from nexus_tui.logic import recovery
from nexus_tui.logic.discovery import summarize
from nexus_tui.logic.model import LockView, ProjectSnapshot, build_view

NOW = 1_800_000_000_000
HOST_NAME = os.uname().nodename
OWNERS = {
    "alive": {"pid": os.getpid(), "hostname": HOST_NAME},
    "dead": {"pid": 4194304, "hostname": HOST_NAME},
    "elsewhere": {"pid": 4242, "hostname": "another-host"},
}
TASKS = ("a", "b", "c", "p")
PER_TASK = [
    name for name, command in MUTATIONS.items() if command.per_task
]  # p has an execution contract (launched and supervised)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = make_project(
        tmp_path_factory.mktemp("agreement"),
        [
            task_plan("a", maxAttempts=2),
            task_plan("b", dependsOn=["a"], maxAttempts=3, idempotent=False),
            task_plan("c", maxAttempts=1),
            process_task_plan("p", maxAttempts=2),
        ],
    )
    return root, cast(dict[str, Any], load_run(str(root), "demo"))  # edited as plain JSON


def iso(offset_s: int) -> str:
    return iso_from_ms(NOW + offset_s * 1000)


KINDS_OF_ATTEMPT = (
    "running",
    "running-cancel-requested",
    "blocked",
    "ambiguous",
    "completed",
    "verifying",
    "passed",
    "failed-verification",
    "ambiguous-verification",
    "failed",
    "cancelled",
)
PROCESS_KINDS = ("starting", "running", "finished", "collected")


@st.composite
def attempt_of(draw: st.DrawFn, task_id: str, number: int, latest: bool) -> dict[str, Any]:
    is_process = task_id == "p"
    backend: dict[str, Any]
    if is_process:
        owner = OWNERS[draw(st.sampled_from(list(OWNERS)))]
        backend = {"kind": "process", "id": "sup", "sessionId": "s", "hostname": owner["hostname"]}
        backend["ownerPid"] = owner["pid"]
    else:
        backend = {"kind": "host", "id": "worker", "sessionId": "session-1"}
    # The latest attempt more often passed (then accepted or not, stale or not) than anything else.
    kinds = (*KINDS_OF_ATTEMPT, "passed", "passed") if latest else ("failed", "cancelled", "failed-verification")
    kind = draw(st.sampled_from(kinds))
    attempt: dict[str, Any] = {
        "id": f"00000000-0000-4000-8000-{task_id.encode().hex():0>10}{number:02d}",
        "backend": backend,
        "execution": "completed",
        "verification": {"status": "pending", "checks": []},
        "verificationRounds": draw(st.integers(0, 3)),
        "verificationHistory": [],
        "reconciliations": [],
        "observations": [],
        "cancellation": {"status": "none"},
        "startedAt": iso(-3600),
        "observedAt": iso(-1800),
        "endedAt": iso(-1700),
        "deadline": iso(draw(st.sampled_from([-60, 3600]))),
    }
    verification = attempt["verification"]
    if kind in ("running", "running-cancel-requested"):
        attempt["execution"], attempt["endedAt"] = "running", None
        if kind == "running-cancel-requested":
            attempt["cancellation"] = {"status": "requested", "requestedAt": iso(-100), "reason": "stop"}
    elif kind in ("blocked", "ambiguous", "failed", "cancelled"):
        attempt["execution"] = kind
        if kind == "blocked":
            attempt["blockedRequest"] = "a key"
            attempt["endedAt"] = None
        if kind in ("failed", "cancelled") and draw(st.booleans()):
            attempt["reconciliation"] = {"outcome": kind, "retrySafe": draw(st.booleans())}
            attempt["reconciliations"] = [attempt["reconciliation"]]
    elif kind == "verifying":
        owner = OWNERS[draw(st.sampled_from(list(OWNERS)))]
        attempt["verification"] = {"id": f"v-{task_id}", "status": "running", "startedAt": iso(-50), "owner": owner}
    elif kind != "completed":
        status = {"passed": "passed", "failed-verification": "failed", "ambiguous-verification": "ambiguous"}[kind]
        verification.update(
            {"id": f"v-{task_id}-{number}", "status": status, "startedAt": iso(-60), "endedAt": iso(-40)}
        )
    if is_process:
        stage = draw(st.sampled_from(PROCESS_KINDS))
        if stage in ("starting", "running"):
            attempt["execution"], attempt["endedAt"] = "running", None
            attempt["verification"] = {"status": "pending", "checks": []}
            attempt["cancellation"] = {"status": "none"}
            beat = draw(st.sampled_from([-1, -600]))
            attempt["process"] = {"status": stage, "heartbeatAt": iso(beat), "childPid": None}
        elif stage == "finished":
            attempt["execution"], attempt["endedAt"] = "running", None
            attempt["verification"] = {"status": "pending", "checks": []}
            attempt["cancellation"] = {"status": "none"}
            attempt.pop("reconciliation", None)
            attempt["reconciliations"] = []
            receipt = {"outcome": draw(st.sampled_from(["completed", "failed", "blocked"])), "endedAt": iso(-30)}
            attempt["process"] = {"status": "finished", "heartbeatAt": iso(-30), "receipt": receipt}
        else:
            outcome = draw(st.sampled_from(["completed", "failed", "blocked"]))
            receipt = {"outcome": outcome, "endedAt": iso(-30)}
            attempt["process"] = {"status": "finished", "receipt": receipt, "collectedAt": iso(-20)}
            attempt["execution"] = outcome  # what collect stores
            attempt["cancellation"] = {"status": "none"}
            if outcome != "completed":
                attempt["verification"] = {"status": "pending", "checks": []}
    return attempt


@st.composite
def run_state(draw: st.DrawFn, template: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A run as the core could have written it, and inspect's observations of it."""
    run = copy.deepcopy(template)
    observations: dict[str, Any] = {}
    for task in run["tasks"]:
        task_id = task["id"]
        definition = next(d for d in run["plan"]["tasks"] if d["id"] == task_id)
        # b (which depends on a) not started, often: the state where a stale a blocks it.
        counts = [0, 0, 0, *range(1, definition["maxAttempts"] + 1)] if task_id == "b" else None
        count = draw(st.sampled_from(counts) if counts else st.integers(0, definition["maxAttempts"]))
        attempts = [draw(attempt_of(task_id, n, n == count - 1)) for n in range(count)]
        task["attempts"] = attempts
        latest = attempts[-1] if attempts else None
        accepted = (
            latest is not None
            and latest["execution"] == "completed"
            and latest["verification"]["status"] == "passed"
            and draw(st.booleans())
        )
        task["integration"] = "accepted" if accepted else "pending"
        if accepted:
            task["acceptedAt"] = iso(-10)
        stale = draw(st.booleans()) if latest is not None or accepted else False
        resources = draw(st.sampled_from([True, True, True, False]))
        observation: dict[str, Any] = {
            "taskId": task_id,
            "attemptId": latest["id"] if latest else None,
            "overdue": bool(latest and needs.overdue(cast(Attempt, latest), task, NOW)),
            "resourcesCurrent": resources,
            "evidenceEligible": False,
            "stale": stale or not resources,
            "staleReason": "Nexus: Stale evidence." if stale or not resources else None,
        }
        if latest is not None and latest["backend"]["kind"] == "process":
            observation["process"] = process_observation(cast(Attempt, latest), NOW)
        observation["hint"] = "(inspect's hint)"
        observations[task_id] = observation
    # Dependencies accepted before a dependant began (the core refuses a start otherwise).
    tasks = {t["id"]: t for t in run["tasks"]}
    if tasks["b"]["attempts"] and tasks["a"]["integration"] != "accepted":
        tasks["b"]["attempts"] = []
        observations["b"].update(attemptId=None, overdue=False, stale=False, staleReason=None, resourcesCurrent=True)
        observations["b"].pop("process", None)
    return run, observations


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_every_reader_agrees_with_the_classifier(base: tuple[Path, dict[str, Any]], data: st.DataObject) -> None:
    root, template = base
    run, observations = data.draw(run_state(template))
    inspection: dict[str, Any] = {**run, "observations": [observations[t["id"]] for t in run["tasks"]]}
    inspection["lock"], inspection["recoveryLock"] = None, None
    standings = needs.stand_run(run, observations, NOW)  # type: ignore[arg-type]
    project_needs = needs.run_needs(str(root), run, observations, NOW, standings)  # type: ignore[arg-type]
    by_task = {need.task: need for need in project_needs}
    for need in project_needs:
        event(f"{need.kind}->{need.action}")

    # wait: the same state and category for every task.
    states = {s.task: (s.state, s.category) for s in classify_run(inspection, now=NOW)}  # type: ignore[arg-type]
    assert states == {t: (s.state, s.category) for t, s in standings.items()}

    # A need exactly when a person must act: an operator's decision, a spent budget, a receipt.
    for task_id, standing in standings.items():
        expected = standing.category in (needs.OPERATOR, needs.BUDGET) or standing.state == "awaiting-collect"
        assert (standing.kind is not None) == expected, (task_id, standing)
        assert (task_id in by_task) == expected

    # The dashboard's rows and the run's needs.
    view = build_view("demo", inspection, now=NOW, project=str(root))  # type: ignore[arg-type]
    assert {row.task_id: row.need for row in view.rows} == {t: s.kind for t, s in standings.items()}
    assert [n.id for n in view.needs] == [n.id for n in project_needs]

    # The guide: one situation per need, its next step the need's guided action.
    situations = recovery.task_situations(str(root), inspection, NOW)  # type: ignore[arg-type]
    assert sorted(s.task_id or "" for s in situations) == sorted(task or "" for task in by_task)
    for situation in situations:
        assert situation.next_action == standings[situation.task_id or ""].action, situation

    # The overview counts them.
    snapshot = ProjectSnapshot(
        str(root),
        str(root),
        (view,),
        LockView("writer.lock", False),
        LockView("recovery.lock", False),
        NOW,
        needs=tuple(needs.oldest_first(project_needs)),
    )
    assert summarize(snapshot).total == len(project_needs)

    # A guided action is one the core's state checks accept, as far as the run file says; so
    # completion, which offers first the tasks awaiting the action, offers valid ones first.
    for task in run["tasks"]:
        action = standings[task["id"]].action
        if action in PER_TASK:
            assert allows(action, run, task), (task["id"], standings[task["id"]], action)
    for action in PER_TASK:
        for task_id in awaiting_tasks(run, action):
            assert allows(action, run, next(t for t in run["tasks"] if t["id"] == task_id))
