"""One table of state checks (issue 25 item 1): for every per-task action, over generated task
states (hypothesis), the engine refuses in exactly the words of the first check of the action's
entry (``nexus_core.actions.COMMANDS``) that the state fails, and accepts when none fails; the
dashboard's availability gives that check's words, and shell completion offers the task exactly
when no check fails. Plus the deterministic host situations and tolerance of any shape."""

from __future__ import annotations

import copy
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from process_support import command_task, create, make_project
from project_kit import HOST, SITUATIONS, Project
from project_kit import host_situations as situations

from nexus_core import actions, engine
from nexus_core.backend.checks import check_environment
from nexus_core.errors import NexusError
from nexus_core.preconditions import first_refusal
from nexus_core.shapes import Backend, Run, Task
from nexus_core.snapshots import files_snapshot, scope_snapshot
from nexus_core.state import canonical, store
from nexus_core.state.store import load_run
from nexus_tui.logic.operations import OPERATIONS, Target

PER_TASK = actions.per_task_actions()
AT = "2026-01-01T00:00:00.000Z"
ELSEWHERE = "elsewhere.invalid"  # another host: its pids are never probed here
PROCESS_STATES = (None, "starting", "running", "finished")


# ----------------------------------------------------------------- the deterministic situations


def attempt_id(run: Mapping[str, Any], task_id: str) -> str | None:
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
def test_the_table_allows_exactly_what_the_engine_accepts(tmp_path: Path, action: str) -> None:
    accepted = []
    for task_id in SITUATIONS:
        project = situations(tmp_path / task_id)  # a fresh project per try: an accepted try changes it
        run = load_run(project.dir, "r1")
        task = next(t for t in run["tasks"] if t["id"] == task_id)
        predicted = actions.allows(action, run, task)
        assert predicted == attempt(project, action, task_id), (action, task_id, predicted)
        accepted += [task_id] if predicted else []
    assert accepted and len(accepted) < len(SITUATIONS)  # the situations tell some apart


def test_any_shape_is_refused_without_raising() -> None:
    for action in PER_TASK:
        for task in ({}, {"id": "a", "attempts": "x"}, {"id": "a", "attempts": [None, 3]}):
            assert actions.allows(action, {"plan": "x", "tasks": None}, task) is False
    assert actions.allows("frobnicate", {}, {}) is False
    assert actions.allows("inspect", {}, {}) is False  # not a per-task action


# ----------------------------------------------------------------- generated states


def host_def(task_id: str, **overrides: Any) -> dict[str, Any]:
    return {
        "id": task_id,
        "objective": f"Write out/{task_id}/result.txt.",
        "scope": [f"out/{task_id}"],
        "artifacts": [f"out/{task_id}/result.txt"],
        "resources": ["checks/check.sh"],
        "checks": [{"id": "content", "command": "/bin/sh", "args": ["checks/check.sh", task_id], "timeoutMs": 10000}],
        **overrides,
    }


# Every plan shape a check reads: host or process, idempotent or not, maxAttempts 1-3, and
# dependencies accepted ("dep"), pending ("pend"), both or none.
DEPENDENCY_SETS = {"n": [], "a": ["dep"], "p": ["pend"], "b": ["dep", "pend"]}
TARGETS = [
    f"{'p' if contract else 'h'}{int(idempotent)}{limit}{deps}"
    for contract in (False, True)
    for idempotent in (True, False)
    for limit in (1, 2, 3)
    for deps in DEPENDENCY_SETS
]


def target_def(target: str) -> dict[str, Any]:
    shape = {"idempotent": target[1] == "1", "maxAttempts": int(target[2]), "dependsOn": DEPENDENCY_SETS[target[3]]}
    return command_task(target, "fail", **shape) if target[0] == "p" else host_def(target, **shape)


