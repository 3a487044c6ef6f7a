"""A symlink swapped in at any depth during a snapshot is never followed (issue 15, item 3).

A thread swaps ``work/sub`` between a real directory and a symlink to a directory outside the
project, as fast as it can, while scope and artifact snapshots run. Every snapshot must either
hash the project's own file or refuse; the outside file's hash must never be recorded."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from nexus_core.errors import NexusError
from nexus_core.snapshots import files_snapshot, scope_snapshot

SNAPSHOTS = 3000  # at least this many of each kind, and each outcome seen at least SEEN times
SEEN = 20
TIME_LIMIT = 60.0


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def swapped(tmp_path: Path) -> tuple[Path, str, str]:
    root = (tmp_path / "project").resolve()
    (root / "work" / "sub").mkdir(parents=True)
    (root / "work" / "sub" / "passwd").write_bytes(b"inside the project\n")
    (root / "parked").mkdir()  # beside the scope, on the same filesystem: renames are atomic
    (root / "parked" / "link").symlink_to(tmp_path / "outside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_bytes(b"root:x:0:0:outside the project\n")
    return root, sha256(b"inside the project\n"), sha256((outside / "passwd").read_bytes())


def swap_forever(root: Path, stop: threading.Event, swaps: list[int]) -> None:
    """work/sub: real directory -> symlink to outside -> real directory ..."""
    sub, parked = root / "work" / "sub", root / "parked"
    while not stop.is_set():
        os.rename(sub, parked / "dir")
        os.rename(parked / "link", sub)
        os.rename(sub, parked / "link")
        os.rename(parked / "dir", sub)
        swaps[0] += 1


def test_a_directory_swapped_for_a_symlink_never_leads_a_hash_outside(swapped: tuple[Path, str, str]) -> None:
    root, inside_hash, outside_hash = swapped
    stop = threading.Event()
    swaps = [0]
    swapper = threading.Thread(target=swap_forever, args=(root, stop, swaps), daemon=True)
    hashed: dict[str, int] = {"scope": 0, "artifact": 0}
    refused = 0
    recorded: set[str] = set()
    snapshots = 0
    deadline = time.monotonic() + TIME_LIMIT
    swapper.start()
    try:
        while snapshots < SNAPSHOTS or min(hashed.values()) < SEEN or refused < SEEN:
            assert time.monotonic() < deadline, (snapshots, hashed, refused, swaps)
            snapshots += 1
            takers: tuple[tuple[str, Callable[[], dict[str, str | None]]], ...] = (
                ("scope", lambda: scope_snapshot(str(root), ["work"])),
                ("artifact", lambda: files_snapshot(str(root), ["work/sub/passwd"], False)),
            )
            for kind, take in takers:
                try:
                    snapshot = take()
                except NexusError:
                    refused += 1  # the symlink (or the moment without work/sub) was seen and refused
                    continue
                values = {value for value in snapshot.values() if value is not None}
                recorded |= values
                if values:
                    hashed[kind] += 1
    finally:
        stop.set()
        swapper.join(timeout=10)
    assert outside_hash not in recorded
    assert recorded == {inside_hash}
    assert swaps[0] > 0
