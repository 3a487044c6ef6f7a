"""File hashing behind snapshots: the dashboard's display-only hash cache and its key, and a
file swapped for a FIFO between the path check and the open."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from nexus_core import snapshots
from nexus_core.errors import NexusError
from nexus_core.snapshots import file_hash, files_snapshot, observational_hashes


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _displayed(root: Path, cache: dict[tuple[int, ...], str]) -> str | None:
    with observational_hashes(cache):
        return file_hash(str(root), "out/a.txt", True)


def _after_a_timestamp_tick(path: Path) -> None:
    """Until the file system's clock has moved past path's ctime: timestamps are coarse, and a
    change within the same tick could leave them all equal (bounded, waits for the condition)."""
    probe = path.with_name(".clock-probe")
    ctime = path.stat().st_ctime_ns
    for _ in range(100_000):
        probe.write_bytes(b"")
        if probe.stat().st_ctime_ns > ctime:
            probe.unlink()
            return
    raise AssertionError("the file system clock did not move")


def _older_than_the_racy_window(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Until ``path``'s timestamps are outside the racy window (shrunk to 50 ms so the test
    waits that long, not 2 s): only then is its hash remembered (bounded, waits for it)."""
    monkeypatch.setattr(snapshots, "RACY_NANOSECONDS", 50_000_000)
    info = path.stat()
    newest = max(info.st_mtime_ns, info.st_ctime_ns)
    for _ in range(100_000):
        if time.time_ns() - snapshots.RACY_NANOSECONDS > newest:
            return
        time.sleep(0.001)
    raise AssertionError("the clock did not move past the racy window")


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.txt").write_bytes(b"one\n")
    return tmp_path


