"""Issue 24 item 2, "Stop means stop": a check (or a launched process) whose descendants ignore
SIGTERM is stopped with its whole process group: SIGTERM, then SIGKILL after the grace, whether
the stop comes from the core API's ``should_stop`` (the dashboard's Stop), from Ctrl+C on
``nexus verify`` / ``nexus launch``, or from the check's timeout. The recorded verification says
what was stopped.

Every wait here is for a condition (a pid file written by the check, the group gone), bounded by
a generous deadline that only detects a hang; no test asserts a duration."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, cast

import process_support
from project_kit import Project, plan, task_def

from nexus_core import engine, observe
from nexus_core.backend import process
from nexus_core.backend.checks import TIMEOUT_TERMINATION
from nexus_core.engine import INTERRUPTED_CHECK, STOPPED_CHECK

HANG_SECONDS = 60.0  # only a hang takes this long

# The check (or worker) starts a grandchild that ignores SIGTERM and holds the pipes, writes both
# pids, then waits: SIGTERM to the direct child alone would leave the grandchild running.
TREE_SCRIPT = """\
sh -c 'trap "" TERM; echo $$ > "$1.tmp"; mv "$1.tmp" "$1"; exec sleep 600' grandchild "{grandchild}" &
echo $$ > "{child}.tmp"; mv "{child}.tmp" "{child}"
cat > /dev/null
wait
"""


class Tree:
    """The pid files of one check's process tree."""

    def __init__(self, where: Path) -> None:
        where.mkdir(parents=True, exist_ok=True)
        self.child = where / "child.pid"
        self.grandchild = where / "grandchild.pid"

    def script(self) -> str:
        return TREE_SCRIPT.format(child=self.child, grandchild=self.grandchild)

    def started(self) -> tuple[int, int]:
        """(child pid, grandchild pid) once both are running."""
        deadline = time.monotonic() + HANG_SECONDS
        while not (self.child.exists() and self.grandchild.exists()):
            assert time.monotonic() < deadline, "the check's process tree never started"
            time.sleep(0.02)  # polls the files the check writes (a bounded wait for a condition)
        return int(self.child.read_text()), int(self.grandchild.read_text())


def live_members(pgid: int) -> list[int]:
    """The processes of group ``pgid`` that have not exited (a zombie has: it only awaits reaping)."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        state, group = fields[0], int(fields[2])
        if group == pgid and state not in ("Z", "X"):
            members.append(int(entry))
    return members


def running(pid: int) -> bool:
    """Whether ``pid`` has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def assert_tree_gone(child: int, grandchild: int) -> None:
    """The check's grandchild and every process of the check's group have exited (SIGKILL's
    delivery is asynchronous: waited for, up to a hang)."""
    deadline = time.monotonic() + HANG_SECONDS
    while running(grandchild) or live_members(child):
        assert time.monotonic() < deadline, f"still running: {grandchild}, group {child}: {live_members(child)}"
        time.sleep(0.02)


def _project(tmp_path: Path, timeout_ms: int = 300000) -> tuple[Project, Tree]:
    project = Project(tmp_path / "project")
    tree = Tree(tmp_path / "pids")
    (project.root / "checks" / "tree.sh").write_text(tree.script())
    stubborn = task_def(
        "a",
        resources=["checks/check.sh", "checks/tree.sh"],
        checks=[
            {"id": "tree", "command": "/bin/sh", "args": ["checks/tree.sh"], "cwd": ".", "timeoutMs": timeout_ms},
            {"id": "never", "command": "/bin/sh", "args": ["checks/check.sh", "a"], "cwd": ".", "timeoutMs": 30000},
        ],
    )
    project.create(plan("r1", stubborn))
    project.completed("r1", "a")
    return project, tree


def _verification(project: Project) -> dict[str, Any]:
    inspection = cast(dict[str, Any], observe.inspect_run(project.dir, "r1"))
    return cast(dict[str, Any], inspection["tasks"][0]["attempts"][0]["verification"])


