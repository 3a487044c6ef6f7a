"""Long operations survive other writers (issue 8): a verification that began always finishes, a
launch keeps its child and its receipt while other clients hold writer.lock, and a receipt that
truly cannot be saved is kept beside the state for collect."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from process_support import (
    cli,
    cli_retrying,
    command_task,
    create,
    identity,
    latest,
    make_project,
    spawn_cli,
    state,
    wait_running,
    write,
)

from nexus_core import engine, observe
from nexus_core.backend import process
from nexus_core.errors import NexusError
from nexus_core.state import canonical, store

LONG = os.environ.get("NEXUS_LONG") == "1"
HOST = {"kind": "host", "id": "storm-tester", "sessionId": "s1"}

# Other clients: each loops fail-fast mutations on its own runs (create, start, record), the way
# agents record their work, until the stop file appears.
STORM = r"""
import os, sys, time
from nexus_core import engine
from nexus_core.errors import NexusError
root, name, stop = sys.argv[1], sys.argv[2], sys.argv[3]
host = {"kind": "host", "id": name, "sessionId": "s"}
ok = busy = i = 0
def attempt_of(run, task="w"):
    return next(t for t in run["tasks"] if t["id"] == task)["attempts"][-1]
while not os.path.exists(stop):
    i += 1
    run_id = f"{name}-{i}"
    plan = {"id": run_id, "tasks": [{"id": "w", "objective": "storm", "scope": [f"storm/{name}/{i}"],
            "artifacts": [f"storm/{name}/{i}/a.txt"], "resources": ["checks/check.sh"],
            "checks": [{"id": "c", "command": "/bin/sh", "args": ["checks/check.sh", "x"]}]}]}
    steps = [lambda: engine.create_run(root, plan),
             lambda: engine.start_task(root, run_id, "w", {"backend": host}),
             lambda: engine.record_attempt(root, run_id, "w", {
                 "attemptId": attempt_of(engine.load_run(root, run_id))["id"],
                 "backend": host, "outcome": "failed", "summary": "storm"})]
    for step in steps:
        while not os.path.exists(stop):
            try:
                step()
                ok += 1
                time.sleep(0.01)
                break
            except NexusError as error:
                if "owns writer.lock" not in error.message:
                    raise
                busy += 1
                time.sleep(0.005)
print(ok, busy)
"""

# A slow writer: takes writer.lock (waiting for it) and holds it HOLD seconds, GAP apart.
HOG = r"""
import os, sys, time
from nexus_core.state import locks
root, hold, gap, stop = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
held = 0
while not os.path.exists(stop):
    token = locks.try_acquire_writer(root)
    if token is None:
        time.sleep(0.005)
        continue
    time.sleep(hold)
    locks.release_writer(root, token)
    held += 1
    time.sleep(gap)
print(held)
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "project")
    write(root / "checks" / "slow.sh", 'sleep 0.15\ngrep -q ok "out/$1/result.txt"\n')
    return root


