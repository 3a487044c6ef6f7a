"""Crash injection: SIGKILL real ``nexus`` mutations at random moments, many times.

After every kill: every run file loads with its checksum; ``sequence`` never goes backwards;
every acknowledged mutation is still there; a leftover writer.lock is recovered through
``recover-lock``; a verification left ``running`` is reconciled; stray temp files are reported
and never loaded; and at the end every run is brought to accepted without any manual repair.

Quick mode by default (about 40 landed kills); ``NEXUS_LONG=1`` for 500.
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from reliability_support import (
    HOST_BACKEND,
    add_work,
    assert_contains,
    cli_command,
    is_run,
    latest_attempt,
    load_all_runs,
    make_project,
    parse_stdout,
    plan_for,
    run_cli_json,
    write_json,
)

from nexus_core import observe
from nexus_core.hostinfo import pid_alive
from nexus_core.state import store
from nexus_core.state.locks import RECOVERY_LOCK, WRITER_LOCK

LONG = os.environ.get("NEXUS_LONG") == "1"
KILLS = int(os.environ.get("NEXUS_KILLS", "0")) or (500 if LONG else 40)
SEED = int(os.environ.get("NEXUS_SEED", "0")) or random.randrange(1 << 30)
LAUNCH_KILLS = int(os.environ.get("NEXUS_LAUNCH_KILLS", "0")) or (150 if LONG else 10)
MAX_ATTEMPTS = 10
IDENTITY = ("kind", "id", "sessionId", "hostname", "ownerPid")
WORKER_EXECUTION = {
    "adapter": "command",
    "command": "/bin/sh",
    "input": "checks/brief.md",
    "resources": ["checks/worker.sh"],
}


def wait_for_exit(child_pid: object) -> None:
    """A SIGKILLed supervisor's worker lives on briefly; reconcile waits for it to end."""
    if not isinstance(child_pid, int):
        return
    for _ in range(500):
        if not pid_alive(child_pid):
            return
        time.sleep(0.01)


