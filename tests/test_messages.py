"""Messages a new user tripped on (issue 13, items 8, 9, 10 and 21): the reference's message
exactly (issue 23), then, as the hint, in plain words where and what; no Python spelling of a
JSON value in human text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import run_cli
from project_kit import Project, plan, task_def

from nexus_core.words import json_word
from nexus_tui.logic import operations

USAGE = (
    "Use nexus create --plan FILE, inspect RUN, or "
    "start|launch|collect|record|reconcile|verify|retry|cancel|accept RUN TASK."
)


def create_refusal(project: Project, value: dict[str, Any]) -> tuple[str, str | None]:
    """(error, hint) of ``nexus create`` for ``value``: the --json envelope's, which the human
    form prints as its first stderr line (``Nexus: `` + error) and the lines after it."""
    path = project.input_file("plan", value)
    human = run_cli("create", "--plan", path, "-d", project.dir)
    assert (human.returncode, human.stdout) == (1, "")
    machine = run_cli("create", "--plan", path, "--json", "-d", project.dir)
    assert machine.returncode == 1
    envelope = json.loads(machine.stdout)
    assert list(envelope)[:3] == ["schemaVersion", "status", "error"]
    error, hint = envelope["error"], envelope.get("hint")
    assert human.stderr == f"Nexus: {error}\n" + (f"{hint}\n" if hint else "")
    assert not (project.root / ".bmad-plus").exists()
    return error, hint


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path / "project")


# ----------------------------------------------------------------- item 8: where in the plan


def test_an_execution_without_input_names_its_place(project: Project) -> None:
    execution = {"adapter": "command", "command": "/bin/sh", "args": []}
    value = plan("r1", task_def("a"), task_def("b"), task_def("c", execution=execution))
    assert create_refusal(project, value) == (
        "Nexus: Relative path must be a nonempty bounded string.",
        "At tasks[2].execution.input (task c).",
    )


@pytest.mark.parametrize(
    ("overrides", "expected", "where"),
    [
        ({"scope": ["out/a", "../elsewhere"]}, "Nexus: Unsafe relative path: ../elsewhere", "tasks[0].scope[1]"),
        ({"artifacts": [""]}, "Nexus: Relative path must be a nonempty bounded string.", "tasks[0].artifacts[0]"),
        (
            {"dependsOn": ["Not An Id"]},
            "Nexus: ID must use 1-64 lowercase letters, numbers, _ or -.",
            "tasks[0].dependsOn[0]",
        ),
        (
            {"checks": [{"id": "c", "command": "/bin/sh", "args": [], "cwd": "missing"}]},
            "Nexus: Directory is missing: missing",
            "tasks[0].checks[0].cwd",
        ),
        (
            {"checks": [{"id": "c", "command": "sh", "args": []}]},
            "Nexus: Check command must be node or an absolute executable path.",
            "tasks[0].checks[0].command",
        ),
    ],
    ids=["scope-item", "artifact-item", "dependency", "check-cwd", "check-command"],
)
def test_every_plan_error_that_names_no_field_says_where(
    project: Project, overrides: dict[str, Any], expected: str, where: str
) -> None:
    """The reference's message exactly (issue 23: no suffix glued to it), where in the plan as the hint."""
    error, hint = create_refusal(project, plan("r1", task_def("a", **overrides)))
    assert (error, hint) == (expected, f"At {where} (task a).")


def test_a_plan_error_that_names_its_field_is_unchanged(project: Project) -> None:
    error = create_refusal(project, plan("r1", task_def("a"), task_def("b", maxAttempts=11)))
    assert error == ("Nexus: maxAttempts must be between 1 and 10.", None)


def test_an_invalid_task_id_is_never_quoted_as_the_task(project: Project) -> None:
    value = plan("r1", task_def("a", scope=["/abs"]))
    value["tasks"][0]["id"] = "\x1b[2J"
    error = create_refusal(project, value)
    assert error == ("Nexus: Task ID must use 1-64 lowercase letters, numbers, _ or -.", None)


# ----------------------------------------------------------------- item 9: an unusable project path


def test_a_project_directory_that_is_a_file(tmp_path: Path) -> None:
    target = tmp_path / "passwd"
    target.write_text("root:x:0:0\n")
    result = run_cli("inspect", "-d", str(target))
    assert result.returncode == 1
    assert result.stderr == (
        f"Nexus: Adapter parent is not a directory: {target}\n"
        f"The project directory {target} is a file, not a directory.\n"
    )
    envelope = json.loads(run_cli("inspect", "--json", "-d", str(target)).stdout)
    assert envelope["error"] == f"Adapter parent is not a directory: {target}"
    assert envelope["hint"] == f"The project directory {target} is a file, not a directory."


