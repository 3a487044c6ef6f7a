"""Issue 22 item 4: bounded work for a hostile scope.

- The 10,000-file limit stops the walk as directories are listed: a scope of 15,000 files is
  refused after reading some 10,000 directory entries, never listed whole (the listing is
  observed through ``os.scandir``, whatever reads it).
- One snapshot hashes at most SNAPSHOT_BYTE_BUDGET bytes (1 GiB): past it, a clear refusal
  names the scope, the budget and the size, and nothing more is read. The 10 x 16 MiB scope of
  the benchmarks stays well within it.

Sparse files: 16 MiB each with no disk used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from supervise_kit import Project, nexus_command, task_def

from nexus_core import snapshots
from nexus_core.errors import NexusError

SPARSE = 16 * 1024 * 1024 - 1  # the largest file the reference's 16 MiB limit lets through


def sparse_files(folder: Path, count: int, size: int = SPARSE) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        with open(folder / f"s{index:03d}.bin", "wb") as handle:
            handle.truncate(size)


def empty_files(folder: Path, count: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(count):
        os.close(os.open(folder / f"e{index:06d}", os.O_WRONLY | os.O_CREAT, 0o600))


class _CountedListing:
    """``os.scandir`` as the walk uses it, counting the entries it hands out."""

    def __init__(self, inner: Any, seen: list[int]) -> None:
        self.inner, self.seen = inner, seen

    def __enter__(self) -> _CountedListing:
        self.inner.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.inner.__exit__(*exc)

    def __iter__(self) -> Iterator[os.DirEntry[str]]:
        for entry in self.inner:
            self.seen[0] += 1
            yield entry


def test_the_file_limit_stops_the_listing_at_the_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty_files(tmp_path / "work" / "many", 15_000)
    seen = [0]
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda fd: _CountedListing(real(fd), seen))
    with pytest.raises(NexusError, match=r"^Nexus: Scope exceeds the 10000 file snapshot limit\.$"):
        snapshots.scope_snapshot(str(tmp_path), ["work"])
    # "work" lists one entry ("many"), then "many" stops at the 10,001st file.
    assert seen[0] <= snapshots.SCOPE_FILE_LIMIT + 2, seen[0]


def test_the_file_limit_counts_files_across_directories_as_they_are_listed(tmp_path: Path) -> None:
    empty_files(tmp_path / "work" / "a", 6_000)
    empty_files(tmp_path / "work" / "b", 4_000)
    assert len(snapshots.scope_snapshot(str(tmp_path), ["work"])) == 10_000  # exactly the limit: accepted
    empty_files(tmp_path / "work" / "c", 1)
    with pytest.raises(NexusError, match=r"Scope exceeds the 10000 file snapshot limit\."):
        snapshots.scope_snapshot(str(tmp_path), ["work"])


def test_a_scope_past_the_byte_budget_is_refused_naming_scope_budget_and_size(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshots, "SNAPSHOT_BYTE_BUDGET", 64 * 1024 * 1024)  # the mechanism, quickly
    sparse_files(tmp_path / "work", 10)
    read: list[int] = []
    real = snapshots._digest_fd
    monkeypatch.setattr(snapshots, "_digest_fd", lambda fd, size: read.append(size) or real(fd, size))
    with pytest.raises(snapshots.SnapshotTooLarge) as refused:
        snapshots.scope_snapshot(str(tmp_path), ["work"])
    message = refused.value.message
    assert message.startswith("Nexus: Scope work exceeds the snapshot byte budget of 1 GiB (67108864 bytes): ")
    assert f"{5 * SPARSE} bytes with work/s004.bin; nothing past the budget was read." in message
    assert sum(read) <= 64 * 1024 * 1024 and len(read) == 4  # the fifth file was never read


def test_artifacts_share_one_budget_per_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(snapshots, "SNAPSHOT_BYTE_BUDGET", 32 * 1024 * 1024)
    sparse_files(tmp_path / "out", 3)
    files = [f"out/s{index:03d}.bin" for index in range(3)]
    expected = r"^Nexus: The task's files exceed the snapshot byte budget of 1 GiB \(33554432 bytes\)"
    with pytest.raises(snapshots.SnapshotTooLarge, match=expected):
        snapshots.files_snapshot(str(tmp_path), files)
    assert len(snapshots.files_snapshot(str(tmp_path), files[:2])) == 2  # two of 16 MiB - 1: within


def test_the_benchmarks_ten_files_of_16_mib_stay_within_the_budget(tmp_path: Path) -> None:
    sparse_files(tmp_path / "work", 10)
    assert len(snapshots.scope_snapshot(str(tmp_path), ["work"])) == 10


def test_inspect_reports_the_budget_instead_of_hashing_a_hostile_scope_whole(tmp_path: Path) -> None:
    """The real budget through the CLI: 65 sparse files of 16 MiB - 1 (just past 1 GiB) planted
    in the scope of a verified task; inspect names the refusal as the evidence's stale reason."""
    project = Project(tmp_path)
    project.create(task_def("a"))
    project.start("a")
    project.write("a")
    project.record("a")
    assert project.verify("a").returncode == 0
    sparse_files(project.root / "out" / "a" / "planted", 65)
    done = subprocess.run(
        nexus_command("inspect", "demo", "--json", "-d", str(project.root)),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    observation = json.loads(done.stdout)["observations"][0]
    assert observation["stale"] is True
    reason = observation["staleReason"]
    assert reason.startswith("Nexus: Scope out/a exceeds the snapshot byte budget of 1 GiB (1073741824 bytes): ")
    assert "nothing past the budget was read" in reason
    assert "Traceback" not in done.stderr and sys.executable
