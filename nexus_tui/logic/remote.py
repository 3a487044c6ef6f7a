"""Projects on another host, over ssh: the observer stream of a host (``nexus observe`` read
line by line in a thread, restarted with a capped back-off when it ends) and the remote
mutation runner (``ssh HOST <remote nexus> ACTION RUN TASK --input - --json -d PATH``, the
input on stdin). No widgets: the stream hands what it reads to a callback, from its thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nexus_core import observe_protocol as protocol
from nexus_core.actions import MUTATIONS, Result
from nexus_core.errors import NexusError
from nexus_core.terminal import terminal_safe

from .ssh import ErrorTail, SshHost, failure_words

# Reconnecting: the first retry after RECONNECT_FIRST_SECONDS, doubling up to RECONNECT_MAX_SECONDS.
RECONNECT_FIRST_SECONDS = 1.0
RECONNECT_MAX_SECONDS = 30.0
# A connection that does not say hello in this time (ssh's connect, the remote interpreter's
# start, the first scan runs after the hello) is given up and retried.
HELLO_TIMEOUT_SECONDS = 30.0
# Heartbeats come every protocol.HEARTBEAT_SECONDS; this long without any line: the peer is gone.
SILENCE_TIMEOUT_SECONDS = 15.0
# A remote action's answer (the saved run as JSON: at most a 16 MiB run file, pretty-printed).
RESULT_LIMIT_BYTES = 64 * 1024 * 1024
STOP_GRACE_SECONDS = 2.0


class Backoff:
    """Delays between reconnections: RECONNECT_FIRST_SECONDS, doubling, capped."""

    def __init__(self, first: float | None = None, cap: float | None = None) -> None:
        self.first = RECONNECT_FIRST_SECONDS if first is None else first
        self.cap = RECONNECT_MAX_SECONDS if cap is None else cap
        self._next = self.first

    def next(self) -> float:
        delay = self._next
        self._next = min(self.cap, self._next * 2)
        return delay

    def reset(self) -> None:
        self._next = self.first


# ----------------------------------------------------------------- what the stream reports


@dataclass(frozen=True)
class Connected:
    """The observer said hello (its nexus version)."""

    version: str


@dataclass(frozen=True)
class Received:
    """A protocol message after the hello (snapshot, change, rescanned, error)."""

    message: dict[str, Any]


@dataclass(frozen=True)
class Lost:
    """The stream ended or could not start: why (ssh's words included), since when (epoch
    seconds, the first failure of this outage) and when the next try comes."""

    reason: str
    since: float
    retry_in: float


StreamEvent = Connected | Received | Lost


def stop_process(process: subprocess.Popen[bytes], ending: bool = False) -> int | None:
    """End a local ssh (it leads its own session): SIGTERM, then SIGKILL. Its exit status.
    ``ending``: its output ended, so it is exiting by itself; give it time to say how."""
    if ending:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_GRACE_SECONDS)
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    for stream in (process.stdin, process.stdout):
        with contextlib.suppress(OSError):
            if stream is not None:
                stream.close()
    return process.returncode


class ObserverStream:
    """One host's ``nexus observe -d P1 -d P2 ... --json-lines`` over ssh.

    A thread runs it and reads it (each line bounded by protocol.MAX_LINE_BYTES, a hello within
    HELLO_TIMEOUT_SECONDS, then some line at least every SILENCE_TIMEOUT_SECONDS), and hands
    each event to ``deliver`` from that thread. When it ends it is started again after a
    back-off; ``send`` writes a control line to it."""

    def __init__(self, ssh: SshHost, paths: Sequence[str], deliver: Callable[[StreamEvent], None]) -> None:
        self.ssh = ssh
        self.paths = list(paths)
        self.deliver = deliver
        self.connected = False
        self.version: str | None = None
        self.sessions = 0  # connections tried (tests count them)
        self._stopped = threading.Event()
        self._process: subprocess.Popen[bytes] | None = None
        self._write_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"observe-{ssh.host}", daemon=True)

    def words(self) -> list[str]:
        words = ["observe"]
        for path in self.paths:
            words += ["-d", path]
        return [*words, "--json-lines"]

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        process = self._process
        if process is not None:
            stop_process(process)
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(STOP_GRACE_SECONDS * 3)

    @property
    def stopped(self) -> bool:
        return self._stopped.is_set()

    def send(self, message: dict[str, Any]) -> bool:
        """Write a control line (never blocks: a peer that does not read loses it). Whether it
        was written."""
        process = self._process
        if process is None or process.stdin is None or not self.connected:
            return False
        data = protocol.encode(message).encode("utf-8")
        with self._write_lock:
            try:
                fd = process.stdin.fileno()
                os.set_blocking(fd, False)
                return os.write(fd, data) == len(data)
            except (OSError, ValueError):
                return False

    def _run(self) -> None:
        backoff = Backoff()
        since: float | None = None
        while not self._stopped.is_set():
            reason, had_hello = self._session()
            if self._stopped.is_set():
                return
            if had_hello:
                backoff.reset()
                since = None
            since = since if since is not None else time.time()
            delay = backoff.next()
            self.deliver(Lost(reason, since, delay))
            self._stopped.wait(delay)

    def _session(self) -> tuple[str, bool]:
        """One connection, until it ends: why it ended, and whether it said hello."""
        self.sessions += 1
        try:
            process = _started(self.ssh, self.words())
        except RemoteFailure as failure:
            return failure.message, False
        self._process = process
        assert process.stdout is not None and process.stderr is not None
        errors = ErrorTail(process.stderr)
        reader = protocol.LineReader(process.stdout.fileno())
        had_hello = False
        reason: str | None = None
        ended = False
        try:
            line = reader.readline(HELLO_TIMEOUT_SECONDS)
            if line is not None:
                self.version = protocol.check_hello(line)
                had_hello = self.connected = True
                self.deliver(Connected(self.version))
                reason = self._read(reader)
            ended = reason is None
        except TimeoutError:
            reason = (
                f"nothing heard from the remote nexus for {SILENCE_TIMEOUT_SECONDS:g} s"
                if had_hello
                else f"no answer from the remote nexus within {HELLO_TIMEOUT_SECONDS:g} s"
            )
        except protocol.ProtocolError as error:
            reason = error.message
        except OSError as error:
            reason = f"reading from ssh failed ({terminal_safe(error.strerror or error, one_line=True)})"
        finally:
            self.connected = False
            status = stop_process(process, ending=ended)
        said = errors.text()
        if reason is None:  # the stream ended by itself: ssh's or the remote's words say why
            reason = failure_words(self.ssh.host, status, said, self.ssh.remote_nexus)
        elif said and not had_hello:
            reason += f" (ssh said: {said})"
        return reason, had_hello

    def _read(self, reader: protocol.LineReader) -> str | None:
        """Lines until the stream ends (None) or fails (why)."""
        while not self._stopped.is_set():
            line = reader.readline(SILENCE_TIMEOUT_SECONDS)
            if line is None:
                return None
            message = protocol.decode(line)
            kind = message.get("type")
            if kind == "heartbeat":
                continue
            if kind == "error":
                return f"the remote nexus stopped: {terminal_safe(message.get('error'), one_line=True)}"
            self.deliver(Received(message))
        return "stopped"


# ----------------------------------------------------------------- remote actions


class RemoteFailure(Exception):
    """A remote action that did not come back with the core's answer (ssh failed, the remote
    nexus is missing or said something else); the message says what, in ssh's words too."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _started(ssh: SshHost, words: list[str]) -> subprocess.Popen[bytes]:
    try:
        return ssh.start(words)
    except OSError as error:
        raise RemoteFailure(f"ssh cannot be started: {terminal_safe(error, one_line=True)}") from None


