"""Issue 22 item 7: a full disk. On a real 2 MiB tmpfs (mounted by the test; skipped where no
tmpfs can be mounted, e.g. without root): every refusal names the file that could not be
written and says what changed (nothing, or exactly what stays on disk and the way out), a
refusal leaves nothing behind, and the scheduler keeps running and records what it did once
space is back.

The disk is filled page by page (tmpfs allocates 4 KiB pages), so a test can leave exactly the
room one more file needs."""

from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_support import tree_bytes
from schedule_kit import ScheduledProject, epoch_ms, finished_events
from supervise_kit import Project, dead_pid, events_in, nexus_command, task_def, until

PAGE = 4096
T0 = epoch_ms("2026-06-01T00:00")


class Disk:
    """A tmpfs of 2 MiB and a filler file that takes its free pages."""

    def __init__(self, mount: Path) -> None:
        self.mount = mount
        self.filler = mount / "filler"

    def fill(self, leave_pages: int = 0) -> None:
        fd = os.open(self.filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            while True:
                try:
                    os.write(fd, b"\0" * PAGE)  # one page: written whole, or ENOSPC
                except OSError as error:
                    assert error.errno == errno.ENOSPC
                    break
            size = os.fstat(fd).st_size
            os.ftruncate(fd, size - leave_pages * PAGE)
        finally:
            os.close(fd)

    def free(self) -> None:
        self.filler.unlink()


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Disk]:
    mount = tmp_path / "disk"
    mount.mkdir(mode=0o700)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"no tmpfs can be mounted here (root with CAP_SYS_ADMIN needed): {done.stderr.strip()}")
    try:
        yield Disk(mount)
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=60, check=False)


def nexus(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        nexus_command(*args, "-d", str(root)), capture_output=True, text=True, timeout=120, check=False
    )


def on_disk(kind: type[Project], disk: Disk, tmp_path: Path, **task: Any) -> Any:
    """A project of ``kind`` on the small disk (its inputs and event logs stay on the real one)."""
    base = tmp_path / "base"
    base.mkdir()
    project = kind(base)
    project.root.rmdir()
    project.root = disk.mount / "project"
    project.root.mkdir()
    project.create(task_def("a", **task))
    return project


def project_on(disk: Disk, tmp_path: Path, **task: Any) -> Project:
    return on_disk(Project, disk, tmp_path, **task)  # type: ignore[no-any-return]


def test_a_verify_whose_save_meets_a_full_disk_says_what_stays_and_the_way_out(disk: Disk, tmp_path: Path) -> None:
    # The check itself fills the disk (once), so the save of its receipt fails.
    filler = f"[ -e {disk.mount}/filled-once ] || {{ : > {disk.mount}/filled-once; cat /dev/zero > {disk.filler}; }}"
    check = {"id": "fill", "command": "/bin/sh", "args": ["-c", f"{filler} 2>/dev/null; exit 0"], "timeoutMs": 30000}
    project = project_on(disk, tmp_path, checks=[check])
    project.start("a")
    project.write("a")
    project.record("a")
    before = project.run_file.read_bytes()

    first = nexus(project.root, "verify", "demo", "a")
    assert first.returncode == 1
    lock = project.root / ".bmad-plus" / "nexus" / "writer.lock"
    line, *guidance = first.stderr.splitlines()
    assert line == f"Nexus: Could not write {lock} (No space left on device): the verification's result was not saved."
    hint = " ".join(guidance)  # our guidance, on the lines after the refusal
    assert "stays running in the run file as last saved (0 of 1 check receipts)" in hint
    assert "First free space on that disk (or fix the cause). End it with nexus reconcile demo a --input FILE" in hint
    assert "[Errno 28]" not in first.stderr
    assert project.run_file.read_bytes() != before  # the prepare save (verification running) is on disk

    disk.free()
    again = nexus(project.root, "verify", "demo", "a")
    assert again.returncode == 1
    text, *guidance = again.stderr.splitlines()
    assert text == "Nexus: Nexus: Verification already exists; inspect/reconcile or retry before executing again."
    assert "was left running: its process has exited" in guidance[0] and "the disk was full" in guidance[0]
    observation = json.loads(nexus(project.root, "inspect", "demo", "--json").stdout)["observations"][0]
    hint = observation["runningVerification"]["hint"]
    assert "a save of its results failed: the disk was full" in hint
    assert "its save waited past its bound or met a dead writer.lock" not in hint

    # The way out, followed word for word: the reconcile input the hint gives, then verify again.
    body = re.search(r"FILE holding (\{.*?\}) \(outcome failed", hint)
    assert body is not None
    reconcile = tmp_path / "reconcile.json"
    reconcile.write_text(body.group(1))
    assert nexus(project.root, "reconcile", "demo", "a", "--input", str(reconcile)).returncode == 0
    done = nexus(project.root, "verify", "demo", "a")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("pages", "culprit"), [(0, "writer.lock"), (1, "runs/demo.json")])
