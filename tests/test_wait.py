"""`nexus wait`: exit codes for each settled state, the event stream, idle timeout, the event
log and read-only watching. Runs are driven through the real CLI."""

from __future__ import annotations

import copy
import json
import os
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any, cast

import pytest
from supervise_kit import (
    Project,
    dead_pid,
    events_in,
    nexus_command,
    task_def,
    tree_digest,
    until,
    wait_for_event,
)

from nexus_core import supervise
from nexus_core.shapes import Attempt, Inspection, Observation
from nexus_core.supervise import Snapshot, classify_task, derive_events

FAST = ("--settle-grace", "0", "--idle-timeout", "20")


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def outcome(done: subprocess.CompletedProcess[str]) -> tuple[int, str]:
    return done.returncode, done.stderr.strip().splitlines()[-1]


# ----------------------------------------------------------------- exit codes


def test_accepted_run_exits_0_and_json_summary(project: Project) -> None:
    project.create(task_def("a"), task_def("b", dependsOn=["a"]))
    project.finish("a")
    project.finish("b")
    done = project.wait("--json", *FAST)
    code, last = outcome(done)
    assert code == 0, done.stderr
    assert last == "nexus wait: Run demo: every task accepted. [exit 0]"
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert lines[0]["type"] == "watch-started" and lines[0]["sequence"] == project.state()["sequence"]
    summary = lines[-1]
    assert summary["type"] == "summary" and summary["status"] == "settled"
    assert (summary["outcome"], summary["exitCode"]) == ("accepted", 0)
    assert [(t["task"], t["state"]) for t in summary["tasks"]] == [("a", "accepted"), ("b", "accepted")]


def test_awaiting_verify_then_accept_exits_6(project: Project) -> None:
    project.create(task_def("a"))
    project.start("a")
    project.write("a")
    project.record("a")
    code, last = outcome(project.wait(*FAST))
    assert code == 6 and "a: awaiting-verify" in last and "settled but not finished" in last
    assert project.verify("a").returncode == 0
    code, last = outcome(project.wait(*FAST))
    assert code == 6 and "a: awaiting-accept" in last
    project.accept("a")
    assert project.wait(*FAST).returncode == 0


def test_blocked_worker_needs_operator_exits_3(project: Project) -> None:
    # b could start, but the blocked attempt holds the run's only slot: nothing can move.
    project.create(task_def("a"), task_def("b"), max_parallel=1)
    project.start("a")
    project.record("a", "blocked", "needs credentials for the registry")
    done = project.wait("--json", *FAST)
    code, last = outcome(done)
    assert code == 3
    assert "needs an operator" in last and "a: blocked (needs credentials for the registry)" in last
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["outcome"] == "needs-operator" and summary["tasks"][0]["category"] == "operator"
    assert summary["tasks"][1] == {
        "task": "b",
        "state": "waiting-for-capacity",
        "category": "waiting",
        "attempt": None,
        "attemptsUsed": 0,
        "maxAttempts": 2,
        "detail": "1 active of maxParallel 1",
    }


def test_cancellation_and_ambiguity_need_operator(project: Project) -> None:
    project.create(task_def("a"), task_def("b"))
    project.start("a")
    project.cancel("a")
    project.start("b")
    project.record("b", "ambiguous", "lost the worker's output")
    code, last = outcome(project.wait(*FAST))
    assert code == 3
    assert "a: cancellation-requested" in last and "b: ambiguous" in last


def test_failed_verification_with_attempts_left_exits_3_and_budget_spent_exits_4(project: Project) -> None:
    project.create(task_def("a", maxAttempts=2))
    project.start("a")
    project.write("a", "wrong\n")
    project.record("a")
    assert project.verify("a").returncode == 1
    code, last = outcome(project.wait(*FAST))
    assert code == 3 and "a: retry-pending (verification failed; 1 of 2 attempts used" in last
    project.retry("a")
    project.record("a")
    assert project.verify("a").returncode == 1
    code, last = outcome(project.wait(*FAST))
    assert code == 4 and "attempt budget spent: a: budget-spent" in last


def test_budget_spent_outranks_needs_operator(project: Project) -> None:
    project.create(task_def("a", maxAttempts=1), task_def("b"))
    project.start("a")
    project.record("a", "failed", "compiler crashed")
    project.start("b")
    project.record("b", "blocked", "question for the operator")
    code, last = outcome(project.wait(*FAST))
    assert code == 4 and "a: budget-spent" in last


