"""The CLI on a run large enough for the plain (orjson) path and for an output past any pipe
buffer: a mutation's process ends without the interpreter's teardown (nexus_core.cli.main._exit),
so what it prints must still arrive whole, with its exit code, and a refusal must still leave
the disk as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_cli
from project_kit import HOST, Project, plan, task_def

from nexus_core.state import canonical, store

TASKS = 200  # the most a plan may hold: a state of a few hundred KiB


@pytest.fixture
def project(tmp_path: Path) -> Project:
    project = Project(tmp_path / "project")
    project.create(plan("big", *(task_def(f"t{index}") for index in range(TASKS))))
    return project


def stored_run(project: Project) -> dict[str, object]:
    envelope = json.loads((project.root / store.run_path("big")).read_bytes())
    assert isinstance(envelope["run"], dict)
    return envelope["run"]


def test_a_mutation_prints_the_whole_run_it_saved(project: Project) -> None:
    assert (project.root / store.run_path("big")).stat().st_size > 128 << 10  # canonical takes orjson
    identity = project.input_file("host", {"backend": HOST})
    done = run_cli("start", "big", "t7", "--input", identity, "--json", "-d", project.dir)
    assert done.returncode == 0, done.stderr
    run = stored_run(project)
    assert done.stdout == canonical.pretty(run) + "\n"
    assert len(done.stdout) > 128 << 10  # past a pipe buffer (64 KiB on Linux)
    assert run["tasks"][7]["attempts"][0]["execution"] == "running"  # type: ignore[index]


def test_a_refusal_prints_its_error_and_changes_nothing(project: Project) -> None:
    identity = project.input_file("host", {"backend": HOST})
    assert run_cli("start", "big", "t7", "--input", identity, "--json", "-d", project.dir).returncode == 0
    before = project.state_tree()
    again = run_cli("start", "big", "t7", "--input", identity, "--json", "-d", project.dir)
    assert again.returncode == 1
    assert json.loads(again.stdout) == {
        "schemaVersion": 1,
        "status": "error",
        "error": "Nexus: Task already has an attempt; inspect or explicitly retry.",
    }
    human = run_cli("start", "big", "t7", "--input", identity, "-d", project.dir)
    assert (human.returncode, human.stdout) == (1, "")
    assert human.stderr == "Nexus: Nexus: Task already has an attempt; inspect or explicitly retry.\n"
    assert project.state_tree() == before
