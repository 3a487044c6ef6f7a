"""watched_changes: the dashboard's file watcher (our inotify watcher on Linux, watchfiles'
Rust watcher elsewhere), on real inotify."""

from __future__ import annotations

import asyncio
import os
import platform
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from nexus_tui import inotify, watching
from nexus_tui.watching import WAITING_THREAD_NAME, watched_changes

linux_only = pytest.mark.skipif(sys.platform != "linux", reason="inotify is Linux's")


def _keep(path: str) -> bool:
    return not path.endswith(".tmp")


def _waiting_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == WAITING_THREAD_NAME]


async def _until(predicate: object, what: str) -> None:
    assert callable(predicate)
    for _ in range(250):
        if predicate():
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"never: {what}")


async def _seen_until(changes: object, path: str) -> set[str]:
    """Every batch until one holds ``path`` (events come in order: what was changed before
    ``path`` and is watched came in the same batch or an earlier one)."""
    seen: set[str] = set()
    while path not in seen:
        seen |= await asyncio.wait_for(anext(changes), 5)  # type: ignore[call-overload]
    return seen


@linux_only
def test_linux_gets_the_inotify_watcher() -> None:
    assert watching.backend() == "inotify"


@pytest.mark.parametrize("backend", ["inotify", "watchfiles"])
async def test_armed_at_once_then_each_change_kept_until_stopped(
    tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same contract from either watcher (watchfiles': where inotify cannot be had)."""
    if backend == "inotify" and watching.backend() != "inotify":
        pytest.skip("no inotify here")
    monkeypatch.setattr(watching, "backend", lambda: backend)
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
        return len(_waiting_threads())

    before = waiting_threads()
    for _ in range(5):  # watching a directory where nothing changes: only the close ends the wait
        changes = watched_changes([str(tmp_path)], stop=asyncio.Event(), debounce_ms=50, step_ms=10, keep=_keep)
        assert await asyncio.wait_for(anext(changes), 5) == set()
        waiting = asyncio.ensure_future(anext(changes))
        for _ in range(250):  # its thread gets into the wait (later on a loaded machine)
            if waiting_threads() == before + 1:
                break
            await asyncio.sleep(0.02)
        assert waiting_threads() == before + 1  # its thread is in the wait now
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        await changes.aclose()
        for _ in range(100):
            if waiting_threads() == before:
                break
            await asyncio.sleep(0.02)
        assert waiting_threads() == before


@linux_only
async def test_a_file_made_deep_in_a_directory_made_after_arming_is_reported(tmp_path: Path) -> None:
    """The file is made before the new directories' watches can land: the walk that watches
    them reports what it finds there."""
    stop = asyncio.Event()
    changes = watched_changes([str(tmp_path)], stop=stop, debounce_ms=50, step_ms=10, keep=_keep)
    assert await asyncio.wait_for(anext(changes), 5) == set()
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    (deep / "run.json").write_text("{}")
    seen = await _seen_until(changes, str(deep / "run.json"))
    assert {str(tmp_path / "a"), str(tmp_path / "a" / "b"), str(deep)} <= seen
    (deep / "later.json").write_text("{}")  # and the new directory is watched from now on
    await _seen_until(changes, str(deep / "later.json"))
    stop.set()


@linux_only
async def test_a_name_that_is_not_utf8_is_a_changed_path_like_any_other(tmp_path: Path) -> None:
    stop = asyncio.Event()
    changes = watched_changes([str(tmp_path)], stop=stop, debounce_ms=50, step_ms=10, keep=_keep)
    assert await asyncio.wait_for(anext(changes), 5) == set()
    with open(os.path.join(os.fsencode(tmp_path), b"bad-\xff.txt"), "wb") as handle:
        handle.write(b"x")
    await _seen_until(changes, str(tmp_path / "bad-\udcff.txt"))  # surrogate-escaped
    (tmp_path / "after.json").write_text("{}")  # the watcher goes on
    await _seen_until(changes, str(tmp_path / "after.json"))
    stop.set()


@linux_only
async def test_a_symlinked_directory_is_not_followed(tmp_path: Path) -> None:
    outside, tree = tmp_path / "outside", tmp_path / "tree"
    outside.mkdir()
    tree.mkdir()
    (tree / "link").symlink_to(outside, target_is_directory=True)
    stop = asyncio.Event()
    changes = watched_changes([str(tree)], stop=stop, debounce_ms=50, step_ms=10, keep=_keep)
    assert await asyncio.wait_for(anext(changes), 5) == set()
    (outside / "secret.json").write_text("{}")
    (tree / "marker.json").write_text("{}")
    seen = await _seen_until(changes, str(tree / "marker.json"))
    assert not any("secret" in path for path in seen)
    stop.set()


@linux_only
async def test_a_directory_moved_within_is_followed_and_one_moved_out_forgotten(tmp_path: Path) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    (tree / "first" / "inner").mkdir(parents=True)
    (tree / "gone").mkdir()
    outside.mkdir()
    stop = asyncio.Event()
    changes = watched_changes([str(tree)], stop=stop, debounce_ms=50, step_ms=10, keep=_keep)
    assert await asyncio.wait_for(anext(changes), 5) == set()
    (tree / "first").rename(tree / "second")
    (tree / "gone").rename(outside / "gone")
    await _seen_until(changes, str(tree / "second"))
    (outside / "gone" / "away.json").write_text("{}")  # no longer in the tree: not reported
    (tree / "second" / "inner" / "run.json").write_text("{}")  # under its new path
    seen = await _seen_until(changes, str(tree / "second" / "inner" / "run.json"))
    assert not any("away" in path or "first" in path for path in seen)
    stop.set()


@linux_only
async def test_stopping_or_closing_a_watcher_leaks_no_descriptor(tmp_path: Path) -> None:
    """Stopped while it waits, or its generator closed while it waits or before its first
    batch: its thread ends and every descriptor it opened is closed (once)."""

    def descriptors() -> int:
        return len(os.listdir("/proc/self/fd"))

    before, threads = descriptors(), len(_waiting_threads())
    for cycle in range(20):
        stop = asyncio.Event()
        changes = watched_changes([str(tmp_path)], stop=stop, debounce_ms=50, step_ms=10, keep=_keep)
        if cycle % 4 == 3:  # closed before it was ever asked anything
            await changes.aclose()
            continue
        assert await asyncio.wait_for(anext(changes), 5) == set()
        waiting = asyncio.ensure_future(anext(changes))
        await _until(lambda: len(_waiting_threads()) == threads + 1, "waiting")
        if cycle % 2:
            stop.set()
            with pytest.raises(StopAsyncIteration):
                await asyncio.wait_for(waiting, 5)
        else:
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            await changes.aclose()
        await _until(lambda: len(_waiting_threads()) == threads, "its thread ended")
    assert descriptors() == before


# The system calls an idle watcher may sleep in, with where its timeout is: poll's third
# argument is the timeout in ms (-1: none), ppoll's its timespec (NULL: none).
_POLL_CALLS = {"x86_64": {7: 0xFFFFFFFF, 271: 0}, "aarch64": {73: 0}}


@linux_only
@pytest.mark.skipif(platform.machine() not in _POLL_CALLS, reason="system call numbers known for x86_64 and aarch64")
async def test_an_idle_watcher_sleeps_in_poll_without_a_timeout(tmp_path: Path) -> None:
    """No wakeup while nothing changes: the waiting thread is in poll with no timeout (read
    from /proc: the system call it is blocked in, and its arguments)."""
    calls = _POLL_CALLS[platform.machine()]
    stop = asyncio.Event()
    changes = watched_changes([str(tmp_path)], stop=stop, debounce_ms=50, step_ms=10, keep=_keep)
    assert await asyncio.wait_for(anext(changes), 5) == set()
    waiting = asyncio.ensure_future(anext(changes))

    def blocked_in(thread: threading.Thread) -> list[str]:
        try:
            with open(f"/proc/self/task/{thread.native_id}/syscall") as handle:
                return handle.read().split()
        except FileNotFoundError:  # a thread that ended (the arming's, say)
            return []
        except PermissionError:
            pytest.skip("/proc/self/task/*/syscall is not readable here")

    def polling() -> list[list[str]]:
        found = (blocked_in(thread) for thread in _waiting_threads())
        # A thread on a CPU reads "running": only a blocked one names its system call.
        return [call for call in found if call and call[0].isdigit() and int(call[0]) in calls]

    await _until(polling, "the waiting thread blocked in poll")
    ((number, *arguments),) = polling()
    assert int(arguments[2], 16) & 0xFFFFFFFF == calls[int(number)]
    stop.set()
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(waiting, 5)


def _event(wd: int, mask: int, name: bytes = b"") -> bytes:
    padded = name + b"\0" * (-len(name) % 16 or (16 if name else 0)) if name else b""
    return struct.pack("iIII", wd, mask, 0, len(padded)) + padded


def test_events_are_parsed_from_a_read_buffer() -> None:
    buffer = (
        _event(1, inotify.IN_CREATE, b"run.json")
        + _event(2, inotify.IN_DELETE_SELF)
        + _event(-1, inotify.IN_Q_OVERFLOW)
        + _event(3, inotify.IN_CREATE | inotify.IN_ISDIR, b"bad-\xff")
    )
    assert inotify.parse_events(buffer) == [
        (1, inotify.IN_CREATE, b"run.json"),
        (2, inotify.IN_DELETE_SELF, b""),
        (-1, inotify.IN_Q_OVERFLOW, b""),
        (3, inotify.IN_CREATE | inotify.IN_ISDIR, b"bad-\xff"),
    ]


@linux_only
def test_an_overflow_reports_every_given_path(tmp_path: Path) -> None:
    """Events were lost: every given path may hold a change (the app then catches those
    projects up)."""
    (tmp_path / "a").mkdir()
    watcher = inotify.Watcher([str(tmp_path / "a"), str(tmp_path / "b") + "/"])
    try:
        assert watcher.arm()
        overflow = inotify.parse_events(_event(-1, inotify.IN_Q_OVERFLOW))
        assert watcher.paths_of(overflow) == {str(tmp_path / "a"), str(tmp_path / "b")}
    finally:
        watcher.close()


@linux_only
async def test_a_real_overflow_reports_every_given_path(tmp_path: Path) -> None:
    """Nothing reads the queue between batches: more events than it holds overflow it."""
    with open("/proc/sys/fs/inotify/max_queued_events") as handle:
        limit = int(handle.read())
    if limit > 100_000:
        pytest.skip("inotify's queue holds too many events to fill here")
    (tmp_path / "many").mkdir()
    stop = asyncio.Event()
    paths = [str(tmp_path / "many"), str(tmp_path / "other")]
    changes = watched_changes(paths, stop=stop, debounce_ms=50, step_ms=10, keep=_keep)
    assert await asyncio.wait_for(anext(changes), 5) == set()
    for index in range(limit + 1):  # an event each at least (its creation)
        os.close(os.open(tmp_path / "many" / f"{index}.json", os.O_CREAT | os.O_WRONLY))
    await _seen_until(changes, str(tmp_path / "other"))  # never changed: the overflow tells it
    stop.set()


_OUT_OF_WATCHES = """
import errno, sys
from nexus_tui import inotify
with open("/proc/sys/user/max_inotify_watches", "w") as handle:
    handle.write("5")
watcher = inotify.Watcher([sys.argv[1]])
try:
    watcher.arm()
except OSError as error:
    print(errno.errorcode[error.errno], error.strerror)
finally:
    watcher.close()
"""


@linux_only
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
def test_the_watch_limit_reached_is_a_clear_error(tmp_path: Path) -> None:
    """The per-user watch limit, lowered in a user namespace of its own (where it is ours to
    set): arming fails with ENOSPC and says which limit."""
    for index in range(10):
        (tmp_path / f"d{index}").mkdir()
    ran = subprocess.run(
        ["unshare", "--user", "--map-root-user", sys.executable, "-c", _OUT_OF_WATCHES, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if ran.returncode != 0 and "unshare" in ran.stderr:
        pytest.skip(f"no user namespace here: {ran.stderr.strip()}")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("ENOSPC inotify watch limit reached (fs.inotify.max_user_watches)")
