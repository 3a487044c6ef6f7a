"""``nexus observe -d DIR [-d DIR ...] [--json-lines]``: the dashboard's view of projects,
streamed (observe_protocol): a hello, each project's full snapshot, then a line per change as
it happens, and a heartbeat every few seconds. It is what a remote dashboard reads over ssh.

Read-only, like the dashboard: the same :class:`ProjectScanner` (re-reads only run files whose
bytes changed), a real file watcher (watchfiles) on each project's state directory and the
scopes of its passed or accepted evidence, requests merged until the scanner takes them, a 1 s
tick for the clock-derived flags and a 5 s safety rescan. Control lines on stdin choose the run
whose full inspection is sent (``focus``) and ask for a fresh read (``rescan``).

It ends when its output is closed (the dashboard went away: exit 141), on SIGTERM (143),
SIGHUP (129) or Ctrl+C (130).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, NoReturn

import click

from .. import __version__
from .. import observe_protocol as protocol
from ..state.store import BASE
from ..terminal import terminal_safe
from ..timeutil import now_iso
from .codec import change_message, snapshot_message
from .model import ProjectScanner, ProjectSnapshot, ScopeIndex

TICK_SECONDS = 1.0
SAFETY_RESCAN_SECONDS = 5.0
WATCH_DEBOUNCE_MS = 50
WATCH_STEP_MS = 10
WATCH_ARMED_MS = 300
WATCH_RETRY_MAX_SECONDS = 30.0
MAX_WATCHED_SCOPES = 1000
CONTROL_LINE_LIMIT = 64 * 1024
EXIT_PIPE_CLOSED = 141
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
EXIT_HANGUP = 129


class OutputClosed(Exception):
    """Nobody reads the output any more."""


class Output:
    """Lines on stdout from several threads, one whole line at a time."""

    def __init__(self, json_lines: bool) -> None:
        self.json_lines = json_lines
        self._lock = threading.Lock()
        self.closed = threading.Event()

    def send(self, message: dict[str, Any]) -> None:
        text = protocol.encode(message) if self.json_lines else _human(message)
        if text:
            self._write(text.encode("utf-8", "replace"))

    def _write(self, data: bytes) -> None:
        if self.closed.is_set():
            raise OutputClosed
        with self._lock:
            view = memoryview(data)
            try:
                while view:
                    view = view[os.write(1, view) :]
            except OSError:  # EPIPE (SIGPIPE is ignored by Python), or stdout gone
                self.closed.set()
                raise OutputClosed from None


def _human(message: dict[str, Any]) -> str:
    """A line for a person (without --json-lines): what changed, run by run."""
    kind = message.get("type")
    if kind == "hello":
        return f"nexus observe (protocol {message['protocol']}, nexus {message['nexus']}): watching; Ctrl+C stops.\n"
    if kind not in ("snapshot", "change"):
        return ""
    snapshot = message["snapshot"]
    where = terminal_safe(snapshot.get("directory"), one_line=True)
    lines = []
    if snapshot.get("error"):
        lines.append(f"{where}: {terminal_safe(snapshot['error'], one_line=True)}")
    for view in snapshot.get("runs") or ():
        counts = ", ".join(f"{count} {state}" for state, count in view.get("counts") or ())
        problem = f" ({terminal_safe(view['error'], one_line=True)})" if view.get("error") else ""
        lines.append(f"{where} {terminal_safe(view.get('run_id'), one_line=True)}: {counts or 'loading'}{problem}")
    return "".join(f"{now_iso()} {line}\n" for line in lines)


@dataclass
class _Asked:
    everything: bool = False
    retime: bool = False
    runs: set[str] = field(default_factory=set)
    tokens: list[str] = field(default_factory=list)


class Requests:
    """Scan requests per project, merged until the scanner takes them (thread-safe)."""

    def __init__(self, projects: int) -> None:
        self._condition = threading.Condition()
        self._asked: dict[int, _Asked] = {}
        self.projects = projects

    def ask(
        self,
        index: int,
        everything: bool = False,
        retime: bool = False,
        runs: set[str] | frozenset[str] = frozenset(),
        token: str | None = None,
    ) -> None:
        with self._condition:
            asked = self._asked.setdefault(index, _Asked())
            asked.everything |= everything
            asked.retime |= retime or everything
            asked.runs |= runs
            if token is not None:
                asked.tokens.append(token)
            self._condition.notify()

    def ask_all(self, everything: bool = False, retime: bool = False) -> None:
        for index in range(self.projects):
            self.ask(index, everything=everything, retime=retime)

    def take(self, timeout: float) -> dict[int, _Asked]:
        with self._condition:
            if not self._asked:
                self._condition.wait(timeout)
            taken, self._asked = self._asked, {}
            return taken


class Observer:
    """The scanners of the observed projects, what was last sent of each, and the threads that
    feed the scanner loop (watcher, clock, control lines, heartbeat)."""

    def __init__(self, directories: list[str], output: Output) -> None:
        self.scanners = [ProjectScanner(os.path.abspath(directory)) for directory in directories]
        self.output = output
        self.requests = Requests(len(self.scanners))
        self.sent: list[ProjectSnapshot | None] = [None] * len(self.scanners)
        self.scope_indexes = [ScopeIndex() for _ in self.scanners]
        self.stop = threading.Event()
        self._watch_stop = threading.Event()
        self._watched: tuple[str, ...] = ()
        self._lock = threading.Lock()  # the snapshots and indexes the watcher thread reads

    # -- the scanner loop (main thread)
    def run(self) -> None:
        self.output.send(protocol.hello(__version__))
        self.requests.ask_all(everything=True)
        for target, name in (
            (self._heartbeat, "heartbeat"),
            (self._clock, "clock"),
            (self._control, "control"),
            (self._watch, "watch"),
        ):
            threading.Thread(target=self._guarded(target), name=name, daemon=True).start()
        while not self.stop.is_set():
            for index, asked in sorted(self.requests.take(0.5).items()):
                self._scan(index, asked)
            if self.output.closed.is_set():
                raise OutputClosed

    def _guarded(self, target: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                target()
            except OutputClosed:
                self.stop.set()

        return run

    def _scan(self, index: int, asked: _Asked) -> None:
        scanner = self.scanners[index]

        def publish(partial: ProjectSnapshot) -> None:  # a long first load: what is there so far
            self._send(index, partial)

        snapshot = scanner.scan(reinspect=asked.runs, everything=asked.everything, publish=publish, retime=asked.retime)
        self._send(index, snapshot)
        for token in asked.tokens:
            self.output.send({"type": "rescanned", "project": index, "token": token})
        self._follow_paths()

    def _send(self, index: int, snapshot: ProjectSnapshot) -> None:
        before = self.sent[index]
        message = snapshot_message(index, snapshot) if before is None else change_message(index, before, snapshot)
        if message is not None:
            self.output.send(message)
        with self._lock:
            self.sent[index] = snapshot
            self.scope_indexes[index].update(snapshot.runs)

    # -- the file watcher
    def wanted_paths(self) -> tuple[str, ...]:
        paths: set[str] = set()
        for scanner in self.scanners:
            root = scanner.root
            if root is None or not os.path.isdir(os.path.join(root, BASE)):
                continue
            paths.add(os.path.join(root, BASE))
            scopes = scanner.scope_paths()
            if len(scopes) <= MAX_WATCHED_SCOPES:  # past it, the safety rescan notices scope edits
                paths.update(scopes)
        return tuple(sorted(paths))

    def _follow_paths(self) -> None:
        if self.wanted_paths() != self._watched:
            self._watch_stop.set()  # the watcher starts again on the new paths

    def _watch(self) -> None:
        from watchfiles import watch

        failures = 0
        while not self.stop.is_set():
            self._watch_stop = threading.Event()
            paths = self._watched = self.wanted_paths()
            if not paths:
                self._watch_stop.wait(1.0)
                continue
            armed = False
            try:
                for changes in watch(
                    *paths,
                    watch_filter=lambda _change, path: not path.endswith(".tmp"),
                    debounce=WATCH_DEBOUNCE_MS,
                    step=WATCH_STEP_MS,
                    stop_event=self._watch_stop,
                    rust_timeout=WATCH_ARMED_MS,
                    yield_on_timeout=True,
                    recursive=True,
                    ignore_permission_denied=True,
                ):
                    if self.stop.is_set():
                        return
                    if not armed:  # live now: catch up with what changed while it started
                        armed = True
                        self.requests.ask_all(everything=True)
                    if changes:
                        self._changed({path for _, path in changes})
                failures = 0
            except Exception:  # a watched scope vanished, a path name watchfiles cannot decode
                failures += 1
                self.requests.ask_all(everything=True)
                self.stop.wait(min(WATCH_RETRY_MAX_SECONDS, 0.5 * 2**failures))

    def _changed(self, paths: set[str]) -> None:
        for index, scanner in enumerate(self.scanners):
            root = scanner.root
            if root is None:
                continue
            state = os.path.join(root, BASE)
            inside = [path for path in paths if path == root or path.startswith(root + os.sep)]
            if not inside:
                continue
            with self._lock:
                runs = set().union(
                    *(self.scope_indexes[index].runs_covering(os.path.relpath(path, root)) for path in inside)
                )
            state_changed = any(path == state or path.startswith(state + os.sep) for path in inside)
            if runs or state_changed:
                self.requests.ask(index, runs=runs)  # every scan re-stats the run files

    # -- the other threads
    def _heartbeat(self) -> None:
        while not self.stop.wait(protocol.HEARTBEAT_SECONDS):
            self.output.send({"type": "heartbeat", "at": now_iso()})

    def _clock(self) -> None:
        last_safety = time.monotonic()
        while not self.stop.wait(TICK_SECONDS):
            everything = time.monotonic() - last_safety >= SAFETY_RESCAN_SECONDS
            if everything:
                last_safety = time.monotonic()
            self.requests.ask_all(everything=everything, retime=True)

    def _control(self) -> None:
        """Control lines on stdin; an unreadable one is ignored, the end of stdin changes nothing
        (the observer ends with its output)."""
        try:
            reader = protocol.LineReader(sys.stdin.fileno(), CONTROL_LINE_LIMIT)
        except (AttributeError, OSError, ValueError):
            return
        while not self.stop.is_set():
            try:
                line = reader.readline()
            except protocol.LineTooLong:
                return
            except OSError:
                return
            if line is None:
                return
            with contextlib.suppress(protocol.ProtocolError):
                self._obey(protocol.decode(line))

    def _obey(self, message: dict[str, Any]) -> None:
        index = message.get("project", 0)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(self.scanners):
            return
        if "focus" in message:
            run_id = message["focus"]
            if run_id is None or isinstance(run_id, str):
                self.scanners[index].focus = run_id
                self.requests.ask(index)  # the scanner reads the new focus run in full
        if message.get("rescan") is True:
            runs = message.get("runs") or []
            token = message.get("token")
            self.requests.ask(
                index,
                everything=True,
                runs={run for run in runs if isinstance(run, str)} if isinstance(runs, list) else set(),
                token=token if isinstance(token, str) else None,
            )


def _on_signal(code: int) -> Callable[[int, FrameType | None], None]:
    def handler(_number: int, _frame: FrameType | None) -> None:
        raise SystemExit(code)

    return handler


OBSERVE_HELP = """Stream the dashboard's view of projects, as JSON lines (read-only).