def test_an_unchanged_file_reuses_its_cached_hash(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _older_than_the_racy_window(project / "out" / "a.txt", monkeypatch)
    cache: dict[tuple[int, ...], str] = {}
    assert _displayed(project, cache) == _sha(b"one\n")
    assert len(cache) == 1
    # While the key matches, the cache answers (a planted value proves the file is not read).
    key = next(iter(cache))
    cache[key] = "cached"
    assert _displayed(project, cache) == "cached"
    # Mutations (verify, accept) never run inside observational_hashes: they always hash.
    assert file_hash(str(project), "out/a.txt", True) == _sha(b"one\n")
    assert files_snapshot(str(project), ["out/a.txt"]) == {"out/a.txt": _sha(b"one\n")}


@pytest.mark.parametrize(
    "change",
    ["size", "same-size-rewrite-with-mtime-restored", "replaced-by-rename-same-size-and-mtime", "chmod-only"],
)
def test_a_changed_file_misses_the_cache_even_with_its_size_and_mtime_restored(
    project: Path, change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: display hashes are cached by (device, inode, size, mtime, ctime): the inode and
    ctime catch the edits that keep the size and mtime."""
    path = project / "out" / "a.txt"
    _older_than_the_racy_window(path, monkeypatch)
    cache: dict[tuple[int, ...], str] = {}
    _displayed(project, cache)
    assert len(cache) == 1
    for key in cache:
        cache[key] = "cached"  # a stale answer, if the key were reused
    _after_a_timestamp_tick(path)
    before = path.stat()
    expected = b"one\n"
    if change == "size":
        expected = b"longer\n"
        path.write_bytes(expected)
    elif change == "same-size-rewrite-with-mtime-restored":
        expected = b"two\n"
        path.write_bytes(expected)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif change == "replaced-by-rename-same-size-and-mtime":
        expected = b"two\n"
        other = path.with_name("new.txt")
        other.write_bytes(expected)
        os.utime(other, ns=(before.st_atime_ns, before.st_mtime_ns))
        os.replace(other, path)
    else:
        path.chmod(0o640)
    assert _displayed(project, cache) == _sha(expected)


def test_a_file_stamped_within_the_racy_window_is_hashed_again_at_every_look(project: Path) -> None:
    """README: as git does with racily clean entries, a file whose mtime or ctime is within the
    timestamp granularity of the moment of its hash is not remembered (the file system's coarse
    clock could stamp a same-size rewrite with the very same key)."""
    cache: dict[tuple[int, ...], str] = {}
    assert _displayed(project, cache) == _sha(b"one\n")
    assert cache == {}


def test_a_same_size_edit_within_the_same_second_changes_the_answer(project: Path) -> None:
    """The issue's case: the file rewritten at once, same size, its mtime set back to the very
    same value: the displayed hash is the new content's, look after look."""
    path = project / "out" / "a.txt"
    cache: dict[tuple[int, ...], str] = {}
    before = path.stat()
    assert _displayed(project, cache) == _sha(b"one\n")
    path.write_bytes(b"two\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size and path.stat().st_mtime_ns == before.st_mtime_ns
    assert _displayed(project, cache) == _sha(b"two\n")
    assert _displayed(project, cache) == _sha(b"two\n")


def test_a_file_swapped_for_a_fifo_after_the_path_check_never_hangs_a_snapshot(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """README: hashing opens each file non-blocking and checks with fstat that it is a regular
    file. The swap is made at the worst moment: inside the open of the file itself, after every
    check of its path."""
    path = project / "out" / "a.txt"
    real_open = os.open
    swapped: list[str] = []

    def open_after_a_swap(name: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if os.fsdecode(name).endswith("a.txt") and not swapped:
            swapped.append(os.fsdecode(name))
            path.unlink()
            os.mkfifo(path, 0o600)
        return real_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_after_a_swap)
    outcome: list[BaseException | dict[str, str | None]] = []

    def snapshot() -> None:
        try:
            outcome.append(snapshots.files_snapshot(str(project), ["out/a.txt"]))
        except BaseException as error:  # reported below, whatever it is
            outcome.append(error)

    worker = threading.Thread(target=snapshot, daemon=True)
    worker.start()
    worker.join(60)  # a guard against a hang, not a timing claim: this returns at once
    if worker.is_alive():
        monkeypatch.undo()
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # release the blocked reader
        worker.join(10)
        pytest.fail("the snapshot blocked on a FIFO swapped in after the path check")
    assert swapped, "the file was never opened"
    assert len(outcome) == 1 and isinstance(outcome[0], NexusError), outcome
    assert "not a regular file" in outcome[0].message


def test_the_dashboard_s_freshness_follows_a_same_size_edit_with_its_mtime_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived reader (the dashboard's scanner) keeps hashes across looks: an accepted
    task's evidence rewritten with the same size and its mtime set back turns it stale at the
    next look, exactly as ``nexus inspect`` (no cache) says."""
    from project_kit import Project, plan, task_def

    from nexus_core.observe import inspect_run
    from nexus_core.view.model import ProjectScanner

    project = Project(tmp_path)
    project.create(plan("r1", task_def("a")))
    project.accepted("r1", "a")
    result = tmp_path / "out" / "a" / "result.txt"
    _older_than_the_racy_window(result, monkeypatch)
    scanner = ProjectScanner(str(tmp_path))
    assert [row.stale for row in scanner.scan(everything=True).runs[0].rows] == [False]
    before = result.stat()
    result.write_text("ko\n")
    os.utime(result, ns=(before.st_atime_ns, before.st_mtime_ns))
    rows = scanner.scan(reinspect={"r1"}).runs[0].rows
    inspected = inspect_run(str(tmp_path), "r1")
    assert [row.stale for row in rows] == [o["stale"] for o in inspected["observations"]] == [True]


def test_a_scope_look_reuses_kept_hashes_and_sees_a_same_size_edit(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived reader's scope walk answers a kept version from one lstat (no open), the
    same snapshot as a walk without a cache; a same-size rewrite with its mtime set back is a
    new version (its ctime moved), hashed again."""
    path = project / "out" / "a.txt"
    _older_than_the_racy_window(path, monkeypatch)
    cache: dict[tuple[int, ...], str] = {}

    def look() -> dict[str, str | None]:
        with observational_hashes(cache):
            return snapshots.scope_snapshot(str(project), ["out"])

    assert look() == snapshots.scope_snapshot(str(project), ["out"]) == {"out/a.txt": _sha(b"one\n")}
    key = next(iter(cache))
    cache[key] = "kept"  # planted: the next look answers from the cache
    assert look() == {"out/a.txt": "kept"}
    _after_a_timestamp_tick(path)
    before = path.stat()
    path.write_bytes(b"two\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert look() == {"out/a.txt": _sha(b"two\n")}


def test_one_look_answers_each_task_by_its_own_protected_hashes(tmp_path: Path) -> None:
    """Within one look the protected resources shared by many tasks are checked once (each
    answer kept by what it depends on: the plan's hashes and executables): a run planned before
    a protected file changed is stale in every task, one planned after it is current, within
    one look exactly as ``nexus inspect`` (no look, no cache) says, and in the dashboard's
    scanner; the next look sees the next change."""
    from project_kit import Project, plan, task_def

    from nexus_core.observe import inspect_loaded, inspect_run
    from nexus_core.state.store import load_run
    from nexus_core.view.model import ProjectScanner

    project = Project(tmp_path)
    project.create(plan("before", task_def("a"), task_def("b")))
    check = tmp_path / "checks" / "check.sh"
    check.write_text(check.read_text() + "# changed\n")
    project.create(plan("after", task_def("a"), task_def("b")))
    project.accepted("after", "a")
    runs = ("after", "before")
    scanner = ProjectScanner(str(tmp_path))
    cache: dict[tuple[int, ...], str] = {}

    def answers() -> dict[str, list[tuple[bool, bool, str | None]]]:
        unlooked = {
            run_id: [
                (o["resourcesCurrent"], o["stale"], o["staleReason"])
                for o in inspect_run(str(tmp_path), run_id)["observations"]
            ]
            for run_id in runs
        }
        with observational_hashes(cache):  # one look over both runs
            looked = {
                run_id: [
                    (o["resourcesCurrent"], o["stale"], o["staleReason"])
                    for o in inspect_loaded(str(tmp_path), load_run(str(tmp_path), run_id))["observations"]
                ]
                for run_id in runs
            }
        assert looked == unlooked
        rows = {view.run_id: [row.stale for row in view.rows] for view in scanner.scan(reinspect=set(runs)).runs}
        assert rows == {run_id: [stale for _, stale, _ in unlooked[run_id]] for run_id in runs}
        return looked

    changed = "Nexus: Protected verifier or agent resource changed since the plan was created."
    stale = (False, True, changed)
    assert answers() == {"after": [(True, False, None), (True, False, None)], "before": [stale, stale]}
    check.write_text(check.read_text() + "# again\n")
    assert answers() == {"after": [stale, stale], "before": [stale, stale]}
