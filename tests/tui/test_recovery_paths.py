"""Every recovery path, step by step: after EACH step the guided recovery's advice for the task,
the row's need, the detail and the core's hint come from the one classifier and agree
(issue 24: after a killed launch was reconciled and verified, the guide still offered Reconcile
and the detail still showed the dead supervisor's heartbeat as STALE).

Real states driven with nexus_core and the dashboard's Operations; nothing is written by hand
except what an operator or a worker would write (files in the scope, a lock left by a kill)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tui_actions_support import (
    HOST,
    accepted,
    latest,
    make_project,
    process_task_plan,
    record,
    start,
    task_plan,
    write_dead_writer_lock,
    write_result,
)

from nexus_core import engine, needs, observe
from nexus_core.state.store import load_run
from nexus_core.timeutil import now_ms
from nexus_tui.logic import operations as ops
from nexus_tui.logic import recovery
from nexus_tui.logic.model import build_view
from nexus_tui.widgets.styles import DEFAULT_STYLES
from nexus_tui.widgets.task_detail import task_detail

RECONCILE = {"summary": "checked: the worker is gone", "owner_stopped": True, "retry_safe": False}


def advice(root: Path, task_id: str, now: int | None = None) -> tuple[str | None, str | None, str]:
    """(the guide's situation for the task, its next step, the core's hint), after checking that
    the row, the classifier and the guide agree."""
    moment = now_ms() if now is None else now
    situations = [s for s in recovery.situations_for(str(root), "demo", task_id, moment) if s.task_id == task_id]
    assert len(situations) <= 1, [s.kind for s in situations]
    situation = situations[0] if situations else None
    inspection = observe.inspect_loaded(str(root), load_run(str(root), "demo"), moment)
    standing = needs.stand_run(inspection, needs.observations_of(inspection), moment)[task_id]
    view = build_view("demo", inspection, now=moment, project=str(root))
    row = next(r for r in view.rows if r.task_id == task_id)
    assert row.need == standing.kind
    assert (situation is not None) == (standing.kind is not None), (situation, standing)
    assert (situation.next_action if situation else None) == standing.action
    hint = next(o for o in inspection["observations"] if o["taskId"] == task_id)["hint"]
    return (situation.kind if situation else None, situation.next_action if situation else None, hint)


def detail(root: Path, task_id: str, now: int | None = None) -> str:
    moment = now_ms() if now is None else now
    inspection = observe.inspect_loaded(str(root), load_run(str(root), "demo"), moment)
    shown = task_detail(build_view("demo", inspection, now=moment, project=str(root)), task_id, moment, DEFAULT_STYLES)
    assert shown is not None
    return shown[0].plain


def act(root: Path, action: str, task_id: str | None, values: dict[str, Any] | None = None) -> None:
    preview = ops.preview(str(root), action, "demo" if task_id else None, task_id)
    merged = dict(values or {})
    if preview.backend_editable:
        # A new attempt is the worker's (its record names it); else the attempt's own identity.
        backend = HOST if action in ("start", "retry") or not preview.backend else preview.backend
        merged.setdefault("backend_id", backend["id"])
        merged.setdefault("backend_session", backend["sessionId"])
    ops.execute(preview, merged, ops.ActionLog())


def wait_for(predicate: Any, seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def recover_left_lock(root: Path) -> None:
    """A SIGKILL may land while the killed process holds writer.lock: recover it by the book."""
    if (root / ".bmad-plus/nexus/writer.lock").exists():
        situation = next(s for s in recovery.lock_situations(str(root)) if s.kind == "writer-lock-dead")
        assert situation.lock_hash is not None
        act(root, "recover-lock", None, {"note": "killed", "owner_stopped": True, "typed": situation.lock_hash[:8]})


def alive(pid: int) -> bool:
    from nexus_core.hostinfo import pid_alive

    return pid_alive(pid)


def test_killed_launch_reconciled_verified_accepted(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    (root / "hold-worker").write_text("")
    launch = f"from nexus_core.backend import process; process.launch_task({str(root)!r}, 'demo', 'p', {{}})"
    supervisor = subprocess.Popen([sys.executable, "-c", launch], start_new_session=True)
    try:
        child = wait_for(lambda: (latest(root, "p").get("process") or {}).get("childPid") if _started(root) else None)
        assert advice(root, "p") == (None, None, observe.HINT_ACTIVE)  # alive and beating: nothing to do
    finally:
        os.killpg(supervisor.pid, signal.SIGKILL)
        supervisor.wait()
    os.kill(child, signal.SIGKILL)
    wait_for(lambda: not alive(child))
    recover_left_lock(root)
    later = now_ms() + 60_000  # the heartbeat is stale
    assert advice(root, "p", later) == ("process-heartbeat-stale", "reconcile", observe.HINT_ACTIVE)
    assert "STALE: supervisor gone" in detail(root, "p", later)
    # The operator checked: the worker wrote its result before it was killed. Reconcile completed.
    write_result(root, "p")
    act(root, "reconcile", "p", {**RECONCILE, "outcome": "completed"})
    assert advice(root, "p", later) == (None, None, observe.HINT_VERIFY)
    shown = detail(root, "p", later)
    assert "STALE" not in shown and "superseded: the attempt was reconciled completed" in shown
    act(root, "verify", "p")
    assert advice(root, "p", later) == (None, None, observe.HINT_ACCEPT)
    assert "STALE" not in detail(root, "p", later)
    act(root, "accept", "p")
    assert advice(root, "p", later) == (None, None, observe.HINT_ACCEPT)  # inspect's words once accepted


def _started(root: Path) -> bool:
    return bool(load_run(str(root), "demo")["tasks"][0]["attempts"])


def test_dead_verifier_reconciled_then_verified_again(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    (root / "hold").write_text("")
    verifier = subprocess.Popen(
        [sys.executable, "-c", f"from nexus_core import engine; engine.verify_task({str(root)!r}, 'demo', 'a')"],
        start_new_session=True,
    )
    try:
        wait_for(lambda: latest(root, "a")["verification"]["status"] == "running")
        assert advice(root, "a")[:2] == (None, None)  # its verifier is alive
    finally:
        os.killpg(verifier.pid, signal.SIGKILL)
        verifier.wait()
    (root / "hold").unlink()
    recover_left_lock(root)
    assert advice(root, "a")[:2] == ("verification-orphaned", "reconcile")
    assert "verifying: verifier gone" in detail(root, "a")
    act(root, "reconcile", "a", {**RECONCILE, "outcome": "completed"})
    assert advice(root, "a") == (None, None, observe.HINT_VERIFY)
    act(root, "verify", "a")
    assert advice(root, "a") == (None, None, observe.HINT_ACCEPT)
    act(root, "accept", "a")
    assert advice(root, "a") == (None, None, observe.HINT_ACCEPT)


def test_dead_writer_lock_recovered(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    lock_hash = write_dead_writer_lock(root)
    found = recovery.lock_situations(str(root))
    assert [(s.kind, s.next_action) for s in found] == [("writer-lock-dead", "recover-lock")]
    assert [n.kind for n in needs.lock_needs(str(root), *_locks(root))] == [needs.WRITER_LOCK_DEAD]
    act(root, "recover-lock", None, {"note": "owner gone", "owner_stopped": True, "typed": lock_hash[:8]})
    assert recovery.lock_situations(str(root)) == []
    assert needs.lock_needs(str(root), *_locks(root)) == []


def _locks(root: Path) -> tuple[Any, Any]:
    from nexus_core.state.locks import RECOVERY_LOCK, WRITER_LOCK, lock_snapshot

    return lock_snapshot(str(root), WRITER_LOCK), lock_snapshot(str(root), RECOVERY_LOCK)


def test_cancelled_attempt_reconciled_retried_recorded(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    assert advice(root, "a") == (None, None, observe.HINT_ACTIVE)
    engine.cancel_task(str(root), "demo", "a", {"reason": "operator stop"})
    assert advice(root, "a")[:2] == ("attempt-interrupted", "reconcile")
    act(root, "reconcile", "a", {**RECONCILE, "outcome": "cancelled"})
    assert advice(root, "a") == ("retry-ready", "retry", observe.HINT_TERMINAL)
    act(root, "retry", "a")
    assert advice(root, "a") == (None, None, observe.HINT_ACTIVE)
    write_result(root, "a")
    record(root, "a")
    assert advice(root, "a") == (None, None, observe.HINT_VERIFY)


def test_failed_verification_retried_until_it_passes(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a", "not yet\n")
    record(root, "a")
    act(root, "verify", "a")
    assert advice(root, "a") == ("retry-ready", "retry", observe.HINT_TERMINAL)
    act(root, "retry", "a")
    assert advice(root, "a") == (None, None, observe.HINT_ACTIVE)
    write_result(root, "a")
    record(root, "a")
    act(root, "verify", "a")
    assert advice(root, "a") == (None, None, observe.HINT_ACCEPT)


def test_failed_twice_spends_the_budget(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a", maxAttempts=1)])
    start(root, "a")
    record(root, "a", outcome="failed")
    situation, action, _ = advice(root, "a")
    assert (situation, action) == ("budget-spent", None)


def test_non_idempotent_failure_needs_a_retry_safe_reconciliation(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a", idempotent=False)])
    start(root, "a")
    record(root, "a", outcome="failed")
    assert advice(root, "a")[:2] == ("retry-needs-reconcile", "reconcile")
    act(root, "reconcile", "a", {**RECONCILE, "outcome": "failed", "retry_safe": True})
    assert advice(root, "a")[:2] == ("retry-ready", "retry")
    act(root, "retry", "a")
    assert advice(root, "a")[:2] == (None, None)


def test_blocked_worker_then_its_report(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    attempt = latest(root, "a")["id"]
    report = {"attemptId": attempt, "backend": HOST, "outcome": "blocked", "summary": "need a key"}
    engine.record_attempt(str(root), "demo", "a", report)
    assert advice(root, "a")[:2] == ("attempt-blocked", "record")
    write_result(root, "a")
    act(root, "record", "a", {"outcome": "completed", "summary": "got the key, done"})
    assert advice(root, "a") == (None, None, observe.HINT_VERIFY)


def test_overdue_host_attempt_then_its_report(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a", deadlineMs=100)])
    start(root, "a")
    late = now_ms() + 5_000
    assert advice(root, "a", late)[:2] == ("attempt-overdue", "reconcile")
    write_result(root, "a")
    record(root, "a")
    assert advice(root, "a", late) == (None, None, observe.HINT_VERIFY)


def test_receipt_collected_verified_accepted(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    act(root, "launch", "p")
    assert advice(root, "p") == ("process-receipt-uncollected", "collect", observe.HINT_RECEIPT_READY)
    act(root, "collect", "p")
    assert advice(root, "p") == (None, None, observe.HINT_VERIFY)
    act(root, "verify", "p")
    assert advice(root, "p") == (None, None, observe.HINT_ACCEPT)


def test_stale_acceptance_then_restored(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b", dependsOn=["a"])])
    accepted(root, "a")
    assert advice(root, "b")[:2] == (None, None)
    write_result(root, "a", "ok but edited\n")
    assert advice(root, "a")[:2] == ("accepted-stale", None)
    assert advice(root, "b")[:2] == ("dependency-stale", None)
    write_result(root, "a")  # restored: the evidence is current again
    assert advice(root, "a") == (None, None, observe.HINT_ACCEPT)
    assert advice(root, "b") == (None, None, observe.HINT_START)


def test_stale_passed_verification_reconciled_failed_then_retried(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    act(root, "verify", "a")
    write_result(root, "a", "ok changed\n")
    assert advice(root, "a")[:2] == ("evidence-stale", "reconcile")
    act(root, "reconcile", "a", {**RECONCILE, "outcome": "failed"})
    assert advice(root, "a")[:2] == ("retry-ready", "retry")
    act(root, "retry", "a")
    assert advice(root, "a")[:2] == (None, None)


def test_corrupt_run_moved_out_as_the_guide_says(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    state = root / ".bmad-plus/nexus/runs/demo.json"
    state.write_bytes(state.read_bytes()[:40])
    situations = recovery.classify_project(str(root))
    assert [(s.kind, s.next_action) for s in situations] == [("run-unreadable", None)]
    assert situations[0].command is not None
    move = situations[0].command.splitlines()[0]  # then `nexus create`, from the saved plan
    subprocess.run(["/bin/sh", "-c", move], check=True)
    assert recovery.classify_project(str(root)) == []
