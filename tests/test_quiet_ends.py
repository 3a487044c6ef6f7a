"""Issue 24's small things about how a command ends: output to a closed pipe (``nexus inspect …
--json | head -c 20``) ends it quietly with 141, the status of a command SIGPIPE killed (what
the shell shows for ``cat`` in that pipeline), never a traceback; ``nexus wait`` ended by
SIGTERM says the same line as for Ctrl+C and exits 143."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from project_kit import Project, plan, task_def
from supervise_kit import Project as WaitProject
from supervise_kit import nexus_command, until
from supervise_kit import task_def as wait_task

CLI = [sys.executable, "-m", "nexus_core.cli"]


@pytest.fixture(scope="module")
def big_run(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """A run whose inspection is far larger than a pipe's buffer (64 KiB)."""
    project = Project(tmp_path_factory.mktemp("pipe") / "project")
    project.create(plan("r1", *[task_def(f"t{index:03d}") for index in range(80)], max_parallel=32))
    return project


def head_c(args: list[str], count: int = 20) -> tuple[bytes, subprocess.Popen[bytes]]:
    """``nexus ARGS | head -c COUNT``: read COUNT bytes, then close the pipe as head does."""
    child = subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdout is not None and child.stderr is not None
    first = child.stdout.read(count)
    child.stdout.close()
    child.wait(timeout=60)
    return first, child


def test_a_closed_pipe_ends_the_command_quietly(big_run: Project) -> None:
    first, child = head_c(["inspect", "r1", "--json", "-d", big_run.dir])
    assert first == b'{\n  "schemaVersion": 1'[:20]
    assert child.stderr is not None
    errors = child.stderr.read().decode()
    assert (child.returncode, errors) == (141, ""), errors


def test_a_closed_pipe_ends_wait_quietly_too(tmp_path: Path) -> None:
    project = WaitProject(tmp_path)
    project.create(wait_task("a"))
    project.start("a")  # running: wait keeps watching until its idle timeout, then writes its summary
    first, child = head_c(["wait", project.run_id, "--json", "--idle-timeout", "1", "-d", str(project.root)])
    assert first.startswith(b'{"')
    assert child.stderr is not None
    errors = child.stderr.read().decode()
    assert child.returncode == 141 and "Traceback" not in errors, errors


def test_wait_ended_by_sigterm_says_so_and_exits_143(tmp_path: Path) -> None:
    project = WaitProject(tmp_path)
    project.create(wait_task("a"))
    project.start("a")
    child = subprocess.Popen(
        nexus_command("wait", project.run_id, "--idle-timeout", "600", "-d", str(project.root)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stderr is not None
    lines: list[str] = []
    until(lambda: lines.append(child.stdout.readline()) or bool(lines[-1]), what="the first event")
    child.send_signal(signal.SIGTERM)
    errors = child.stderr.read()
    assert child.wait(timeout=60) == 143
    assert errors.splitlines()[-1] == "nexus wait: interrupted; nothing was changed."
    assert "Traceback" not in errors
