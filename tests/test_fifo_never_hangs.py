"""Issue 22 item 2: a FIFO (or a file swapped for one) under ``.bmad-plus`` or a scope never
hangs a reader. Every file opened by name goes through ``paths.open_regular``
(``O_NOFOLLOW|O_NONBLOCK``, then ``fstat``: a regular file, the inode an earlier lstat saw, a
size cap).

Each case runs in a subprocess with a timeout: the timeout detects a hang (a reader blocked on
a FIFO never returns); it is not a performance assertion. The swap race is real: a helper
replaces the file with a FIFO right before the reader opens it (after every check the reader
made by path), which is the window an attacker sharing the machine has.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from schedule_kit import ScheduledProject, epoch_ms, finished_events
from supervise_kit import Project, nexus_command, task_def, until

from nexus_core.paths import FileTooLarge, RefusedFile, open_regular, read_regular

HANG = 60  # seconds: a reader blocked on a FIFO never returns; anything that works ends well before
T0 = epoch_ms("2026-06-01T00:00")


def run_bounded(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=HANG, check=False, **kwargs)
    except subprocess.TimeoutExpired as expired:
        raise AssertionError(f"{command[3:]} hung (blocked on a FIFO?); output so far: {expired.stdout!r}") from None


def ended(process: subprocess.Popen[str]) -> None:
    """Wait for ``process``; one that hangs (blocked on a FIFO, deaf to signals) is killed, and
    the test fails on its exit status."""
    try:
        process.wait(timeout=HANG)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=HANG)


# ----------------------------------------------------------------- the one open function


def test_open_regular_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "x.json"
    os.mkfifo(fifo)
    with pytest.raises(RefusedFile, match="not a regular file"):
        open_regular(str(fifo))  # O_NONBLOCK: the open returns at once, fstat refuses


def test_open_regular_refuses_a_file_swapped_after_its_lstat(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    path.write_text("{}")
    checked = os.lstat(path)
    path.rename(tmp_path / "kept")  # kept: its inode number is not reused for the next file
    os.mkfifo(path)  # the swap: a FIFO now where the lstat saw a regular file
    with pytest.raises(RefusedFile, match="not a regular file"):
        read_regular(str(path), 1024, checked=checked)
    path.unlink()
    path.write_text("{}")  # another regular file: same name, another inode
    with pytest.raises(RefusedFile, match="replaced since it was checked"):
        read_regular(str(path), 1024, checked=checked)


def test_open_regular_caps_the_size_and_never_follows_a_symlink(tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.write_bytes(b"x" * 2048)
    with pytest.raises(FileTooLarge):
        read_regular(str(big), 1024)
    assert read_regular(str(big), 2048) == b"x" * 2048
    link = tmp_path / "link"
    link.symlink_to(big)
    with pytest.raises(OSError):
        read_regular(str(link), 4096)


# ----------------------------------------------------------------- the swap race, reader by reader

# Runs one reader of the core with os.open and the built-in open patched so that the first open
# of TARGET swaps it for a FIFO first: every check the reader made by path saw the regular file.
SWAP_SCRIPT = r"""
import builtins, json, os, sys
reader, root, target = sys.argv[1:4]
swapped = []
def swap(path):
    name = os.fsdecode(path) if isinstance(path, (str, bytes, os.PathLike)) else ""
    if not swapped and (name == target or name == os.path.basename(target)):
        swapped.append(name)
        os.unlink(target)
        os.mkfifo(target)
real_os_open, real_open = os.open, builtins.open
def patched_os_open(path, *args, **kwargs):
    swap(path)
    return real_os_open(path, *args, **kwargs)
def patched_open(path, *args, **kwargs):
    swap(path)
    return real_open(path, *args, **kwargs)
os.open, builtins.open = patched_os_open, patched_open

from nexus_core import plan
from nexus_core.backend import process
from nexus_core.state import locks, store
from nexus_core.cli.inputs import read_input_file
from nexus_core.schedule import db
from nexus_core.snapshots import executable
from nexus_tui.logic import recovery

def call():
    if reader == "run state":
        return store.read_state_bytes(root, "demo")
    if reader == "writer.lock":
        return locks.lock_snapshot(root, locks.WRITER_LOCK)
    if reader == "writer.lock release":
        return locks.release_writer(root, "a-token")
    if reader == "kept receipt":
        return process.read_receipt_file(root, "demo", "attempt-1")
    if reader == "execution input":
        return plan.input_bytes(root, {"instructions": [], "input": "prompt.txt"})
    if reader == "schedules database":
        return db.connect_checked(root, read_only=True)
    if reader == "input file":
        return read_input_file(target, "--input")
    if reader == "executable":
        return executable(target)
    if reader == "recovery plan":
        return recovery.fresh_run(root, "demo").plan_problem
    raise SystemExit("unknown reader " + reader)

try:
    result = call()
except Exception as error:
    print(json.dumps({"swapped": bool(swapped), "refused": str(error)}))
else:
    print(json.dumps({"swapped": bool(swapped), "result": repr(result)}))
