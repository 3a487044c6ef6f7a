"""nexus_tui.recovery: every situation classified from real states driven with nexus_core,
and each safe next step carried out through nexus_tui.logic.operations, asserting on disk."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tui_actions_support import (
    HOST,
    accepted,
    latest,
    make_project,
    process_task_plan,
    record,
    start,
    task_of,
    task_plan,
    tree_digest,
    write_dead_recovery_lock,
    write_dead_writer_lock,
    write_result,
)

from nexus_core import engine
from nexus_core.errors import NexusError
from nexus_core.state import canonical
from nexus_core.state.store import load_run
from nexus_core.timeutil import now_ms
from nexus_tui.logic import operations as ops
from nexus_tui.logic import recovery

RECONCILE = {"summary": "checked: worker gone", "owner_stopped": True, "retry_safe": False}


def _kinds(root: Path, now: int | None = None) -> dict[str, recovery.Situation]:
    return {s.kind: s for s in recovery.classify_project(str(root), now)}


def _act(root: Path, situation: recovery.Situation, values: dict[str, Any] | None = None) -> dict[str, Any]:
    assert situation.next_action is not None
    preview = ops.preview(str(root), situation.next_action, situation.run_id, situation.task_id)
    merged = dict(values or {})
    if preview.backend_editable and preview.backend:
        merged.setdefault("backend_id", preview.backend["id"])
        merged.setdefault("backend_session", preview.backend["sessionId"])
    return ops.execute(preview, merged, ops.ActionLog())


def test_a_clean_project_has_no_situation(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    accepted(root, "a")
    assert recovery.classify_project(str(root)) == []


def test_interrupted_attempt_reconcile_then_retry(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    engine.cancel_task(str(root), "demo", "a", {"reason": "operator stop"})
    situation = _kinds(root)["attempt-interrupted"]
    assert situation.task_id == "a" and situation.next_action == "reconcile"
    assert situation.then == ["verify", "retry"]
    assert any("operator stop" in line for line in situation.known)
    assert any("really stopped" in line for line in situation.checks)
    _act(root, situation, {**RECONCILE, "outcome": "cancelled"})
    assert latest(root, "a")["execution"] == "cancelled"
    follow = _kinds(root)["retry-ready"]
    assert follow.next_action == "retry"
    _act(root, follow)
    assert len(task_of(root, "a")["attempts"]) == 2


def test_overdue_attempt(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a", deadlineMs=100)])
    start(root, "a")
    assert "attempt-overdue" not in _kinds(root, now_ms() - 60_000)
    situation = _kinds(root, now_ms() + 5_000)["attempt-overdue"]
    assert situation.next_action == "reconcile" and "record" in situation.then
    assert any("Deadline" in line for line in situation.known)


def test_blocked_attempt(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    engine.record_attempt(
        str(root),
        "demo",
        "a",
        {"attemptId": latest(root, "a")["id"], "backend": HOST, "outcome": "blocked", "summary": "need a key"},
    )
    situation = _kinds(root)["attempt-blocked"]
    assert situation.next_action == "record"
    assert any("need a key" in line for line in situation.known)


def _recover_left_lock(root: Path) -> None:
    """A SIGKILL can land while the killed process holds writer.lock (its mutations are short
    but real): the operator then recovers it, as the guided recovery says."""
    lock = root / ".bmad-plus/nexus/writer.lock"
    if lock.exists():
        situation = _kinds(root)["writer-lock-dead"]
        assert situation.lock_hash is not None
        _act(root, situation, {"note": "killed by the test", "owner_stopped": True, "typed": situation.lock_hash[:8]})


def _wait_for(predicate: Callable[[], object], seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_verification_left_running_by_a_dead_verifier(tmp_path: Path) -> None:
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
        _wait_for(lambda: latest(root, "a")["verification"]["status"] == "running")
        assert "verification-orphaned" not in _kinds(root)  # its verifier is alive
    finally:
        os.killpg(verifier.pid, signal.SIGKILL)
        verifier.wait()
    (root / "hold").unlink()
    _recover_left_lock(root)
    situation = _kinds(root)["verification-orphaned"]
    assert situation.next_action == "reconcile" and situation.then == ["verify"]
    assert any("is not running" in line for line in situation.known)
    _act(root, situation, {**RECONCILE, "outcome": "completed"})
    attempt = latest(root, "a")
    assert attempt["verification"]["status"] == "pending"
    assert attempt["verificationHistory"][-1]["status"] == "ambiguous"
    ops.execute(ops.preview(str(root), "verify", "demo", "a"), {}, ops.ActionLog())
    assert latest(root, "a")["verification"]["status"] == "passed"


def test_process_receipt_uncollected_then_collect(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    ops.execute(ops.preview(str(root), "launch", "demo", "p"), {}, ops.ActionLog())
    situation = _kinds(root)["process-receipt-uncollected"]
    assert situation.next_action == "collect"
    assert any("outcome 'completed'" in line for line in situation.known)
    _act(root, situation)
    assert latest(root, "p")["execution"] == "completed"
    assert latest(root, "p")["process"]["collectedAt"] is not None


def test_process_with_a_stale_heartbeat_and_a_dead_supervisor(tmp_path: Path) -> None:
    root = make_project(tmp_path, [process_task_plan("p")])
    (root / "hold-worker").write_text("")
    supervisor = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"from nexus_core.backend import process; process.launch_task({str(root)!r}, 'demo', 'p', {{}})",
        ],
        start_new_session=True,
    )
    try:
        _wait_for(
            lambda: (latest(root, "p").get("process") or {}).get("childPid") if task_of(root, "p")["attempts"] else None
        )
        child = latest(root, "p")["process"]["childPid"]
        os.kill(supervisor.pid, signal.SIGKILL)
        supervisor.wait()
        _recover_left_lock(root)
        situation = _kinds(root, now_ms() + 60_000)["process-heartbeat-stale"]
        assert situation.next_action == "reconcile"
        assert any("supervisor pid" in line and "is not running" in line for line in situation.known)
        assert any(f"pid {child}" in line and "is alive" in line for line in situation.known)
        # The child still runs: the core refuses the operator's declaration, exact message kept.
        before = tree_digest(root)
        with pytest.raises(NexusError) as refused:
            _act(root, situation, {**RECONCILE, "outcome": "failed"})
        assert refused.value.message == (
            "Nexus: The original child may still be alive; inspect its effects before stopped-owner reconciliation."
        )
        assert tree_digest(root) == before
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(supervisor.pid, signal.SIGKILL)
        # The launched child leads its own process group (nexus_core/backend/process_group.py).
        with contextlib.suppress(ProcessLookupError, UnboundLocalError):
            os.killpg(child, signal.SIGKILL)
    _wait_for(lambda: not _alive(child))
    situation = _kinds(root, now_ms() + 60_000)["process-heartbeat-stale"]
    _act(root, situation, {**RECONCILE, "outcome": "failed", "retry_safe": True})
    assert latest(root, "p")["execution"] == "failed"


def _alive(pid: int) -> bool:
    from nexus_core.hostinfo import pid_alive

    return pid_alive(pid)


def test_stale_evidence_after_acceptance_lists_every_changed_file(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b", dependsOn=["a"])])
    accepted(root, "a")
    write_result(root, "a", "ok but edited\n")
    (root / "out" / "a" / "extra.txt").write_text("new\n")
    situation = _kinds(root)["accepted-stale"]
    assert situation.task_id == "a" and situation.next_action is None
    assert [c.words() for c in situation.changes] == ["added: out/a/extra.txt", "modified: out/a/result.txt"]
    assert situation.fresh_run is not None and situation.command is None  # no command before a save
    (root / "out" / "a" / "result.txt").unlink()
    changes = _kinds(root)["accepted-stale"].changes
    assert [c.words() for c in changes] == ["added: out/a/extra.txt", "removed: out/a/result.txt"]
    blocked = _kinds(root)["dependency-stale"]
    assert blocked.task_id == "b" and blocked.next_action is None
    assert "Stale evidence" in blocked.known[0]


def test_a_fresh_run_that_create_would_refuse_says_why(tmp_path: Path) -> None:
    checks = [{"id": "c", "command": "python", "args": ["checks/check.py", "out/a/result.txt"]}]
    root = make_project(tmp_path, [task_plan("a", checks=checks)])
    accepted(root, "a")
    write_result(root, "a", "ok but edited\n")
    advice = _kinds(root)["accepted-stale"].fresh_run
    assert advice is not None and advice.create_problem == (
        "Nexus: File argument must be declared as a protected resource: out/a/result.txt"
    )


def test_fresh_run_created_from_the_dashboard_and_refused_if_the_id_was_taken(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b", dependsOn=["a"])])
    accepted(root, "a")
    write_result(root, "a", "ok but edited\n")
    advice = _kinds(root)["accepted-stale"].fresh_run
    assert advice is not None and advice.plan is not None and advice.create_problem is None
    preview = ops.preview_fresh_run(str(root), "demo", advice.new_run_id, advice.plan)
    log = ops.ActionLog()
    ops.execute(preview, {}, log)
    fresh = load_run(str(root), "demo-fresh")
    assert [t["integration"] for t in fresh["tasks"]] == ["pending", "pending"]
    assert log.entries[-1].result == "run demo-fresh created with 2 task(s)"
    with pytest.raises(ops.TargetChanged):
        ops.execute(preview, {}, log)  # the same dialog confirmed again: the id is taken now
    # In the fresh run the work can be redone and accepted on the current files.
    start(root, "a", run_id="demo-fresh")
    record(root, "a", run_id="demo-fresh")
    engine.verify_task(str(root), "demo-fresh", "a")
    engine.accept_task(str(root), "demo-fresh", "a")
    assert task_of(root, "a", run_id="demo-fresh")["integration"] == "accepted"


def test_stale_passed_verification_before_acceptance(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    start(root, "a")
    write_result(root, "a")
    record(root, "a")
    engine.verify_task(str(root), "demo", "a")
    write_result(root, "a", "ok changed\n")
    situation = _kinds(root)["evidence-stale"]
    assert situation.next_action == "reconcile" and situation.then == ["retry"]
    assert [c.words() for c in situation.changes] == ["modified: out/a/result.txt"]


def test_protected_resource_changed_since_create(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    (root / "checks" / "check.py").write_text("import sys\nsys.exit(0)\n")
    situation = _kinds(root)["resource-changed"]
    assert [c.words() for c in situation.changes] == ["modified: checks/check.py"]
    assert situation.known[0] == "Nexus: Protected verifier or agent resource changed since the plan was created."
    assert situation.fresh_run is not None


def test_dead_writer_lock_then_recover_lock(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    lock_hash = write_dead_writer_lock(root)
    situation = _kinds(root)["writer-lock-dead"]
    assert situation.next_action == "recover-lock" and situation.lock_hash == lock_hash
    assert any(lock_hash[:12] in line for line in situation.known)
    assert any("pid 4194304" in line and "not running" in line for line in situation.known)
    _act(root, situation, {"note": "owner gone", "owner_stopped": True, "typed": lock_hash[:8]})
    assert not (root / ".bmad-plus/nexus/writer.lock").exists()
    assert "writer-lock-dead" not in _kinds(root)


def test_live_writer_lock_is_not_a_situation(tmp_path: Path) -> None:
    from nexus_core.state.locks import writer_lock

    root = make_project(tmp_path)
    with writer_lock(str(root)):
        assert recovery.lock_situations(str(root)) == []


def test_recovery_lock_left_gives_the_manual_command(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    write_dead_recovery_lock(root)
    situation = _kinds(root)["recovery-lock-left"]
    assert situation.next_action is None
    assert situation.command == f"rm -- {root}/.bmad-plus/nexus/recovery.lock"


def test_corrupt_run_file_gives_a_fresh_run_without_repairing(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    state = root / ".bmad-plus/nexus/runs/demo.json"
    state.write_bytes(state.read_bytes()[:100])
    before = tree_digest(root)
    situation = _kinds(root)["run-unreadable"]
    assert situation.run_id == "demo" and situation.next_action is None
    assert situation.fresh_run is not None and situation.fresh_run.plan is None
    assert any("cannot be recovered" in line for line in situation.known)
    assert situation.fresh_run.new_run_id == "demo-fresh"
    assert "PLAN.json: your original plan file" in (situation.command or "")
    assert "may redo work" in situation.next_step
    assert tree_digest(root) == before


def test_unsafe_run_file_plan_recovered_and_the_command_works(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), process_task_plan("p", dependsOn=["a"])])
    engine.create_run(str(root), {"id": "demo-fresh", "tasks": [task_plan("z", scope=["out/z"])]})
    state = root / ".bmad-plus/nexus/runs/demo.json"
    os.chmod(state, 0o666)
    situation = _kinds(root)["run-unreadable"]
    advice = situation.fresh_run
    assert advice is not None and advice.plan is not None
    assert any("group- or world-writable" in line for line in situation.known)
    assert advice.new_run_id == "demo-fresh-2"  # demo-fresh is taken
    move = situation.command  # no create command until the plan is saved
    assert move is not None
    assert "\n" not in move and "nexus create" not in move
    path = recovery.save_fresh_plan(advice)
    assert path == str(root / ".bmad-plus/nexus/fresh-plans/demo-demo-fresh-2.json")
    assert oct(os.stat(path).st_mode & 0o777) == "0o600"
    create = advice.create_command(path)
    assert create == f"nexus create --plan {path} -d {root}"
    try:
        with pytest.raises(recovery.PlanFileExists, match="did not write it"):
            recovery.save_fresh_plan(advice)  # never overwrites
        # The operator runs the commands as shown: move the unreadable file out of runs/, create.
        assert subprocess.run(["bash", "-c", move], timeout=30).returncode == 0
        result = subprocess.run(
            [sys.executable, "-m", "nexus_core.cli", *create.split()[1:]],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
    finally:
        os.unlink(path)
    fresh = load_run(str(root), "demo-fresh-2")
    assert [t["id"] for t in fresh["plan"]["tasks"]] == ["a", "p"]
    kept = root / ".bmad-plus/nexus/evidence/demo.json"
    assert oct(kept.stat().st_mode & 0o777) == "0o666"  # moved whole, nothing was repaired
    original = canonical.parse(kept.read_text())["run"]["plan"]
    assert fresh["plan"]["tasks"] == original["tasks"]  # the same plan, re-derived by create
    engine.start_task(str(root), "demo-fresh-2", "a", {"backend": HOST})  # starts are possible again


def test_failed_task_retry_paths_and_budget(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a", maxAttempts=1), task_plan("b", idempotent=False), task_plan("c")])
    for task in ("a", "b", "c"):
        start(root, task)
        write_result(root, task, "no\n")
        record(root, task)
        engine.verify_task(str(root), "demo", task)
    situations = {s.task_id: s for s in recovery.classify_project(str(root))}
    assert situations["a"].kind == "budget-spent" and situations["a"].next_action is None
    assert situations["a"].fresh_run is not None
    assert situations["b"].kind == "retry-needs-reconcile" and situations["b"].next_action == "reconcile"
    assert situations["c"].kind == "retry-ready" and situations["c"].next_action == "retry"


def test_stray_temp_files_are_reported(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    (root / ".bmad-plus/nexus/runs/demo.json.1234.tmp").write_text("{")
    situation = _kinds(root)["stray-temp-files"]
    assert situation.next_action is None and "demo.json.1234.tmp" in situation.known[0]


def test_situations_for_one_task(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "a")
    start(root, "b")
    engine.cancel_task(str(root), "demo", "b", {"reason": "x"})
    assert [s.task_id for s in recovery.situations_for(str(root), "demo", "b")] == ["b"]
    assert recovery.situations_for(str(root), "demo", "a") == []


def test_a_planted_plan_file_is_never_used_and_another_name_is_proposed(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    accepted(root, "a")
    write_result(root, "a", "ok but edited\n")
    advice = _kinds(root)["accepted-stale"].fresh_run
    assert advice is not None
    planted = Path(advice.default_plan_file)
    assert planted.parent == root / ".bmad-plus/nexus/fresh-plans"  # inside the project, not /tmp
    planted.parent.mkdir(parents=True)
    planted.write_text('{"id": "demo-fresh", "tasks": []}\n')
    with pytest.raises(recovery.PlanFileExists) as clash:
        recovery.save_fresh_plan(advice)
    assert "did not write it" in clash.value.message and clash.value.suggestion.endswith("demo-demo-fresh-2.json")
    assert planted.read_text() == '{"id": "demo-fresh", "tasks": []}\n'  # left exactly as it was
    saved = recovery.save_fresh_plan(advice, clash.value.suggestion)
    assert saved == clash.value.suggestion and '"id": "demo-fresh"' in Path(saved).read_text()


def test_a_plan_file_is_never_saved_where_others_can_write_or_through_a_symlink(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    accepted(root, "a")
    write_result(root, "a", "ok but edited\n")
    advice = _kinds(root)["accepted-stale"].fresh_run
    assert advice is not None
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp
    with pytest.raises(NexusError, match="writable by group or others"):
        recovery.save_fresh_plan(advice, str(shared / "plan.json"))
    assert list(shared.iterdir()) == []
    private = tmp_path / "private"
    private.mkdir()
    (private / "link.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(recovery.PlanFileExists):
        recovery.save_fresh_plan(advice, str(private / "link.json"))
    assert not (tmp_path / "elsewhere.json").exists()


def _cancelled(root: Path, task: str) -> None:
    start(root, task)
    engine.cancel_task(str(root), "demo", task, {"reason": "operator stop"})
    attempt = latest(root, task)
    reconcile = {"attemptId": attempt["id"], "backend": HOST, "outcome": "cancelled", "ownerStopped": True}
    engine.reconcile_attempt(str(root), "demo", task, {**reconcile, "summary": "stopped", "retrySafe": False})


def _words(situation: recovery.Situation) -> str:
    return "\n".join([situation.title, *situation.known, *situation.checks, situation.next_step])


def test_the_guide_of_an_ended_attempt_names_its_real_state(tmp_path: Path) -> None:
    """Issue 13 item 3: a cancelled attempt is never called failed (title, checks, next step);
    a failed one and a failed verification say so."""
    tasks = [
        task_plan("cancelled"),
        task_plan("spent", maxAttempts=1),
        task_plan("unsafe", idempotent=False),
        task_plan("failed"),
        task_plan("rejected"),
    ]
    root = make_project(tmp_path, tasks)
    for task in ("cancelled", "spent", "unsafe"):
        _cancelled(root, task)
    start(root, "failed")
    record(root, "failed", "failed")
    start(root, "rejected")
    write_result(root, "rejected", "no\n")
    record(root, "rejected")
    engine.verify_task(str(root), "demo", "rejected")
    situations = {s.task_id: s for s in recovery.classify_project(str(root))}
    kinds = {task: s.kind for task, s in situations.items()}
    assert kinds == {
        "cancelled": "retry-ready",
        "spent": "budget-spent",
        "unsafe": "retry-needs-reconcile",
        "failed": "retry-ready",
        "rejected": "retry-ready",
    }
    for task in ("cancelled", "spent", "unsafe"):
        words = _words(situations[task])
        assert "fail" not in words.lower(), words
        assert f"{task}: cancelled" in situations[task].title
        assert "execution cancelled" in words
    assert situations["cancelled"].checks == ["Why was it cancelled? Settle that before the next attempt."]
    assert "Reconcile 'cancelled' with retry-safe ticked" in situations["unsafe"].next_step
    failed = situations["failed"]
    assert failed.title == "failed: failed; a retry is possible"
    assert failed.checks == ["Why did it fail? Fix the cause before the next attempt."]
    rejected = situations["rejected"]
    assert rejected.title == "rejected: verification failed; a retry is possible"
    assert "verification failed" in rejected.known[1]
    assert rejected.checks[0].startswith("Why did its verification fail?")
