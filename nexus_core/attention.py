"""``nexus attention``: everything that waits on a person, across projects, oldest first.

A read-only look (no lock, no write) at each project: its two locks, every run (an unreadable
one is a need of its own), each task's standing (``needs.stand``) and its schedules' latest
occurrences. With ``--watch`` it keeps looking (watchfiles on each project's ``.bmad-plus/nexus``,
and a full look at least every second for clocks and workspace files) and prints one JSON line
per need opened or closed; ``--exec CMD`` runs the operator's own notifier for each need opened
(the need as JSON on stdin, no shell, bounded in time), in a worker thread that never holds up
the watch.
"""

from __future__ import annotations

import contextlib
import os
import queue
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import NoReturn

import click

from . import needs
from .errors import NexusError
from .needs import Need
from .shapes import JsonObject
from .terminal import terminal_safe
from .timeutil import iso_from_ms, now_ms

EXIT_NONE = 0
EXIT_NEEDS = 5  # something needs a person (documented; not one of wait's 1/3/4/6/124/130)
EXIT_ERROR = 1
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
DEFAULT_EXEC_TIMEOUT = 30.0
EXEC_QUEUE = 1000  # needs waiting for --exec; past it they are dropped (and said so)
OUTPUT_LIMIT = 64 * 1024
FULL_LOOK_SECONDS = 1.0  # a full look at least this often (deadlines, heartbeats, scope files)
REDISCOVER_SECONDS = 5.0
WATCH_TIMEOUT_MS = 500


# ----------------------------------------------------------------- one look


