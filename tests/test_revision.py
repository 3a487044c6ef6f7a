"""baseline.revision (and a verification's revision): HEAD's commit when the project directory is
the top level of a git work tree with a commit, else null (SPEC 5.0.7)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from project_kit import Project, plan, task_def

from nexus_core.state import store

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
}


def git(directory: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(directory), *args], env=GIT_ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def started_revision(root: Path) -> object:
    project = Project(root)
    project.create(plan("r1", task_def("a")))
    attempt = project.start("r1", "a")
    run = store.load_run(project.dir, "r1")
    found = Project.latest(run, "a")
    assert found["id"] == attempt
    return found["baseline"]["revision"]


def test_the_top_level_of_a_work_tree_with_a_commit_records_head(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    git(root, "init", "-q")
    (root / "README").write_text("x\n")
    git(root, "add", "README")
    git(root, "commit", "-q", "-m", "first")
    assert started_revision(root) == git(root, "rev-parse", "HEAD")


def test_a_work_tree_without_a_commit_records_null(tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    root.mkdir()
    git(root, "init", "-q")
    assert started_revision(root) is None


def test_a_subdirectory_of_a_work_tree_records_null(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    top.mkdir()
    git(top, "init", "-q")
    (top / "README").write_text("x\n")
    git(top, "add", "README")
    git(top, "commit", "-q", "-m", "first")
    assert started_revision(top / "sub") is None


def test_a_directory_outside_any_work_tree_records_null(tmp_path: Path) -> None:
    if subprocess.run(["git", "-C", str(tmp_path), "rev-parse"], capture_output=True).returncode == 0:
        pytest.skip("the temporary directory is inside a git work tree")
    assert started_revision(tmp_path / "plain") is None


def test_a_git_directory_whose_core_worktree_is_the_project_records_head(tmp_path: Path) -> None:
    # No .git entry anywhere above the project: git finds the repository as the git directory
    # the project sits in (its HEAD), whose core.worktree names the project.
    source = tmp_path / "source"
    source.mkdir()
    git(source, "init", "-q")
    (source / "README").write_text("x\n")
    git(source, "add", "README")
    git(source, "commit", "-q", "-m", "first")
    gitdir = tmp_path / "repo.git"
    git(tmp_path, "clone", "-q", "--bare", str(source), str(gitdir))
    root = gitdir / "work"
    root.mkdir()
    git(gitdir, "config", "core.bare", "false")
    git(gitdir, "config", "core.worktree", str(root))
    assert started_revision(root) == git(source, "rev-parse", "HEAD")


def test_a_linked_worktree_records_its_head(tmp_path: Path) -> None:
    main = tmp_path / "main"
    main.mkdir()
    git(main, "init", "-q")
    (main / "README").write_text("x\n")
    git(main, "add", "README")
    git(main, "commit", "-q", "-m", "first")
    linked = tmp_path / "linked"
    git(main, "worktree", "add", "-q", "--detach", str(linked))
    assert (linked / ".git").is_file()
    assert started_revision(linked) == git(main, "rev-parse", "HEAD")


def test_no_git_process_runs_where_git_can_find_no_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for directory in [tmp_path, *tmp_path.parents]:
        if (directory / ".git").exists() or (directory / "HEAD").exists():
            pytest.skip(f"{directory} may hold a repository")
    calls = tmp_path / "git-calls"
    fake = tmp_path / "bin" / "git"
    fake.parent.mkdir()
    fake.write_text(f'#!/bin/sh\necho "$@" >> {calls}\nexit 128\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert started_revision(tmp_path / "plain") is None
    assert not calls.exists()
    # A .git entry above the project (whatever it holds) is for git to judge.
    (tmp_path / "other" / ".git").mkdir(parents=True)
    assert started_revision(tmp_path / "other" / "project") is None
    assert calls.read_text().count("rev-parse") == 1
