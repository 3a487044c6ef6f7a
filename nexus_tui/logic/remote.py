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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from nexus_core import observe_protocol as protocol
from nexus_core.actions import MUTATIONS, Result
from nexus_core.errors import NexusError
from nexus_core.shapes import LockSnapshot, Run
from nexus_core.state.locks import WRITER_LOCK
from nexus_core.terminal import terminal_safe
from nexus_core.typed_json import DecodeError
from nexus_core.view.codec import SnapshotReader
from nexus_core.view.model import LockView, ProjectSnapshot

from .ssh import ErrorTail, RemoteProject, SshHost, failure_words

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
STOP_POLL_SECONDS = 0.1


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
        self.heard_at: float | None = None  # when a line (a heartbeat at least) last came
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
            self.heard_at = time.time()
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


def _started(ssh: SshHost, words: list[str], line: str | None = None) -> subprocess.Popen[bytes]:
    try:
        return ssh.start(words, line)
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
    ssh: SshHost,
    path: str,
    action: str,
    run_id: str | None,
    task_id: str | None,
    options: Any,
    should_stop: Callable[[], bool] | None = None,
) -> Result:
    """Run mutation ``action`` with the remote nexus on ``path`` and return the core's result.

    The input goes on stdin (``--input -``): no file on either side. A long action (verify,
    launch) given ``should_stop`` runs so that closing its stdin interrupts it (SIGINT, as Ctrl+C
    does locally); when ``should_stop`` answers True, stdin is closed. The core's refusal comes
    back as a NexusError with its exact message; anything else that fails is a RemoteFailure."""
    mutation = MUTATIONS[action]
    if mutation.takes == "plan":
        raise RemoteFailure(f"{action} takes a plan file: run it on {terminal_safe(ssh.host, one_line=True)} itself.")
    takes_input = mutation.takes != "nothing" and options is not None
    data = json.dumps(options, ensure_ascii=False).encode("utf-8") if takes_input else b""
    words = action_words(action, path, run_id, task_id, takes_input)
    stoppable = mutation.long and should_stop is not None
    line = ssh.stoppable_command_line(words, takes_input) if stoppable else None
    process = _started(ssh, words, line)
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None
    errors = ErrorTail(process.stderr)
    out = bytearray()
    ended = threading.Event()
    try:
        with contextlib.suppress(BrokenPipeError):
            process.stdin.write(data + (b"\n" if stoppable and takes_input else b""))
            process.stdin.flush()
        if stoppable and should_stop is not None:
            _close_when(process, should_stop, ended)
        else:
            with contextlib.suppress(OSError):
                process.stdin.close()
        while len(out) <= RESULT_LIMIT_BYTES:
            chunk = os.read(process.stdout.fileno(), 1 << 16)
            if not chunk:
                break
            out += chunk
    finally:
        ended.set()
        status = stop_process(process, ending=len(out) <= RESULT_LIMIT_BYTES)
    said = errors.text()
    if len(out) > RESULT_LIMIT_BYTES:
        raise RemoteFailure(f"the remote nexus answered more than {RESULT_LIMIT_BYTES // (1024 * 1024)} MiB")
    return _result(ssh, status, bytes(out), said)


def _close_when(process: subprocess.Popen[bytes], should_stop: Callable[[], bool], ended: threading.Event) -> None:
    """Close the remote action's stdin (its stop) once ``should_stop`` says so, from a thread."""

    def watch() -> None:
        while not ended.wait(STOP_POLL_SECONDS):
            if should_stop():
                with contextlib.suppress(OSError):
                    assert process.stdin is not None
                    process.stdin.close()
                return

    threading.Thread(target=watch, name="remote-stop", daemon=True).start()


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


# ----------------------------------------------------------------- remote projects in the dashboard

