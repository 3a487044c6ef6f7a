"""The process backend (SPEC 5.7, 5.8 and 6): ``launch`` supervises the plan's executable in
the foreground and stores a checksummed receipt; ``collect`` turns that receipt into the
attempt's outcome.

Beyond the reference (SPEC 9.2.3): every state write made while the child runs waits for
writer.lock with a bounded, jittered backoff instead of failing at once. A heartbeat that cannot
be written in time is skipped (the child is never stopped for it), and a receipt that cannot be
stored is kept beside the state as a recoverable receipt file that ``inspect`` points at and
``collect`` accepts.
"""

from __future__ import annotations

import base64
import codecs
import contextlib
import errno
import functools
import os
import selectors
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, cast

from ..engine import (
    Progress,
    WriterBusy,
    backend_identity,
    begin,
    bound_attempt,
    definition_of,
    mutate,
    task_of,
)
from ..errors import NexusError, fail, message_of
from ..hostinfo import hostname, pid
from ..paths import directory_at, read_regular, root_of, safe_target
from ..plan import input_bytes
from ..preconditions import COLLECT_READY, COLLECT_UNRECONCILED, LAUNCH, LAUNCH_CONTRACT, require, task_facts
from ..shapes import Attempt, Backend, JsonObject, Run, Task, TaskDefinition
from ..snapshots import protected_snapshot, scope_snapshot
from ..state import canonical
from ..state.store import (
    RECEIPTS_DIR,
    RUN_ID,
    StateNotWritten,
    atomic_write,
    load_run,
    run_path,
    unsafe_reason,
)
from ..timeutil import now_iso, now_ms, parse_iso_ms
from . import process_group
from .checks import check_environment, signal_name
from .process_group import group_alive

POLL_SECONDS = 0.1
HEARTBEAT_SECONDS = 1.0
STOP_GRACE_SECONDS = process_group.STOP_GRACE_SECONDS  # the reference's 1 s; then SIGKILL to the group
KILLED_EXIT_SECONDS = 0.5  # after that SIGKILL: how long the child's exit is waited for
RETAINED_PIPES_SECONDS = 0.25
# How long a state write inside a running launch may wait for writer.lock.
HEARTBEAT_PATIENCE_SECONDS = 2.0
SPAWNED_PATIENCE_SECONDS = 1.0
RECEIPT_PATIENCE_SECONDS = 30.0
RECEIPT_FILE_LIMIT = 32 * 1024 * 1024

CODEX_KEYS = ("HOME", "USERPROFILE", "HOMEDRIVE", "HOMEPATH", "CODEX_HOME")
NOT_OWNED = "Original process no longer owns the active operation."
BLOCKED_REQUEST = (
    "Executable reported a blocked operation; inspect the receipt and existing authorization. No approval is inferred."
)
COLLECTED_SUMMARY = "Collected the exact foreground supervisor result. Verification remains separate."
USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens")
SAFE_INTEGER = 2**53 - 1


@functools.cache
def runtime_hash() -> str:
    """sha256 of this module, the counterpart of the reference's nexus-process.js hash."""
    with open(__file__, "rb") as handle:
        return canonical.sha256_bytes(handle.read())


def _options(options: Any) -> JsonObject:
    return options if isinstance(options, dict) else {}


# ----------------------------------------------------------------- environment (SPEC 6.1)


def execution_environment(
    execution: JsonObject, minimal: JsonObject, environ: dict[str, str] | None = None
) -> tuple[dict[str, str], JsonObject]:
    """(values given to the child, the receipt's environment entry). No value is recorded."""
    values = dict(minimal["values"])
    codex = execution["adapter"] == "codex-exec"
    if codex:
        source = dict(os.environ if environ is None else environ)
        for key in CODEX_KEYS:
            for name, value in source.items():
                if name.upper() == key:
                    values[key] = value
                    break
    receipt = {
        "policy": "local-codex-auth-paths-v1" if codex else "minimal-local-v1",
        "inheritedKeys": canonical.js_sorted(values),
        "credentialValuesRecorded": False,
    }
    return values, receipt


# ----------------------------------------------------------------- output interpretation (SPEC 6.5)


def _safe_count(value: object) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return float(value).is_integer() and 0 <= value <= SAFE_INTEGER


