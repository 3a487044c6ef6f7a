"""``nexus loop``: inspect a run every interval (and verify what awaits it), in this process only."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..engine import definition_of, latest
from ..errors import NexusError
from ..paths import root_of
from ..shapes import JsonObject, Task
from ..state import canonical
from ..state.store import run_path
from ..terminal import terminal_safe
from ..timeutil import iso_from_ms, now_ms
from .classify import classify_run, owner_record_gone
from .events import (
    Emit,
    Snapshot,
    View,
    as_object,
    derive_events,
    heartbeat_stale,
    render_event,
    short_id,
    take_snapshot,
)

LOOP_TICK_CAP = 500
LOOP_MIN_SECONDS = 30
LOOP_MAX_SECONDS = 24 * 3600

# ----------------------------------------------------------------- loop


INTERVAL = re.compile(r"(0|[1-9][0-9]*)([smh])\Z", re.ASCII)
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text: str, option: str, low: int, high: int) -> int:
    """A whole number of seconds, minutes or hours (``30s``, ``5m``, ``2h``) within
    ``low``..``high`` seconds, as seconds; anything else is refused, naming ``option``."""
    match = INTERVAL.match(text)
    if not match:
        raise NexusError(
            f"{option} takes a whole number of seconds, minutes or hours such as 30s, 5m or 2h; got {text!r}."
        )
    seconds = int(match.group(1)) * UNIT_SECONDS[match.group(2)]
    if not low <= seconds <= high:
        raise NexusError(f"{option} must be between {_span(low)} and {_span(high)}; got {text}.")
    return seconds


def _span(seconds: int) -> str:
    return f"{seconds // 3600}h" if seconds % 3600 == 0 else f"{seconds}s"


def parse_interval(text: str) -> int:
    """``--every``: ``30s`` .. ``24h``."""
    return parse_duration(text, "--every", LOOP_MIN_SECONDS, LOOP_MAX_SECONDS)


@dataclass
class LoopStop:
    """Stop requests (Ctrl+C): the first ends the loop after the current step, the second
    ends it at once, leaving a running verification to finish on its own."""

    requests: int = 0
    event: threading.Event = field(default_factory=threading.Event)

    def request(self) -> None:
        self.requests += 1
        self.event.set()


def busy_reason(snapshot: Snapshot) -> str | None:
    """Why a tick must not run now, or None."""
    for name, lock in snapshot.locks.items():
        if lock is None:
            continue
        owner = as_object(lock.get("owner"))
        where = f"pid {owner.get('pid')} on {owner.get('hostname')}"
        if owner_record_gone(owner):
            where += ", not alive here: inspect, then recover-lock"
        return f"{name}.lock held by {where}"
    if snapshot.view is None:
        return None
    for task in snapshot.view["tasks"]:
        attempt = latest(task)
        if attempt is None:
            continue
        verification = attempt["verification"]
        if verification.get("status") == "running" and not owner_record_gone(verification.get("owner")):
            return f"a verification of {task['id']} is running"
        process = attempt.get("process") if isinstance(attempt.get("process"), dict) else None
        if (
            attempt["backend"].get("kind") == "process"
            and process is not None
            and process.get("status") in ("starting", "running")
            and not heartbeat_stale(attempt, snapshot.at_ms)
        ):
            return f"a launch of {task['id']} is running"
    return None


def verify_candidates(view: View) -> list[str]:
    """Tasks whose latest attempt completed and has no verification yet."""
    found = []
    for task in view["tasks"]:
        attempt = latest(task)
        if (
            attempt is not None
            and task["integration"] != "accepted"
            and attempt["execution"] == "completed"
            and attempt["verification"].get("status") == "pending"
            and attempt.get("cancellation", {}).get("status") != "requested"
            and attempt.get("verificationRounds", 0) < definition_of(view, task["id"])["maxAttempts"]
        ):
            found.append(task["id"])
    return found


VERIFY_STOP_GRACE_SECONDS = 10.0  # after SIGINT at the deadline, how long verify may take to record


@dataclass
class VerifyResult:
    """How one ``nexus verify`` child ended: ``finished`` is False when it was left running (a
    second stop request) or stopped at its deadline (``timed_out``)."""

    finished: bool
    status: str | None = None
    timed_out: bool = False
    refusal: str | None = None  # verify refused to run: its error, as --json gave it


def verify_in_own_process_group(
    root: str,
    run_id: str,
    task_id: str,
    say: Callable[[str], None],
    stop: LoopStop,
    deadline: float | None = None,
) -> VerifyResult:
    """Run ``nexus verify`` as a child in its own session and report its checks as they land.

    A terminal Ctrl+C signals the whole foreground process group: a check in the loop's group
    would be killed by it and recorded as a failed verification. In its own session the
    verification never sees the terminal's signals and always records a real verdict. A second
    stop request leaves it running on its own. At ``deadline`` (``time.monotonic``) it gets
    SIGINT, which makes verify stop its check and record the verification as ambiguous; a
    child still there after a grace period is killed with its whole process group.
    """
    import subprocess

    before = take_snapshot(root, run_id)
    child = subprocess.Popen(
        [sys.executable, "-m", "nexus_core.cli", "verify", run_id, task_id, "--json", "-d", root],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    output = b""
    interrupted_at: float | None = None
    while True:
        try:
            output, _ = child.communicate(timeout=0.2)
            finished = True
        except subprocess.TimeoutExpired:
            finished = False
        after = take_snapshot(root, run_id)
        for event in derive_events(before, after, run_id, {task_id}):
            if event["type"] == "check-finished":
                error = f", {event['error']}" if event.get("error") else ""
                say(f"    check {event['check']}: exit {event['exitCode']}{error}")
        before = after
        if finished:
            break
        if stop.requests >= 2:
            say(f"  the verification of {task_id} goes on in pid {child.pid} and will record its own verdict")
            return VerifyResult(False)
        moment = time.monotonic()
        if deadline is not None and moment >= deadline and interrupted_at is None:
            say(f"  the verification of {task_id} ran past its maximum duration: stopping it")
            interrupted_at = moment
            with contextlib.suppress(OSError):
                os.kill(child.pid, signal.SIGINT)
        elif interrupted_at is not None and moment - interrupted_at >= VERIFY_STOP_GRACE_SECONDS:
            with contextlib.suppress(OSError):
                os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            say(f"  the verification of {task_id} did not stop by itself; its process group was killed")
            return VerifyResult(False, None, True)
    status, refusal = _verified_status(output, child.returncode, task_id, say)
    return VerifyResult(True, status, interrupted_at is not None, refusal)


def _verified_status(
    output: bytes, exit_code: int, task_id: str, say: Callable[[str], None]
) -> tuple[str | None, str | None]:
    """(the verification status, or why verify refused or gave nothing) in a finished
    ``nexus verify --json``'s output, said as it is."""
    try:
        result = canonical.parse(output.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        result = None
    if isinstance(result, dict) and isinstance(result.get("tasks"), list):
        task: Task = next((t for t in result["tasks"] if t.get("id") == task_id), Task())
        status = as_object((latest(task) or {}).get("verification")).get("status")
        say(f"  verified {task_id}: {status}")
        return status, None
    if isinstance(result, dict) and "error" in result:
        say(f"  verify {task_id} refused: {result['error']}")
        return None, str(result["error"])
    say(f"  verify {task_id} ended with exit {exit_code} and no readable result")
    return None, f"ended with exit {exit_code} and no readable result"


@dataclass
class TickOutcome:
    """One tick: the run as the tick left it, why it was skipped (``busy``), the verdicts of
    the verifications it ran, and whether a stop request or the deadline cut it short."""

    snapshot: Snapshot
    busy: str | None = None
    verified: dict[str, str | None] = field(default_factory=dict)
    refused: dict[str, str] = field(default_factory=dict)  # verify refused (or gave nothing): why
    stopped: bool = False
    timed_out: str | None = None


def run_tick(
    root: str,
    run_id: str,
    tick: int,
    previous: Snapshot | None,
    say: Callable[[str], None],
    *,
    verify: bool,
    stop: LoopStop,
    cache: TickCache | None = None,
    deadline: float | None = None,
) -> TickOutcome:
    """Inspect once, report what changed since ``previous`` (stale and overdue work on the first
    tick) and, with ``verify``, verify every completed attempt that awaits it. A run that is
    busy is not touched: the outcome says why."""
    cache = cache if cache is not None else TickCache()
    snapshot = take_snapshot(root, run_id, cache.recoveries, cache.hashes)
    cache.recoveries = snapshot.recoveries
    reason = busy_reason(snapshot)
    if reason is not None:
        return TickOutcome(snapshot, busy=reason)
    outcome = TickOutcome(snapshot)
    _report_tick(say, tick, previous, snapshot, run_id)
    if verify and snapshot.view is not None:
        for task_id in verify_candidates(snapshot.view):
            if stop.requests:
                break
            say(f"  verifying {task_id}...")
            result = verify_in_own_process_group(root, run_id, task_id, say, stop, deadline)
            outcome.verified[task_id] = result.status
            if result.refusal is not None:
                outcome.refused[task_id] = result.refusal
            if result.timed_out:
                outcome.timed_out = task_id
            if not result.finished or result.timed_out:
                outcome.stopped = not result.timed_out
                break
        outcome.snapshot = take_snapshot(root, run_id, cache.recoveries, cache.hashes)
    return outcome


@dataclass
class TickCache:
    """What successive ticks of one run reuse: known lock-recovery receipts, file hashes."""

    recoveries: dict[str, JsonObject] = field(default_factory=dict)
    hashes: dict[tuple[int, ...], str] = field(default_factory=dict)


@dataclass
class LoopResult:
    executed: int
    skipped: int
    reason: str


def ticks_phrase(count: int) -> str:
    return f"{count} tick" if count == 1 else f"{count} ticks"


def run_loop(
    directory: str,
    run_id: str,
    every: float,
    *,
    verify: bool = False,
    emit: Emit,
    clock: Callable[[], float] = time.monotonic,
    sleeper: Callable[[float], object] | None = None,
    tick_cap: int = LOOP_TICK_CAP,
    stop: LoopStop | None = None,
) -> LoopResult:
    """Tick every ``every`` seconds until the cap or a stop request; see ``nexus loop --help``."""
    stop = stop or LoopStop()
    sleep: Callable[[float], object] = sleeper or stop.event.wait
    root = root_of(directory)
    run_path(run_id)
    first = take_snapshot(root, run_id)
    if first.unknown:
        raise NexusError(first.error or f"Unknown run: {run_id}")
    cache = TickCache()
    executed = skipped = 0
    previous: Snapshot | None = None
    next_at = clock()

    def say(text: str) -> None:
        emit(f"[{iso_from_ms(now_ms())}] {terminal_safe(text, one_line=True)}\n")

    while True:
        if stop.requests:
            return LoopResult(executed, skipped, "stopped")
        moment = clock()
        if moment < next_at:
            sleep(next_at - moment)
            continue
        next_at += every
        tick = executed + skipped + 1
        outcome = run_tick(root, run_id, tick, previous, say, verify=verify, stop=stop, cache=cache)
        if outcome.busy is not None:
            skipped += 1
            say(f"tick {tick} skipped: run busy ({outcome.busy})")
            continue
        executed += 1
        if outcome.stopped:
            return LoopResult(executed, skipped, "stopped")
        previous = outcome.snapshot
        if executed >= tick_cap:
            say(f"Loop stopped by itself after {ticks_phrase(executed)} (the cap); start it again to continue.")
            return LoopResult(executed, skipped, "cap")
        # Ticks that came due while this one ran are skipped and counted, never run late.
        finished = clock()
        missed = 0
        while next_at <= finished:
            missed += 1
            next_at += every
        if missed:
            skipped += missed
            say(f"{missed} tick(s) skipped: the previous tick was still running")


def tick_summary(snapshot: Snapshot) -> str:
    """``sequence 7; 1 accepted, 1 awaiting-verify; 0 stale, 0 overdue`` (a readable run)."""
    assert snapshot.view is not None
    observations = snapshot.view.get("observations") or []
    stale = sum(1 for o in observations if o.get("stale"))
    overdue = sum(1 for o in observations if o.get("overdue"))
    counts: dict[str, int] = {}
    for item in classify_run(snapshot.view, None, snapshot.at_ms):
        counts[item.state] = counts.get(item.state, 0) + 1
    tally = ", ".join(f"{n} {name}" for name, n in counts.items())
    return f"sequence {snapshot.sequence}; {tally}; {stale} stale, {overdue} overdue"


def _report_tick(
    say: Callable[[str], None], tick: int, previous: Snapshot | None, snapshot: Snapshot, run_id: str
) -> None:
    if snapshot.view is None:
        say(f"tick {tick}: run unreadable: {snapshot.error}")
        return
    observations = snapshot.view.get("observations") or []
    stale = [o for o in observations if o.get("stale")]
    overdue = [o for o in observations if o.get("overdue")]
    say(f"tick {tick}: {tick_summary(snapshot)}")
    if previous is None:
        for item in stale:
            say(f"  stale: task {item['taskId']}: {item.get('staleReason')}")
        for item in overdue:
            say(f"  overdue: task {item['taskId']} attempt {short_id(item.get('attemptId'))}")
        return
    events = derive_events(previous, snapshot, run_id)
    if not events:
        say("  no change")
    for event in events:
        say("  " + render_event(event))