@dataclass
class Template:
    root: str
    run: Run = field(repr=False)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Template:
    """One run holding every target, "dep" accepted through the real engine, "pend" pending."""
    root = make_project(tmp_path_factory.mktemp("states") / "project")
    for task_id in ["dep", "pend", *TARGETS]:
        (root / "out" / task_id).mkdir(parents=True)
        (root / "out" / task_id / "result.txt").write_text("ok\n")
    create(root, "r", [host_def("dep"), host_def("pend"), *[target_def(t) for t in TARGETS]], max_parallel=32)
    project = str(root)
    run = engine.start_task(project, "r", "dep", {"backend": HOST})
    dep_attempt = run["tasks"][0]["attempts"][-1]["id"]
    engine.record_attempt(
        project, "r", "dep", {"attemptId": dep_attempt, "backend": HOST, "outcome": "completed", "summary": "done"}
    )
    engine.verify_task(project, "r", "dep")
    return Template(project, engine.accept_task(project, "r", "dep"))


def backend_of(kind: str) -> Backend:
    if kind == "host":
        return engine.backend_identity(HOST)
    identity = {"kind": "process", "id": "owner", "sessionId": "s", "hostname": ELSEWHERE, "ownerPid": 4242}
    return engine.backend_identity(identity)


def identity_of(backend: dict[str, Any]) -> dict[str, Any]:
    return {key: backend[key] for key in ("kind", "id", "sessionId", "hostname", "ownerPid") if key in backend}


@st.composite
def task_states(draw: st.DrawFn) -> dict[str, Any]:
    """A target and its stored record: its acceptance and attempts, the latest one with every
    field a check reads drawn from its stored values."""
    target = draw(st.sampled_from(TARGETS))
    attempts = []
    for index in range(draw(st.integers(0, 3))):
        kind = "process" if target[0] == "p" and draw(st.booleans()) else "host"
        attempts.append(
            {
                "kind": kind,
                "execution": draw(st.sampled_from(store.EXECUTIONS)),
                "verification": draw(st.sampled_from(store.VERIFICATIONS)),
                "verified_own": draw(st.booleans()),  # a passed verification names this attempt
                "rounds": draw(st.integers(0, 3)),
                "cancellation": draw(st.sampled_from(("none", "requested", "reconciled"))),
                "reconciliation": draw(st.sampled_from((None, False, True))),  # None: never; else retrySafe
                "process": draw(st.sampled_from((None, "starting", "running", "finished")))
                if kind == "process"
                else None,
                "receipt": draw(st.booleans()),
                "collected": draw(st.booleans()),
                "index": index,
            }
        )
    return {
        "target": target,
        "integration": draw(st.sampled_from(store.INTEGRATIONS)),
        "attempts": attempts,
        "retry": draw(st.sampled_from((None, True, False))),  # launch's input (None: as the dashboard)
    }


# What each action's checks ask for, drawn often so that every action is also seen accepting
# and, one thing set astray, refused by each single check.
_ACCEPTING: dict[str, dict[str, Any]] = {
    "start": {"contract": "h", "attempts": (0,)},
    "retry": {"contract": "h", "attempts": (1, 2), "execution": ("failed", "cancelled"), "idle": True},
    "launch": {"contract": "p", "attempts": (0, 1, 2), "execution": ("failed", "cancelled"), "idle": True},
    "record": {"attempts": (1,), "kind": "host", "execution": ("running", "blocked"), "cancellation": ("none",)},
    "reconcile": {"attempts": (1, 2)},
    "cancel": {"attempts": (1,), "cancellation": ("none",)},
    "verify": {"attempts": (1,), "execution": ("completed",), "verification": ("pending",), "rounds": (0, 1, 2, 3)},
    "accept": {"attempts": (1,), "execution": ("completed",), "verification": ("passed",), "own": True},
    "collect": {"contract": "p", "attempts": (1,), "kind": "process", "process": "finished", "receipt": True},
}