def action_words(action: str, path: str, run_id: str | None, task_id: str | None, takes_input: bool) -> list[str]:
    """The remote nexus's words for a mutation (the core's own command line)."""
    words = [action]
    if MUTATIONS[action].per_task:
        words += [run_id or "", task_id or ""]
    if takes_input:
        words += ["--input", "-"]
    return [*words, "--json", "-d", path]


def run_remote_action(
    ssh: SshHost, path: str, action: str, run_id: str | None, task_id: str | None, options: Any
) -> Result:
    """Run mutation ``action`` with the remote nexus on ``path`` and return the core's result.

    The input goes on stdin (``--input -``): no file on either side. The core's refusal comes
    back as a NexusError with its exact message; anything else that fails is a RemoteFailure."""
    mutation = MUTATIONS[action]
    if mutation.takes == "plan":
        raise RemoteFailure(f"{action} takes a plan file: run it on {terminal_safe(ssh.host, one_line=True)} itself.")
    takes_input = mutation.takes != "nothing" and options is not None
    data = json.dumps(options, ensure_ascii=False).encode("utf-8") if takes_input else b""
    process = _started(ssh, action_words(action, path, run_id, task_id, takes_input))
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    errors = ErrorTail(process.stderr)
    out = bytearray()
    try:
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write(data)
        with contextlib.suppress(OSError):
            process.stdin.close()
        while len(out) <= RESULT_LIMIT_BYTES:
            chunk = os.read(process.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            out += chunk
    finally:
        status = stop_process(process, ending=len(out) <= RESULT_LIMIT_BYTES)
    said = errors.text()
    if len(out) > RESULT_LIMIT_BYTES:
        raise RemoteFailure(f"the remote nexus answered more than {RESULT_LIMIT_BYTES // (1024 * 1024)} MiB")
    return _result(ssh, status, bytes(out), said)


def _result(ssh: SshHost, status: int | None, out: bytes, said: str) -> Result:
    try:
        value = json.loads(out) if out.strip() else None
    except ValueError:
        value = None
    if isinstance(value, dict) and value.get("status") == "error" and isinstance(value.get("error"), str):
        hint = value.get("hint")
        raise NexusError(value["error"], hint if isinstance(hint, str) else None)
    if isinstance(value, dict) and status in (0, 1):
        return value  # verify, launch and collect exit 1 with the saved run when they did not pass
    if value is None and out.strip():
        said = f"{said} (its output began: '{protocol.preview(out)}')".strip()
    raise RemoteFailure(failure_words(ssh.host, status, said, ssh.remote_nexus))