def test_stale_evidence_after_accept_exits_3(project: Project) -> None:
    project.create(task_def("a"))
    project.finish("a")
    project.write("a", "done, then edited by hand\n")
    code, last = outcome(project.wait(*FAST))
    assert code == 3 and "a: stale-evidence (Nexus: Stale evidence" in last


def test_overdue_running_attempt_exits_3(project: Project) -> None:
    project.create(task_def("a", deadlineMs=100))
    project.start("a")
    time.sleep(0.15)
    code, last = outcome(project.wait(*FAST))
    assert code == 3 and "a: overdue (past its deadline" in last


def test_corrupt_and_unsafe_run_files_exit_3(project: Project) -> None:
    project.create(task_def("a"))
    original = project.run_file.read_bytes()
    project.run_file.write_bytes(original.replace(b'"sequence": 1', b'"sequence": 9'))
    done = project.wait("--json", *FAST)
    code, last = outcome(done)
    assert code == 3 and "is unreadable: Nexus: Corrupt or foreign run state" in last
    assert json.loads(done.stdout.splitlines()[0])["error"].startswith("Nexus: Corrupt or foreign run state")
    project.run_file.write_bytes(original)
    os.chmod(project.run_file, 0o666)
    code, last = outcome(project.wait(*FAST))
    assert code == 3 and "group- or world-writable" in last
    assert stat.S_IMODE(project.run_file.stat().st_mode) == 0o666  # reported, never repaired


def test_lock_left_by_a_dead_process_needs_operator(project: Project) -> None:
    project.create(task_def("a"))
    project.start("a")  # running, but no mutation can happen until the lock is recovered
    owner = dead_pid()
    project.hand_lock(owner)
    code, last = outcome(project.wait(*FAST))
    assert code == 3
    assert f"writer.lock was left by pid {owner}, which is gone; inspect it, then recover-lock" in last