"""


def _plant(project: Project, reader: str) -> Path:
    """The regular file the reader will open (the helper swaps it for a FIFO just before)."""
    base = project.root / ".bmad-plus" / "nexus"
    if reader in ("run state", "recovery plan"):
        return project.run_file
    if reader in ("writer.lock", "writer.lock release"):
        project.hand_lock(os.getpid())
        return project.writer_lock
    if reader == "kept receipt":
        target = base / "receipts" / "demo" / "attempt-1.json"
        target.parent.mkdir(parents=True, mode=0o700)
        target.write_text("{}")
        target.chmod(0o600)
        return target
    if reader == "execution input":
        target = project.root / "prompt.txt"
        target.write_text("do it\n")
        return target
    if reader == "schedules database":
        subprocess.run(
            nexus_command("schedule", "add", "demo", "--every", "1h", "-d", str(project.root)), check=True, timeout=60
        )
        return base / "schedules.sqlite3"
    if reader == "input file":
        target = project.inputs / "input.json"
        target.write_text("{}")
        target.chmod(0o600)
        return target
    assert reader == "executable"
    target = project.inputs / "tool"
    target.write_text("#!/bin/sh\n")
    target.chmod(0o700)
    return target


READERS = {
    "run state": "not a regular file",
    "writer.lock": "'unsafe': 'not a regular file'",
    "writer.lock release": "None",
    "kept receipt": "Foreign or corrupt process receipt.",
    "execution input": "execution input must be a regular file no larger than 256 KiB.",
    "schedules database": "is unsafe (not a regular file)",
    "input file": "not a regular file",
    "executable": "not a regular file",
    "recovery plan": "the run file cannot be read (not a regular file)",
}


@pytest.mark.parametrize("reader", list(READERS))
def test_a_file_swapped_for_a_fifo_before_the_open_is_refused_not_waited_on(tmp_path: Path, reader: str) -> None:
    project = Project(tmp_path)
    project.create(task_def("a"))
    target = _plant(project, reader)
    done = run_bounded([sys.executable, "-c", SWAP_SCRIPT, reader, str(project.root), str(target)])
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.splitlines()[-1])
    assert outcome["swapped"], "the helper never saw the reader open the file"
    assert READERS[reader] in (outcome.get("refused") or outcome.get("result") or ""), outcome
    assert "Traceback" not in done.stderr


# ----------------------------------------------------------------- planted FIFOs, end to end


@pytest.fixture
def settled(tmp_path: Path) -> Project:
    """A run whose one task is accepted, with a FIFO planted among the lock-recovery receipts."""
    project = Project(tmp_path)
    project.create(task_def("a"))
    project.finish("a")
    recoveries = project.root / ".bmad-plus" / "nexus" / "lock-recovery"
    recoveries.mkdir(mode=0o700)
    os.mkfifo(recoveries / "x.json")
    return project


def test_wait_is_not_hung_by_a_fifo_among_lock_recovery_receipts(settled: Project) -> None:
    done = run_bounded(nexus_command("wait", "demo", "--poll", "-d", str(settled.root)))
    assert done.returncode == 0, done.stderr  # every task accepted


def test_loop_is_not_hung_by_a_fifo_among_lock_recovery_receipts(settled: Project, tmp_path: Path) -> None:
    out = tmp_path / "loop.out"
    with out.open("w") as sink:
        loop = subprocess.Popen(
            nexus_command("loop", "demo", "--every", "30s", "-d", str(settled.root)),
            stdout=sink,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:
        until(lambda: "tick 1" in out.read_text(), timeout=HANG, what="loop's first tick", diagnose=out.read_text)
    finally:
        loop.send_signal(signal.SIGINT)
        ended(loop)
    assert loop.returncode == 0, out.read_text()


def test_scheduler_is_not_stalled_by_a_fifo_among_lock_recovery_receipts(tmp_path: Path) -> None:
    project = ScheduledProject(tmp_path)
    project.create(task_def("a"))
    project.add("--every", "1h", clock=T0)
    recoveries = project.root / ".bmad-plus" / "nexus" / "lock-recovery"
    recoveries.mkdir(mode=0o700)
    os.mkfifo(recoveries / "x.json")
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log, f"{T0 + 3600_000}@0")
    try:
        until(lambda: finished_events(log), timeout=HANG, what="the occurrence (a reader blocked on the FIFO?)")
    finally:
        runner.send_signal(signal.SIGTERM)
        ended(runner)
    assert runner.returncode == 0
    assert finished_events(log)[0]["status"] == "fired"


def test_the_guided_recovery_of_a_run_file_that_is_a_fifo_does_not_hang(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.create(task_def("a"))
    project.run_file.unlink()
    os.mkfifo(project.run_file)
    script = (
        "import sys\nfrom nexus_tui.logic import recovery\n"
        "print(recovery.fresh_run(sys.argv[1], 'demo').plan_problem)\n"
        "print(len(recovery.classify_project(sys.argv[1])))\n"
    )
    done = run_bounded([sys.executable, "-c", script, str(project.root)])
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "the run file cannot be read (not a regular file)"
