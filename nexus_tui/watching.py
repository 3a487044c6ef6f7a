"""The dashboard's file watcher: watchfiles' Rust watcher (notify: inotify on Linux), driven
without ``awatch``'s polling of the event loop.

``awatch`` hands the Rust ``watch`` call to a worker thread with a timeout, and yields
nothing on a timeout: to learn when the watcher was armed the dashboard asked a 300 ms timeout,
so an idle dashboard woke its event loop three times a second for nothing (a third of the
watcher's idle CPU), and every watcher was known armed only 300 ms after it was. Here the
watcher is armed when its constructor returns (it adds every watch there), which is said at once
(an empty batch); then each ``watch`` call waits without a timeout until changes or the stop.

No logic here knows about widgets: the app consumes ``watched_changes``."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

WAITING_THREAD_NAME = "nexus-watch"


class _Stop:
    """What the Rust loop asks at each step: the caller's stop, or this generator closed."""

    def __init__(self, stop: asyncio.Event) -> None:
        self.stop = stop
        self.closed = False

    def is_set(self) -> bool:
        return self.closed or self.stop.is_set()  # a plain read, safe from the waiting thread


async def watched_changes(
    paths: Sequence[str],
    *,
    stop: asyncio.Event,
    debounce_ms: int,
    step_ms: int,
    keep: Callable[[str], bool],
) -> AsyncGenerator[set[str], None]:
    """An empty set once every path is watched (recursively; a path missing or unreadable is
    left out), then each batch of changed paths that ``keep`` keeps, until ``stop`` is set.
    Raises what the watcher raises (an undecodable name: ``scanning.undecodable_path_changed``)."""
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