# A fresh read (the confirm re-check, a run's full inspection for a dialog) waits this long for
# the observer's answer before the action is refused.
FRESH_READ_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class LinkStatus:
    """A remote project's connection as its tab says it: connecting, connected (the remote
    nexus's version) or lost (why, since when, the next try)."""

    state: str  # "connecting", "connected" or "lost"
    version: str | None = None
    reason: str | None = None
    since: float | None = None
    retry_at: float | None = None

    def words(self, host: str, now: float | None = None) -> str:
        moment = time.time() if now is None else now
        if self.state == "connected":
            return f"connected to {host} (nexus {self.version})"
        if self.state == "connecting":
            return f"connecting to {host}…"
        since = time.strftime("%H:%M:%S UTC", time.gmtime(self.since or moment))
        retry = max(0, round((self.retry_at or moment) - moment))
        return f"disconnected since {since}, retrying in {retry} s: {self.reason}"

    def refusal(self, host: str) -> str | None:
        """Why an action cannot run now (None when connected): what the gate says."""
        if self.state == "connected":
            return None
        if self.state == "connecting":
            return f"not connected to {host} yet (connecting…)"
        return f"{host}: {self.words(host)}"


class RemoteLink:
    """One remote project as the dashboard holds it: its host, its index in the host's observer,
    the snapshot rebuilt from the observer's lines, and the connection's status. Thread-safe:
    the host's reading thread updates it; the UI and action workers read it."""

    def __init__(self, project: RemoteProject, host: RemoteHost, index: int) -> None:
        self.project = project
        self.host = host
        self.index = index
        self.reader = SnapshotReader()
        self.status = LinkStatus("connecting")
        self.focus: str | None = None
        self._answers: dict[str, threading.Event] = {}
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return self.project.label

    @property
    def snapshot(self) -> ProjectSnapshot | None:
        return self.reader.snapshot

    def refusal(self) -> str | None:
        return self.status.refusal(terminal_safe(self.project.host, one_line=True))

    def status_words(self, now: float | None = None) -> str:
        """The status bar's line: the connection, and when the host was last heard from."""
        moment = time.time() if now is None else now
        words = self.status.words(terminal_safe(self.project.host, one_line=True), moment)
        heard = self.host.stream.heard_at
        if self.status.state == "connected" and heard is not None:
            words += f", heard {max(0, round(moment - heard))} s ago"
        return words

    def set_focus(self, run_id: str | None) -> None:
        """The run whose full inspection the detail pane shows (sent again after a reconnect)."""
        self.focus = run_id
        self.host.stream.send(protocol.focus(run_id, self.index))

    def fresh_read(self, run_id: str | None, timeout: float | None = None) -> ProjectSnapshot:
        """Ask the observer to read again now (``run_id`` in full, made the focus) and wait for
        its answer; the snapshot after it. RemoteFailure when not connected or no answer."""
        refusal = self.refusal()
        if refusal is not None:
            raise RemoteFailure(refusal)
        token = os.urandom(8).hex()
        answered = threading.Event()
        with self._lock:
            self._answers[token] = answered
        try:
            if run_id is not None:
                self.set_focus(run_id)
            sent = self.host.stream.send(protocol.rescan(self.index, (run_id,) if run_id else (), token))
            wait = FRESH_READ_TIMEOUT_SECONDS if timeout is None else timeout
            if not sent or not answered.wait(wait):
                raise RemoteFailure(
                    f"{terminal_safe(self.project.host, one_line=True)} did not answer a fresh read within {wait:g} s"
                )
        finally:
            with self._lock:
                self._answers.pop(token, None)
        snapshot = self.snapshot
        if snapshot is None:
            raise RemoteFailure(f"no snapshot of {self.label} yet")
        return snapshot

    def answered(self, token: object) -> None:
        with self._lock:
            event = self._answers.get(token) if isinstance(token, str) else None
        if event is not None:
            event.set()

    def place(self) -> RemotePlace:
        return RemotePlace(self)


class RemotePlace:
    """A remote project's place for an action (operations/place.py): reads come from the
    snapshot its host's observer sent (a run without its full inspection is asked for first), the
    re-check asks for a fresh read, and the action runs the remote nexus over the host's
    connection with its input on stdin."""

    def __init__(self, link: RemoteLink) -> None:
        self.link = link

    def _snapshot(self) -> ProjectSnapshot:
        snapshot = self.link.snapshot
        if snapshot is None:
            raise RemoteFailure(f"no snapshot of {self.link.label} yet")
        return snapshot

    def root(self) -> str:
        return self._snapshot().root or self.link.project.remote_path

    def lock(self, name: str) -> LockSnapshot | None:
        snapshot = self._snapshot()
        view = snapshot.writer_lock if name == WRITER_LOCK else snapshot.recovery_lock
        return lock_snapshot_of(view)

    def run(self, run_id: str) -> Run:
        view = self._snapshot().run(run_id)
        if view is None or view.inspection is None:
            view = self.link.fresh_read(run_id).run(run_id)
        if view is None or view.inspection is None:
            raise RemoteFailure(f"run {terminal_safe(run_id, one_line=True)} is not in {self.link.label}")
        if view.error is not None:
            raise RemoteFailure(view.error)
        return view.inspection

    def refresh(self, run_id: str | None) -> None:
        self.link.fresh_read(run_id)

    def call(
        self,
        action: str,
        run_id: str | None,
        task_id: str | None,
        options: Any,
        progress: Any = None,
        should_stop: Any = None,
    ) -> Result:
        refusal = self.link.refusal()
        if refusal is not None:
            raise RemoteFailure(refusal)
        return run_remote_action(self.link.host.ssh, self.root(), action, run_id, task_id, options, should_stop)


