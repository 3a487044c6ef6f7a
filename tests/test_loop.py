"""`nexus loop`: interval parsing, busy-skip, the tick cap, overruns, --verify and Ctrl+C.

The schedule tests run the loop in-process with an injected clock and sleeper (no real waiting);
the run itself is driven through the real CLI, and one test runs the real command end to end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from supervise_kit import Project, dead_pid, nexus_command, task_def, until

from nexus_core.errors import NexusError
from nexus_core.supervise import LoopResult, LoopStop, parse_interval, run_loop


class FakeTime:
    """A monotonic clock that only moves when the loop sleeps (or a hook moves it)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []
        self.on_sleep: list[object] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        hook = self.on_sleep[len(self.sleeps) - 1] if len(self.sleeps) <= len(self.on_sleep) else None
        if callable(hook):
            hook()


def loop(project: Project, every: float = 60, **options: Any) -> tuple[LoopResult, list[str], FakeTime]:
    fake = FakeTime()
    hooks = options.pop("hooks", [])
    fake.on_sleep = list(hooks)
    on_line = options.pop("on_line", None)
    lines: list[str] = []

    def emit(text: str) -> None:
        line = text.rstrip("\n").split("] ", 1)[1]  # drop the time stamp
        lines.append(line)
        if callable(on_line):
            on_line(line, fake)

    result = run_loop(
        str(project.root), project.run_id, every, emit=emit, clock=fake.clock, sleeper=fake.sleep, **options
    )
    return result, lines, fake


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


# ----------------------------------------------------------------- interval


@pytest.mark.parametrize(("text", "seconds"), [("30s", 30), ("45s", 45), ("5m", 300), ("1h", 3600), ("24h", 86400)])
def test_intervals_accepted(text: str, seconds: int) -> None:
    assert parse_interval(text) == seconds


@pytest.mark.parametrize("text", ["29s", "0s", "25h", "1441m", "86401s"])
def test_intervals_out_of_range(text: str) -> None:
    with pytest.raises(NexusError, match=r"--every must be between 30s and 24h; got "):
        parse_interval(text)


@pytest.mark.parametrize("text", ["", "5", "5M", "1d", "1.5m", "-5m", " 5m", "5m ", "05m", "5 m", "m", "٥m", "1h30m"])
def test_intervals_malformed(text: str) -> None:
    with pytest.raises(NexusError, match=r"--every takes a whole number of seconds, minutes or hours"):
        parse_interval(text)


def test_cli_refuses_bad_intervals_clearly(project: Project) -> None:
    project.create(task_def("a"))
    for text, message in (
        ("10s", "Nexus: --every must be between 30s and 24h; got 10s.\n"),
        (
            "5 minutes",
            "Nexus: --every takes a whole number of seconds, minutes or hours such as 30s, 5m or 2h; "
            "got '5 minutes'.\n",
        ),
    ):
        done = subprocess.run(
            nexus_command("loop", "demo", "--every", text, "-d", str(project.root)), capture_output=True, text=True
        )
        assert (done.returncode, done.stdout, done.stderr) == (1, "", message)
    done = subprocess.run(nexus_command("loop", "demo", "-d", str(project.root)), capture_output=True, text=True)
    assert (done.returncode, done.stderr) == (1, "error: missing required option '--every'\n")
    raw = subprocess.run(nexus_command("loop", "nope", "--every", "1m", "-d", str(project.root)), capture_output=True)
    assert raw.returncode == 1 and raw.stderr.startswith(b"Nexus: Nexus: Unknown run: nope")
    help_text = subprocess.run(nexus_command("loop", "--help"), capture_output=True, text=True).stdout
    assert "lives in this process only" in help_text and "500" in help_text


# ----------------------------------------------------------------- schedule


def test_busy_ticks_are_skipped_and_counted_never_queued(project: Project) -> None:
    project.create(task_def("a"))
    holder = os.getpid()  # alive: a mutation in progress
    project.hand_lock(holder)
    result, lines, fake = loop(project, tick_cap=2, hooks=[None, None, project.writer_lock.unlink])
    assert result == LoopResult(executed=2, skipped=3, reason="cap")
    host = os.uname().nodename
    assert lines[:3] == [f"tick {n} skipped: run busy (writer.lock held by pid {holder} on {host})" for n in (1, 2, 3)]
    assert lines[3].startswith("tick 4: sequence 1; 1 awaiting-start; 0 stale, 0 overdue")
    assert lines[4:] == [
        "tick 5: sequence 1; 1 awaiting-start; 0 stale, 0 overdue",
        "  no change",
        "Loop stopped by itself after 2 ticks (the cap); start it again to continue.",
    ]
    assert fake.sleeps == [60.0] * 4  # one tick per interval, no burst after the lock went away


def test_dead_lock_owner_is_named_and_the_tick_skipped(project: Project) -> None:
    project.create(task_def("a"))
    owner = dead_pid()
    project.hand_lock(owner)
    result, lines, _ = loop(project, tick_cap=1, hooks=[project.writer_lock.unlink])
    assert result == LoopResult(executed=1, skipped=1, reason="cap")
    assert lines[0].endswith(
        f"writer.lock held by pid {owner} on {os.uname().nodename}, not alive here: inspect, then recover-lock)"
    )


