"""--plan and --input refuse a file another user owns or can write (issue 15, item 2).

A plan's checks run as the operator and an input decides a mutation in their name: a file
planted or editable by someone else must never be used. The tests run as root, so another
owner is made with chown."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from reliability_support import HOST_BACKEND, add_work, make_project, plan_for, run_cli_json, tree_bytes, write_json

from nexus_core import engine

OTHER_UID = 65534


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = make_project(tmp_path / "project")
    add_work(root, "work/a")
    return root


def plan_file(root: Path, mode: int, owner: int | None = None) -> Path:
    path = write_json(root.parent / "plan.json", plan_for("r", ["work/a"]))
    path.chmod(mode)
    if owner is not None:
        os.chown(path, owner, owner)
    return path


@pytest.mark.parametrize(
    ("mode", "owner", "reason"),
    [
        (0o666, None, "group- or world-writable"),
        (0o620, None, "group- or world-writable"),
        (0o602, None, "group- or world-writable"),
        (0o644, OTHER_UID, f"owned by uid {OTHER_UID}, not by the current user"),
        (0o600, OTHER_UID, f"owned by uid {OTHER_UID}, not by the current user"),
    ],
)
def test_plan_another_user_could_write_is_refused(project: Path, mode: int, owner: int | None, reason: str) -> None:
    path = plan_file(project, mode, owner)
    expected = f"--plan file is {reason}; another user could have written it, so it was not used: {path}"
    hint = "Use a copy only you can write."
    code, out, err = run_cli_json(project, "create", plan=path)
    assert (code, out, err) == (1, {"schemaVersion": 1, "status": "error", "error": expected, "hint": hint}, "")
    done = subprocess.run(
        [sys.executable, "-m", "nexus_core.cli", "create", "--plan", str(path), "-d", str(project)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"Nexus: {expected}\n{hint}\n")
    assert tree_bytes(project) == {}  # nothing written: not even the state directory


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o400])
def test_own_plan_not_writable_by_others_is_accepted(project: Path, mode: int) -> None:
    code, out, err = run_cli_json(project, "create", plan=plan_file(project, mode))
    assert (code, err) == (0, "")
    assert out["id"] == "r"


def test_plan_root_owns_is_accepted_from_another_user(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Root can act as anyone already: a system-wide example plan is usable by every user."""
    from nexus_core.cli import inputs

    path = plan_file(project, 0o644, owner=0)
    monkeypatch.setattr(os, "geteuid", lambda: OTHER_UID)
    assert inputs.read_input_file(str(path), "--plan")["id"] == "r"


@pytest.mark.parametrize(("mode", "owner"), [(0o646, None), (0o600, OTHER_UID)])
def test_input_another_user_could_write_is_refused(project: Path, mode: int, owner: int | None) -> None:
    engine.create_run(str(project), plan_for("r", ["work/a"]))
    before = tree_bytes(project)
    path = write_json(project.parent / "start.json", {"backend": HOST_BACKEND})
    path.chmod(mode)
    if owner is not None:
        os.chown(path, owner, owner)
    code, out, _ = run_cli_json(project, "start", "r", "t0", input_file=path)
    assert code == 1
    assert out["error"].startswith("--input file is ")
    assert out["error"].endswith(f"so it was not used: {path}")
    assert out["hint"] == "Use a copy only you can write."
    assert tree_bytes(project) == before