class Harness:
    def __init__(self, root: Path, inputs: Path, rng: random.Random) -> None:
        self.root = root
        self.inputs = inputs
        self.rng = rng
        self.acknowledged: list[dict[str, Any]] = []
        self.last_sequence: dict[str, int] = {}
        self.typical: dict[str, float] = {}
        self.kills = 0
        self.completed = 0
        self.locks_recovered = 0
        self.temps_seen = 0
        self.verifications_reconciled = 0
        self.fresh_runs = 0
        self.input_count = 0
        self.history: list[str] = []
        self.abandoned: set[tuple[str, str]] = set()  # spent tasks redone by a fresh run
        self.runs: dict[str, list[str]] = {}  # run id -> scopes (for fresh runs from the same plan)

    # ------------------------------------------------------------- plumbing

    def input_file(self, value: dict[str, Any]) -> Path:
        self.input_count += 1
        return write_json(self.inputs / f"in-{self.input_count}.json", value)

    def create(self, run_id: str, scopes: list[str]) -> None:
        for scope in scopes:
            add_work(self.root, scope)
        plan_value = plan_for(run_id, scopes, checks=2)
        if run_id.startswith("proc"):
            for task in plan_value["tasks"]:
                task["execution"] = dict(WORKER_EXECUTION, args=["checks/worker.sh", task["scope"][0]])
        plan = write_json(self.inputs / f"plan-{run_id}.json", plan_value)
        code, out, err = run_cli_json(self.root, "create", plan=plan)
        assert code == 0 and is_run(out), (out, err)
        self.runs[run_id] = scopes
        self.acknowledged.append(out)

    def next_step(self, run: Mapping[str, Any], task_id: str) -> tuple[str, dict[str, Any] | None] | None:
        """The action that brings this task forward from its recorded state."""
        task = next(t for t in run["tasks"] if t["id"] == task_id)
        if task["integration"] == "accepted":
            return None
        attempt = latest_attempt(run, task_id)
        definition = next(d for d in run["plan"]["tasks"] if d["id"] == task_id)
        launched = bool(definition.get("execution"))
        if attempt is None:
            return ("launch", {}) if launched else ("start", {"backend": HOST_BACKEND})
        backend = {key: attempt["backend"][key] for key in IDENTITY if key in attempt["backend"]}
        bound = {"attemptId": attempt["id"], "backend": backend}
        process = attempt.get("process") or {}
        if (
            launched
            and attempt["execution"] in ("running", "blocked", "ambiguous")
            and process.get("receipt") is None
            and process.get("status") in ("starting", "running")
        ):
            # A killed supervisor: once its child is gone, the attempt is reconciled as failed.
            wait_for_exit(process.get("childPid"))
            return "reconcile", {**bound, "ownerStopped": True, "outcome": "failed", "summary": "Supervisor killed."}
        if launched and process.get("status") == "finished" and not process.get("collectedAt"):
            return "collect", bound
        verification = attempt["verification"]["status"]
        if len(task["attempts"]) >= MAX_ATTEMPTS and (
            attempt["execution"] in ("failed", "cancelled") or verification == "failed"
        ):
            return "fresh-run", None
        reconcile = {**bound, "ownerStopped": True, "summary": "The harness killed the owner."}
        if attempt["cancellation"]["status"] == "requested":
            return "reconcile", {**reconcile, "outcome": "cancelled"}
        if verification in ("running", "ambiguous") or attempt["execution"] == "ambiguous":
            worn = attempt["verificationRounds"] >= MAX_ATTEMPTS
            return "reconcile", {**reconcile, "outcome": "failed" if worn else "completed"}
        if attempt["execution"] in ("running", "blocked"):
            if launched:
                return "reconcile", {**reconcile, "outcome": "failed"}
            if self.rng.random() < 0.15:
                return "cancel", {**bound, "reason": "Harness cancellation."}
            return "record", {**bound, "outcome": "completed", "summary": "Wrote the result.", "exitCode": 0}
        if attempt["execution"] in ("failed", "cancelled") or verification == "failed":
            return ("launch", {"retry": True}) if launched else ("retry", {"backend": HOST_BACKEND})
        if verification == "pending":
            if attempt["verificationRounds"] >= MAX_ATTEMPTS:
                return "reconcile", {**reconcile, "outcome": "failed"}
            return "verify", None
        assert verification == "passed"
        return "accept", None

    def pending_tasks(self) -> list[tuple[str, str]]:
        runs = load_all_runs(self.root)
        return [
            (run_id, task["id"])
            for run_id, run in runs.items()
            for task in run["tasks"]
            if task["integration"] != "accepted" and (run_id, task["id"]) not in self.abandoned
        ]

    def explain(self) -> str:
        """What a task that could not be brought forward went through (seed, steps, state)."""
        lines = [f"seed {SEED}", *self.history[-12:]]
        for run_id, task_id in self.pending_tasks():
            attempt = latest_attempt(store.load_run(str(self.root), run_id), task_id) or {}
            brief = {key: attempt.get(key) for key in ("execution", "verification", "cancellation", "process")}
            lines.append(f"{run_id}/{task_id}: {brief}")
        return "\n".join(lines)

    # ------------------------------------------------------------- one step

    def step(self, run_id: str, task_id: str, kill: bool) -> None:
        run = store.load_run(str(self.root), run_id)
        decided = self.next_step(run, task_id)
        if decided is None:
            return
        action, options = decided
        self.history.append(f"{run_id}/{task_id} {action} {'(kill)' if kill else ''}")
        if action == "fresh-run":
            # The documented way out of a spent task: the same plan under a new, unused id.
            self.fresh_runs += 1
            index = next(i for i, t in enumerate(run["tasks"]) if t["id"] == task_id)
            self.create(f"{run_id}-f{self.fresh_runs}", [self.runs[run_id][index]])
            self.abandoned.add((run_id, task_id))
            return
        input_file = self.input_file(options) if options is not None else None
        command = cli_command(self.root, action, run_id, task_id, input_file=input_file)
        started = time.monotonic()
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if kill and action in self.typical:
            if self.rng.random() < 0.5:
                # Aim at the mutation itself: wait for this call to take writer.lock.
                lock = self.root / WRITER_LOCK
                limit = started + 3 * self.typical[action] + 1.0
                while child.poll() is None and not lock.exists() and time.monotonic() < limit:
                    time.sleep(0.0005)
                deadline = time.monotonic() + self.rng.uniform(0.0, 0.015)
            else:
                # Anywhere in the call, start-up included.
                deadline = started + self.rng.uniform(0.3, 1.15) * self.typical[action]
            while child.poll() is None and time.monotonic() < deadline:
                time.sleep(0.0005)
            if child.poll() is None:
                child.send_signal(signal.SIGKILL)
                child.communicate()
                self.kills += 1
                return
        out, err = child.communicate(timeout=120)
        elapsed = time.monotonic() - started
        self.typical[action] = 0.7 * self.typical.get(action, elapsed) + 0.3 * elapsed
        self.completed += 1
        result = parse_stdout(out)
        assert b"Traceback" not in err, err.decode()
        if is_run(result):
            self.acknowledged.append(result)
            assert child.returncode == 0 or action in ("verify", "launch", "collect"), (action, result)
            # A writer that finished removes what killed writers left in runs/.
            assert store.list_temp_files(str(self.root)) == []
        else:
            # Only a clean refusal is acceptable, and never for a step the state allowed.
            assert isinstance(result, dict) and result.get("status") == "error", (out, err)
            pytest.fail(f"{action} {run_id}/{task_id} was refused: {result['error']}")

    # ------------------------------------------------------------- after a kill

    def check_and_recover(self) -> None:
        root = str(self.root)
        runs = load_all_runs(self.root)  # raises on a torn, unreadable or mis-checksummed file
        for run_id, run in runs.items():
            assert run["sequence"] >= self.last_sequence.get(run_id, 0), f"{run_id}: sequence went backwards"
            self.last_sequence[run_id] = run["sequence"]
        for acknowledged in self.acknowledged:
            assert_contains(runs[acknowledged["id"]], acknowledged)
        temps = store.list_temp_files(root)
        inventory = observe.inspect_inventory(root)
        assert inventory["runIds"] == sorted(runs)
        assert "unreadableRuns" not in inventory
        if temps:
            self.temps_seen += 1
            assert inventory["strayTempFiles"] == len(temps)
        else:
            assert "strayTempFiles" not in inventory
        assert not os.path.lexists(os.path.join(root, RECOVERY_LOCK)), "recover-lock is never killed here"
        if os.path.lexists(os.path.join(root, WRITER_LOCK)):
            self.recover_writer_lock(inventory["lock"])
        for run_id, run in runs.items():
            for task in run["tasks"]:
                attempt = task["attempts"][-1] if task["attempts"] else None
                if attempt and attempt["verification"]["status"] == "running":
                    self.step(run_id, task["id"], kill=False)  # the reconcile of a dead verifier
                    self.verifications_reconciled += 1

    def recover_writer_lock(self, lock: dict[str, Any]) -> None:
        """The operator's way: the exact hash shown by inspect, then the real CLI recover-lock."""
        assert lock is not None and "unsafe" not in lock
        observation = {"ownerStopped": True, "note": "The harness SIGKILLed the owner.", "expectedHash": lock["hash"]}
        code, receipt, err = run_cli_json(self.root, "recover-lock", input_file=self.input_file(observation))
        assert code == 0, (receipt, err)
        assert receipt["observed"]["hash"] == lock["hash"]
        assert not os.path.lexists(self.root / WRITER_LOCK)
        self.locks_recovered += 1