def interpret_output(execution: JsonObject, stdout_text: str, exit_code: int | None) -> tuple[str, Any]:
    """(outcome, provider) from the exit code and, for codex-exec, its JSONL events."""
    if exit_code is not None and exit_code in execution.get("blockedExitCodes", []):
        return "blocked", None
    if execution["adapter"] != "codex-exec":
        return ("completed" if exit_code == 0 else "failed"), None
    seen = _CodexEvents()
    for line in stdout_text.replace("\r\n", "\n").split("\n"):
        if line == "":
            continue
        try:
            event = canonical.parse(line)
        except (ValueError, RecursionError):
            return "failed", {"problem": "Invalid Codex JSONL."}
        if not isinstance(event, dict):
            return "failed", {"problem": "Invalid Codex event object."}
        seen.take(event)
    if seen.approval:
        outcome = "blocked"
    elif exit_code == 0 and seen.completed and seen.thread_id and not seen.failed:
        outcome = "completed"
    else:
        outcome = "failed"
    provider = {
        "threadId": seen.thread_id,
        "completed": seen.completed,
        "failed": seen.failed,
        "usage": seen.usage,
        "concreteModel": None,
        "monetaryCost": None,
    }
    return outcome, provider


class _CodexEvents:
    """What codex-exec's JSONL events said: its thread, whether its turn completed or failed
    (and for want of an approval), its token usage."""

    def __init__(self) -> None:
        self.thread_id: Any = None
        self.completed = self.failed = self.approval = False
        self.usage: JsonObject | None = None

    def take(self, event: JsonObject) -> None:
        kind = event.get("type")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            self.thread_id = event["thread_id"]
        elif kind == "turn.completed":
            self.completed = True
            if isinstance(event.get("usage"), dict):
                self.usage = {
                    key: int(value) for key, value in event["usage"].items() if key in USAGE_KEYS and _safe_count(value)
                }
        elif kind in ("turn.failed", "error"):
            self.failed = True
            error = event.get("error")
            code = error.get("code") if isinstance(error, dict) else None
            if code == "approval_required" or event.get("code") == "approval_required":
                self.approval = True


# ----------------------------------------------------------------- supervision (SPEC 6.4)


class Hooks:
    """What the supervisor asks of the state while its child runs."""

    def poll(self) -> str | None:  # pragma: no cover - interface
        return None

    def spawned(self, child_pid: int | None) -> None:  # pragma: no cover - interface
        return None

    def failure(self) -> tuple[str, str] | None:
        """(reason, error) when the state writer found the operation no longer owned."""
        return None

    def should_stop(self) -> bool:
        return False

    def output(self, stream: str, data: bytes) -> None:
        """A captured piece of the child's ``stream`` (as the receipt stores it), as it is read."""
        return None


def _output_entry(data: bytes, observed: int, complete: bool) -> JsonObject:
    return {
        "text": data.decode("utf-8", "replace"),
        "base64": base64.b64encode(data).decode("ascii"),
        "sha256": canonical.sha256_bytes(data),
        "capturedBytes": len(data),
        "observedBytes": observed,
        "complete": complete,
        "hashScope": "captured-bytes",
    }


