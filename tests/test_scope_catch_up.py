"""The watcher's catch-up: a watcher started on scopes after their runs were inspected misses
what changed in between; the catch-up re-inspects exactly the runs whose evidence scopes
changed since their last full inspection began, found from each entry's status alone."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from project_kit import Project, plan, task_def

from nexus_core.observe import inspect_run
from nexus_core.view import model
from nexus_core.view.model import ProjectScanner, changed_since


def _past_the_slack(monkeypatch: pytest.MonkeyPatch) -> None:
    """Until everything written so far is older than the slack before now (shrunk to 50 ms so
    the test waits that long, not a second)."""
    monkeypatch.setattr(model, "CHANGE_SLACK_NS", 50_000_000)
    time.sleep(0.1)


def _stale(scanner: ProjectScanner, **scan: object) -> dict[str, bool]:
    snapshot = scanner.scan(**scan)  # type: ignore[arg-type]
    return {view.run_id: view.rows[0].stale for view in snapshot.runs}


@pytest.fixture
def two_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, ProjectScanner]:
    project = Project(tmp_path)
    project.create(plan("r1", task_def("a")))
    project.create(plan("r2", task_def("b")))
    project.accepted("r1", "a")
    project.accepted("r2", "b")
    _past_the_slack(monkeypatch)
    scanner = ProjectScanner(str(tmp_path))
    assert _stale(scanner, everything=True) == {"r1": False, "r2": False}
    assert scanner.scopes_changed(["r1", "r2"]) == set()
    return tmp_path, scanner


def test_a_same_size_edit_with_its_mtime_set_back_is_caught_up(two_runs: tuple[Path, ProjectScanner]) -> None:
    root, scanner = two_runs
    result = root / "out" / "a" / "result.txt"
    before = result.stat()
    result.write_text("ko\n")  # same size
    os.utime(result, ns=(before.st_atime_ns, before.st_mtime_ns))  # mtime as before: ctime moved
    assert _stale(scanner) == {"r1": False, "r2": False}  # a plain look does not see it
    assert scanner.scopes_changed(["r1", "r2"]) == {"r1"}
    assert _stale(scanner, catch_up=True) == {"r1": True, "r2": False}
    assert inspect_run(str(root), "r1")["observations"][0]["stale"] is True
    assert scanner.scopes_changed(["r1", "r2"]) == {"r1"}  # within the slack of its new look


def test_a_protected_resource_outside_every_scope_is_looked_at_too(two_runs: tuple[Path, ProjectScanner]) -> None:
    """The safety pass's look: a protected resource (checks/check.sh, in no task's scope, so no
    watcher of scopes sees it) edited in place, same size, its mtime set back."""
    root, scanner = two_runs
    resource = root / "checks" / "check.sh"
    before = resource.stat()
    text = resource.read_bytes()
    resource.write_bytes(text[:-1] + (b"#" if text[-1:] != b"#" else b" "))
    os.utime(resource, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert scanner.scopes_changed(["r1", "r2"]) == {"r1", "r2"}
    snapshot = scanner.scan(everything=True)
    assert all(view.rows[0].stale or view.needs for view in snapshot.runs)
    assert inspect_run(str(root), "r1")["observations"][0]["stale"] is True


@pytest.mark.parametrize("change", ["add a file deep down", "remove a file", "remove the scope"])
def test_entries_added_or_removed_are_caught_up(two_runs: tuple[Path, ProjectScanner], change: str) -> None:
    root, scanner = two_runs
    scope = root / "out" / "b"
    if change == "add a file deep down":
        (scope / "deep" / "er").mkdir(parents=True)
        (scope / "deep" / "er" / "new.txt").write_text("x")
    elif change == "remove a file":
        (scope / "result.txt").unlink()
    else:
        shutil.rmtree(scope)
    assert scanner.scopes_changed(["r1", "r2"]) == {"r2"}
    assert _stale(scanner, catch_up=True) == {"r1": False, "r2": True}


def test_a_missing_path_counts_as_changed_only_when_its_parent_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "kept").mkdir()
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "kept" / "link").symlink_to(tmp_path / "elsewhere")
    _past_the_slack(monkeypatch)
    since = time.time_ns() - model.CHANGE_SLACK_NS
    assert not changed_since(str(tmp_path / "kept" / "never" / "there"), since)
    (tmp_path / "elsewhere" / "new").write_text("x")
    assert not changed_since(str(tmp_path / "kept"), since)  # a link is an entry, never followed
    (tmp_path / "kept" / "other").write_text("x")
    assert changed_since(str(tmp_path / "kept"), since)
    assert changed_since(str(tmp_path / "kept" / "never" / "there"), since)