@st.composite
def accepting_states(draw: st.DrawFn, name: str) -> dict[str, Any]:
    wanted = _ACCEPTING[name]
    state = draw(task_states())
    state["target"] = draw(st.sampled_from([t for t in TARGETS if t[0] == wanted.get("contract", t[0])]))
    state["integration"] = draw(st.sampled_from(("pending", "rejected")))
    count = draw(st.sampled_from(wanted["attempts"]))
    state["attempts"] = state["attempts"][:count]
    while len(state["attempts"]) < count:
        state["attempts"].append(dict((draw(task_states())["attempts"] or [_PLAIN])[0]))
    for shape in state["attempts"][-1:]:
        for key in ("execution", "verification", "cancellation", "rounds"):
            if key in wanted:
                shape[key] = draw(st.sampled_from(wanted[key]))
        shape.update({k: wanted[k] for k in ("kind", "process", "receipt") if k in wanted})
        if wanted.get("own"):
            shape["verified_own"] = True
        if name == "collect":
            shape.update(collected=False, reconciliation=None)
        if wanted.get("idle"):
            shape.update(verification="pending", cancellation="none")
    # Then, often, one thing set astray: refused by a single check.
    astray = draw(st.sampled_from((None, "target", "integration", "attempts", *_PLAIN)))
    free = draw(task_states())
    if astray in ("target", "integration"):
        state[astray] = free[astray]
    elif astray == "attempts":
        state["attempts"] = state["attempts"] + state["attempts"][-1:] if state["attempts"] else free["attempts"]
    elif astray is not None and state["attempts"] and free["attempts"]:
        state["attempts"][-1][astray] = free["attempts"][0][astray]
    return state


_PLAIN = {
    "kind": "host",
    "execution": "running",
    "verification": "pending",
    "verified_own": True,
    "rounds": 0,
    "cancellation": "none",
    "reconciliation": None,
    "process": None,
    "receipt": False,
    "collected": False,
    "index": 0,
}


def states_for(name: str) -> st.SearchStrategy[dict[str, Any]]:
    """Two in three draws near what the action accepts, the rest anywhere."""
    return st.one_of(task_states(), accepting_states(name), accepting_states(name))


def build_attempt(root: str, run: dict[str, Any], target: str, shape: dict[str, Any]) -> dict[str, Any]:
    definition = next(d for d in run["plan"]["tasks"] if d["id"] == target)
    attempt_id = str(uuid.uuid4())
    backend = backend_of(shape["kind"])
    status = shape["verification"]
    verification: dict[str, Any] = {"status": status, "checks": []}
    if status != "pending":
        verification = {
            "id": str(uuid.uuid4()),
            "attemptId": attempt_id if shape["verified_own"] else str(uuid.uuid4()),
            "status": status,
            "startedAt": AT,
            "owner": {"pid": 4242, "hostname": ELSEWHERE},
            "checks": [],
        }
    if status == "passed":  # evidence as a real verification leaves it: current, complete
        environment = check_environment()
        verification.update(
            environment=environment,
            scopeHashes=scope_snapshot(root, definition["scope"]),
            artifactHashes=files_snapshot(root, definition["artifacts"], True),
            checks=[
                {"id": c["id"], "attemptId": attempt_id, "exitCode": 0, "error": None, "environment": environment}
                for c in definition["checks"]
            ],
        )
    attempt: dict[str, Any] = {
        "id": attempt_id,
        "runId": run["id"],
        "taskId": target,
        "parentAttemptId": None,
        "backend": backend,
        "execution": shape["execution"],
        "verification": verification,
        "verificationRounds": shape["rounds"],
        "verificationHistory": [],
        "reconciliations": [],
        "cancellation": {"status": shape["cancellation"]},
        "startedAt": AT,
        "observedAt": AT,
        "endedAt": None,
        "deadline": "2099-01-01T00:00:00.000Z",
        "resultHashes": scope_snapshot(root, definition["scope"]),
        "authorizations": [],
        "observations": [],
        "uncheckedScope": engine.UNCHECKED_SCOPE,
    }
    if shape["reconciliation"] is not None:
        reconciliation = {"at": AT, "outcome": "failed", "ownerStopped": True, "retrySafe": shape["reconciliation"]}
        attempt["reconciliation"] = reconciliation
        attempt["reconciliations"] = [copy.deepcopy(reconciliation)]
    if shape["process"] is not None:
        process: dict[str, Any] = {
            "status": shape["process"],
            "owner": copy.deepcopy(backend),
            "childPid": None,
            "heartbeatAt": AT,
            "collectedAt": AT if shape["collected"] else None,
            "runtimeHash": "0" * 64,
        }
        if shape["receipt"]:  # a failed run of the worker, stored as a launch stores it
            receipt = {
                "schemaVersion": 1,
                "attemptId": attempt_id,
                "backend": copy.deepcopy(backend),
                "planHash": run["planHash"],
                "outcome": "failed",
                "exitCode": 3,
                "endedAt": AT,
            }
            process["receipt"] = receipt
            process["receiptHash"] = canonical.sha256_json(receipt)
        attempt["process"] = process
    return attempt


