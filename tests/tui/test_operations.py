"""nexus_tui.logic.operations: every mutating action through the real core, asserting on disk."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from tui_actions_support import (
    HOST,
    accepted,
    latest,
    make_project,
    record,
    start,
    task_of,
    task_plan,
    tree_digest,
    write_dead_writer_lock,
    write_result,
)

from nexus_core import actions as mutations
from nexus_core import engine
from nexus_core.errors import NexusError
from nexus_tui.logic import operations as ops

OPERATOR = {"backend_id": "operator", "backend_session": "nexus-tui-test"}


def _run(
    root: Path,
    action: str,
    task: str | None = "a",
    values: dict[str, Any] | None = None,
    log: ops.ActionLog | None = None,
    **hooks: Any,
) -> Any:
    preview = ops.preview(str(root), action, "demo" if task else None, task)
    return ops.execute(preview, values or {}, log or ops.ActionLog(), **hooks)


def test_a_task_goes_from_nothing_to_accepted_and_every_call_is_logged(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    log = ops.ActionLog()
    seen: list[Any] = []
    log.listener = seen.append
    _run(root, "start", values=OPERATOR, log=log)
    attempt = latest(root, "a")
    assert attempt["execution"] == "running"
    assert attempt["backend"]["id"] == "operator" and attempt["backend"]["sessionId"] == "nexus-tui-test"
    write_result(root, "a")
    # record's identity is prefilled from the attempt being acted on.
    record_preview = ops.preview(str(root), "record", "demo", "a")
    assert record_preview.backend == {"kind": "host", "id": "operator", "sessionId": "nexus-tui-test"}
    ops.execute(
        record_preview,
        {"backend_id": "operator", "backend_session": "nexus-tui-test", "outcome": "completed", "summary": "done"},
        log,
    )
    assert latest(root, "a")["execution"] == "completed"
    events: list[Any] = []
    _run(root, "verify", log=log, progress=events.append)
    assert latest(root, "a")["verification"]["status"] == "passed"
    assert [e["event"] for e in events] == ["check-started", "check-spawned", "check-finished"]
    assert events[0]["total"] == 1 and events[0]["check"] == "result-ok"
    _run(root, "accept", log=log)
    assert task_of(root, "a")["integration"] == "accepted"
    entries = log.entries
    assert [e.action for e in entries] == ["start", "record", "verify", "accept"]
    assert all(e.ok for e in entries) and seen == entries
    assert entries[1].inputs.startswith(f"attemptId={attempt['id'][:8]}, backend=host:operator/nexus-tui-test")
    assert entries[3].result.endswith("acceptance=accepted")


def test_operator_identity_is_stable_and_host_kind() -> None:
    first, second = ops.operator_identity(), ops.operator_identity()
    assert first == second
    assert first["kind"] == "host" and first["id"] == "operator"
    assert first["sessionId"].startswith("nexus-tui-")


def test_invalid_input_never_reaches_the_core(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    before = tree_digest(root)
    preview = ops.preview(str(root), "reconcile", "demo", "a")
    log = ops.ActionLog()
    with pytest.raises(ops.InvalidInput) as refused:
        ops.execute(preview, {"outcome": "failed", "summary": " ", "owner_stopped": False, **OPERATOR}, log)
    assert set(refused.value.errors) == {"summary", "owner_stopped"}
    record_preview = ops.preview(str(root), "record", "demo", "a")
    with pytest.raises(ops.InvalidInput) as bad_code:
        ops.execute(record_preview, {**OPERATOR, "outcome": "completed", "summary": "x", "exit_code": "3"}, log)
    assert "exit_code" in bad_code.value.errors
    assert tree_digest(root) == before
    assert log.entries == []


def test_cancel_needs_the_task_id_typed_and_a_reason(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    before = tree_digest(root)
    preview = ops.preview(str(root), "cancel", "demo", "a")
    assert preview.confirm_text == "a"
    with pytest.raises(ops.InvalidInput):
        ops.execute(preview, {"reason": "wrong worker", "typed": "b"}, ops.ActionLog())
    assert tree_digest(root) == before
    ops.execute(preview, {"reason": "wrong worker", "typed": "a"}, ops.ActionLog())
    attempt = latest(root, "a")
    assert attempt["cancellation"]["status"] == "requested"
    assert attempt["cancellation"]["reason"] == "wrong worker"
    assert attempt["execution"] == "ambiguous"


def test_reconcile_then_retry_a_non_idempotent_task(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a", idempotent=False, maxAttempts=3)])
    first = start(root, "a")
    engine.cancel_task(str(root), "demo", "a", {"reason": "stuck"})
    assert ops.unavailable_reason("retry", ops.load_run(str(root), "demo"), "a") is not None
    reconcile = ops.preview(str(root), "reconcile", "demo", "a")
    assert reconcile.backend == {"kind": "host", "id": HOST["id"], "sessionId": HOST["sessionId"]}
    assert any("cancellation is marked reconciled" in line for line in reconcile.changes)
    values = {
        "backend_id": HOST["id"],
        "backend_session": HOST["sessionId"],
        "outcome": "cancelled",
        "summary": "worker process gone",
        "owner_stopped": True,
        "retry_safe": True,
    }
    ops.execute(reconcile, values, ops.ActionLog())
    attempt = latest(root, "a")
    assert attempt["execution"] == "cancelled"
    assert attempt["reconciliation"]["retrySafe"] is True and attempt["reconciliation"]["ownerStopped"] is True
    assert attempt["cancellation"]["status"] == "reconciled"
    _run(root, "retry", values=OPERATOR)
    attempts = task_of(root, "a")["attempts"]
    assert len(attempts) == 2 and attempts[1]["parentAttemptId"] == first


def test_a_state_changed_under_the_dialog_is_refused_and_logged(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    preview = ops.preview(str(root), "record", "demo", "a")
    # Meanwhile the worker reports through the CLI/library: the dialog's statement is now wrong.
    record(root, "a", outcome="failed")
    before = tree_digest(root)
    log = ops.ActionLog()
    with pytest.raises(ops.TargetChanged) as changed:
        ops.execute(preview, {**OPERATOR, "outcome": "completed", "summary": "late"}, log)
    assert "execution: running -> failed" in changed.value.message
    assert tree_digest(root) == before
    assert log.entries[-1].ok is False and "changed while the dialog was open" in log.entries[-1].result


def test_another_attempt_under_the_dialog_is_refused(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    first = start(root, "a")
    preview = ops.preview(str(root), "cancel", "demo", "a")
    engine.cancel_task(str(root), "demo", "a", {"reason": "x"})
    engine.reconcile_attempt(
        str(root),
        "demo",
        "a",
        {"attemptId": first, "backend": HOST, "outcome": "failed", "ownerStopped": True, "summary": "gone"},
    )
    second = start_retry(root)
    before = tree_digest(root)
    with pytest.raises(ops.TargetChanged) as changed:
        ops.execute(preview, {"reason": "stop", "typed": "a"}, ops.ActionLog())
    assert f"latest attempt: {first[:8]} -> {second[:8]}" in changed.value.message
    assert tree_digest(root) == before


def start_retry(root: Path) -> str:
    run = engine.retry_task(str(root), "demo", "a", {"backend": HOST})
    return next(t for t in run["tasks"] if t["id"] == "a")["attempts"][-1]["id"]


def test_core_refusal_keeps_its_exact_message(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    engine.verify_task(str(root), "demo", "a")
    write_result(root, "a", "ok edited\n")
    before = tree_digest(root)
    log = ops.ActionLog()
    with pytest.raises(NexusError) as refused:
        _run(root, "accept", log=log)
    assert refused.value.message == "Nexus: Stale evidence: checked artifacts or write scope changed."
    assert log.entries[-1].result == refused.value.message and not log.entries[-1].ok
    assert tree_digest(root) == before


def test_verify_can_be_stopped_and_never_passes(tmp_path: Path) -> None:
    checks = [{"id": f"c{i}", "command": "python", "args": ["checks/check.py", "a"]} for i in range(3)]
    root = make_project(tmp_path, [task_plan("a", checks=checks)])
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    events: list[Any] = []
    _run(root, "verify", progress=events.append, should_stop=lambda: len(events) >= 2)
    verification = latest(root, "a")["verification"]
    assert verification["status"] == "ambiguous"
    assert len(verification["checks"]) == 1
    assert task_of(root, "a")["integration"] == "rejected"


def test_recover_lock_needs_the_fingerprint_and_refuses_a_replaced_lock(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    lock_hash = write_dead_writer_lock(root)
    preview = ops.preview(str(root), "recover-lock")
    assert preview.confirm_text == lock_hash[:8]
    assert any("not running" in line for line in preview.changes)
    with pytest.raises(ops.InvalidInput):
        ops.execute(preview, {"note": "owner gone", "owner_stopped": True, "typed": "00000000"}, ops.ActionLog())
    # Another dead writer replaced the lock while the dialog was open.
    (root / ".bmad-plus/nexus/writer.lock").unlink()
    other_hash = write_dead_writer_lock(root)
    assert other_hash != lock_hash
    with pytest.raises(ops.TargetChanged):
        ops.execute(preview, {"note": "owner gone", "owner_stopped": True, "typed": lock_hash[:8]}, ops.ActionLog())
    assert (root / ".bmad-plus/nexus/writer.lock").exists()
    fresh = ops.preview(str(root), "recover-lock")
    ops.execute(fresh, {"note": "owner gone", "owner_stopped": True, "typed": other_hash[:8]}, ops.ActionLog())
    assert not (root / ".bmad-plus/nexus/writer.lock").exists()
    receipts = list((root / ".bmad-plus/nexus/lock-recovery").glob("*.json"))
    assert len(receipts) == 1 and other_hash in receipts[0].read_text()


STATES = ("fresh", "running", "completed", "passed", "failed-verification", "cancel-requested", "accepted")
HOST_ACTIONS = ("start", "retry", "record", "reconcile", "cancel", "verify", "accept", "collect", "launch")


def _drive(root: Path, state: str) -> None:
    if state == "fresh":
        return
    if state == "accepted":
        accepted(root, "a")
        return
    start(root, "a")
    if state == "running":
        return
    if state == "cancel-requested":
        engine.cancel_task(str(root), "demo", "a", {"reason": "x"})
        return
    write_result(root, "a", "ok\n" if state != "failed-verification" else "no\n")
    record(root, "a")
    if state in ("passed", "failed-verification"):
        engine.verify_task(str(root), "demo", "a")


@pytest.mark.parametrize("state", STATES)
def test_actions_reported_unavailable_are_refused_by_the_core(tmp_path: Path, state: str) -> None:
    """The palette's cheap mirror never hides an action the core would accept wrongly: every
    action it calls unavailable is refused by the core with nothing changed."""
    root = make_project(tmp_path)
    _drive(root, state)
    run = ops.load_run(str(root), "demo")
    for action in HOST_ACTIONS:
        # The mirror of the core's refusal (what the dashboard withholds on top, the core accepts).
        if ops.OPERATIONS[action].core_refusal(ops.Target(str(root), run, "a")) is None:
            continue
        before = tree_digest(root)
        attempt = run["tasks"][0]["attempts"][-1] if run["tasks"][0]["attempts"] else {"id": None}
        options = {
            "attemptId": attempt["id"],
            "backend": HOST,
            "outcome": "completed",
            "summary": "s",
            "reason": "r",
            "ownerStopped": True,
        }
        with pytest.raises(NexusError):
            mutations.call(action, str(root), "demo", "a", options)  # the CLI's and the dashboard's table
        assert tree_digest(root) == before, action


def test_recover_lock_names_a_recovery_lock_that_appeared_under_the_dialog(tmp_path: Path) -> None:
    """The core's recover_lock reads recovery.lock too: one appearing while the dialog is open is
    named at confirm (issue 13 item 4), not left to the core's refusal."""
    from tui_actions_support import write_dead_recovery_lock

    root = make_project(tmp_path)
    lock_hash = write_dead_writer_lock(root)
    preview = ops.preview(str(root), "recover-lock")
    write_dead_recovery_lock(root)
    before = tree_digest(root)
    values = {"note": "owner gone", "owner_stopped": True, "typed": lock_hash[:8]}
    with pytest.raises(ops.TargetChanged, match=r"changed while the dialog was open \(recovery.lock: none -> "):
        ops.execute(preview, values, ops.ActionLog())
    assert tree_digest(root) == before
