"""File hashing behind snapshots: the dashboard's display-only hash cache and its key, and a
file swapped for a FIFO between the path check and the open."""

from __future__ import annotations

import hashlib
import os
import threading
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


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.txt").write_bytes(b"one\n")
    return tmp_path


def test_an_unchanged_file_reuses_its_cached_hash(project: Path) -> None:
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
def test_a_changed_file_misses_the_cache_even_with_its_size_and_mtime_restored(project: Path, change: str) -> None:
    """README: display hashes are cached by (device, inode, size, mtime, ctime): the inode and
    ctime catch the edits that keep the size and mtime."""
    path = project / "out" / "a.txt"
    cache: dict[tuple[int, ...], str] = {}
    _displayed(project, cache)
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
    assert len(cache) == 2


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
