"""Issue 22 item 3: a state directory another user owns, or that group or others can write, is
refused by every mutation (naming the directory and the chmod that fixes it; nothing changes)
and shown as a warning by every read (inspect, wait, the dashboard's status bar).

The tests run as root: a directory is handed to another uid with chown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_support import HOST_BACKEND, add_work, make_project, plan_for, tree_bytes, write_json

from nexus_core import engine
from nexus_core.state import store
from nexus_core.state.state_dirs import problems
from nexus_tui.logic.model import ProjectScanner
from nexus_tui.widgets.status_bar import status_text
from nexus_tui.widgets.styles import DEFAULT_STYLES

OTHER_UID = 4242
NEXUS = ".bmad-plus/nexus"
# Each directory a mutation may write under, and how it becomes unsafe.
DIRECTORIES = [".bmad-plus", NEXUS, f"{NEXUS}/runs", f"{NEXUS}/lock-recovery", f"{NEXUS}/receipts/r"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "project")
    add_work(root, "work/a")
    add_work(root, "work/b")
    engine.create_run(str(root), plan_for("r", ["work/a"]))
    for rel in (f"{NEXUS}/lock-recovery", f"{NEXUS}/receipts/r"):
        (root / rel).mkdir(mode=0o700, parents=True)
    return root


def make_unsafe(root: Path, rel: str, how: str) -> Path:
    path = root / rel
    if how == "world-writable":
        os.chmod(path, 0o777)
    else:
        os.chown(path, OTHER_UID, -1)
    return path


def nexus(root: Path, *args: str, input_value: object = None) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "nexus_core.cli", *args, "-d", str(root)]
    if input_value is not None:
        flag = "--plan" if args[0] == "create" else "--input"
        command += [flag, str(write_json(root.parent / f"{args[0]}.json", input_value))]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)


MUTATIONS = {
    "create": (("create",), plan_for("fresh", ["work/b"])),
    "start": (("start", "r", "t0"), {"backend": HOST_BACKEND}),
    "recover-lock": (("recover-lock",), {"expectedHash": "0" * 64, "ownerStopped": True, "note": "checked"}),
}


@pytest.mark.parametrize("how", ["world-writable", "another owner"])
@pytest.mark.parametrize("rel", DIRECTORIES)
@pytest.mark.parametrize("action", list(MUTATIONS))
def test_a_mutation_refuses_an_unsafe_state_directory_and_changes_nothing(
    project: Path, rel: str, how: str, action: str
) -> None:
    path = make_unsafe(project, rel, how)
    before = tree_bytes(project)
    args, value = MUTATIONS[action]
    done = nexus(project, *args, input_value=value)
    assert done.returncode == 1, done.stdout
    first, *guidance = done.stderr.splitlines()
    assert first.startswith(f"Nexus: The state directory {path} is "), first
    problem = "writable by group or others (mode 0777)" if how == "world-writable" else f"owned by uid {OTHER_UID}"
    assert problem in first and first.endswith("Nothing was changed.")
    assert f"chmod go-w {path}" in guidance[0]  # the fix, as a command to paste, on the next line
    assert tree_bytes(project) == before


def test_the_refusal_comes_in_the_json_envelope_too(project: Path) -> None:
    path = make_unsafe(project, f"{NEXUS}/runs", "world-writable")
    done = nexus(project, "start", "r", "t0", "--json", input_value={"backend": HOST_BACKEND})
    envelope = json.loads(done.stdout)
    assert envelope["status"] == "error" and envelope["error"].startswith(f"The state directory {path} is writable")
    assert list(envelope) == ["schemaVersion", "status", "error", "hint"]  # the fix: only in the hint
    assert f"chmod go-w {path}" in envelope["hint"] and "chmod" not in envelope["error"]


def test_schedule_add_refuses_an_unsafe_state_directory(project: Path) -> None:
    make_unsafe(project, NEXUS, "world-writable")
    before = tree_bytes(project)
    done = nexus(project, "schedule", "add", "r", "--every", "1h")
    assert done.returncode == 1
    assert done.stderr.startswith(f"Nexus: The state directory {project / NEXUS} is writable by group or others")
    assert tree_bytes(project) == before


def test_the_core_refuses_before_taking_the_lock(project: Path) -> None:
    make_unsafe(project, f"{NEXUS}/runs", "another owner")
    with pytest.raises(Exception, match="owned by uid 4242"):
        engine.start_task(str(project), "r", "t0", {"backend": HOST_BACKEND})
    assert not (project / NEXUS / "writer.lock").exists()
    assert store.load_run(str(project), "r")["sequence"] == 1


def test_inspect_shows_an_unsafe_directory_as_a_warning(project: Path) -> None:
    path = make_unsafe(project, f"{NEXUS}/runs", "world-writable")
    inventory = json.loads(nexus(project, "inspect", "--json").stdout)
    assert inventory["unsafeStateDirectories"] == [
        {
            "directory": str(path),
            "problem": "writable by group or others (mode 0777)",
            "hint": f"Check its contents, then remove that write access: chmod go-w {path}",
        }
    ]
    view = json.loads(nexus(project, "inspect", "r", "--json").stdout)
    keys = list(view)
    assert keys[-1] == "unsafeStateDirectories" and keys.index("recoveryLock") < keys.index("unsafeStateDirectories")
    human = nexus(project, "inspect", "r")
    assert human.returncode == 0
    assert f"Warning: The state directory {path} is writable by group or others" in human.stdout
    assert f"chmod go-w {path}" in human.stdout


def test_inspect_of_a_safe_project_has_no_such_key(project: Path) -> None:
    assert problems(str(project)) == []
    assert "unsafeStateDirectories" not in json.loads(nexus(project, "inspect", "r", "--json").stdout)


def test_wait_warns_on_stderr_and_in_its_first_event(project: Path) -> None:
    path = make_unsafe(project, ".bmad-plus", "another owner")
    done = subprocess.run(
        [sys.executable, "-m", "nexus_core.cli", "wait", "r", "--idle-timeout", "1", "--poll", "-d", str(project)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    started = json.loads(done.stdout.splitlines()[0])
    assert started["type"] == "watch-started"
    assert started["unsafeStateDirectories"][0]["directory"] == str(path)
    assert f"nexus wait: warning: The state directory {path} is owned by uid {OTHER_UID}" in done.stderr


def test_the_dashboard_status_bar_shows_the_warning(project: Path) -> None:
    path = make_unsafe(project, f"{NEXUS}/lock-recovery", "world-writable")
    snapshot = ProjectScanner(str(project)).scan()
    assert len(snapshot.unsafe_directories) == 1
    shown = status_text(snapshot, snapshot.scanned_at_ms, DEFAULT_STYLES, True, False, "project").plain
    assert f"The state directory {path} is writable by group or others" in shown
    assert f"chmod go-w {path}" in shown


def test_following_the_advice_lets_the_mutation_through(project: Path) -> None:
    path = make_unsafe(project, f"{NEXUS}/runs", "world-writable")
    done = nexus(project, "start", "r", "t0", input_value={"backend": HOST_BACKEND})
    advice = done.stderr.split("Check its contents, then remove that write access: ")[1].strip()
    subprocess.run(advice, shell=True, check=True, timeout=30)
    assert os.stat(path).st_mode & 0o777 == 0o755
    assert nexus(project, "start", "r", "t0", input_value={"backend": HOST_BACKEND}).returncode == 0