def lock_snapshot_of(view: LockView) -> LockSnapshot | None:
    """The core's lock snapshot as far as a LockView carries it (fingerprint, owner, unsafe)."""
    if not view.present:
        return None
    snapshot: dict[str, Any] = {"hash": view.fingerprint}
    if not view.unreadable:
        snapshot["owner"] = {"pid": view.pid, "hostname": view.host, "createdAt": view.created_at}
    if view.unsafe is not None:
        snapshot["unsafe"] = view.unsafe
    return cast(LockSnapshot, snapshot)


class RemoteHost:
    """One host: its ssh (one multiplexed connection), one observer for all its projects, and
    the links it feeds. ``changed(link)`` is called (from the reading thread) whenever a link's
    snapshot or status changes."""

    def __init__(
        self,
        host: str,
        remote_nexus: str,
        changed: Callable[[RemoteLink], None],
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.ssh = SshHost(host, remote_nexus, environ)
        self.links: list[RemoteLink] = []
        self.changed = changed
        self.stream = ObserverStream(self.ssh, [], self._deliver)

    def add(self, project: RemoteProject) -> RemoteLink:
        link = RemoteLink(project, self, len(self.links))
        self.links.append(link)
        self.stream.paths.append(project.remote_path)
        return link

    def start(self) -> None:
        self.stream.start()

    def close(self) -> None:
        self.stream.stop()
        self.ssh.close()

    def _deliver(self, event: StreamEvent) -> None:
        if isinstance(event, Connected):
            for link in self.links:
                link.status = LinkStatus("connected", version=event.version)
                if link.focus is not None:
                    self.stream.send(protocol.focus(link.focus, link.index))
                self.changed(link)
        elif isinstance(event, Lost):
            for link in self.links:
                link.status = LinkStatus(
                    "lost", reason=event.reason, since=event.since, retry_at=time.time() + event.retry_in
                )
                self.changed(link)
        else:
            self._received(event.message)

    def _received(self, message: dict[str, Any]) -> None:
        index = message.get("project")
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(self.links):
            line = protocol.preview(json.dumps(message).encode())
            raise protocol.ProtocolError(f"a line for a project it was not asked for: {line}")
        link = self.links[index]
        kind = message.get("type")
        if kind == "rescanned":
            link.answered(message.get("token"))
            return
        if kind not in ("snapshot", "change"):
            return  # a kind this dashboard does not know (a newer peer's): nothing to show
        try:
            link.reader.apply(message)
        except DecodeError as error:
            raise protocol.ProtocolError(f"the remote sent a snapshot this dashboard cannot read ({error})") from None
        self.changed(link)


class RemoteFleet:
    """Every remote project of the dashboard, grouped by host (one connection and one observer
    per host and remote nexus command)."""

    def __init__(self, changed: Callable[[RemoteLink], None], environ: Mapping[str, str] | None = None) -> None:
        self.changed = changed
        self.environ = environ
        self.hosts: dict[tuple[str, str], RemoteHost] = {}

    def add(self, project: RemoteProject, remote_nexus: str) -> RemoteLink:
        key = (project.host, remote_nexus)
        host = self.hosts.get(key)
        if host is None:
            host = self.hosts[key] = RemoteHost(project.host, remote_nexus, self.changed, self.environ)
        return host.add(project)

    def start(self) -> None:
        for host in self.hosts.values():
            host.start()

    def close(self) -> None:
        for host in self.hosts.values():
            host.close()