@contextmanager
def other_writers(root: Path, storms: int, hog: tuple[float, float] | None = None) -> Iterator[list[str]]:
    """Run `storms` mutating clients (and optionally a slow lock holder) until the block ends."""
    stop = root.parent / f"stop-{uuid.uuid4()}"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", STORM, str(root), f"storm{k}", str(stop)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(storms)
    ]
    if hog:
        children.append(
            subprocess.Popen(
                [sys.executable, "-c", HOG, str(root), str(hog[0]), str(hog[1]), str(stop)],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    report: list[str] = []
    try:
        time.sleep(0.3)  # let them get going
        yield report
    finally:
        stop.write_text("stop")
        for child in children:
            out, err = child.communicate(timeout=60)
            assert child.returncode == 0, err
            report.append(out.strip())


def verify_plan(run_id: str, checks: int = 4) -> dict[str, Any]:
    return {
        "id": "v",
        "objective": "Verified under load.",
        "scope": [f"out/{run_id}"],
        "artifacts": [f"out/{run_id}/result.txt"],
        "resources": ["checks/slow.sh"],
        "checks": [
            {"id": f"c{i}", "command": "/bin/sh", "args": ["checks/slow.sh", run_id], "timeoutMs": 10000}
            for i in range(checks)
        ],
    }


def retry_busy(call: Any) -> Any:
    for _ in range(2000):
        try:
            return call()
        except NexusError as error:
            if "owns writer.lock" not in error.message:
                raise
            time.sleep(0.01)
    raise AssertionError("writer.lock never became free")


def test_every_started_verification_finishes_while_others_write(project: Path) -> None:
    rounds = 6 if LONG else 3
    runs = [f"verify{i}" for i in range(rounds)]
    for run_id in runs:
        create(project, run_id, [verify_plan(run_id)])
        write(project / "out" / run_id / "result.txt", "ok\n")
        root = str(project)
        retry_busy(lambda run_id=run_id, root=root: engine.start_task(root, run_id, "v", {"backend": HOST}))
        attempt = latest(project, run_id, "v")
        record = {"attemptId": attempt["id"], "backend": HOST, "outcome": "completed", "summary": "done"}
        engine.record_attempt(root, run_id, "v", record)
    started = finished = refused_at_start = 0
    with other_writers(project, storms=3, hog=(0.05, 0.1)) as report:
        for run_id in runs:
            while True:
                try:
                    engine.verify_task(str(project), run_id, "v")
                except NexusError as error:
                    if "owns writer.lock" not in error.message:
                        raise
                    # The user-facing start stays fail-fast, as the SPEC says; nothing began.
                    assert latest(project, run_id, "v")["verification"]["status"] == "pending"
                    refused_at_start += 1
                    time.sleep(0.01)
                    continue
                break
            started += 1
            verification = latest(project, run_id, "v")["verification"]
            assert verification["status"] == "passed", verification
            assert [c["id"] for c in verification["checks"]] == ["c0", "c1", "c2", "c3"]
            finished += 1
    assert started == finished == rounds
    print(f"verify: {started} started, {finished} finished, {refused_at_start} refused at start; others: {report}")
    storm_counts = [line.split() for line in report[:-1]]
    assert all(int(ok) > 0 for ok, _ in storm_counts), report  # the others really wrote meanwhile
    # Every run file is intact and no verification anywhere was left running.
    for run_id in [*runs, *(f"storm{k}-1" for k in range(3))]:
        run = store.load_run(str(project), run_id)
        for task in run["tasks"]:
            for stored in task["attempts"]:
                assert stored["verification"]["status"] != "running"


def test_launch_keeps_its_child_and_receipt_through_a_storm(project: Path) -> None:
    create(project, "r", [command_task("t", "pause", "4")])
    supervisor = spawn_cli(project, "launch", "r", "t")
    wait_running(project, "r", "t")
    # While the child runs: other clients write, and a slow writer holds writer.lock longer than
    # a heartbeat may wait, so some heartbeats are skipped.
    with other_writers(project, storms=3, hog=(0.3, 0.05)) as report:
        out, err = supervisor.communicate(timeout=60)
    assert all(int(line.split()[0]) > 0 for line in report), report
    assert supervisor.returncode == 0, (out, err)
    attempt = latest(project, "r", "t")
    receipt = attempt["process"]["receipt"]
    assert receipt["outcome"] == "completed" and receipt["reason"] is None
    assert receipt["directChildSignalled"] is False and receipt["exitCode"] == 0
    assert attempt["process"]["status"] == "finished" and isinstance(attempt["process"]["childPid"], int)
    assert attempt["process"]["receiptHash"] == canonical.sha256_json(receipt)
    assert not (project / ".bmad-plus" / "nexus" / "receipts").exists()
    assert cli_retrying(project, "collect", "r", "t", input_value=identity(attempt))[0] == 0


def test_a_receipt_that_cannot_be_saved_is_kept_for_collect(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    create(project, "r", [command_task("t", "pause", "1.5")])
    monkeypatch.setattr(process, "RECEIPT_PATIENCE_SECONDS", 0.5)
    # Holds writer.lock once the child runs, for longer than the receipt may wait.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import json, sys, time\n"
            "from nexus_core.state import locks\n"
            "root, path = sys.argv[1], sys.argv[2]\n"
            "print('ready', flush=True)\n"
            "def status():\n"
            "    try:\n"
            "        return json.load(open(path))['run']['tasks'][0]['attempts'][-1]['process']['status']\n"
            "    except (IndexError, KeyError, ValueError):\n"
            "        return None\n"
            "while status() != 'running':\n"
            "    time.sleep(0.02)\n"
            "while (token := locks.try_acquire_writer(root)) is None:\n"
            "    time.sleep(0.005)\n"
            "print('held', flush=True)\n"
            "time.sleep(4)\n"
            "locks.release_writer(root, token)\n",
            str(project),
            str(project / ".bmad-plus" / "nexus" / "runs" / "r.json"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        with pytest.raises(NexusError) as refused:
            process.launch_task(str(project), "r", "t", {})
        attempt = latest(project, "r", "t")
        kept = f".bmad-plus/nexus/receipts/r/{attempt['id']}.json"
        assert f"it was kept in {kept}" in refused.value.message
        assert attempt["process"]["status"] == "running" and "receipt" not in attempt["process"]
        info = (project / kept).stat()
        assert stat.S_IMODE(info.st_mode) == 0o600
        record = canonical.parse((project / kept).read_text(encoding="utf-8"))
        assert record["receiptHash"] == canonical.sha256_json(record["receipt"])
        assert record["receipt"]["outcome"] == "completed" and record["receipt"]["attemptId"] == attempt["id"]
        observation = observe.inspect_run(str(project), "r")["observations"][0]
        assert observation["process"]["recoverableReceipt"] == kept
        assert observation["process"]["receiptReady"] is True
        assert kept in observation["hint"]
    finally:
        holder.communicate(timeout=30)
    code, result, err = cli(project, "collect", "r", "t", input_value=identity(attempt))
    assert code == 0, (result, err)
    attempt = latest(project, "r", "t")
    assert attempt["execution"] == "completed"
    assert attempt["process"]["status"] == "finished"
    assert attempt["process"]["receiptHash"] == record["receiptHash"]
    assert attempt["process"]["receipt"] == record["receipt"]
    assert not (project / kept).exists()
    assert cli(project, "verify", "r", "t")[0] == 0


def test_a_tampered_kept_receipt_is_refused(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    create(project, "r", [command_task("t", "ok")])
    # Simulate a launch whose final save failed: a supervisor that died after keeping its receipt.
    original = engine.mutate
    calls = {"n": 0}

    def failing_finalize(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("patience") == process.RECEIPT_PATIENCE_SECONDS:
            calls["n"] += 1
            raise engine.WriterBusy("Nexus: Another mutation owns writer.lock; inspect before explicit recovery.")
        return original(*args, **kwargs)

    monkeypatch.setattr(process, "mutate", failing_finalize)
    with pytest.raises(NexusError):
        process.launch_task(str(project), "r", "t", {})
    monkeypatch.setattr(process, "mutate", original)
    assert calls["n"] == 1
    attempt = latest(project, "r", "t")
    kept = project / ".bmad-plus" / "nexus" / "receipts" / "r" / f"{attempt['id']}.json"
    record = canonical.parse(kept.read_text(encoding="utf-8"))
    record["receipt"]["exitCode"] = 1
    kept.write_text(canonical.pretty(record) + "\n", encoding="utf-8")
    code, result, _ = cli(project, "collect", "r", "t", input_value=identity(attempt))
    assert code == 1 and result["error"] == "Nexus: Foreign or corrupt process receipt."
    assert latest(project, "r", "t")["process"]["status"] == "running"


def test_user_facing_acquisition_stays_fail_fast(project: Path) -> None:
    create(project, "r", [verify_plan("r")])
    from nexus_core.state import locks

    token = locks.try_acquire_writer(str(project))
    assert token is not None
    try:
        code, result, _ = cli(project, "start", "r", "v", input_value={"backend": HOST})
    finally:
        locks.release_writer(str(project), token)
    assert code == 1
    assert result["error"] == "Nexus: Another mutation owns writer.lock; inspect before explicit recovery."
    assert state(project, "r")["tasks"][0]["attempts"] == []


def test_lock_temporaries_of_dead_publishers_are_removed_live_ones_kept(project: Path) -> None:
    create(project, "r", [verify_plan("r")])
    base = project / ".bmad-plus" / "nexus"
    dead = base / f".writer.lock.4194304.{uuid.uuid4()}.tmp"  # above PID_MAX_LIMIT: never alive
    live = base / f".writer.lock.{os.getpid()}.{uuid.uuid4()}.tmp"
    torn = base / "runs" / f"r.json.{uuid.uuid4()}.tmp"
    for path in (dead, live, torn):
        path.write_text("")
    assert observe.inspect_run(str(project))["strayTempFiles"] == 2
    assert cli(project, "start", "r", "v", input_value={"backend": HOST})[0] == 0
    assert not dead.exists() and not torn.exists()
    assert live.exists(), "a live publisher may still link its temporary"
    assert "strayTempFiles" not in observe.inspect_run(str(project))


# Takes writer.lock once the state shows STATUS (waiting for it), holds it until the RELEASE
# file appears (or 60 s pass), then releases it; with KILL it never releases (the test kills it).
HOLDER = r"""
import json, os, sys, time
from nexus_core.state import locks
root, path, status, release = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
deadline = time.monotonic() + 60
def current():
    try:
        attempt = json.load(open(path))["run"]["tasks"][0]["attempts"][-1]
    except (IndexError, KeyError, ValueError):
        return None
    return (attempt.get("process") or {}).get("status") or attempt["verification"]["status"]
while current() != status and time.monotonic() < deadline:
    time.sleep(0.02)
while (token := locks.try_acquire_writer(root)) is None and time.monotonic() < deadline:
    time.sleep(0.005)
print("held", flush=True)
while not os.path.exists(release) and time.monotonic() < deadline:
    time.sleep(0.02)
locks.release_writer(root, token)
"""


def hold_writer_lock(project: Path, run_id: str, status: str, release: Path) -> subprocess.Popen[str]:
    state_file = project / ".bmad-plus" / "nexus" / "runs" / f"{run_id}.json"
    command = [sys.executable, "-c", HOLDER, str(project), str(state_file), status, str(release)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, text=True)


def test_a_heartbeat_that_cannot_be_written_is_skipped_and_the_child_runs_on(project: Path) -> None:
    """README: a heartbeat that cannot be written within 2 s is skipped; the child is never
    stopped for it. The lock is held from the spawn acknowledgement until a heartbeat has been
    skipped; only then may the child finish (it waits for the release file)."""
    assert process.HEARTBEAT_PATIENCE_SECONDS == 2.0  # the README's figure
    write(
        project / "workers" / "until.sh",
        'cat > /dev/null\nwhile [ ! -e "out/$1/go" ]; do sleep 0.05; done\nprintf "ok\\n" > "out/$1/result.txt"\n',
    )
    task = command_task("t", "until", execution={"args": ["workers/until.sh", "t"], "resources": ["workers/until.sh"]})
    create(project, "r", [task])
    (project / "out" / "t").mkdir(parents=True, exist_ok=True)
    release = project / "out" / "t" / "go"  # frees the lock holder and the child at once
    holder = hold_writer_lock(project, "r", "running", release)
    events: list[str] = []

    def progress(event: dict[str, Any]) -> None:
        events.append(event["event"])
        if event["event"] == "heartbeat-skipped":
            release.write_text("go\n")

    try:
        process.launch_task(str(project), "r", "t", {}, progress=progress)
    finally:
        release.write_text("go\n")
        holder.communicate(timeout=60)
    assert "heartbeat-skipped" in events, events
    assert events.index("heartbeat-skipped") < events.index("finished")
    # The child ran to its end (exit 0, no signal) and its receipt is stored for collect.
    process_state = latest(project, "r", "t")["process"]
    assert process_state["status"] == "finished"
    receipt = process_state["receipt"]
    assert (receipt["outcome"], receipt["exitCode"], receipt["signal"]) == ("completed", 0, None), receipt


@pytest.mark.parametrize("holder_fate", ["holds-too-long", "dies-holding"])
def test_verify_saves_give_up_and_leave_the_verification_running(
    project: Path, monkeypatch: pytest.MonkeyPatch, holder_fate: str
) -> None:
    """README, known limits: if a live process holds writer.lock for more than 30 s (or the
    lock's owner is dead), verify's saves give up and the verification stays running."""
    assert engine.VERIFY_SAVE_PATIENCE_SECONDS == 30.0  # the README's figure
    if holder_fate == "holds-too-long":
        monkeypatch.setattr(engine, "VERIFY_SAVE_PATIENCE_SECONDS", 0.5)  # "longer than the patience"
    # The check runs until the holder has the lock (the verifier's own save released it first).
    write(project / "checks" / "until-held.sh", "while [ ! -e .bmad-plus/nexus/writer.lock ]; do sleep 0.02; done\n")
    plan = verify_plan("r", checks=1)
    plan["resources"] = ["checks/until-held.sh"]
    plan["checks"][0]["args"] = ["checks/until-held.sh"]
    create(project, "r", [plan])
    run = engine.start_task(str(project), "r", "v", {"backend": HOST})
    attempt_id = engine.task_of(run, "v")["attempts"][-1]["id"]
    write(project / "out" / "r" / "result.txt", "ok\n")
    engine.record_attempt(
        str(project), "r", "v", {"attemptId": attempt_id, "backend": HOST, "outcome": "completed", "summary": "s"}
    )
    release = project.parent / f"release-{uuid.uuid4()}"
    holder = hold_writer_lock(project, "r", "running", release)
    outcome: list[BaseException | None] = []

    def verify() -> None:
        try:
            engine.verify_task(str(project), "r", "v")
            outcome.append(None)
        except BaseException as error:  # checked below
            outcome.append(error)

    verifier = threading.Thread(target=verify, daemon=True)
    verifier.start()
    try:
        if holder_fate == "dies-holding":
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            holder.kill()  # writer.lock stays, naming a dead pid
            holder.wait()
        verifier.join(120)  # the patience is at most 30 s
    finally:
        release.write_text("go")
        holder.communicate(timeout=60)
    assert len(outcome) == 1 and isinstance(outcome[0], engine.WriterBusy), outcome
    assert outcome[0].message == "Nexus: Another mutation owns writer.lock; inspect before explicit recovery."
    verification = latest(project, "r", "v")["verification"]
    assert verification["status"] == "running" and verification["checks"] == []
