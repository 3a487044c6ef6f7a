"""``nexus wait``: watch a run read-only until it settles, streaming its events."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from .. import needs
from ..errors import NexusError
from ..paths import root_of
from ..shapes import JsonObject
from ..state import state_dirs
from ..state.store import BASE, run_path
from ..timeutil import iso_from_ms, now_ms
from .classify import (
    EXIT_ACCEPTED,
    EXIT_BUDGET,
    EXIT_ERROR,
    EXIT_IDLE,
    EXIT_INTERRUPTED,
    Verdict,
    verdict_for,
)
from .events import (
    Emit,
    Event,
    EventBatch,
    EventLog,
    Snapshot,
    check_log_path,
    derive_events,
    fingerprint,
    json_line,
    take_snapshot,
)

DEFAULT_IDLE_TIMEOUT = 600.0
DEFAULT_SETTLE_GRACE = 2.0
WATCH_TICK_MS = 500  # the watcher wakes at least this often for time-derived flags
POLL_SECONDS = 0.2  # polling fallback: a cheap stat-based look this often
FULL_LOOK_SECONDS = 1.0  # a full inspect at least this often (workspace files, clocks)

# ----------------------------------------------------------------- wakes


def poll_wakes(sleep: Callable[[float], None] = time.sleep) -> Iterator[str]:
    while True:
        sleep(POLL_SECONDS)
        yield "poll"


def watch_wakes(root: str) -> Iterator[str]:
    """Wake on any change under .bmad-plus/nexus (or every WATCH_TICK_MS); poll if watching fails."""
    base = os.path.join(root, BASE)
    try:
        from watchfiles import watch

        for _changes in watch(
            base,
            watch_filter=lambda _change, path: not path.endswith(".tmp"),
            debounce=50,
            step=20,
            rust_timeout=WATCH_TICK_MS,
            yield_on_timeout=True,
            raise_interrupt=True,
        ):
            yield "watch"
    except (ImportError, OSError, RuntimeError):
        pass
    yield from poll_wakes()


# ----------------------------------------------------------------- wait


@dataclass
class WaitResult:
    code: int
    message: str
    events: int
    verdict: Verdict | None
    sequence: int | None


def _wakes(root: str, force_polling: bool) -> tuple[Iterator[str], str]:
    """What wakes the watcher up, and its name for watch-started's ``mode``."""
    if force_polling:
        return poll_wakes(), "polling"
    return watch_wakes(root), "watchfiles"


def _check_target(first: Snapshot, run_id: str, task_id: str | None) -> None:
    """Refuse an unknown run, or a task the run does not have (as the watcher's own error)."""
    if first.unknown:
        raise NexusError(first.error or f"Unknown run: {run_id}")
    if task_id is not None and first.view is not None and task_id not in {t["id"] for t in first.view["tasks"]}:
        names = ", ".join(t["id"] for t in first.view["tasks"])
        raise NexusError(f"Unknown task: {task_id}", f"Run {run_id} has {names}.")


@dataclass
class _Settling:
    """A settled verdict ends the wait once it has held for ``grace`` seconds (the same code,
    sequence and error), or at once when it is final (accepted, budget spent, an error)."""

    grace: float
    key: tuple[Any, ...] | None = None
    since: float | None = None

    def done(self, verdict: Verdict, current: Snapshot, moment: float) -> bool:
        if not verdict.settled:
            self.key = self.since = None
            return False
        key = (verdict.code, current.sequence, current.error)
        final = verdict.code in (EXIT_ACCEPTED, EXIT_BUDGET, EXIT_ERROR) or self.grace <= 0
        if key != self.key:
            self.key, self.since = key, moment
        assert self.since is not None
        return final or moment - self.since >= self.grace