def test_a_mutation_on_a_full_disk_names_the_file_and_changes_nothing(
    disk: Disk, tmp_path: Path, pages: int, culprit: str
) -> None:
    project = project_on(disk, tmp_path)
    disk.fill(leave_pages=pages)  # one page: room for writer.lock, none for the run file
    before = tree_bytes(project.root)
    done = nexus(
        project.root,
        "start",
        "demo",
        "a",
        "--input",
        project.input_file({"backend": {"kind": "host", "id": "h", "sessionId": "s"}}),
    )
    assert done.returncode == 1
    path = project.root / ".bmad-plus" / "nexus" / culprit
    assert done.stderr.splitlines() == [
        f"Nexus: Could not write {path} (No space left on device); nothing was changed.",
        "Free space on the filesystem that holds it, then run the command again.",
    ]
    assert tree_bytes(project.root) == before


def test_a_refused_recover_lock_leaves_no_lock_recovery_directory(disk: Disk, tmp_path: Path) -> None:
    project = project_on(disk, tmp_path)
    lock_hash = project.hand_lock(dead_pid())
    disk.fill(leave_pages=1)  # room for recovery.lock, none for the receipt
    before = tree_bytes(project.root)
    body = {"expectedHash": lock_hash, "ownerStopped": True, "note": "the owner had exited"}
    done = nexus(project.root, "recover-lock", "--input", project.input_file(body))
    assert done.returncode == 1
    assert re.match(
        r"Nexus: Could not write \S+/lock-recovery/[0-9a-f-]+\.json \(No space left on device\)", done.stderr
    )
    assert not (project.root / ".bmad-plus" / "nexus" / "lock-recovery").exists()
    assert tree_bytes(project.root) == before


def test_schedule_commands_name_the_full_disk_not_a_second_rollback(disk: Disk, tmp_path: Path) -> None:
    project: ScheduledProject = on_disk(ScheduledProject, disk, tmp_path)
    schedule = project.add("--every", "1h")
    disk.fill()
    before = tree_bytes(project.root)
    for args in (("add", "demo", "--every", "2h"), ("run", schedule["id"])):
        done = project.schedule(*args, ok=False)
        assert done.returncode == 1
        assert done.stderr.splitlines()[0] == (
            "Nexus: The schedules database could not be written: the disk that holds it is full "
            "(SQLite: database or disk is full); nothing was changed."
        ), done.stderr
    assert tree_bytes(project.root) == before


def test_the_scheduler_keeps_running_on_a_full_disk_and_fires_once_space_is_back(disk: Disk, tmp_path: Path) -> None:
    project: ScheduledProject = on_disk(ScheduledProject, disk, tmp_path)
    schedule = project.add("--every", "1h", clock=T0)
    disk.fill()
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log, f"{T0 + 3600_000}@0")
    try:
        until(lambda: any(e["type"] == "scheduler-error" for e in events_in(log)), timeout=60, what="the error event")
        error = next(e for e in events_in(log) if e["type"] == "scheduler-error")
        assert error["project"] == str(project.root) and error["retryIn"] == 5
        assert "could not be written: the disk that holds it is full" in error["error"]
        assert runner.poll() is None, "the scheduler exited on a full disk"
        disk.free()
        until(lambda: finished_events(log), timeout=120, what="the occurrence once space is back")
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)
    assert runner.returncode == 0
    [occurrence] = project.runs(schedule["id"])
    assert occurrence["status"] == "fired"


def test_a_refused_verify_of_the_scheduler_is_recorded_as_refused(tmp_path: Path) -> None:
    project = ScheduledProject(tmp_path)
    project.create(task_def("a"))
    project.start("a")
    project.write("a")
    project.record("a")
    project.write("a", "done, then edited\n")  # verify refuses: the artifacts changed after the result
    schedule = project.add("--every", "1h", "--verify", clock=T0)
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log, f"{T0 + 3600_000}@0")
    try:
        until(lambda: finished_events(log), timeout=120, what="the occurrence")
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)
    [occurrence] = project.runs(schedule["id"])
    assert occurrence["status"] == "failed"
    assert occurrence["reason"].endswith(
        "; verify a refused: Nexus: Artifacts changed after the worker result; reconcile the current result first."
    ), occurrence["reason"]
    assert "verified a: None" not in occurrence["reason"]