def test_sigkill_at_random_moments_never_loses_or_tears_state(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    root = make_project(tmp_path / "project")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    harness = Harness(root, inputs, rng)
    harness.create("alpha", ["work/a", "work/b"])
    harness.create("beta", ["other/c"])
    generation = 0
    while harness.kills < KILLS:
        pending = harness.pending_tasks()
        if not pending:
            # Everything accepted: keep going on a new run, as a project would.
            generation += 1
            harness.create(f"gen{generation}", [f"gen{generation}/a", f"gen{generation}/b"])
            continue
        run_id, task_id = rng.choice(pending)
        # Some calls run to the end, so kills reach verify and accept too.
        harness.step(run_id, task_id, kill=rng.random() < 0.7)
        harness.check_and_recover()
    # Brought forward: with no more kills, every task of every run reaches accepted.
    for _ in range(60):
        pending = harness.pending_tasks()
        if not pending:
            break
        for run_id, task_id in pending:
            harness.step(run_id, task_id, kill=False)
        harness.check_and_recover()
    assert harness.pending_tasks() == [], harness.explain()
    assert store.list_temp_files(str(root)) == []
    print(
        f"\ncrash injection (seed {SEED}): {harness.kills} kills, {harness.completed} completed calls, "
        f"{len(harness.acknowledged)} acknowledged states, {harness.locks_recovered} writer.lock recovered, "
        f"{harness.verifications_reconciled} running verifications reconciled, {harness.temps_seen} times "
        f"stray temp files reported, {harness.fresh_runs} fresh runs"
    )
    # The kills must land inside mutations, not only during interpreter start-up.
    assert harness.locks_recovered + harness.verifications_reconciled > 0


def test_sigkill_during_launch_never_loses_or_tears_state(tmp_path: Path) -> None:
    rng = random.Random(SEED + 1)
    root = make_project(tmp_path / "project")
    (root / "checks" / "worker.sh").write_text('sleep 0.05\nprintf "done\\n" > "$1/result.txt"\n')
    (root / "checks" / "brief.md").write_text("Write done.\n")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    harness = Harness(root, inputs, rng)
    harness.create("proc", ["proc/a", "proc/b"])
    generation = 0
    while harness.kills < LAUNCH_KILLS:
        pending = harness.pending_tasks()
        if not pending:
            generation += 1
            harness.create(f"proc{generation}", [f"proc{generation}/a", f"proc{generation}/b"])
            continue
        run_id, task_id = rng.choice(pending)
        # Some calls run to the end, so kills reach verify and accept too.
        harness.step(run_id, task_id, kill=rng.random() < 0.7)
        harness.check_and_recover()
    for _ in range(60):
        pending = harness.pending_tasks()
        if not pending:
            break
        for run_id, task_id in pending:
            harness.step(run_id, task_id, kill=False)
        harness.check_and_recover()
    assert harness.pending_tasks() == [], harness.explain()
    print(
        f"\nlaunch crash injection (seed {SEED + 1}): {harness.kills} kills, {harness.completed} completed calls, "
        f"{harness.locks_recovered} writer.lock recovered, {harness.fresh_runs} fresh runs"
    )


# ----------------------------------------------------------------- recover-lock itself

RECOVERY_KILLS = int(os.environ.get("NEXUS_RECOVERY_KILLS", "0")) or (300 if LONG else 25)
BASE = Path(".bmad-plus") / "nexus"


def dead_pid() -> int:
    """The pid of a process of ours that has exited (and been reaped)."""
    child = subprocess.Popen(["/bin/true"])
    child.wait()
    return child.pid


def plant_dead_writer_lock(root: Path) -> None:
    """What a SIGKILLed mutation leaves: writer.lock naming a process that has exited."""
    owner = {"token": str(uuid.uuid4()), "pid": dead_pid(), "hostname": os.uname().nodename}
    owner["createdAt"] = "2026-01-01T00:00:00.000Z"
    lock = root / WRITER_LOCK
    lock.write_text(json.dumps(owner, separators=(",", ":")))
    os.chmod(lock, 0o600)


def temp_files_on_disk(root: Path) -> list[str]:
    return sorted(
        str(path.relative_to(root)) for path in (root / ".bmad-plus").rglob("*") if path.name.endswith(".tmp")
    )


def follow_the_way_out(root: Path, inputs: Path, leftovers: collections.Counter[str]) -> None:
    """What inspect says after a killed recover-lock, done to the end: state clean again."""
    inventory = observe.inspect_inventory(str(root))
    recovery = inventory["recoveryLock"]
    if recovery is not None:
        leftovers["recovery.lock"] += 1
        hint = inventory["recoveryLockHint"]
        assert "was interrupted" in hint and f"pid {recovery['owner']['pid']}" in hint, hint
        assert f"remove {RECOVERY_LOCK} by hand" in hint, hint
        # While it is there every mutation is refused, with the SPEC's message.
        code, refused, _ = run_cli_json(root, "start", "alpha", "t0", input_file=write_json(inputs / "h.json", {}))
        assert refused["error"].startswith("Nexus: Lock recovery is active or interrupted"), refused
        (root / RECOVERY_LOCK).unlink()  # the documented way out (SPEC 7.2: no command does it)
        inventory = observe.inspect_inventory(str(root))
        assert "recoveryLockHint" not in inventory
    if inventory["lock"] is not None:
        leftovers["writer.lock still there"] += 1
        observation = {"expectedHash": inventory["lock"]["hash"], "ownerStopped": True, "note": "Owner exited."}
        code, receipt, err = run_cli_json(root, "recover-lock", input_file=write_json(inputs / "r.json", observation))
        assert code == 0, (receipt, err)
    # The next lock holder removes what the killed writers left (this start is refused under the
    # lock, so it changes nothing else).
    code, refused, _ = run_cli_json(root, "start", "alpha", "t0", input_file=write_json(inputs / "h.json", {}))
    assert "already has an attempt" in refused["error"] or "host identity" in refused["error"], refused
    assert temp_files_on_disk(root) == [] and store.list_temp_files(str(root)) == []
    inventory = observe.inspect_inventory(str(root))
    assert inventory["lock"] is None and inventory["recoveryLock"] is None and "strayTempFiles" not in inventory


def test_sigkill_during_recover_lock_leaves_a_documented_way_out(tmp_path: Path) -> None:
    rng = random.Random(SEED + 2)
    root = make_project(tmp_path / "project")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    add_work(root, "work/a")
    code, created, err = run_cli_json(
        root, "create", plan=write_json(inputs / "plan.json", plan_for("alpha", ["work/a"]))
    )
    assert code == 0, (created, err)
    start = write_json(inputs / "start.json", {"backend": HOST_BACKEND})
    assert run_cli_json(root, "start", "alpha", "t0", input_file=start)[0] == 0
    state = (root / BASE / "runs" / "alpha.json").read_bytes()
    kills = recoveries = receipts_left = 0
    leftovers: collections.Counter[str] = collections.Counter()
    typical = 0.0
    while kills < RECOVERY_KILLS:
        plant_dead_writer_lock(root)
        lock = observe.inspect_inventory(str(root))["lock"]
        observation = {"expectedHash": lock["hash"], "ownerStopped": True, "note": "The owner was SIGKILLed."}
        before = (
            set((root / BASE / "lock-recovery").glob("*.json")) if (root / BASE / "lock-recovery").exists() else set()
        )
        command = cli_command(root, "recover-lock", input_file=write_json(inputs / "recover.json", observation))
        started = time.monotonic()
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if typical and rng.random() < 0.6:
            # Aim at the recovery itself: once recovery.lock is taken, within a few ms.
            while child.poll() is None and not (root / RECOVERY_LOCK).exists() and time.monotonic() < started + 5:
                time.sleep(0.0002)
            deadline = time.monotonic() + rng.uniform(0.0, 0.006)
        else:
            deadline = started + rng.uniform(0.2, 1.1) * (typical or 10.0)
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.0002)
        if child.poll() is None:
            child.send_signal(signal.SIGKILL)
            child.communicate()
            kills += 1
        else:
            output = child.communicate()
            assert child.returncode == 0, output
            typical = time.monotonic() - started if not typical else 0.7 * typical + 0.3 * (time.monotonic() - started)
            recoveries += 1
        # Whatever the moment: the state is intact, every receipt is complete, every leftover is reported.
        assert (root / BASE / "runs" / "alpha.json").read_bytes() == state
        store.load_run(str(root), "alpha")
        for path in (root / BASE / "lock-recovery").glob("*.json"):
            receipt = json.loads(path.read_text(encoding="utf-8"))
            assert list(receipt) == [
                "schemaVersion",
                "observed",
                "note",
                "ownerStopped",
                "recoveredAt",
                "evidenceClass",
            ]
        receipts_left += len(set((root / BASE / "lock-recovery").glob("*.json")) - before)
        temps = temp_files_on_disk(root)
        assert temps == store.list_temp_files(str(root)), "every temporary left is a counted one"
        inventory = observe.inspect_inventory(str(root))
        assert inventory.get("strayTempFiles", 0) == len(temps)
        for temp in temps:
            leftovers["lock temp" if "/." in temp else "receipt temp"] += 1
        follow_the_way_out(root, inputs, leftovers)
    print(
        f"\nrecover-lock crash injection (seed {SEED + 2}): {kills} kills, {recoveries} recoveries run to the end, "
        f"leftovers after kills {dict(leftovers)}, {receipts_left} complete receipts written, all cleaned"
    )
    assert kills >= RECOVERY_KILLS