def test_running_verification_makes_the_run_busy(project: Project) -> None:
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
    try:
        until(lambda: b'"status": "running"' in project.run_file.read_bytes(), what="verification to start")
        until(lambda: not project.writer_lock.exists(), what="verify to release the lock")

        def kill_verifier() -> None:
            os.killpg(verifier.pid, signal.SIGKILL)
            verifier.wait()

        result, lines, _ = loop(project, tick_cap=1, hooks=[kill_verifier])
    finally:
        if verifier.poll() is None:
            os.killpg(verifier.pid, signal.SIGKILL)
            verifier.wait()
    assert result == LoopResult(executed=1, skipped=1, reason="cap")
    assert lines[0] == "tick 1 skipped: run busy (a verification of a is running)"
    assert lines[1] == "tick 2: sequence 4; 1 verifier-gone; 0 stale, 0 overdue"


def test_cap_stops_the_loop_with_a_notice(project: Project) -> None:
    project.create(task_def("a"))
    result, lines, fake = loop(project, every=30, tick_cap=3)
    assert result == LoopResult(executed=3, skipped=0, reason="cap")
    assert lines[-1] == "Loop stopped by itself after 3 ticks (the cap); start it again to continue."
    assert fake.sleeps == [30.0, 30.0]


def test_ticks_that_come_due_during_a_long_tick_are_skipped(project: Project) -> None:
    project.create(task_def("a"))

    def slow_first_tick(line: str, fake: FakeTime) -> None:
        if line.startswith("tick 1:"):
            fake.now += 150  # the tick took 2.5 intervals
        if line.startswith("tick 4:"):
            fake.now += 10

    result, lines, fake = loop(project, every=60, tick_cap=2, on_line=slow_first_tick)
    assert result == LoopResult(executed=2, skipped=2, reason="cap")
    assert lines[1] == "2 tick(s) skipped: the previous tick was still running"
    assert lines[2].startswith("tick 4: ")
    assert fake.sleeps == [30.0]  # then the slot at 3 intervals, on time


def test_stop_request_ends_the_loop_with_counts(project: Project) -> None:
    project.create(task_def("a"))
    stop = LoopStop()
    result, _, _ = loop(project, tick_cap=10, stop=stop, hooks=[None, stop.request])
    assert result == LoopResult(executed=2, skipped=0, reason="stopped")


# ----------------------------------------------------------------- what ticks report, --verify


def test_ticks_report_stale_evidence_and_overdue_attempts(project: Project) -> None:
    project.create(task_def("a"), task_def("b", deadlineMs=100))
    project.finish("a")
    project.start("b")
    project.write("a", "edited after acceptance\n")
    time.sleep(0.15)  # past b's deadline
    result, lines, _ = loop(project, tick_cap=3, hooks=[lambda: project.write("a"), None])
    assert result.executed == 3
    assert lines[0] == "tick 1: sequence 8; 1 stale-evidence, 1 overdue; 1 stale, 1 overdue"
    assert lines[1].startswith("  stale: task a: Nexus: Stale evidence")
    assert lines[2] == f"  overdue: task b attempt {project.attempt_id('b')[:8]}"
    assert lines[3] == "tick 2: sequence 8; 1 accepted, 1 overdue; 0 stale, 1 overdue"
    assert lines[4] == f"  evidence-current: task a attempt {project.attempt_id('a')[:8]}"
    assert lines[6] == "  no change"


def test_verify_checks_completed_attempts_once(project: Project) -> None:
    project.create(task_def("a"), task_def("b"), task_def("c"))
    for task, text in (("a", "done\n"), ("b", "wrong\n")):
        project.start(task)
        project.write(task, text)
        project.record(task)
    project.start("c")  # still running: nothing to verify
    result, lines, _ = loop(project, tick_cap=2, verify=True)
    assert result.executed == 2
    assert lines[1:7] == [
        "  verifying a...",
        "    check content: exit 0",
        "  verified a: passed",
        "  verifying b...",
        "    check content: exit 1",
        "  verified b: failed",
    ]
    assert lines[7].startswith("tick 2: ") and lines[8] == "  no change"
    statuses = {t["id"]: t["attempts"][-1]["verification"]["status"] for t in project.state()["tasks"]}
    assert statuses == {"a": "passed", "b": "failed", "c": "pending"}


def test_real_loop_verifies_and_a_terminal_ctrl_c_never_reaches_the_check(project: Project) -> None:
    slow = task_def(
        "a",
        checks=[
            {
                "id": "slow",
                "command": "/bin/sh",
                "args": ["-c", "sleep 1; grep -q done out/a/result.txt"],
                "timeoutMs": 30000,
            }
        ],
    )
    project.create(slow)
    project.start("a")
    project.write("a")
    project.record("a")
    process = subprocess.Popen(
        nexus_command("loop", "demo", "--every", "30s", "--verify", "-d", str(project.root)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, as a shell gives a foreground job
    )
    lines: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        until(lambda: b'"status": "running"' in project.run_file.read_bytes(), what="the verification to start")
        os.killpg(process.pid, signal.SIGINT)  # what a terminal Ctrl+C does: the whole foreground group
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    reader.join(timeout=5)
    assert process.returncode == 0
    assert lines[0] == "nexus loop: run demo every 30s with --verify; it lives in this process only. Ctrl+C stops it.\n"
    untimed = [line.split("] ", 1)[-1] for line in lines[-3:]]
    assert untimed == [
        "    check slow: exit 0\n",
        "  verified a: passed\n",
        "nexus loop: 1 tick run, 0 skipped (stopped).\n",
    ]
    assert "stopping after the current step" in process.stderr.read()  # type: ignore[union-attr]
    assert project.state()["tasks"][0]["attempts"][-1]["verification"]["status"] == "passed"
    assert json.loads(project.nexus("inspect", "--json").stdout)["lock"] is None
