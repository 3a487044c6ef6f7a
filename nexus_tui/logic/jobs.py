"""Long work started from this dashboard session (verify, launch): a :class:`Job` per call, whether
its progress dialog is open or it runs in the background, and :class:`Jobs`, the session's list of
them (the jobs view, J; the task rows; the quit dialog; the finish notification). No widgets here.

A job's worker thread feeds it the core's progress events (``Job.take``) and its end
(``Job.finish``); the screens read it on the UI thread. Everything a job holds is guarded by its
lock, and its output is bounded (OUTPUT_LINES_KEPT lines of at most LINE_CHARS_KEPT characters).
The output is the check's or the process's text as captured: untrusted, shown only through
``widgets.plain.plain`` (terminal-safe, never markup).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any, NamedTuple

from nexus_core.backend.process_group import STOP_GRACE_SECONDS
from nexus_core.words import json_word

OUTPUT_LINES_KEPT = 5000  # per job; the oldest go first (the view says how many went)
LINE_CHARS_KEPT = 1000  # a longer line is cut, its length said
EVENT_LINES_KEPT = 100  # the progress dialog's event lines
FINISHED_JOBS_KEPT = 20  # finished jobs listed in the jobs view; older ones are forgotten

NEXUS = "nexus"  # the stream of the lines the dashboard adds (a check starts, a process ends)


class OutputLine(NamedTuple):
    stream: str  # "stdout", "stderr" or NEXUS
    text: str  # as captured (untrusted): shown through widgets.plain.plain


class JobOutput:
    """A job's output as lines, bounded. ``count`` numbers every line ever added, so a view that
    has shown lines up to ``n`` asks for ``since(n)`` even after the oldest were dropped."""

    def __init__(self, max_lines: int = OUTPUT_LINES_KEPT, max_chars: int = LINE_CHARS_KEPT) -> None:
        self.lines: deque[OutputLine] = deque(maxlen=max_lines)
        self.count = 0
        self.max_chars = max_chars
        self._partial: dict[str, str] = {}

    @property
    def dropped(self) -> int:
        return self.count - len(self.lines)

    def add(self, stream: str, text: str) -> None:
        """A captured piece of ``stream``: complete lines are kept, the rest waits for its end."""
        pending = self._partial.pop(stream, "") + text
        *complete, rest = pending.split("\n")
        for line in complete:
            self._append(stream, line.removesuffix("\r"))
        while len(rest) > self.max_chars:  # a line that never ends is still shown, in pieces
            self._append(stream, rest[: self.max_chars])
            rest = rest[self.max_chars :]
        if rest:
            self._partial[stream] = rest

    def flush(self) -> None:
        """The stream ended (its check finished, the process ended): unfinished lines are lines."""
        for stream, rest in sorted(self._partial.items()):
            self._append(stream, rest)
        self._partial.clear()

    def note(self, text: str) -> None:
        self.flush()
        self._append(NEXUS, text)

    def _append(self, stream: str, text: str) -> None:
        if len(text) > self.max_chars:
            text = f"{text[: self.max_chars]}… ({len(text) - self.max_chars} more characters)"
        self.lines.append(OutputLine(stream, text))
        self.count += 1

    def since(self, index: int) -> tuple[list[OutputLine], int]:
        """The lines numbered ``index`` and after that are still kept, and the next number."""
        first = self.count - len(self.lines)
        start = max(index, first)
        return list(islice(self.lines, start - first, None)), self.count


@dataclass(frozen=True)
class JobTarget:
    """What a job acts on, and the facts its stop's cost is stated from (the dialog's)."""

    action: str  # "verify" | "launch"
    project: str  # the project root, as the core resolves it
    run_id: str
    task_id: str
    title: str
    facts: Mapping[str, object]  # preconditions.task_facts when the dialog opened


class Job:
    """One verify or launch of this session, from its start to its end."""

    def __init__(self, number: int, target: JobTarget, clock: Callable[[], float] = time.monotonic) -> None:
        self.number = number
        self.target = target
        self.clock = clock
        self.started_at = clock()
        self.ended_at: float | None = None
        self.stop_requested = threading.Event()
        self._lock = threading.Lock()
        attempt = target.facts.get("attempt") if target.action == "verify" else None
        self.attempt_id: str | None = attempt if isinstance(attempt, str) else None
        self.step = "Preparing…"
        self.command = ""
        self.child: str | None = None  # what runs right now, in words
        self.child_pid: int | None = None
        self._events: list[str] = []
        self.output = JobOutput()
        self.finished = False
        self.succeeded = False
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.words = ""  # the result in the action log's words, or the refusal
        self._reported = False
        self._announced = False

    # -- facts read by the views (the UI thread)
    @property
    def action(self) -> str:
        return self.target.action

    @property
    def label(self) -> str:
        return f"{self.target.action} {self.target.run_id}/{self.target.task_id}"

    def elapsed(self) -> float:
        end = self.ended_at if self.ended_at is not None else self.clock()
        return max(0.0, end - self.started_at)

    def state(self) -> str:
        """One word: running, stopping, passed / completed, failed, ambiguous, refused."""
        if not self.finished:
            return "stopping" if self.stop_requested.is_set() else "running"
        if self.error is not None:
            return "refused"
        return self.outcome() or ("done" if self.succeeded else "failed")

    def outcome(self) -> str | None:
        """The verification's status, or the launch receipt's outcome, once finished."""
        attempt = _latest_attempt(self.result, self.target.task_id)
        if attempt is None:
            return None
        if self.target.action == "verify":
            return str(attempt["verification"].get("status"))
        receipt = (attempt.get("process") or {}).get("receipt") or {}
        return str(receipt["outcome"]) if receipt.get("outcome") else None

    def events(self, last: int = EVENT_LINES_KEPT) -> list[str]:
        with self._lock:
            return self._events[-last:]

    def lines_since(self, index: int) -> tuple[list[OutputLine], int]:
        with self._lock:
            return self.output.since(index)

    def running_words(self) -> str:
        """What runs, in one sentence (the quit dialog's): action, task, attempt, child, pid, time."""
        target = self.target
        words = f"{target.action} of task {target.task_id} (run {target.run_id})"
        if self.attempt_id:
            words += f", attempt {self.attempt_id}"
        if self.child:
            words += f": {self.child}"
        if self.finished:
            return f"{words}: ended after {elapsed_text(self.elapsed())}"
        words += f", pid {self.child_pid}" if self.child_pid else ", no child running"
        if self.stop_requested.is_set():
            words += ", stop requested"
        return f"{words}; running for {elapsed_text(self.elapsed())}"

    # -- fed by the worker thread
    def take(self, event: Mapping[str, Any]) -> None:
        """One progress event of the core (engine.verify_task, process.launch_task)."""
        with self._lock:
            self._take(event)

    def _take(self, event: Mapping[str, Any]) -> None:
        kind = event.get("event")
        if kind == "check-started":
            self.step = f"Check {event['index'] + 1} of {event['total']}: {event['check']}"
            self.command = " ".join(str(part) for part in event.get("command", []))
            self.child = f"check {event['check']} ({event['index'] + 1} of {event['total']})"
            self.output.note(f"── check {event['check']} ({event['index'] + 1} of {event['total']}): {self.command}")
        elif kind == "check-spawned":
            self.child_pid = event.get("pid")
        elif kind in ("check-output", "output"):
            self.output.add(str(event.get("stream")), str(event.get("text", "")))
        elif kind == "check-finished":
            self.child_pid = None
            passed = event.get("exitCode") == 0 and not event.get("error")
            words = f"{event['check']}: exit code {json_word(event.get('exitCode'))}"
            if event.get("timedOut"):
                words += ", timed out"
            if event.get("error"):
                words += f", {event['error']}"
            self._add_event(f"{'✓' if passed else '✗'} {words}")
            self.output.note(f"── {words}")
        elif kind == "spawned":
            self.step = f"Process running (pid {event.get('pid')})"
            self.child, self.child_pid = "the launched process", event.get("pid")
            self.attempt_id = event.get("attemptId") or self.attempt_id
            self._add_event(f"spawned pid {event.get('pid')}")
            self.output.note(f"── process started (pid {event.get('pid')})")
        elif kind == "heartbeat":
            self._add_event(f"heartbeat {event.get('count')}", replace_prefix="heartbeat ")
        elif kind == "heartbeat-skipped":
            self._add_event(f"heartbeat skipped ({event.get('count')}): writer.lock busy")
        elif kind == "finished":
            self.child_pid = None
            words = f"process ended: outcome {json_word(event.get('outcome'))}"
            if event.get("reason") is not None:
                words += f", reason {json_word(event.get('reason'))}"
            self._add_event(words)
            self.output.note(f"── {words}")

    def _add_event(self, line: str, replace_prefix: str | None = None) -> None:
        if replace_prefix and self._events and self._events[-1].startswith(replace_prefix):
            self._events[-1] = line
        else:
            self._events.append(line)
            del self._events[:-EVENT_LINES_KEPT]

    def request_stop(self) -> bool:
        """Ask the core to stop (its ``should_stop``); False when the job had already ended."""
        if self.finished:
            return False
        self.stop_requested.set()
        with self._lock:
            self._add_event(f"stop requested: {stop_signal_words(self.target.action)}")
        return True

    def finish(self, result: dict[str, Any] | None, error: str | None, words: str) -> None:
        with self._lock:
            self.output.flush()
            self.result, self.error = result, error
            self.words = error if error is not None else words
            self.succeeded = error is None and self.outcome() in ("passed", "completed")
            self.ended_at = self.clock()
            self.child_pid = None
            self.step = "Stopped" if self.stop_requested.is_set() else "Done"
            self.finished = True  # last: a view that sees it finished sees the rest

    def announce(self) -> bool:
        """Whether the UI should be told of a change now: False while an earlier word has not
        been heard yet (it will read this change too). The UI calls :meth:`heard` first."""
        with self._lock:
            if self._announced:
                return False
            self._announced = True
            return True

    def heard(self) -> None:
        with self._lock:
            self._announced = False

    @property
    def reported(self) -> bool:
        """Its end was reported on the UI thread (notified, the project asked to rescan)."""
        return self._reported

    def report_once(self) -> bool:
        """True the first time it is asked after the job finished (one notification per job)."""
        if not self.finished or self._reported:
            return False
        self._reported = True
        return True


def _latest_attempt(result: Mapping[str, Any] | None, task_id: str) -> Mapping[str, Any] | None:
    if result is None:
        return None
    task = next((t for t in result.get("tasks", []) if t.get("id") == task_id), None)
    attempts = task.get("attempts") if task else None
    return attempts[-1] if attempts else None


class Jobs:
    """The jobs of this dashboard session, oldest first; finished ones beyond FINISHED_JOBS_KEPT go."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._jobs: list[Job] = []
        self._numbers = 0

    def add(self, target: JobTarget) -> Job:
        self._numbers += 1
        job = Job(self._numbers, target, self.clock)
        self._jobs.append(job)
        finished = [j for j in self._jobs if j.finished]
        for old in finished[: max(0, len(finished) - FINISHED_JOBS_KEPT)]:
            self._jobs.remove(old)
        return job

    def all(self) -> list[Job]:
        return list(self._jobs)

    def running(self) -> list[Job]:
        return [job for job in self._jobs if not job.finished]

    @property
    def any_running(self) -> bool:
        """Whether a job is still running (asked per task row at each tick: no list built)."""
        return any(not job.finished for job in self._jobs)

    def running_on(self, project: str | None, run_id: str | None, task_id: str) -> Job | None:
        """The unfinished job on this task, if any (the task row shows it)."""
        for job in self._jobs:
            target = job.target
            if not job.finished and (target.project, target.run_id, target.task_id) == (project, run_id, task_id):
                return job
        return None

    def get(self, number: int) -> Job | None:
        return next((job for job in self._jobs if job.number == number), None)


# ----------------------------------------------------------------- words


def elapsed_text(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s"


def short_elapsed(seconds: float) -> str:
    """For a table cell: 42s, 3m05s, 1h02m."""
    whole = int(max(0.0, seconds))
    if whole < 60:
        return f"{whole}s"
    minutes, rest = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m{rest:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


def stop_signal_words(action: str) -> str:
    what = "the running check's process group" if action == "verify" else "the launched process's group"
    return f"{what} gets SIGTERM, then SIGKILL after {STOP_GRACE_SECONDS:g} s"


def stop_cost(target: JobTarget) -> list[str]:
    """What a stop costs, in the core's terms (SPEC 5.12, 5.10, 6.4): the Stop dialog says it."""
    facts = target.facts
    limit = facts.get("maxAttempts")
    signal_line = f"Stopping: {stop_signal_words(target.action)}."
    if target.action == "verify":
        used = facts.get("verificationRounds")
        round_ = used + 1 if isinstance(used, int) else None
        lines = [
            signal_line + " No further check starts.",
            "The verification ends ambiguous (never passed) and the task's acceptance becomes 'rejected'.",
        ]
        if isinstance(round_, int) and isinstance(limit, int):
            left = max(0, limit - round_)
            lines.append(
                f"This is verification round {round_} of {limit} for this attempt, and it counts toward the "
                "restart limit even when stopped (reconcile does not give it back): "
                + (
                    f"{left} round{'s' if left != 1 else ''} left (reconcile, then verify again)."
                    if left
                    else "none is left, so only a new attempt (reconcile, then retry) can be verified again."
                )
            )
        return lines
    attempts = facts.get("attempts")
    number = attempts + 1 if isinstance(attempts, int) else None
    lines = [
        signal_line,
        "Its receipt then says supervisor-interrupted and the attempt's execution becomes ambiguous: "
        "it must be reconciled before a retry.",
    ]
    if isinstance(number, int) and isinstance(limit, int):
        lines.append(f"This is attempt {number} of {limit} of the task; a retry uses another one.")
    return lines