def test_dead_verifier_needs_operator(project: Project) -> None:
    slow = task_def("a", checks=[{"id": "slow", "command": "/bin/sh", "args": ["-c", "sleep 30"], "timeoutMs": 60000}])
    project.create(slow)
    project.start("a")
    project.write("a")
    project.record("a")
    verifier = subprocess.Popen(
        nexus_command("verify", "demo", "a", "-d", str(project.root)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    lock = project.root / ".bmad-plus/nexus/writer.lock"

    def checks_running() -> bool:
        # "running" is saved under writer.lock; once the lock is released the verifier runs its
        # 30 s check and takes no lock until that check ends: a kill now leaves exactly a
        # verification marked running by a dead pid, and no lock.
        return b'"status": "running"' in project.run_file.read_bytes() and not os.path.lexists(lock)

    until(checks_running, what="verification to start its check")
    os.killpg(verifier.pid, signal.SIGKILL)
    verifier.wait()
    assert not os.path.lexists(lock)
    code, last = outcome(project.wait(*FAST))
    assert code == 3 and f"a: verifier-gone (verification left running by pid {verifier.pid}, which is gone)" in last


def test_task_option_settles_on_that_task_and_its_dependencies(project: Project) -> None:
    project.create(task_def("a"), task_def("b", dependsOn=["a"]), task_def("c"))
    project.finish("a")
    project.start("c")  # still running: the whole run is not settled
    assert project.wait("--task", "a", *FAST).returncode == 0
    code, last = outcome(project.wait("--task", "b", "--idle-timeout", "1"))
    assert code == 124 and "b: awaiting-start" in last
    done = project.wait("--task", "zz", "--json", *FAST)
    assert done.returncode == 1
    assert json.loads(done.stdout) == {
        "schemaVersion": 1,
        "status": "error",
        "error": "Unknown task: zz",
        "hint": "Run demo has a, b, c.",
    }


def test_watcher_errors_exit_1(project: Project, tmp_path: Path) -> None:
    project.create(task_def("a"))
    done = project.wait("--run-typo")
    assert (done.returncode, done.stderr) == (1, "error: unknown option '--run-typo'\n")
    done = project.wait("--idle-timeout", "nan")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "error: Invalid value for '--idle-timeout': 'nan' is not a number of seconds between 0 and 1000000000\n"
    )
    done = subprocess.run(nexus_command("wait", "nope", "-d", str(project.root)), capture_output=True, text=True)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("Nexus: Nexus: Unknown run: nope")
    done = subprocess.run(
        nexus_command("wait", "demo", "-d", str(tmp_path / "missing")), capture_output=True, text=True
    )
    assert done.returncode == 1 and "Project directory does not exist" in done.stderr
    assert "Traceback" not in done.stderr
    done = subprocess.run(nexus_command("wait", "Bad/Id", "-d", str(project.root)), capture_output=True, text=True)
    assert done.returncode == 1 and "Run ID must use" in done.stderr


def test_help_lists_every_exit_code_including_130_and_143() -> None:
    help_text = subprocess.run(nexus_command("wait", "--help"), capture_output=True, text=True).stdout
    codes = [line.split()[0] for line in help_text.splitlines() if line.strip()[:1].isdigit()]
    assert codes == ["0", "3", "4", "6", "1", "124", "130", "143"]
    assert "130  interrupted (Ctrl+C)" in help_text
    assert "143  terminated (SIGTERM)" in help_text


def test_idle_timeout_exits_124_when_nothing_changes(project: Project) -> None:
    project.create(task_def("a"))  # startable: wait keeps waiting for an agent to start it
    started = time.monotonic()
    done = project.wait("--idle-timeout", "1", "--poll")
    assert time.monotonic() - started < 10
    code, last = outcome(done)
    assert code == 124
    assert last == (
        "nexus wait: no change for 1 s (idle timeout). Run demo in progress: "
        "a: awaiting-start (every dependency is accepted; an agent may start it) [exit 124]"
    )


# ----------------------------------------------------------------- the event log


def test_event_log_refuses_an_existing_file(project: Project, tmp_path: Path) -> None:
    project.create(task_def("a"))
    log = tmp_path / "events.jsonl"
    log.write_text("keep me\n")
    done = project.wait("--event-log", str(log), *FAST)
    assert done.returncode == 1 and done.stdout == ""
    assert (
        done.stderr == f"Nexus: --event-log {log} already exists; an event log is never overwritten. Name a new file.\n"
    )
    assert log.read_text() == "keep me\n"
    dangling = tmp_path / "dangling.jsonl"
    dangling.symlink_to(tmp_path / "nowhere")
    assert project.wait("--event-log", str(dangling), *FAST).returncode == 1
    assert not (tmp_path / "nowhere").exists()
    inside = project.root / ".bmad-plus" / "nexus" / "events.jsonl"
    done = project.wait("--event-log", str(inside), *FAST)
    assert done.returncode == 1 and "must not be inside .bmad-plus/nexus" in done.stderr
    assert not inside.exists()


def test_event_log_is_new_0600_and_matches_stdout(project: Project, tmp_path: Path) -> None:
    project.create(task_def("a"))
    project.finish("a")
    log = tmp_path / "events.jsonl"
    done = project.wait("--event-log", str(log), "--json", *FAST)
    assert done.returncode == 0
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    stdout_lines = done.stdout.splitlines()
    assert log.read_text().splitlines() == stdout_lines[:-1]  # all but the --json summary


# ----------------------------------------------------------------- events


def test_events_for_each_transition(project: Project, tmp_path: Path) -> None:
    project.create(task_def("a"), task_def("b", dependsOn=["a"], maxAttempts=2))
    log = tmp_path / "events.jsonl"
    waiter = project.wait_in_background(log, "--settle-grace", "30", "--idle-timeout", "30")
    try:
        # Locks: one left by a killed mutation, recovered by the operator; one taken and released.
        owner = dead_pid()
        lock_hash = project.hand_lock(owner)
        taken = wait_for_event(log, "lock-taken", hash=lock_hash)
        assert taken["lock"] == "writer" and taken["owner"]["pid"] == owner
        project.nexus(
            "recover-lock",
            "--input",
            project.input_file({"expectedHash": lock_hash, "ownerStopped": True, "note": "pid is gone"}),
        )
        recovered = wait_for_event(log, "lock-recovered", hash=lock_hash)
        assert recovered["note"] == "pid is gone"
        second = project.hand_lock(dead_pid())
        wait_for_event(log, "lock-taken", hash=second)
        project.writer_lock.unlink()
        wait_for_event(log, "lock-released", hash=second)

        attempt_a = project.start("a")
        project.write("a")
        project.record("a", summary="wrote a")
        assert project.verify("a").returncode == 0
        project.accept("a")
        wait_for_event(log, "accepted", task="a")
        project.write("a", "done, edited later\n")
        stale = wait_for_event(log, "evidence-stale", task="a")
        assert stale["reason"].startswith("Nexus: Stale evidence")
        project.write("a")
        wait_for_event(log, "evidence-current", task="a")

        first_b = project.start("b")
        project.cancel("b", "wrong branch")
        project.reconcile("b", "cancelled")
        second_b = project.retry("b")
        project.write("b", "wrong\n")
        project.record("b")
        assert project.verify("b").returncode == 1
        waiter.wait(timeout=30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    stdout, stderr = waiter.communicate()
    assert waiter.returncode == 4, stderr
    events = events_in(log)
    assert [json.loads(line) for line in stdout.splitlines()] == events

    def one(kind: str, **fields: object) -> dict[str, object]:
        matches = [e for e in events if e["type"] == kind and all(e.get(k) == v for k, v in fields.items())]
        assert len(matches) == 1, (kind, fields, events)
        return matches[0]

    started = one("attempt-started", task="a", attempt=attempt_a)
    assert started["backend"] == "host" and started["parentAttemptId"] is None
    recorded = one("outcome-recorded", task="a", attempt=attempt_a)
    assert (recorded["outcome"], recorded["summary"], recorded["evidenceClass"]) == (
        "completed",
        "wrote a",
        "host-report",
    )
    verification = one("verification-started", task="a")["verification"]
    check = one("check-finished", task="a", verification=verification)
    assert (check["check"], check["exitCode"], check["timedOut"]) == ("content", 0, False)
    one("verification-passed", task="a", verification=verification)
    one("accepted", task="a", attempt=attempt_a)
    assert one("cancellation-requested", task="b", attempt=first_b)["reason"] == "wrong branch"
    reconciled = one("reconciled", task="b", attempt=first_b)
    assert (reconciled["outcome"], reconciled["retrySafe"]) == ("cancelled", True)
    assert one("attempt-started", task="b", attempt=second_b)["parentAttemptId"] == first_b
    failed = one("check-finished", task="b", attempt=second_b)
    assert failed["exitCode"] == 1
    one("verification-failed", task="b", attempt=second_b)
    # Every event carries the common fields, and the sequences never go backwards.
    sequences = []
    for event in events:
        assert list(event)[:4] == ["type", "time", "run", "sequence"] and event["run"] == "demo"
        sequences.append(event["sequence"])
    assert sequences == sorted(sequences)
    assert events[-1]["sequence"] == project.state()["sequence"]
    assert (
        stderr.strip()
        .splitlines()[-1]
        .endswith("b: budget-spent (verification failed; 2 of 2 attempts used). [exit 4]")
    )


def test_overdue_and_unreadable_events(project: Project, tmp_path: Path) -> None:
    project.create(task_def("a", deadlineMs=300), task_def("b"))
    project.start("b")  # keeps the run in motion while a goes overdue
    log = tmp_path / "events.jsonl"
    waiter = project.wait_in_background(log, "--settle-grace", "1", "--idle-timeout", "30", "--poll")
    try:
        attempt = project.start("a")
        overdue = wait_for_event(log, "attempt-overdue", task="a")
        assert overdue["attempt"] == attempt and overdue["deadline"]
        project.run_file.write_bytes(project.run_file.read_bytes().replace(b'"tasks"', b'"tasks "', 1))
        waiter.wait(timeout=30)
    finally:
        if waiter.poll() is None:
            waiter.kill()
            waiter.wait()
    assert waiter.returncode == 3
    unreadable = [e for e in events_in(log) if e["type"] == "run-unreadable"]
    assert len(unreadable) == 1 and unreadable[0]["sequence"] is None
    assert unreadable[0]["error"].startswith("Nexus: Corrupt or foreign run state")


def test_wait_is_read_only(project: Project, tmp_path: Path) -> None:
    project.create(task_def("a"), task_def("b"))
    project.finish("a")
    project.start("b")
    project.hand_lock(os.getpid())  # a mutation in progress: not a reason to stop waiting
    os.chmod(project.root / "out" / "a" / "result.txt", 0o644)
    before = tree_digest(project.root)
    for extra in (("--idle-timeout", "1"), ("--idle-timeout", "1", "--poll", "--json")):
        done = project.wait(*extra, "--event-log", str(tmp_path / f"log{len(extra)}.jsonl"))
        assert done.returncode == 124
    assert tree_digest(project.root) == before


# ----------------------------------------------------------------- core: snapshots we cannot reach by hand


def _process_view(state: dict[str, Any], process: dict[str, object]) -> Snapshot:
    """The run as a process supervisor would leave it (launch is not driven here)."""
    view = cast(Inspection, copy.deepcopy(state))
    attempt = {
        "id": "11111111-1111-4111-8111-111111111111",
        "backend": {"kind": "process", "id": "x", "sessionId": "y", "hostname": "elsewhere", "ownerPid": 1},
        "execution": "running",
        "verification": {"status": "pending", "checks": []},
        "verificationRounds": 0,
        "verificationHistory": [],
        "reconciliations": [],
        "observations": [],
        "cancellation": {"status": "none"},
        "startedAt": "2026-01-01T00:00:00.000Z",
        "deadline": "2999-01-01T00:00:00.000Z",
        "process": process,
    }
    view["tasks"][0]["attempts"] = [cast(Attempt, attempt)]
    return Snapshot(at_ms=supervise.now_ms(), view=view, locks={"writer": None, "recovery": None})


def test_process_heartbeat_stale_and_finished(project: Project) -> None:
    project.create(task_def("a"))
    state = project.state()
    fresh = supervise.iso_from_ms(supervise.now_ms())
    running = _process_view(state, {"status": "running", "heartbeatAt": fresh, "childPid": 5})
    stale = _process_view(state, {"status": "running", "heartbeatAt": "2026-01-01T00:00:00.000Z"})
    events = derive_events(running, stale, "demo")
    assert [e["type"] for e in events] == ["process-heartbeat-stale"]
    assert events[0]["lastHeartbeat"] == "2026-01-01T00:00:00.000Z"
    observation: Observation = {"stale": False, "overdue": False}
    assert stale.view is not None and running.view is not None
    verdict = classify_task(stale.view, stale.view["tasks"][0], observation, True, stale.at_ms)
    assert (verdict.state, verdict.category) == ("heartbeat-stale", "operator")
    verdict = classify_task(running.view, running.view["tasks"][0], observation, True, running.at_ms)
    assert (verdict.state, verdict.category) == ("running", "moving")
    receipt = {"outcome": "completed", "exitCode": 0, "reason": None}
    finished = _process_view(state, {"status": "finished", "heartbeatAt": fresh, "receipt": receipt})
    events = derive_events(running, finished, "demo")
    assert [(e["type"], e["outcome"], e["exitCode"]) for e in events] == [("process-finished", "completed", 0)]
    assert finished.view is not None
    verdict = classify_task(finished.view, finished.view["tasks"][0], observation, True, finished.at_ms)
    assert (verdict.state, verdict.category) == ("awaiting-collect", "unfinished")


def test_changes_made_while_the_run_was_unreadable_are_reported(project: Project) -> None:
    project.create(task_def("a"))
    project.start("a")
    root = str(project.root)
    good = supervise.take_snapshot(root, "demo")
    original = project.run_file.read_bytes()
    project.run_file.write_bytes(original.replace(b'"tasks"', b'"tasks "', 1))
    broken = supervise.take_snapshot(root, "demo")
    assert [e["type"] for e in derive_events(good, broken, "demo")] == ["run-unreadable"]
    project.run_file.write_bytes(original)
    project.write("a")
    project.record("a")
    again = supervise.take_snapshot(root, "demo")
    events = derive_events(broken, again, "demo", last_readable=good)
    assert [(e["type"], e["sequence"]) for e in events] == [("run-readable", 3), ("outcome-recorded", 3)]


def test_lock_recovery_is_reported_once_whatever_the_looks_catch() -> None:
    lock = {"hash": "ab" * 32, "owner": {"pid": 7, "hostname": "vm", "createdAt": "2026-01-01T00:00:00.000Z"}}
    receipt = {"observed": lock, "note": "owner gone", "recoveredAt": "2026-01-01T00:01:00.000Z"}

    def look(held: bool, receipts: dict[str, object]) -> Snapshot:
        locks = {"writer": lock if held else None, "recovery": None}
        return Snapshot(at_ms=0, view=None, error="unreadable", locks=locks, recoveries=receipts)  # type: ignore[arg-type]

    held, written, gone = look(True, {}), look(True, {"r.json": receipt}), look(False, {"r.json": receipt})
    assert derive_events(held, written, "demo") == []  # receipt written, lock not yet removed
    for before in (held, written):
        events = derive_events(before, gone, "demo")
        assert [(e["type"], e["hash"], e["note"], e["owner"]["pid"]) for e in events] == [
            ("lock-recovered", "ab" * 32, "owner gone", 7)
        ]
    # Taken and recovered between two looks: the receipt alone proves it.
    assert [e["type"] for e in derive_events(look(False, {}), gone, "demo")] == ["lock-recovered"]
    assert [e["type"] for e in derive_events(held, look(False, {}), "demo")] == ["lock-released"]