class _Signals:
    """SIGINT/SIGTERM to the supervisor, recorded instead of killing it, for the whole launch:
    the child is stopped through the original handle and the receipt is still saved."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> _Signals:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[int(signum)] = signal.signal(signum, self._record)
        return self

    def _record(self, number: int, _frame: Any) -> None:
        self.received = number

    def __exit__(self, *_exc: object) -> None:
        for number, handler in self.previous.items():
            signal.signal(number, handler)


class _Supervision:
    def __init__(self, root: str, execution: JsonObject, stdin: bytes, values: dict[str, str]) -> None:
        self.root = root
        self.execution = execution
        self.stdin = stdin
        self.values = values
        self.exit_code: int | None = None
        self.signal: str | None = None
        self.error: str | None = None
        self.reason: str | None = None
        self.child: subprocess.Popen[bytes] | None = None
        self.child_exited = False
        self.closed = False
        self.signalled = False
        self.captured = {"stdout": bytearray(), "stderr": bytearray()}
        self.observed = {"stdout": 0, "stderr": 0}
        self.stop_at: float | None = None
        self.exited_at: float | None = None
        self.signals = _Signals()

    def stop(self, why: str) -> None:
        if self.reason is None:
            self.reason = why
        child = self.child
        if child is not None and not self.child_exited:
            code = child.poll()
            if code is not None:
                self._record_exit(code)
        if child is not None and self.stop_at is None:
            # The child leads its own process group: SIGTERM reaches what it started too (its
            # descendants are stopped even when the child itself has already exited).
            try:
                os.killpg(child.pid, signal.SIGTERM)
                self.signalled = not self.child_exited
            except ProcessLookupError:
                pass  # nothing of it is left
            except OSError as failure:
                if self.error is None:
                    self.error = str(failure)
        if self.stop_at is None:
            self.stop_at = time.monotonic() + STOP_GRACE_SECONDS

    def _capture(self, stream: str, chunk: bytes) -> bytes:
        self.observed[stream] += len(chunk)
        room = self.execution["outputLimitBytes"] - len(self.captured["stdout"]) - len(self.captured["stderr"])
        kept = chunk[: max(0, room)]
        self.captured[stream] += kept
        if len(kept) < len(chunk):
            self.stop("output-limit")
        return kept

    def _record_exit(self, returncode: int) -> None:
        self.child_exited = True
        self.exited_at = time.monotonic()
        if returncode < 0:
            self.exit_code, self.signal = None, signal_name(-returncode)
        else:
            self.exit_code, self.signal = returncode, None

    def run(self, deadline_ms: int, hooks: Hooks, started_at: str, signals: _Signals) -> JsonObject:
        self.signals = signals
        try:
            self._supervise(deadline_ms, hooks)
        except Exception as failure:
            if self.error is None:
                self.error = message_of(failure)
            if self.child is None:
                self.child_exited = self.closed = True
            else:
                self.stop("launch-observation-failed")
                self._drain_until_stop()
        finally:
            self._close_pipes()
        return self._result(started_at)

    def _supervise(self, deadline_ms: int, hooks: Hooks) -> None:
        early = hooks.poll()
        if early is not None or now_ms() >= deadline_ms:
            self.reason = early or "deadline"
            self.child_exited = self.closed = True
            return
        execution = self.execution
        try:
            self.child = subprocess.Popen(
                [execution["command"], *execution["args"]],
                cwd=directory_at(self.root, execution["cwd"]),
                env=self.values,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,
                start_new_session=True,  # its descendants are its process group: stopped together
            )
        except OSError as failure:
            code = errno.errorcode.get(failure.errno or 0, str(failure))
            self.error = f"spawn {execution['command']} {code}"
            self.child_exited = self.closed = True
            hooks.spawned(None)
            return
        hooks.spawned(self.child.pid)
        self._loop(deadline_ms, hooks)

    def _loop(self, deadline_ms: int, hooks: Hooks) -> None:
        child = self.child
        assert child is not None and child.stdin and child.stdout and child.stderr
        selector = selectors.DefaultSelector()
        streams = {child.stdout.fileno(): "stdout", child.stderr.fileno(): "stderr"}
        for fd in streams:
            selector.register(fd, selectors.EVENT_READ)
        stdin_fd = child.stdin.fileno()
        pending = memoryview(self.stdin)
        if pending:
            os.set_blocking(stdin_fd, False)
            selector.register(stdin_fd, selectors.EVENT_WRITE)
        else:
            child.stdin.close()
        open_streams = len(streams)
        next_poll = time.monotonic() + POLL_SECONDS
        try:
            while True:
                for key, _ in selector.select(timeout=0.02):
                    fd = int(key.fd)
                    if fd == stdin_fd:
                        pending = self._feed(selector, fd, pending)
                        continue
                    chunk = os.read(fd, 65536)
                    if not chunk:
                        selector.unregister(fd)
                        open_streams -= 1
                        continue
                    kept = self._capture(streams[fd], chunk)
                    if kept:
                        hooks.output(streams[fd], kept)
                now = time.monotonic()
                if not self.child_exited:
                    code = child.poll()
                    if code is not None:
                        self._record_exit(code)
                if open_streams == 0:
                    self.closed = True
                if self._ended(now):
                    return
                self._heed(hooks)
                if now >= next_poll:
                    next_poll = now + POLL_SECONDS
                    self._poll_owner(hooks, deadline_ms)
        finally:
            selector.close()

    def _feed(self, selector: selectors.BaseSelector, fd: int, pending: memoryview) -> memoryview:
        """Write what the child's stdin takes now; close it once all is written (or it broke)."""
        assert self.child is not None and self.child.stdin
        try:
            written = os.write(fd, pending)
            pending = pending[written:]
        except BlockingIOError:
            return pending
        except OSError as failure:
            if failure.errno != errno.EPIPE and self.error is None:
                self.error = str(failure)
            pending = pending[len(pending) :]
        if not pending:
            selector.unregister(fd)
            self.child.stdin.close()
        return pending

    def _ended(self, now: float) -> bool:
        """The child exited with its pipes closed, kept them past the grace, or was stopped (its
        process group then gone, or killed once the grace has passed)."""
        stopping = self.stop_at is not None
        if self.child_exited and self.closed and not (stopping and self._group_left()):
            return True
        if not stopping and self.exited_at is not None and now - self.exited_at >= RETAINED_PIPES_SECONDS:
            if self.reason is None:
                self.reason = "retained-pipes"
            return True
        if self.stop_at is not None and now >= self.stop_at:
            self._kill_group()
            return True
        return False

    def _group_left(self) -> bool:
        return self.child is not None and group_alive(self.child.pid)

    def _kill_group(self) -> None:
        """The grace after SIGTERM has passed: SIGKILL what is left of the child's process group,
        and record the child's end if it comes at once (the reference leaves it running)."""
        child = self.child
        if child is None or not self._group_left():
            return
        with contextlib.suppress(OSError):
            os.killpg(child.pid, signal.SIGKILL)
        if not self.child_exited:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._record_exit(child.wait(timeout=KILLED_EXIT_SECONDS))

    def _heed(self, hooks: Hooks) -> None:
        """Stop on an operator's interrupt or when the state writer lost the operation."""
        if self.signals.received or hooks.should_stop():
            self.stop("supervisor-interrupted")
        writer_failure = hooks.failure()
        if writer_failure is not None:
            if self.error is None:
                self.error = writer_failure[1]
            self.stop(writer_failure[0])

    def _poll_owner(self, hooks: Hooks, deadline_ms: int) -> None:
        """Every POLL_SECONDS: stop when the owner state asks for it or cannot be read, or at the deadline."""
        try:
            requested = hooks.poll()
        except Exception as poll_failure:
            if self.error is None:
                self.error = message_of(poll_failure)
            self.stop("owner-state-unavailable")
        else:
            if requested is not None:
                self.stop(requested)
        if now_ms() >= deadline_ms:
            self.stop("deadline")

    def _drain_until_stop(self) -> None:
        # After an unexpected supervisor error: give the signalled child its grace period.
        child = self.child
        if child is None:
            return
        end = self.stop_at or time.monotonic() + STOP_GRACE_SECONDS
        while time.monotonic() < end and not self.child_exited:
            code = child.poll()
            if code is not None:
                self._record_exit(code)
                break
            time.sleep(0.02)
        self._kill_group()

    def _close_pipes(self) -> None:
        child = self.child
        if child is None:
            return
        for stream in (child.stdin, child.stdout, child.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        if not self.child_exited:
            code = child.poll()
            if code is not None:
                self._record_exit(code)
        # A child that has not exited is left running (detached), as the reference does; a
        # stopped one was killed with its process group (_kill_group).

    def _result(self, started_at: str) -> JsonObject:
        stdout = bytes(self.captured["stdout"])
        stderr = bytes(self.captured["stderr"])
        outcome, provider = interpret_output(self.execution, stdout.decode("utf-8", "replace"), self.exit_code)
        if self.reason is not None or not self.child_exited or not self.closed:
            outcome = "ambiguous"
        elif self.error is not None or self.signal is not None:
            outcome = "failed"
        spawned = self.child is not None

        def complete(stream: str, data: bytes) -> bool:
            return self.closed and self.reason is None and self.observed[stream] == len(data)

        return {
            "startedAt": started_at,
            "endedAt": now_iso(),
            "exitCode": self.exit_code,
            "signal": self.signal,
            "error": self.error,
            "reason": self.reason,
            "spawned": spawned,
            "directChildExited": spawned and self.child_exited,
            "streamsClosed": self.closed,
            "directChildSignalled": self.signalled,
            "descendantState": "unobserved",
            "outcome": outcome,
            "provider": provider,
            "output": {
                "stdout": _output_entry(stdout, self.observed["stdout"], complete("stdout", stdout)),
                "stderr": _output_entry(stderr, self.observed["stderr"], complete("stderr", stderr)),
            },
        }


# ----------------------------------------------------------------- ownership and state writes


def owned_attempt(run: Run, task_id: str, attempt_id: str, backend: Backend) -> Attempt:
    """The guard of every write and poll of a running launch (SPEC 5.7 step 4)."""
    attempt = bound_attempt(task_of(run, task_id), {"attemptId": attempt_id, "backend": backend})
    process = attempt.get("process")
    if (
        not isinstance(process, dict)
        or process.get("status") not in ("starting", "running")
        or attempt["execution"] not in ("running", "ambiguous")
    ):
        raise fail(NOT_OWNED)
    return attempt


class _StateWriter(threading.Thread):
    """Writes the spawn acknowledgement and the heartbeats beside the supervision loop, so a
    busy writer.lock never delays output draining, cancellation polling or the deadline."""

    def __init__(
        self,
        directory: str,
        run_id: str,
        task_id: str,
        attempt_id: str,
        backend: Backend,
        child_pid: int | None,
        progress: Progress | None,
    ) -> None:
        super().__init__(name="nexus-launch-state-writer", daemon=True)
        self.directory = directory
        self.run_id = run_id
        self.task_id = task_id
        self.attempt_id = attempt_id
        self.backend = backend
        self.child_pid = child_pid
        self.progress = progress
        self.spawn_pending = True
        self.done = threading.Event()
        self.failure: tuple[str, str] | None = None
        self.heartbeats = 0
        self.skipped_heartbeats = 0

    def _write(self, op: Callable[[Attempt], None], patience: float) -> None:
        def change(_root: str, run: Run) -> None:
            op(owned_attempt(run, self.task_id, self.attempt_id, self.backend))

        mutate(self.directory, self.run_id, change, patient=True, patience=patience)

    def _spawned(self, attempt: Attempt) -> None:
        process = attempt["process"]
        process["status"] = "running"
        process["childPid"] = self.child_pid
        process["heartbeatAt"] = now_iso()

    @staticmethod
    def _heartbeat(attempt: Attempt) -> None:
        attempt["process"]["heartbeatAt"] = now_iso()

    def run(self) -> None:
        last_beat = time.monotonic()
        while not self.done.is_set():
            try:
                if self.spawn_pending:
                    self._write(self._spawned, SPAWNED_PATIENCE_SECONDS)
                    self.spawn_pending = False
                    last_beat = time.monotonic()
                elif time.monotonic() - last_beat >= HEARTBEAT_SECONDS:
                    last_beat = time.monotonic()
                    self._write(self._heartbeat, HEARTBEAT_PATIENCE_SECONDS)
                    self.heartbeats += 1
                    self._emit({"event": "heartbeat", "count": self.heartbeats})
            except WriterBusy:
                # Skipped, never a reason to stop the child; the next beat tries again.
                if not self.spawn_pending:
                    self.skipped_heartbeats += 1
                    self._emit({"event": "heartbeat-skipped", "count": self.skipped_heartbeats})
            except Exception as failure:
                reason = "launch-observation-failed" if self.spawn_pending else "owner-state-unavailable"
                self.failure = (reason, message_of(failure))
                return
            self.done.wait(POLL_SECONDS)

    def _emit(self, event: JsonObject) -> None:
        if self.progress is not None:
            with contextlib.suppress(Exception):
                self.progress(event)


class _LaunchHooks(Hooks):
    def __init__(
        self,
        root: str,
        directory: str,
        run_id: str,
        task_id: str,
        attempt_id: str,
        backend: Backend,
        progress: Progress | None,
        should_stop: Callable[[], bool] | None,
    ) -> None:
        self.root = root
        self.directory = directory
        self.run_id = run_id
        self.task_id = task_id
        self.attempt_id = attempt_id
        self.backend = backend
        self.progress = progress
        self.stop_requested = should_stop
        self.writer: _StateWriter | None = None
        self.child_pid: int | None = None
        self.seen_key: tuple[int, int, int] | None = None
        self.seen_run: Run | None = None
        self.decoders: dict[str, codecs.IncrementalDecoder] = {}  # the output events' text

    def poll(self) -> str | None:
        # Re-parse only when the state file was replaced (every save renames a new file in).
        info = os.stat(safe_target(self.root, run_path(self.run_id)))
        key = (info.st_ino, info.st_size, info.st_mtime_ns)
        if key != self.seen_key or self.seen_run is None:
            self.seen_run = load_run(self.root, self.run_id)
            self.seen_key = key
        attempt = owned_attempt(self.seen_run, self.task_id, self.attempt_id, self.backend)
        if attempt["cancellation"].get("status") == "requested":
            return "cancellation-requested"
        return None

    def spawned(self, child_pid: int | None) -> None:
        self.child_pid = child_pid
        if self.progress is not None:
            with contextlib.suppress(Exception):
                self.progress({"event": "spawned", "pid": child_pid, "attemptId": self.attempt_id})
        self.writer = _StateWriter(
            self.directory, self.run_id, self.task_id, self.attempt_id, self.backend, child_pid, self.progress
        )
        self.writer.start()

    def failure(self) -> tuple[str, str] | None:
        return self.writer.failure if self.writer is not None else None

    def output(self, stream: str, data: bytes) -> None:
        if self.progress is None:
            return
        decoder = self.decoders.get(stream)
        if decoder is None:
            decoder = self.decoders[stream] = codecs.getincrementaldecoder("utf-8")("replace")
        with contextlib.suppress(Exception):
            self.progress({"event": "output", "stream": stream, "text": decoder.decode(data)})

    def should_stop(self) -> bool:
        return bool(self.stop_requested and self.stop_requested())

    def finish(self) -> None:
        if self.writer is not None:
            self.writer.done.set()
            self.writer.join()


# ----------------------------------------------------------------- recoverable receipt files


def receipt_file(run_id: str, attempt_id: str) -> str:
    return f"{RECEIPTS_DIR}/{run_id}/{attempt_id}.json"


def _store_receipt(attempt: Attempt, receipt: JsonObject, at: str, child_pid: int | None) -> None:
    """The finalization effects of SPEC 5.7 step 7 (shared by launch and a recovered receipt)."""
    process = attempt["process"]
    process["status"] = "finished"
    if process.get("childPid") is None and child_pid is not None:
        # The spawn acknowledgement may have been skipped while writer.lock was busy.
        process["childPid"] = child_pid
    process["receipt"] = receipt
    process["receiptHash"] = canonical.sha256_json(receipt)
    process["heartbeatAt"] = at
    attempt["observedAt"] = at
    if receipt.get("outcome") == "ambiguous":
        attempt["execution"] = "ambiguous"
    cancellation = attempt["cancellation"]
    if cancellation.get("status") == "requested":
        cancellation["termination"] = (
            "direct-child-exited-descendants-unobserved" if receipt.get("directChildExited") else "unresolved"
        )
        signalled = receipt.get("directChildSignalled") and process.get("childPid") is not None
        cancellation["processesSignalled"] = [process["childPid"]] if signalled else []


def write_receipt_file(
    root: str, run_id: str, task_id: str, receipt: JsonObject, child_pid: int | None, problem: str
) -> str:
    """Keep a receipt the run state could not take (0600, checksummed); returns its path."""
    rel = receipt_file(run_id, receipt["attemptId"])
    record = {
        "schemaVersion": 1,
        "kind": "nexus-recoverable-process-receipt",
        "runId": run_id,
        "taskId": task_id,
        "attemptId": receipt["attemptId"],
        "childPid": child_pid,
        "writtenAt": now_iso(),
        "saveError": problem,
        "receiptHash": canonical.sha256_json(receipt),
        "receipt": receipt,
    }
    atomic_write(root, rel, canonical.pretty(record) + "\n")
    return rel


def read_receipt_file(root: str, run_id: str, attempt_id: str) -> JsonObject | None:
    """The recoverable receipt record for this attempt, None if there is none.

    Raises "Foreign or corrupt process receipt." for a file that is unsafe, unreadable or
    whose checksum does not match."""
    if not RUN_ID.match(run_id) or not isinstance(attempt_id, str) or "/" in attempt_id or attempt_id.startswith("."):
        return None
    rel = receipt_file(run_id, attempt_id)
    try:
        path = safe_target(root, rel)
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except NexusError:
        raise fail("Foreign or corrupt process receipt.") from None
    corrupt = fail("Foreign or corrupt process receipt.")
    if unsafe_reason(info) or info.st_size > RECEIPT_FILE_LIMIT:
        raise corrupt
    try:
        record = canonical.parse(read_regular(path, RECEIPT_FILE_LIMIT, checked=info).decode("utf-8"))
    except (OSError, ValueError, RecursionError, UnicodeDecodeError):
        raise corrupt from None
    if (
        not isinstance(record, dict)
        or record.get("schemaVersion") != 1
        or not isinstance(record.get("receipt"), dict)
        or record.get("receiptHash") != canonical.sha256_json(record["receipt"])
        or record.get("attemptId") != attempt_id
        or record.get("runId") != run_id
    ):
        raise corrupt
    return record


def kept_receipt_belongs(receipt: JsonObject, attempt: Attempt, plan_hash: str | None) -> bool:
    """Whether collect may store this kept receipt on ``attempt``: same attempt, same owning
    backend, same plan (``plan_hash`` None: not checked)."""
    return (
        receipt.get("attemptId") == attempt.get("id")
        and canonical.same(receipt.get("backend"), attempt.get("backend"))
        and (plan_hash is None or receipt.get("planHash") == plan_hash)
    )


def receipt_file_status(root: str, run_id: str, attempt: Attempt, plan_hash: str | None = None) -> str | None:
    """For inspect: the relative path of a recoverable receipt collect would accept, or None.

    A kept receipt that collect would refuse (unreadable, tampered, for another owner or plan,
    or an attempt reconciled since) is never offered."""
    process = attempt.get("process")
    if not isinstance(process, dict) or process.get("receipt") is not None or process.get("collectedAt"):
        return None
    if process.get("status") not in ("starting", "running") or attempt.get("reconciliation") is not None:
        return None
    if attempt.get("reconciliations"):
        return None
    rel = receipt_file(run_id, str(attempt.get("id")))
    try:
        if not os.path.isfile(safe_target(root, rel)):
            return None
        record = read_receipt_file(root, run_id, str(attempt.get("id")))
    except (NexusError, OSError):
        return None
    return rel if record is not None and kept_receipt_belongs(record["receipt"], attempt, plan_hash) else None


def _remove_receipt_file(root: str, run_id: str, attempt_id: str) -> None:
    with contextlib.suppress(OSError, NexusError):
        os.unlink(safe_target(root, receipt_file(run_id, attempt_id)))


# ----------------------------------------------------------------- launch (SPEC 5.7)


def _interrupted_receipt(attempt_id: str, backend: Backend, plan_hash: str, message: str) -> JsonObject:
    return {
        "schemaVersion": 1,
        "attemptId": attempt_id,
        "backend": canonical.copy(backend),
        "planHash": plan_hash,
        "outcome": "ambiguous",
        "error": message,
        "endedAt": now_iso(),
        "evidenceClass": "launch-interrupted",
        "independentlyVerified": False,
    }


def launch_task(
    directory: str,
    run_id: str,
    task_id: str,
    options: Any,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> Run:
    """Open a process attempt, supervise its child in the foreground and store the receipt.

    ``progress`` receives ``{"event": "spawned"|"output"|"heartbeat"|"heartbeat-skipped"|"finished", ...}``
    (``output``: a captured piece of the child's ``stream`` as ``text``);
    ``should_stop`` is polled like a SIGINT: the child gets SIGTERM and the receipt says
    ``supervisor-interrupted``.
    """
    if (
        not isinstance(options, dict)
        or any(key != "retry" for key in options)
        or ("retry" in options and not isinstance(options["retry"], bool))
    ):
        raise fail("launch accepts only an optional boolean retry; executable settings belong in the plan.")
    backend = backend_identity(
        {
            "kind": "process",
            "id": str(uuid.uuid4()),
            "sessionId": str(uuid.uuid4()),
            "hostname": hostname(),
            "ownerPid": pid(),
        }
    )
    ids: JsonObject = {}

    def prepare(root: str, run: Run) -> None:
        # SPEC 5.7 step 3.1: the definition is looked up before the task id is checked, so an
        # unknown task gets the contract's refusal too.
        if next((d for d in run["plan"]["tasks"] if d.get("id") == task_id), None) is None:
            raise LAUNCH_CONTRACT.refusal({})
        task: Task = task_of(run, task_id)
        attempt = begin(root, run, task, backend, options.get("retry") is True, LAUNCH)
        attempt["process"] = {
            "status": "starting",
            "owner": canonical.copy(backend),
            "childPid": None,
            "heartbeatAt": now_iso(),
            "collectedAt": None,
            "runtimeHash": runtime_hash(),
        }
        ids["attempt"] = attempt["id"]
        ids["deadline"] = attempt["deadline"]

    prepared = mutate(directory, run_id, prepare)
    root = prepared["project"]
    attempt_id: str = ids["attempt"]
    definition = definition_of(prepared, task_id)
    hooks = _LaunchHooks(root, directory, run_id, task_id, attempt_id, backend, progress, should_stop)
    with _Signals() as signals:
        receipt = _supervise_and_build(root, prepared, definition, hooks, signals, attempt_id, backend, ids)
        child_pid = hooks.child_pid
        if progress is not None:
            with contextlib.suppress(Exception):
                progress({"event": "finished", "outcome": receipt.get("outcome"), "reason": receipt.get("reason")})

        def finalize(_root: str, run: Run) -> None:
            attempt = owned_attempt(run, task_id, attempt_id, backend)
            _store_receipt(attempt, receipt, now_iso(), child_pid)

        try:
            return mutate(directory, run_id, finalize, patient=True, patience=RECEIPT_PATIENCE_SECONDS)
        except BaseException as failure:
            if isinstance(failure, NexusError) and not isinstance(failure, (WriterBusy, StateNotWritten)):
                # The core refused the receipt (SPEC 5.7 step 7.1: ownership replaced, state
                # unusable): as in the reference it is not stored, and nothing collect would
                # refuse is kept.
                raise
            # The save lost the race for writer.lock (or was cut short): keep the receipt beside
            # the state for inspect and collect, unless the attempt is no longer ours.
            refusal = _ownership_refusal(root, run_id, task_id, attempt_id, backend)
            if refusal is not None:
                if isinstance(failure, Exception):
                    raise refusal from None
                raise
            problem = message_of(failure) if isinstance(failure, Exception) else type(failure).__name__
            try:
                kept = write_receipt_file(root, run_id, task_id, receipt, child_pid, problem)
            except Exception as write_failure:
                raise fail(
                    f"The process receipt could not be stored ({problem}) nor kept beside the state "
                    f"({message_of(write_failure)}); receipt sha256 {canonical.sha256_json(receipt)}."
                ) from None
            if not isinstance(failure, Exception):
                raise
            raise fail(
                f"The process receipt could not be stored in the run state ({problem}); it was kept in {kept}. "
                "Inspect the run; collect accepts this exact receipt."
            ) from None


def _ownership_refusal(root: str, run_id: str, task_id: str, attempt_id: str, backend: Backend) -> NexusError | None:
    """The refusal the receipt's save would meet, read without the lock (like a launch poll);
    None when the attempt is still owned or the state cannot be read now."""
    try:
        owned_attempt(load_run(root, run_id), task_id, attempt_id, backend)
    except NexusError as refusal:
        return refusal
    except OSError:
        return None
    return None


def _supervise_and_build(
    root: str,
    prepared: Run,
    definition: TaskDefinition,
    hooks: _LaunchHooks,
    signals: _Signals,
    attempt_id: str,
    backend: Backend,
    ids: JsonObject,
) -> JsonObject:
    """SPEC 5.7 steps 5-6: the supervisor's receipt, or the launch-interrupted receipt."""
    execution = definition["execution"]
    try:
        protected_snapshot(root, definition)
        stdin = input_bytes(root, execution)
        values, environment = execution_environment(execution, check_environment())
        deadline_ms = parse_iso_ms(ids["deadline"])
        assert deadline_ms is not None
        supervision = _Supervision(root, execution, stdin, values)
        try:
            receipt = supervision.run(deadline_ms, hooks, now_iso(), signals)
        finally:
            hooks.finish()
        receipt.update(
            schemaVersion=1,
            attemptId=attempt_id,
            backend=canonical.copy(backend),
            planHash=prepared["planHash"],
            execution=canonical.copy(execution),
            inputSha256=canonical.sha256_bytes(stdin),
            inputBytes=len(stdin),
            environment=environment,
            evidenceClass="owned-process-result",
            independentlyVerified=False,
        )
        try:
            protected_snapshot(root, definition)
            receipt["resultHashes"] = scope_snapshot(root, definition["scope"])
        except Exception as failure:
            receipt["outcome"] = "ambiguous"
            receipt["snapshotError"] = message_of(failure)
    except Exception as failure:
        receipt = _interrupted_receipt(attempt_id, backend, prepared["planHash"], message_of(failure))
    return receipt


# ----------------------------------------------------------------- collect (SPEC 5.8)


def collect_task(directory: str, run_id: str, task_id: str, options: Any) -> Run:
    options = _options(options)
    recovered: JsonObject = {}

    def op(root: str, run: Run) -> None:
        task = task_of(run, task_id)
        attempt = bound_attempt(task, options)
        process = attempt.get("process")
        if (
            attempt["backend"].get("kind") == "process"
            and isinstance(process, dict)
            and process.get("status") in ("starting", "running")
            and process.get("receipt") is None
        ):
            record = read_receipt_file(root, run["id"], attempt["id"])
            if record is not None:
                receipt = record["receipt"]
                if not kept_receipt_belongs(receipt, attempt, run["planHash"]):
                    raise fail("Foreign or corrupt process receipt.")
                child_pid = record.get("childPid")
                written = record.get("writtenAt")
                at = written if isinstance(written, str) else now_iso()
                _store_receipt(attempt, receipt, at, child_pid if isinstance(child_pid, int) else None)
                recovered["attempt"] = attempt["id"]
        require(COLLECT_READY, task_facts(run, task, kept_receipt=False))
        assert isinstance(process, dict)
        receipt = process["receipt"]
        if (
            not isinstance(receipt, dict)
            or process.get("receiptHash") != canonical.sha256_json(receipt)
            or receipt.get("attemptId") != attempt["id"]
            or not canonical.same(receipt.get("backend"), attempt["backend"])
            or receipt.get("planHash") != run["planHash"]
        ):
            raise fail("Foreign or corrupt process receipt.")
        require((COLLECT_UNRECONCILED,), task_facts(run, task, kept_receipt=False))
        cancellation = attempt["cancellation"].get("status")
        if receipt.get("outcome") == "completed":
            exit_code = receipt.get("exitCode")
            if (
                cancellation != "none"
                or exit_code != 0
                or isinstance(exit_code, bool)
                or receipt.get("error")
                or not receipt.get("directChildExited")
                or not receipt.get("streamsClosed")
            ):
                raise fail("Ambiguous execution cannot be collected as completed.")
            definition = definition_of(run, task_id)
            protected_snapshot(root, definition)
            if not canonical.same(scope_snapshot(root, definition["scope"]), receipt.get("resultHashes")):
                raise fail("Process result changed before collection; reconcile and create a fresh attempt.")
        at = now_iso()
        process["collectedAt"] = at
        execution = "ambiguous" if cancellation == "requested" else receipt.get("outcome")
        attempt["execution"] = cast(str, execution)  # the outcome of a receipt whose hash matched
        attempt["observedAt"] = at
        if execution in ("completed", "failed"):
            attempt["endedAt"] = receipt.get("endedAt")
        if "resultHashes" in receipt:
            attempt["resultHashes"] = canonical.copy(receipt["resultHashes"])
        if execution == "blocked":
            attempt["blockedRequest"] = BLOCKED_REQUEST
        attempt["observations"].append(
            {
                "at": at,
                "outcome": execution,
                "evidenceClass": "owned-process-result",
                "receiptHash": process["receiptHash"],
                "independentlyVerified": False,
                "summary": COLLECTED_SUMMARY,
            }
        )

    saved = mutate(directory, run_id, op)
    if recovered:
        _remove_receipt_file(root_of(directory), run_id, recovered["attempt"])
    return saved