def wait_for_run(
    directory: str,
    run_id: str,
    *,
    task_id: str | None = None,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    settle_grace: float = DEFAULT_SETTLE_GRACE,
    event_log: str | None = None,
    emit: Emit,
    force_polling: bool = False,
    monotonic: Callable[[], float] = time.monotonic,
    wakes: Iterator[str] | None = None,
    warn: Callable[[str], None] | None = None,
) -> WaitResult:
    """Watch until the run settles (see ``verdict_for``); ``emit`` receives each JSON line,
    ``warn`` what the operator should fix (a state directory others can write).

    Raises NexusError for the watcher's own errors (unknown run or task, unreadable project,
    an existing event log); everything else is an exit code in the result.
    """
    root = root_of(directory)
    run_path(run_id)  # the run id's own rule, before anything else
    if event_log is not None:
        check_log_path(event_log, root)
    recoveries: dict[str, JsonObject] = {}
    hashes: dict[tuple[int, ...], str] = {}
    current = take_snapshot(root, run_id, recoveries, hashes)
    _check_target(current, run_id, task_id)
    log = EventLog(event_log) if event_log is not None else None
    closure = set(needs.dependency_closure(current.view, task_id)) if current.view is not None and task_id else None
    count = 0

    def send(event: Event) -> None:
        nonlocal count
        line = json_line(event)
        emit(line)
        if log is not None:
            log.write(line)
        count += 1

    wakes, mode = (wakes, "injected") if wakes is not None else _wakes(root, force_polling)
    try:
        started = EventBatch(run_id, current.sequence, current.at_ms)
        extra: JsonObject = {"mode": mode, "idleTimeout": idle_timeout, "settleGrace": settle_grace}
        if current.error is not None:
            extra["error"] = current.error
        unsafe = state_dirs.problems(root)
        if unsafe:
            extra["unsafeStateDirectories"] = state_dirs.as_json(unsafe)
            for unsafe_directory in unsafe:
                if warn is not None:
                    warn(unsafe_directory.warning())
        started.add("watch-started", task_id, **extra)
        send(started.items[0])
        last_change = monotonic()
        last_full = last_change
        last_print = fingerprint(root, run_id)
        settling = _Settling(settle_grace)
        readable: Snapshot | None = current if current.view is not None else None
        while True:
            verdict = verdict_for(current, run_id, task_id)
            moment = monotonic()
            if settling.done(verdict, current, moment):
                return WaitResult(verdict.code or 0, verdict.message, count, verdict, current.sequence)
            if idle_timeout > 0 and moment - last_change >= idle_timeout:
                message = f"no change for {idle_timeout:g} s (idle timeout). {verdict.message}"
                return WaitResult(EXIT_IDLE, message, count, verdict, current.sequence)
            next(wakes)
            moment = monotonic()
            look = fingerprint(root, run_id)
            if look == last_print and moment - last_full < FULL_LOOK_SECONDS:
                continue
            last_print, last_full = look, moment
            newer = take_snapshot(root, run_id, recoveries, hashes)
            recoveries = newer.recoveries
            events = derive_events(current, newer, run_id, closure, readable)
            for event in events:
                send(event)
            if events or newer.sequence != current.sequence:
                last_change = moment
            current = newer
            if current.view is not None:
                readable = current
    finally:
        _close(log, wakes)


def _close(log: EventLog | None, wakes: Iterator[str]) -> None:
    if log is not None:
        log.close()
    close = getattr(wakes, "close", None)
    if close is not None:
        close()


def summary_object(run_id: str, task_id: str | None, result: WaitResult) -> JsonObject:
    status = {EXIT_IDLE: "idle-timeout", EXIT_ERROR: "error", EXIT_INTERRUPTED: "interrupted"}.get(
        result.code, "settled"
    )
    summary: JsonObject = {
        "type": "summary",
        "schemaVersion": 1,
        "time": iso_from_ms(now_ms()),
        "run": run_id,
        "status": status,
        "outcome": result.verdict.outcome if result.verdict and status == "settled" else None,
        "exitCode": result.code,
        "message": result.message,
        "sequence": result.sequence,
        "events": result.events,
        "tasks": [s.as_json() for s in result.verdict.states] if result.verdict else [],
    }
    if task_id is not None:
        summary["task"] = task_id
    if status == "error":
        summary["error"] = result.message
    return summary
