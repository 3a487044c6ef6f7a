"""watched_changes: the dashboard's file watcher (watchfiles' Rust watcher, on real inotify)."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from nexus_tui.watching import WAITING_THREAD_NAME, watched_changes

pytestmark = pytest.mark.asyncio


def _keep(path: str) -> bool:
    return not path.endswith(".tmp")


async def test_armed_at_once_then_each_change_kept_until_stopped(tmp_path: Path) -> None:
    (tmp_path / "deep").mkdir()
    stop = asyncio.Event()
    changes = watched_changes([str(tmp_path)], stop=stop, debounce_ms=50, step_ms=10, keep=_keep)
    assert await asyncio.wait_for(anext(changes), 5) == set()  # armed: no timeout waited for
    (tmp_path / "deep" / "state.tmp").write_text("x")  # left out by keep
    (tmp_path / "deep" / "run.json").write_text("{}")
    seen: set[str] = set()
    while str(tmp_path / "deep" / "run.json") not in seen:
        seen |= await asyncio.wait_for(anext(changes), 5)
    assert not any(path.endswith(".tmp") for path in seen)
    stop.set()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(changes), 5)


async def test_a_missing_or_unreadable_path_is_left_out_and_the_others_watched(tmp_path: Path) -> None:
    """A scope removed between a scan and the arming must not cost the other paths their watch."""
    (tmp_path / "kept").mkdir()
    stop = asyncio.Event()
    paths = [str(tmp_path / "gone"), str(tmp_path / "kept")]
    changes = watched_changes(paths, stop=stop, debounce_ms=50, step_ms=10, keep=_keep)
    assert await asyncio.wait_for(anext(changes), 5) == set()
    (tmp_path / "kept" / "run.json").write_text("{}")
    assert str(tmp_path / "kept" / "run.json") in await asyncio.wait_for(anext(changes), 5)
    stop.set()


async def test_a_closed_watcher_s_waiting_thread_ends(tmp_path: Path) -> None:
    """A watcher closed while it waits (its task cancelled: the app quitting, a watcher
    replaced), its stop never set: the thread waiting in the Rust watcher ends too."""

    def waiting_threads() -> int:
        return sum(1 for thread in threading.enumerate() if thread.name == WAITING_THREAD_NAME)

    before = waiting_threads()
    for _ in range(5):  # watching a directory where nothing changes: only the close ends the wait
        changes = watched_changes([str(tmp_path)], stop=asyncio.Event(), debounce_ms=50, step_ms=10, keep=_keep)
        assert await asyncio.wait_for(anext(changes), 5) == set()
        waiting = asyncio.ensure_future(anext(changes))
        await asyncio.sleep(0.05)
        assert waiting_threads() == before + 1  # its thread is in the Rust wait now
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await changes.aclose()
        for _ in range(100):
            if waiting_threads() == before:
                break
            await asyncio.sleep(0.02)
        assert waiting_threads() == before