def stored_state(template: Template, state: dict[str, Any]) -> tuple[Run, Task]:
    """The template's run with the target's record replaced, saved: (run as loaded, task)."""
    run: dict[str, Any] = copy.deepcopy(dict(template.run))  # edited as plain JSON
    target = state["target"]
    built = [build_attempt(template.root, run, target, shape) for shape in state["attempts"]]
    task = next(t for t in run["tasks"] if t["id"] == target)
    task.update(integration=state["integration"], attempts=built)
    store.save_run(template.root, cast(Run, run))
    loaded = load_run(template.root, "r")
    return loaded, next(t for t in loaded["tasks"] if t["id"] == target)


def well_formed_input(name: str, task: Mapping[str, Any], retry: bool | None) -> Any:
    latest = task["attempts"][-1] if task["attempts"] else None
    bound = {
        "attemptId": latest["id"] if latest else None,
        "backend": identity_of(latest["backend"]) if latest else HOST,
    }
    return {
        "start": {"backend": HOST},
        "retry": {"backend": HOST},
        "launch": {"retry": bool(task["attempts"]) if retry is None else retry},
        "record": {**bound, "outcome": "completed", "summary": "done"},
        "reconcile": {**bound, "outcome": "failed", "ownerStopped": True, "summary": "checked"},
        "cancel": {**bound, "reason": "stop"},
        "collect": bound,
        "verify": None,
        "accept": None,
    }[name]


GENERATED = settings(
    max_examples=100,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)


@pytest.mark.parametrize("name", PER_TASK)
@GENERATED
@given(data=st.data())
def test_the_engine_refuses_in_the_words_of_the_tables_first_failing_check(
    template: Template, name: str, data: st.DataObject
) -> None:
    state = data.draw(states_for(name))
    run, task = stored_state(template, state)
    options = well_formed_input(name, task, state["retry"])
    retry = options.get("retry") if isinstance(options, dict) and name == "launch" else None
    facts = actions.facts_for(name, run, task, retry=retry)
    failing = first_refusal(actions.COMMANDS[name].checks, facts)
    try:
        actions.call(name, template.root, "r", task["id"], options)
    except NexusError as error:
        assert failing is not None, f"{name} refused a state its checks accept: {error.message} {facts}"
        assert error.message == failing.refusal(facts).message, (name, failing.name, facts)
    else:
        assert failing is None, f"{name} accepted a state its check {failing.name} refuses: {facts}"


@pytest.mark.parametrize("name", PER_TASK)
@settings(GENERATED, max_examples=150)
@given(data=st.data())
def test_the_dashboard_and_completion_ask_the_same_checks(template: Template, name: str, data: st.DataObject) -> None:
    state = data.draw(states_for(name))
    run, task = stored_state(template, state)
    failing = first_refusal(actions.COMMANDS[name].checks, actions.facts_for(name, run, task))
    # The dashboard: offered exactly when no check fails, else refused in that check's words.
    refusal = OPERATIONS[name].core_refusal(Target(template.root, run, task["id"], None))
    assert refusal == (None if failing is None else failing.words)
    # Completion offers the task exactly then.
    assert actions.allows(name, run, task) == (failing is None)
