"""One look of a display-only reader (``paths.one_look``, entered by
``snapshots.observational_hashes``): directories opened and ancestors checked once per look,
with the same answers and refusals as outside a look, and nothing left open after it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nexus_core import paths, preconditions
from nexus_core.errors import NexusError
from nexus_core.snapshots import observational_hashes, scope_snapshot


def _open_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    for run in ("r1", "r2"):
        for task in ("a", "b"):
            (tmp_path / run / "out" / task).mkdir(parents=True)
            (tmp_path / run / "out" / task / "result.txt").write_text(f"{run}/{task}\n")
    return tmp_path


def test_a_look_answers_as_no_look_does_and_closes_what_it_held(tree: Path) -> None:
    scopes = [f"{run}/out/{task}" for run in ("r1", "r2") for task in ("a", "b")]
    outside = [scope_snapshot(str(tree), [scope]) for scope in scopes]
    before = _open_descriptors()
    with observational_hashes({}):
        inside = [scope_snapshot(str(tree), [scope]) for scope in scopes]
        assert _open_descriptors() > before  # the ancestors shared by every scope, held
        # What open_directory returns is the caller's own: closing it leaves the look's intact.
        for _ in range(3):
            fd = paths.open_directory(str(tree / "r1" / "out"))
            assert fd is not None
            listing = os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            assert sorted(os.listdir(listing)) == ["a", "b"]
            os.close(listing)
            os.close(fd)
    assert inside == outside
    assert _open_descriptors() == before


def test_a_symlink_is_refused_inside_a_look_as_outside(tree: Path) -> None:
    (tree / "r2" / "out" / "b" / "result.txt").unlink()
    (tree / "r2" / "out" / "b").rmdir()
    (tree / "r2" / "out" / "b").symlink_to(tree / "r1" / "out" / "a")
    with pytest.raises(NexusError) as outside:
        scope_snapshot(str(tree), ["r2/out/b"])
    with observational_hashes({}):
        assert scope_snapshot(str(tree), ["r2/out/a"])  # r2/out held and checked now
        with pytest.raises(NexusError) as inside:
            scope_snapshot(str(tree), ["r2/out/b"])
        with pytest.raises(NexusError):
            paths.safe_target(str(tree), "r2/out/b/result.txt")
    assert inside.value.message == outside.value.message


def test_a_directory_swapped_for_a_symlink_between_looks_is_refused_by_the_next(tree: Path) -> None:
    with observational_hashes({}):
        assert scope_snapshot(str(tree), ["r1/out/a"])
        paths.safe_target(str(tree), "r1/out/a/result.txt")
    (tree / "r1").rename(tree / "r1-real")
    (tree / "r1").symlink_to(tree / "r1-real")
    with observational_hashes({}), pytest.raises(NexusError, match="symlink"):
        paths.safe_target(str(tree), "r1/out/a/result.txt")
    with observational_hashes({}), pytest.raises(NexusError, match="symlink"):
        scope_snapshot(str(tree), ["r1/out/a"])


def test_a_look_holds_at_most_its_limit_of_directories(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(paths, "LOOK_HELD_DIRECTORIES", 2)
    before = _open_descriptors()
    with observational_hashes({}):
        for run in ("r1", "r2"):
            for task in ("a", "b"):
                assert scope_snapshot(str(tree), [f"{run}/out/{task}"])
        assert _open_descriptors() == before + 2
    assert _open_descriptors() == before


def test_records_by_id_keep_the_first_or_the_last_and_a_look_builds_them_once_per_list() -> None:
    from nexus_core.preconditions import by_id

    tasks = [{"id": "a", "n": 1}, "not a record", {"id": "b", "n": 2}, {"id": "a", "n": 3}]
    assert by_id(tasks) == {"a": tasks[0], "b": tasks[2]}  # as a scan for the first finds it
    assert by_id(tasks, last=True) == {"a": tasks[3], "b": tasks[2]}  # as a dict of them keeps it
    assert by_id(tasks) is not by_id(tasks)  # outside a look: built at each ask
    with paths.one_look():
        index = by_id(tasks)
        assert by_id(tasks) is index
        assert by_id(tasks, last=True)["a"] is tasks[3]
        other = list(tasks)  # another list (the next read of the run): its own index
        assert by_id(other) is not index and by_id(other) == index
    with paths.one_look():
        assert by_id(tasks) is not index  # each look builds its own
        first = by_id(tasks)
        lists = [list(tasks) for _ in range(preconditions.BY_ID_KEPT)]
        for each in lists:
            by_id(each)
        # Only the newest few are kept (a look over 30 runs kept every parsed run alive).
        assert by_id(tasks) is not first
        assert by_id(lists[-1]) is by_id(lists[-1])