\b
First a hello ({"type":"hello","protocol":1,"nexus":VERSION}), then each
project's full snapshot, then one line per change (only the changed runs),
and a heartbeat every 2 s. Control lines on stdin: {"focus":"RUN"} sends
RUN's full inspection; {"rescan":true,"runs":["RUN"],"token":"T"} reads
again now and answers {"type":"rescanned","token":"T"}. Each carries
"project": N (the N-th -d, from 0; default 0).
It is what nexus-tui --ssh HOST:PATH runs on HOST. It never writes state
and ends when its output is closed (141), on SIGTERM (143) or Ctrl+C (130).
"""


@click.command(name="observe", context_settings={"help_option_names": ["-h", "--help"]}, help=OBSERVE_HELP)
@click.option(
    "-d",
    "--directory",
    "directories",
    multiple=True,
    metavar="PATH",
    help="Project directory (repeat for several; default: the current one).",
)
@click.option("--json-lines", "json_lines", is_flag=True, help="JSON lines (what a dashboard reads); else text.")
def observe_command(directories: tuple[str, ...], json_lines: bool) -> None:
    output = Output(json_lines)
    observer = Observer(list(directories) or ["."], output)
    for number, code in ((signal.SIGTERM, EXIT_TERMINATED), (signal.SIGHUP, EXIT_HANGUP)):
        signal.signal(number, _on_signal(code))
    try:
        observer.run()
    except OutputClosed:
        os._exit(EXIT_PIPE_CLOSED)  # daemon threads may hold the output lock: no teardown
    except KeyboardInterrupt:
        os._exit(EXIT_INTERRUPTED)
    except SystemExit as leaving:
        observer.stop.set()
        os._exit(int(leaving.code or 0))


def observe_main(argv: list[str]) -> NoReturn:
    """``nexus observe ...``: argv starts with the command name."""
    from ..supervise.command import run_click

    run_click(observe_command, argv[1:], "nexus observe")