@pytest.mark.parametrize("args", [["inspect"], ["inspect", "r1"], ["create", "--plan", "PLAN"]])
def test_a_state_directory_that_is_a_file(tmp_path: Path, args: list[str]) -> None:
    project = Project(tmp_path / "project")
    state = project.root / ".bmad-plus"
    state.write_text("not a directory")
    words = [project.input_file("plan", plan("r1")) if word == "PLAN" else word for word in args]
    result = run_cli(*words, "-d", project.dir)
    assert result.returncode == 1
    first, *guidance = result.stderr.splitlines()
    assert first == f"Nexus: Adapter parent is not a directory: {state}"
    assert f"nexus keeps its state in the directory {state}/nexus, but {state} is a file" in guidance[0]
    assert state.read_text() == "not a directory"


def test_a_project_path_through_a_symbolic_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    result = run_cli("inspect", "-d", str(link))
    assert result.returncode == 1
    assert result.stderr == (
        f"Nexus: Adapter path contains a symlink or junction: {link}\n{link} is a symbolic link, and nexus "
        f"never follows one in a project path; give the real path instead: {real}\n"
    )


def test_nexus_tui_refuses_an_unusable_state_directory_in_the_same_words(tmp_path: Path) -> None:
    project = Project(tmp_path / "project")
    (project.root / ".bmad-plus").write_text("not a directory")
    expected = run_cli("inspect", "-d", project.dir).stderr
    result = subprocess.run(
        [sys.executable, "-m", "nexus_tui.cli", "-d", project.dir],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    assert (result.returncode, result.stdout, result.stderr) == (1, "", expected)


# ----------------------------------------------------------------- item 10: words, not Python


def test_invalid_json_says_where_without_a_doubled_word(tmp_path: Path) -> None:
    broken = tmp_path / "input.json"
    broken.write_text('{"backend": "unterminated')
    result = run_cli("start", "r1", "a", "--input", str(broken), "-d", str(tmp_path))
    assert result.stderr == (
        f"Nexus: --input file is not valid JSON (Unterminated string starting at line 1 column 13): {broken}\n"
    )
    assert not (tmp_path / ".bmad-plus").exists()


def test_json_values_read_as_json_words() -> None:
    assert [json_word(v) for v in (True, False, None, 0, 1.0, "x", {"a": True})] == [
        "true",
        "false",
        "none",
        "0",
        "1",
        "x",
        '{"a":true}',
    ]
    assert json_word("\x1b]52;c;x\x07") == "\\x1b]52;c;x\\x07"
    # The action log's input summary: a launch with retry, a reconcile's flags.
    assert operations.summarize_input("launch", {"retry": False}) == "retry=false"
    summary = operations.summarize_input("reconcile", {"ownerStopped": True, "retrySafe": None})
    assert summary == "ownerStopped=true, retrySafe=none"


# ----------------------------------------------------------------- item 21: the usage line


def test_the_usage_line_keeps_the_reference_and_names_every_form(tmp_path: Path) -> None:
    """The reference's line exactly, the other forms as the hint (issue 23), a bare nexus: help."""
    more = (
        "Also: nexus recover-lock --input FILE, nexus wait RUN, nexus loop RUN --every INTERVAL,"
        " nexus schedule add|list|show|runs|pause|resume|delete|run, nexus scheduler [-d DIR ...],"
        " nexus report RUN --format markdown|junit|html [-o FILE],"
        " nexus attention [-d DIR ...] [--discover ROOT] [--watch [--exec CMD]],"
        " nexus observe [-d DIR ...] [--json-lines]"
        " (nexus --help shows every option)."
    )
    wrong = run_cli("create", "r1", "-d", str(tmp_path))
    assert (wrong.returncode, wrong.stderr) == (1, f"Nexus: {USAGE}\n{more}\n")
    as_json = run_cli("frobnicate", "r1", "t", "--json", "-d", str(tmp_path))
    assert (
        as_json.stdout
        == json.dumps({"schemaVersion": 1, "status": "error", "error": USAGE, "hint": more}, separators=(",", ":"))
        + "\n"
    )
    bare = run_cli(cwd=tmp_path)
    first, blank, *help_lines = bare.stderr.splitlines()
    assert (bare.returncode, first, blank) == (1, "error: missing required argument 'action'", "")
    assert "Usage: nexus [OPTIONS] ACTION [RUN] [TASK]" in help_lines and "  -h, --help" in " ".join(help_lines)
    assert os.listdir(tmp_path) == []