# ----------------------------------------------------------------- what killed writers leave


def test_dead_writers_receipt_temporaries_are_counted_and_removed_by_the_next_lock_holder(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    add_work(root, "work/a")
    assert run_cli_json(root, "create", plan=write_json(inputs / "plan.json", plan_for("alpha", ["work/a"])))[0] == 0
    dead, alive = dead_pid(), os.getpid()
    token = str(uuid.uuid4())
    recovery = root / BASE / "lock-recovery"
    kept = root / BASE / "receipts" / "alpha"
    for folder in (recovery, kept):
        folder.mkdir(parents=True, exist_ok=True)
    left = [recovery / f"{token}.json.{dead}.{token}.tmp", kept / f"{token}.json.{dead}.{token}.tmp"]
    live = [recovery / f"{token}.json.{alive}.{token}.tmp", kept / f"{token}.json.{alive}.{token}.tmp"]
    for path in left + live:
        path.write_text("{")
    inventory = observe.inspect_inventory(str(root))
    assert inventory["strayTempFiles"] == 2, "a live writer's temporary is not stray"
    start = write_json(inputs / "start.json", {"backend": HOST_BACKEND})
    assert run_cli_json(root, "start", "alpha", "t0", input_file=start)[0] == 0
    assert [p.exists() for p in left + live] == [False, False, True, True]
    assert "strayTempFiles" not in observe.inspect_inventory(str(root))


def test_a_symlinked_receipts_directory_is_never_cleaned_through(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    add_work(root, "work/a")
    assert run_cli_json(root, "create", plan=write_json(inputs / "plan.json", plan_for("alpha", ["work/a"])))[0] == 0
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    victim = elsewhere / f"x.json.{dead_pid()}.{uuid.uuid4()}.tmp"
    victim.write_text("not ours")
    (root / BASE / "lock-recovery").symlink_to(elsewhere)
    assert "strayTempFiles" not in observe.inspect_inventory(str(root))
    run_cli_json(root, "start", "alpha", "t0", input_file=write_json(inputs / "s.json", {"backend": HOST_BACKEND}))
    assert victim.exists()


# ----------------------------------------------------------------- a verification left running

# A check that runs until the test creates ./stop (at most 30 s).
WAIT_FOR_STOP = "i=0; while [ ! -e stop ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done"


def test_a_verification_left_running_says_who_owned_it_and_what_ends_it(tmp_path: Path) -> None:
    root = make_project(tmp_path / "project")
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    add_work(root, "work/a")
    plan = plan_for("alpha", ["work/a"])
    plan["tasks"][0]["checks"].insert(
        0, {"id": "slow", "command": "/bin/sh", "args": ["-c", WAIT_FOR_STOP], "cwd": ".", "timeoutMs": 60000}
    )
    assert run_cli_json(root, "create", plan=write_json(inputs / "plan.json", plan))[0] == 0
    assert (
        run_cli_json(root, "start", "alpha", "t0", input_file=write_json(inputs / "s.json", {"backend": HOST_BACKEND}))[
            0
        ]
        == 0
    )
    attempt = latest_attempt(store.load_run(str(root), "alpha"), "t0")
    assert attempt is not None
    bound = {"attemptId": attempt["id"], "backend": HOST_BACKEND}
    record = {**bound, "outcome": "completed", "summary": "done"}
    assert run_cli_json(root, "record", "alpha", "t0", input_file=write_json(inputs / "r.json", record))[0] == 0
    verifier = subprocess.Popen(
        cli_command(root, "verify", "alpha", "t0"), stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        for _ in range(2000):
            running = latest_attempt(store.load_run(str(root), "alpha"), "t0")
            if running and running["verification"]["status"] == "running":
                break
            time.sleep(0.01)
        observation = observe.inspect_run(str(root), "alpha")["observations"][0]
        live = observation["runningVerification"]
        assert live["ownerAlive"] is True and live["owner"]["pid"] == verifier.pid
        assert "is running: wait for that verify" in live["hint"]
        assert list(observation)[-2:] == ["hint", "runningVerification"], "additive, after the reference's keys"
        # The verify dies without saving (as when its save waits past its bound and it exits).
        verifier.send_signal(signal.SIGKILL)
        verifier.communicate()
    finally:
        if verifier.poll() is None:
            verifier.kill()
    (root / "stop").write_text("")  # ends the orphaned check
    plant_dead_writer_lock(root)  # and it met a dead writer.lock
    inspected = observe.inspect_run(str(root), "alpha")
    left = inspected["observations"][0]["runningVerification"]
    verification = latest_attempt(store.load_run(str(root), "alpha"), "t0")["verification"]  # type: ignore[index]
    assert left["ownerAlive"] is False and left["verificationId"] == verification["id"]
    assert left["startedAt"] == verification["startedAt"] and left["owner"] == verification["owner"]
    hint = left["hint"]
    for part in (
        "was left running",
        f"pid {verifier.pid}",
        verification["startedAt"],
        "first recover it with nexus recover-lock",
        "nexus reconcile alpha t0 --input FILE",
        "nexus verify alpha t0",
    ):
        assert part in hint, (part, hint)
    # Follow the hint to the end: recover the lock, reconcile with the very input it gives, verify.
    lock = inspected["lock"]
    assert lock is not None
    recovery = {"expectedHash": lock["hash"], "ownerStopped": True, "note": "The verifier was killed."}
    assert run_cli_json(root, "recover-lock", input_file=write_json(inputs / "l.json", recovery))[0] == 0
    given = json.loads(hint.split("FILE holding ", 1)[1].split(" (outcome failed", 1)[0])
    code, reconciled, err = run_cli_json(
        root, "reconcile", "alpha", "t0", input_file=write_json(inputs / "c.json", given)
    )
    assert code == 0, (reconciled, err)
    attempt = latest_attempt(reconciled, "t0")
    assert attempt is not None and attempt["verification"] == {"status": "pending", "checks": []}
    assert attempt["verificationHistory"][-1]["status"] == "ambiguous"
    assert "runningVerification" not in observe.inspect_run(str(root), "alpha")["observations"][0]
