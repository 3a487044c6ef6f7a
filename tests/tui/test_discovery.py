"""The discovery walk and the urgency summary (pure logic: nexus_tui.logic.discovery)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dashboard_kit import small_project

from nexus_core.hostinfo import hostname
from nexus_tui.logic.demo import DemoInfo, write_dead_writer_lock
from nexus_tui.logic.discovery import discover_projects, order, summarize
from nexus_tui.logic.model import ProjectScanner


def project(path: Path) -> str:
    (path / ".bmad-plus" / "nexus").mkdir(parents=True)
    return str(path.resolve())


def test_finds_every_project_down_to_the_depth_and_nothing_below(tmp_path: Path) -> None:
    top = project(tmp_path)
    shallow = project(tmp_path / "a")
    nested = project(tmp_path / "a" / "sub" / "inner")  # a project inside a project is one too
    at_limit = project(tmp_path / "1" / "2" / "3" / "4")
    too_deep = project(tmp_path / "x" / "2" / "3" / "4" / "5")
    assert discover_projects(str(tmp_path)) == sorted([top, shallow, nested, at_limit])
    assert too_deep in discover_projects(str(tmp_path), max_depth=5)
    assert discover_projects(str(tmp_path), max_depth=0) == [top]


def test_skips_version_control_dependencies_and_virtual_environments(tmp_path: Path) -> None:
    kept = project(tmp_path / "app")
    for skipped in (".git", "node_modules", ".venv", "venv", "app/node_modules/pkg"):
        project(tmp_path / skipped / "inside")
    environment = tmp_path / "any-name-env"
    environment.mkdir()
    (environment / "pyvenv.cfg").write_text("home = /usr/bin\n")
    project(environment / "lib" / "site")
    assert discover_projects(str(tmp_path)) == [kept]


def test_follows_no_symlink_out_of_the_root(tmp_path: Path) -> None:
    outside = project(tmp_path / "outside" / "elsewhere")
    root = tmp_path / "root"
    kept = project(root / "real")
    (root / "link").symlink_to(Path(outside).parent, target_is_directory=True)
    (root / "loop").symlink_to(root, target_is_directory=True)
    fake = root / "fake"
    fake.mkdir()
    (fake / ".bmad-plus").symlink_to(Path(outside) / ".bmad-plus", target_is_directory=True)
    assert discover_projects(str(root)) == [kept]


def test_unreadable_directories_are_skipped_without_failing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kept = project(tmp_path / "ok")
    project(tmp_path / "locked" / "inner")
    real_scandir = os.scandir
    locked = str(tmp_path / "locked")

    def scandir(path: str) -> object:
        # Root reads through permission bits, so the refusal is simulated where it happens.
        if os.fspath(path) == locked:
            raise PermissionError(13, "Permission denied", path)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    assert discover_projects(str(tmp_path)) == [kept]
    assert discover_projects(str(tmp_path / "missing")) == []


def test_summary_counts_what_needs_an_operator(frozen_demo: DemoInfo) -> None:
    snapshot = ProjectScanner(frozen_demo.directory).scan(everything=True)
    summary = summarize(snapshot)
    assert (summary.runs, summary.tasks, summary.accepted) == (3, 11, 6)
    # The counts are the classifier's needs, one per task: the overdue backfill, the blocked
    # patch (overdue too, but blocked is what it needs), the cancelled cleanup to reconcile, the
    # stale release-notes. The lock names another host, whose pids cannot be probed from here:
    # not counted as dead.
    assert (summary.overdue, summary.stale, summary.blocked, summary.ambiguous, summary.dead_lock) == (1, 1, 1, 1, 0)
    assert summary.unreadable == 0
    assert summary.total == len(snapshot.needs) == 4
    assert [kind for kind, _ in summary.needs()] == ["to reconcile", "overdue", "blocked", "stale"]


def test_a_dead_lock_on_this_host_counts(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")
    assert summarize(ProjectScanner(root).scan(everything=True)).dead_lock == 0
    write_dead_writer_lock(root, hostname())
    summary = summarize(ProjectScanner(root).scan(everything=True))
    assert summary.dead_lock == 1
    assert summary.needs()[0] == ("dead lock", 1)


def test_urgency_order_puts_unreadable_first_and_quiet_projects_last(tmp_path: Path, frozen_demo: DemoInfo) -> None:
    quiet = small_project(tmp_path / "quiet")
    broken = small_project(tmp_path / "broken")
    state = Path(broken, ".bmad-plus/nexus/runs/live.json")
    state.write_bytes(state.read_bytes()[:50])
    summaries = {
        index: summarize(ProjectScanner(directory).scan(everything=True))
        for index, directory in enumerate([quiet, frozen_demo.directory, broken])
    }
    assert summaries[2].unreadable == 1
    assert summaries[0].needs() == []
    labels = {0: "quiet", 1: "demo", 2: "broken"}
    assert order(summaries, labels) == [2, 1, 0]


def test_the_logic_imports_no_widget_library() -> None:
    probe = (
        "import sys, nexus_tui.logic.discovery\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