def test_should_stop_stops_the_checks_whole_process_group(tmp_path: Path) -> None:
    project, tree = _project(tmp_path)
    stop = threading.Event()
    outcome: list[BaseException | None] = []

    def verify() -> None:
        try:
            engine.verify_task(project.dir, "r1", "a", should_stop=stop.is_set)
        except BaseException as error:  # reported to the test thread
            outcome.append(error)
        else:
            outcome.append(None)

    worker = threading.Thread(target=verify, daemon=True)
    worker.start()
    child, grandchild = tree.started()
    stop.set()
    worker.join(HANG_SECONDS)
    assert not worker.is_alive(), "verify still waits for the check's grandchild"
    assert outcome == [None]
    assert_tree_gone(child, grandchild)  # the check led its own group: its pgid is its pid
    verification = _verification(project)
    assert verification["status"] == "ambiguous"
    assert [c["id"] for c in verification["checks"]] == ["tree"]
    receipt = verification["checks"][0]
    assert receipt["error"] == (
        f"{STOPPED_CHECK}: the check's process group {child} got SIGTERM, then SIGKILL after 1 s."
    )
    assert receipt["signal"] == "SIGTERM" and receipt["timedOut"] is False
    assert observe.inspect_run(project.dir, "r1")["tasks"][0]["integration"] == "rejected"