@dataclass
class Looker:
    """Looks at projects, reusing file hashes between looks (a long-lived watcher hashes an
    unchanged file once)."""

    hashes: dict[tuple[int, ...], str] = field(default_factory=dict)

    def project(self, directory: str, now: int) -> list[Need]:
        """Every need of one project (raises NexusError when the project itself is unusable)."""
        from .paths import root_of
        from .state.locks import RECOVERY_LOCK, WRITER_LOCK
        from .state.store import list_run_ids
        from .supervise.events import safe_lock_snapshot

        root = root_of(directory)
        found = needs.lock_needs(root, safe_lock_snapshot(root, WRITER_LOCK), safe_lock_snapshot(root, RECOVERY_LOCK))
        for run_id in list_run_ids(root):
            found.extend(self._run(root, run_id, now))
        found.extend(schedule_needs(root))
        return found

    def _run(self, root: str, run_id: str, now: int) -> list[Need]:
        from .observe import inspect_loaded
        from .snapshots import observational_hashes
        from .state.store import parse_run, read_state_bytes, run_path
        from .supervise.events import error_message

        try:
            _, raw = read_state_bytes(root, run_id)
            run = parse_run(root, run_id, raw)
            with observational_hashes(self.hashes):
                inspection = inspect_loaded(root, run, now)
        except Exception as error:  # corrupt, foreign, unsafe or gone: a need of its own
            try:
                changed = iso_from_ms(os.lstat(os.path.join(root, run_path(run_id))).st_mtime_ns // 1_000_000)
            except OSError:
                changed = None
            return [needs.unreadable_need(root, run_id, error_message(error), changed)]
        if len(self.hashes) > 200_000:
            self.hashes.clear()
        return needs.run_needs(root, run, needs.observations_of(inspection), now)

    def projects(self, directories: list[str], now: int, errors: Callable[[str, str], None]) -> list[Need]:
        found: list[Need] = []
        for directory in directories:
            try:
                found.extend(self.project(directory, now))
            except (NexusError, OSError) as error:
                errors(directory, _words(error))
        return needs.oldest_first(found)


def schedule_needs(root: str) -> list[Need]:
    """A schedule whose latest occurrence failed (a re-check that did not run as planned)."""
    from .schedule import DB_REL

    if not os.path.lexists(os.path.join(root, DB_REL)):
        return []
    import sqlite3

    from .schedule.db import failed_schedules

    try:
        rows = failed_schedules(root)
    except (NexusError, sqlite3.Error):
        return []  # inspect names an unusable database; it is not a task's need
    return [
        needs.schedule_need(root, row["schedule"], row["run"], row["occurrence"], row["finishedAt"]) for row in rows
    ]


def _words(error: BaseException) -> str:
    if isinstance(error, NexusError):
        return error.message
    if isinstance(error, OSError) and error.filename:
        return f"{error.strerror}: {error.filename}"
    return str(error)


# ----------------------------------------------------------------- which projects


@dataclass
class Projects:
    """The projects named with -d, and those found under --discover ROOT (walked again now and then)."""

    directories: list[str]
    discover: str | None = None
    depth: int = 4
    _found: list[str] = field(default_factory=list)
    _walked: float | None = None

    def current(self, force: bool = False) -> list[str]:
        if self.discover is not None and (
            force or self._walked is None or time.monotonic() - self._walked > REDISCOVER_SECONDS
        ):
            from .projects import discover_projects

            self._found = discover_projects(self.discover, self.depth)
            self._walked = time.monotonic()
        return list(dict.fromkeys([*self.directories, *self._found]))


# ----------------------------------------------------------------- lines


def event(kind: str, need: Need, at: int, **extra: object) -> JsonObject:
    line: JsonObject = {"type": kind, "time": iso_from_ms(at)}
    line.update(extra)
    line.update(need.as_json())
    return line


def human_line(need: Need, now: int) -> str:
    from .timeutil import age_text

    where = "/".join(part for part in (need.run, need.task) if part) or "project"
    age = age_text(need.since, now) if need.since else "since ?"
    todo = f" -> {need.command}"
    return terminal_safe(f"{age:>12}  {need.project}  {where}: {need.words}{todo}", one_line=True)


# ----------------------------------------------------------------- --exec


class Executor:
    """Runs ``argv`` once per need (the need's JSON on stdin), one at a time in a worker thread,
    each bounded by ``timeout`` seconds (then its whole process group is killed). Failures are
    written to ``log``; a full queue drops needs and says so. Never blocks the caller."""

    def __init__(self, argv: list[str], timeout: float, log: Callable[[str], None]) -> None:
        self.argv = argv
        self.timeout = timeout
        self.log = log
        self.jobs: queue.Queue[Need | None] = queue.Queue(EXEC_QUEUE)
        self.current: subprocess.Popen[bytes] | None = None
        self.done = 0  # commands finished (tests wait on it)
        self.thread = threading.Thread(target=self._work, name="nexus-attention-exec", daemon=True)
        self.thread.start()

    def submit(self, need: Need) -> None:
        try:
            self.jobs.put_nowait(need)
        except queue.Full:
            self.log(f"--exec is {EXEC_QUEUE} needs behind; need {need.id} ({need.kind}) was not passed to it")

    def _work(self) -> None:
        while True:
            need = self.jobs.get()
            if need is None:
                return
            try:
                self._run(need)
            except Exception as error:  # never let one need stop the worker
                self.log(f"--exec failed for need {need.id} ({need.kind}): {error}")
            self.done += 1

    def _run(self, need: Need) -> None:
        from .state.canonical import compact
        from .terminal import terminal_safe_json

        payload = (terminal_safe_json(compact(need.as_json())) + "\n").encode("utf-8")
        name = shlex.join(self.argv)
        try:
            child = subprocess.Popen(
                self.argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own group: a timeout kills what it started too
                close_fds=True,
            )
        except OSError as error:
            self.log(f"--exec {name} could not start for need {need.id}: {_words(error)}")
            return
        self.current = child
        try:
            _, err = child.communicate(payload, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
            child.communicate()
            self.log(f"--exec {name} was killed after {self.timeout:g} s for need {need.id} ({need.kind})")
            return
        finally:
            self.current = None
        if child.returncode != 0:
            tail = (err or b"")[-OUTPUT_LIMIT:].decode("utf-8", "replace").strip().splitlines()
            said = f": {tail[-1]}" if tail else ""
            self.log(f"--exec {name} exited {child.returncode} for need {need.id} ({need.kind}){said}")

    def stop(self) -> None:
        child = self.current
        if child is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.pid, signal.SIGKILL)
        with contextlib.suppress(queue.Full):
            self.jobs.put_nowait(None)


# ----------------------------------------------------------------- watching


def _wakes(paths: Callable[[], list[str]], force_polling: bool) -> Iterator[str]:
    """Wake on a change under any project's state directory, or every WATCH_TIMEOUT_MS; the
    watch starts over when the set of paths changes (a project appeared)."""
    while True:
        watched = [p for p in paths() if os.path.isdir(p)]
        if force_polling or not watched:
            time.sleep(0.2)
            yield "poll"
            continue
        try:
            from watchfiles import watch

            for _changes in watch(
                *watched,
                watch_filter=lambda _change, path: not path.endswith(".tmp"),
                debounce=50,
                step=20,
                rust_timeout=WATCH_TIMEOUT_MS,
                yield_on_timeout=True,
                raise_interrupt=True,
                ignore_permission_denied=True,
            ):
                yield "watch" if _changes else "tick"
                if [p for p in paths() if os.path.isdir(p)] != watched:
                    break
        except (ImportError, OSError, RuntimeError):
            time.sleep(0.2)
            yield "poll"


def watch(
    projects: Projects,
    emit: Callable[[str], None],
    log: Callable[[str], None],
    executor: Executor | None = None,
    force_polling: bool = False,
    wakes: Iterator[str] | None = None,
    interrupted: Callable[[], bool] = lambda: False,
) -> NoReturn:
    """Print need-opened / need-closed lines until interrupted (KeyboardInterrupt, SystemExit;
    ``interrupted()`` is asked at each wake: an interrupt raised by a signal handler is lost
    when it lands in a weakref callback, such as the import system's, and is only printed)."""
    from .state.store import BASE
    from .supervise.events import json_line

    looker = Looker()
    reported: set[tuple[str, str]] = set()

    def errors(directory: str, message: str) -> None:
        if (directory, message) not in reported:
            reported.add((directory, message))
            log(f"{directory}: {message}")

    def state_dirs() -> list[str]:
        return [os.path.join(os.path.abspath(d), BASE) for d in projects.current()]

    moment = now_ms()
    current = {need.id: need for need in looker.projects(projects.current(force=True), moment, errors)}
    mode = "polling" if force_polling else "watchfiles"
    emit(json_line({"type": "watch-started", "time": iso_from_ms(moment), "mode": mode, "needs": len(current)}))
    for need in current.values():
        emit(json_line(event("need-opened", need, moment, initial=True)))
    wakes = wakes if wakes is not None else _wakes(state_dirs, force_polling)
    last = time.monotonic()
    for wake in wakes:
        if interrupted():
            raise KeyboardInterrupt
        if wake != "watch" and time.monotonic() - last < FULL_LOOK_SECONDS:
            continue
        last = time.monotonic()
        moment = now_ms()
        seen = {need.id: need for need in looker.projects(projects.current(), moment, errors)}
        for need_id in [i for i in current if i not in seen]:
            emit(json_line(event("need-closed", current.pop(need_id), moment)))
        for need in needs.oldest_first(n for i, n in seen.items() if i not in current):
            current[need.id] = need
            emit(json_line(event("need-opened", need, moment)))
            if executor is not None:
                executor.submit(need)
    raise SystemExit(EXIT_NONE)  # the wakes never end by themselves


# ----------------------------------------------------------------- the command

ATTENTION_HELP = f"""Everything that waits on a person, oldest first: dead locks, interrupted
recoveries, work whose owner is gone, overdue attempts, blocked tasks, ambiguous
or failed work awaiting a decision, stale evidence, receipts to collect,
unreadable runs, failed scheduled re-checks. Read-only: no lock, no write.

\b
Exit codes:
  0    nothing needs a person
  {EXIT_NEEDS}    something does (the needs are listed)
  1    an error (a project that cannot be read, a bad option)
  130  --watch interrupted (Ctrl+C); 143 on SIGTERM
With --watch, one JSON line per need opened or closed (needs already there at
start come first, with "initial": true); --exec CMD runs CMD (split like a
shell would, but no shell) for each need opened after the start, with the need
as JSON on stdin, at most --exec-timeout seconds each, one at a time.
"""


def _out(text: str) -> None:
    sys.stdout.buffer.write(text.encode("utf-8", "replace"))
    sys.stdout.buffer.flush()


def _err(text: str) -> None:
    sys.stderr.buffer.write(text.encode("utf-8", "replace"))
    sys.stderr.buffer.flush()


def _fail(message: str, as_json: bool) -> NoReturn:
    from .supervise.events import json_line

    if as_json:
        _out(json_line({"schemaVersion": 1, "status": "error", "error": message}))
    _err(f"Nexus: {terminal_safe(message, one_line=True)}\n")
    raise SystemExit(EXIT_ERROR)


def _seconds(_ctx: click.Context, _param: click.Parameter, value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a number of seconds") from None
    if not (0 < number <= 86400):
        raise click.BadParameter(f"{value!r} is not a number of seconds between 0 and 86400")
    return number


@click.command(name="attention", context_settings={"help_option_names": ["-h", "--help"]}, help=ATTENTION_HELP)
@click.option(
    "-d", "--directory", "directories", multiple=True, metavar="PATH", help="A project directory (repeatable)."
)
@click.option("--discover", metavar="ROOT", help="Every project under ROOT too (looked for again while watching).")
@click.option("--discover-depth", default=4, show_default=True, type=click.IntRange(0, 64), help="Levels below ROOT.")
@click.option("--json", "as_json", is_flag=True, help="Print the needs as one JSON object.")
@click.option("--watch", "watching", is_flag=True, help="Keep watching: a JSON line per need opened or closed.")
@click.option("--exec", "command", metavar="CMD", help="With --watch: run CMD for each need opened (JSON on stdin).")
@click.option(
    "--exec-timeout",
    callback=_seconds,
    default=str(DEFAULT_EXEC_TIMEOUT),
    show_default=True,
    metavar="SECONDS",
    help="Kill a --exec command (and what it started) after this long.",
)
@click.option("--poll", "force_polling", is_flag=True, help="With --watch: poll instead of using the file watcher.")
def attention_command(
    directories: tuple[str, ...],
    discover: str | None,
    discover_depth: int,
    as_json: bool,
    watching: bool,
    command: str | None,
    exec_timeout: float,
    force_polling: bool,
) -> None:
    if command is not None and not watching:
        _fail("--exec runs for each need opened while watching: add --watch.", as_json)
    if discover is not None and not os.path.isdir(discover):
        _fail(f"not a directory: {discover}", as_json)
    chosen = [os.path.abspath(d) for d in directories] or ([] if discover is not None else [os.getcwd()])
    projects = Projects(chosen, os.path.realpath(discover) if discover else None, discover_depth)
    if watching:
        _watch(projects, command, exec_timeout, force_polling)
    looker = Looker()
    moment = now_ms()
    problems: list[tuple[str, str]] = []
    found = looker.projects(projects.current(force=True), moment, lambda d, m: problems.append((d, m)))
    if problems:
        directory, message = problems[0]
        _fail(message if directory in message else f"{directory}: {message}", as_json)
    if as_json:
        from .state.canonical import pretty
        from .terminal import terminal_safe_json

        document = {
            "schemaVersion": 1,
            "status": "ok",
            "time": iso_from_ms(moment),
            "count": len(found),
            "needs": [need.as_json() for need in found],
        }
        _out(terminal_safe_json(pretty(document)) + "\n")
    elif found:
        _out("".join(human_line(need, moment) + "\n" for need in found))
        _err(f"nexus attention: {len(found)} need(s) a person. [exit {EXIT_NEEDS}]\n")
    else:
        _err("nexus attention: nothing needs a person. [exit 0]\n")
    raise SystemExit(EXIT_NEEDS if found else EXIT_NONE)


def _watch(projects: Projects, command: str | None, timeout: float, force_polling: bool) -> NoReturn:
    def log(message: str) -> None:
        _err(f"nexus attention: {terminal_safe(message, one_line=True)}\n")

    executor = None
    if command is not None:
        try:
            argv = shlex.split(command)
        except ValueError as error:
            _fail(f"--exec {command!r} cannot be split into words: {error}", False)
        if not argv:
            _fail("--exec needs a command.", False)
        executor = Executor(argv, timeout, log)

    terminated = False
    signalled = False

    def on_signal(number: int, _frame: FrameType | None) -> None:
        # Raised as an interrupt: watchfiles turns whatever a signal handler raises while it
        # waits into KeyboardInterrupt, so the flag says which signal it was. SIGINT has its own
        # handler too, as loop's: a watch started from a script's background job inherits SIGINT
        # ignored, and Ctrl+C or kill -INT must still stop it. An interrupt raised inside a
        # weakref callback is lost (seen: the import of watchfiles as the watch starts): the
        # watch asks ``signalled`` at each wake as well.
        nonlocal terminated, signalled
        terminated, signalled = number == signal.SIGTERM, True
        raise KeyboardInterrupt

    previous = {number: signal.signal(number, on_signal) for number in (signal.SIGINT, signal.SIGTERM)}
    try:
        watch(projects, _out, log, executor, force_polling, interrupted=lambda: signalled)
    except KeyboardInterrupt:
        if terminated:
            _err("nexus attention: terminated (SIGTERM); nothing was changed.\n")
            raise SystemExit(EXIT_TERMINATED) from None
        _err("nexus attention: interrupted; nothing was changed.\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if executor is not None:
            executor.stop()


def attention_main(argv: list[str]) -> NoReturn:
    """``nexus attention ...``: argv starts with the command name."""
    from .supervise.command import run_click

    run_click(attention_command, argv[1:], "nexus attention")
