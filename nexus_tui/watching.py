"""The dashboard's file watcher: our own inotify watcher on Linux (``inotify.py``), watchfiles'
Rust watcher elsewhere (or where inotify cannot be had), either driven without polling the
event loop.

Why our own: watchfiles' Rust loop wakes every ``step_ms`` (10 ms) to take the GIL and ask for
signals and the stop, so an idle dashboard's waiting thread cost about 0.5 % of a core doing
nothing; and its constructor walks the tree holding the GIL, 0.3-0.8 s over the ~10,000 scope
directories of a large project (the UI stalled once, right after the load). The inotify watcher
waits in ``poll`` without a timeout (no wakeup while nothing changes) and arms in the waiting
thread, whose walk releases the GIL at each system call.

Either way the watcher says when it is armed (an empty batch, at once), then each ``wait``
lasts without a timeout until changes or the stop (``awatch`` asked a 300 ms timeout to learn
when it was armed, and woke the event loop three times a second for nothing).

No logic here knows about widgets: the app consumes ``watched_changes``."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from functools import cache
from typing import Any, Literal

from . import inotify

WAITING_THREAD_NAME = "nexus-watch"
Backend = Literal["inotify", "watchfiles"]


@cache
def backend() -> Backend:
    """The watcher this system gets, chosen once: inotify on Linux when it can be had."""
    return "inotify" if sys.platform == "linux" and inotify.available() else "watchfiles"


class _Stop:
    """What the Rust loop asks at each step: the caller's stop, or this generator closed."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.closed = False

    def is_set(self) -> bool:
        return self.closed or self.stop.is_set()  # a plain read, safe from the waiting thread


def watched_changes(
    paths: Sequence[str],
    *,
    stop: asyncio.Event,
    debounce_ms: int,
    step_ms: int,
    keep: Callable[[str], bool],
) -> AsyncGenerator[set[str], None]:
    """An empty set once every path is watched (recursively; a path missing or unreadable is
    left out), then each batch of changed paths that ``keep`` keeps, until ``stop`` is set.
    Raises what the watcher raises (with watchfiles, an undecodable name:
    ``scanning.undecodable_path_changed``; with inotify it is a path like any other, its
    undecodable bytes escaped as ``os.fsdecode`` does)."""
    changes = _inotify_changes if backend() == "inotify" else _rust_changes
    return changes(paths, stop=stop, debounce_ms=debounce_ms, step_ms=step_ms, keep=keep)


async def _inotify_changes(
    paths: Sequence[str],
    *,
    stop: asyncio.Event,
    debounce_ms: int,
    step_ms: int,
    keep: Callable[[str], bool],
) -> AsyncGenerator[set[str], None]:
    loop = asyncio.get_running_loop()
    watcher = inotify.Watcher(paths)
    # The stop wakes the waiting thread out of its poll (nothing there looks at it otherwise).
    stopping = asyncio.ensure_future(stop.wait())
    stopping.add_done_callback(lambda _: watcher.close())
    try:
        if not await _in_a_thread(loop, watcher.arm):
            return  # stopped while arming
        yield set()
        while not stop.is_set():
            changed = await _in_a_thread(loop, watcher.wait, debounce_ms, step_ms)
            if changed is None:  # stopped
                return
            kept = {path for path in changed if keep(path)}
            if kept:
                yield kept
    finally:
        stopping.cancel()
        watcher.close()  # a waiting thread is woken and closes the descriptors on its way out


async def _rust_changes(
    paths: Sequence[str],
    *,
    stop: asyncio.Event,
    debounce_ms: int,
    step_ms: int,
    keep: Callable[[str], bool],
) -> AsyncGenerator[set[str], None]:
    from watchfiles._rust_notify import RustNotify  # the Rust watcher awatch itself drives

    loop = asyncio.get_running_loop()
    # debug, force_polling, poll_delay_ms (unused without polling), recursive, ignore_permission_denied
    notify = RustNotify(list(paths), False, False, 300, True, True)
    asked = _Stop(stop)
    try:
        yield set()
        while not stop.is_set():
            result = await _in_a_thread(loop, notify.watch, debounce_ms, step_ms, 0, asked)
            if result == "stop":
                return
            if isinstance(result, str):  # "timeout" cannot come without one; "signal" only on the main thread
                continue
            changed = {path for _, path in result if keep(path)}
            if changed:
                yield changed
    finally:
        # A waiting call ends at its next step; the watcher's own thread ends when the last
        # reference to it goes (closing it under a running call would fail that call).
        asked.closed = True


def _in_a_thread(loop: asyncio.AbstractEventLoop, call: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
    """``call(*args)`` in a daemon thread of its own: a wait may last for hours, so it holds no
    thread of a pool that others wait on (Textual's thread workers share the loop's default
    executor), and a process ending never waits for it (a pool's threads are joined at exit)."""
    future: asyncio.Future[Any] = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if future.done():  # cancelled meanwhile: nobody waits for it
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(result)

    def run() -> None:
        result: Any = None
        error: BaseException | None = None
        try:
            result = call(*args)
        except BaseException as raised:  # handed to the waiting coroutine, raised there
            error = raised
        with contextlib.suppress(RuntimeError):  # the loop is closed: the app ended meanwhile
            loop.call_soon_threadsafe(settle, result, error)

    threading.Thread(target=run, name=WAITING_THREAD_NAME, daemon=True).start()
    return future