def test_ctrl_c_on_nexus_verify_stops_the_checks_whole_process_group(tmp_path: Path) -> None:
    project, tree = _project(tmp_path)
    # A terminal sends SIGINT to its foreground process group: verify's own (the check has its own).
    verify = subprocess.Popen(
        [sys.executable, "-m", "nexus_core.cli", "verify", "r1", "a", "-d", project.dir],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        child, grandchild = tree.started()
        os.killpg(verify.pid, signal.SIGINT)
        out, err = verify.communicate(timeout=HANG_SECONDS)
    finally:
        if verify.poll() is None:
            verify.kill()
            verify.communicate()
    assert verify.returncode == 1, err
    assert "verification=ambiguous" in out
    assert_tree_gone(child, grandchild)
    receipt = _verification(project)["checks"][0]
    assert receipt["error"] == (
        f"{INTERRUPTED_CHECK}: the check's process group {child} got SIGTERM, then SIGKILL after 1 s."
    )


def test_a_check_that_times_out_is_killed_with_its_process_group(tmp_path: Path) -> None:
    project, tree = _project(tmp_path, timeout_ms=1500)
    finished = threading.Event()
    worker = threading.Thread(target=lambda: (engine.verify_task(project.dir, "r1", "a"), finished.set()), daemon=True)
    worker.start()
    child, grandchild = tree.started()
    worker.join(HANG_SECONDS)
    assert finished.is_set(), "verify never returned"
    assert_tree_gone(child, grandchild)
    verification = _verification(project)
    assert verification["status"] == "ambiguous"
    receipt = verification["checks"][0]
    assert (receipt["timedOut"], receipt["signal"], receipt["exitCode"]) == (True, "SIGKILL", None)
    assert receipt["termination"] == TIMEOUT_TERMINATION


def test_the_output_events_are_what_the_receipt_stores(tmp_path: Path) -> None:
    """The check's output reaches ``progress`` piece by piece as it is read; joined, the pieces
    are exactly the stored stdout and stderr (the receipt is unchanged by the events)."""
    project = Project(tmp_path / "project")
    (project.root / "checks" / "talk.sh").write_text(
        'i=0\nwhile [ $i -lt 50 ]; do echo "line $i"; echo "err $i" >&2; i=$((i + 1)); done\n'
        "printf 'caf\\303\\251 \\033[31m'\ngrep -q ok out/a/result.txt\n"
    )
    talk = task_def(
        "a",
        resources=["checks/check.sh", "checks/talk.sh"],
        checks=[{"id": "talk", "command": "/bin/sh", "args": ["checks/talk.sh"], "cwd": ".", "timeoutMs": 30000}],
    )
    project.create(plan("r1", talk))
    project.completed("r1", "a")
    events: list[dict[str, Any]] = []
    engine.verify_task(project.dir, "r1", "a", progress=lambda event: events.append(dict(event)))
    receipt = _verification(project)["checks"][0]
    assert _verification(project)["status"] == "passed"
    output = [e for e in events if e["event"] == "check-output"]
    assert {(e["check"], e["index"]) for e in output} == {("talk", 0)}
    for stream in ("stdout", "stderr"):
        assert "".join(e["text"] for e in output if e["stream"] == stream) == receipt[stream]
    assert receipt["stdout"].endswith("café \x1b[31m")
    kinds = [e["event"] for e in events]
    assert kinds.index("check-spawned") < kinds.index("check-output") < kinds.index("check-finished")


# ----------------------------------------------------------------- the process backend (launch)


def _launch_project(tmp_path: Path) -> tuple[Path, Tree]:
    root = process_support.make_project(tmp_path / "project")
    tree = Tree(tmp_path / "pids")
    process_support.write(root / "workers" / "tree.sh", tree.script())
    task = process_support.command_task(
        "t", "tree", execution={"args": ["workers/tree.sh"], "resources": ["workers/tree.sh"]}
    )
    process_support.create(root, "r", [task])
    return root, tree


def test_should_stop_stops_a_launched_process_group(tmp_path: Path) -> None:
    root, tree = _launch_project(tmp_path)
    stop = threading.Event()
    finished = threading.Event()

    def launch() -> None:
        process.launch_task(str(root), "r", "t", {}, should_stop=stop.is_set)
        finished.set()

    worker = threading.Thread(target=launch, daemon=True)
    worker.start()
    child, grandchild = tree.started()
    stop.set()
    worker.join(HANG_SECONDS)
    assert finished.is_set(), "launch never returned"
    assert_tree_gone(child, grandchild)
    receipt = process_support.latest(root, "r", "t")["process"]["receipt"]
    assert (receipt["reason"], receipt["directChildSignalled"], receipt["outcome"]) == (
        "supervisor-interrupted",
        True,
        "ambiguous",
    )


def test_ctrl_c_on_nexus_launch_stops_its_process_group(tmp_path: Path) -> None:
    root, tree = _launch_project(tmp_path)
    launch = subprocess.Popen(
        [*process_support.CLI, "launch", "r", "t", "-d", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        child, grandchild = tree.started()
        os.killpg(launch.pid, signal.SIGINT)
        launch.communicate(timeout=HANG_SECONDS)
    finally:
        if launch.poll() is None:
            launch.kill()
            launch.communicate()
    assert launch.returncode == 1
    assert_tree_gone(child, grandchild)
    receipt = process_support.latest(root, "r", "t")["process"]["receipt"]
    assert receipt["reason"] == "supervisor-interrupted" and receipt["outcome"] == "ambiguous"


def test_a_launchs_output_events_are_what_its_receipt_captured(tmp_path: Path) -> None:
    root = process_support.make_project(tmp_path / "project")
    process_support.create(root, "r", [process_support.command_task("t", "loud")])
    events: list[dict[str, Any]] = []
    process.launch_task(str(root), "r", "t", {}, progress=lambda event: events.append(dict(event)))
    output = process_support.latest(root, "r", "t")["process"]["receipt"]["output"]
    for stream in ("stdout", "stderr"):
        shown = "".join(e["text"] for e in events if e["event"] == "output" and e["stream"] == stream)
        assert shown == output[stream]["text"]
    assert output["stdout"]["text"].count("\n") == 200
    kinds = [e["event"] for e in events]
    assert kinds.index("spawned") < kinds.index("output") < kinds.index("finished")
