"""A first load shared among processes.

A dashboard opening a fleet (or one project of many large runs) reads and inspects every run
once before it can show them: about 2 ms a run of ten tasks, on one core, sharing the GIL with
the UI. :class:`FirstLooks` hands parts of that first look (a project's runs, in units of about
``UNIT_BYTES`` of run files) to worker processes, one per core, each running
``python -m nexus_core.view.first_look``, and gives each project's :class:`~.model.Looked` parts
back as soon as all of them are in. The project's own scanner adopts them, and its next scan
costs a stat per run (a run changed meanwhile is read again, as after any earlier scan).

Whatever a worker could not do (it failed, died, or could not start) is simply not given: the
scanner's own scan reads what it was not given. The answer is the same, only slower.

Workers only read. Requests (a Unit's directory, run ids, focus) and answers travel as pickles
over the pipes of the workers this process started, never through a shared directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import IO, Any, NamedTuple

from nexus_core.errors import explained
from nexus_core.paths import root_of
from nexus_core.state.store import RUNS, list_run_ids, run_path
from nexus_core.view.model import Looked, ProjectScanner

# A first look at fewer than MANY_PROJECTS projects whose run files come to less than this is done
# by the scanner itself: starting workers costs about 0.1 s of a core each, the price of reading
# 4 MB of runs.
SHARE_FROM_BYTES = 4_000_000
# Runs are sent in units of about this many bytes of run files (a larger run is a unit alone):
# small enough that the last units finish together, large enough that a unit's round trip
# (a pickle each way) is a small part of it.
UNIT_BYTES = 1_000_000
MAX_PROCESSES = 4
# A first look at this many projects or more is shared whatever their size (see plan).
MANY_PROJECTS = 16
STOP_CHECK_SECONDS = 0.25
# Units sent to a worker ahead of its answers: the next one waits in its pipe while the dashboard
# reads an answer (in a thread that shares the GIL with the UI), so a worker never idles between
# units.
IN_FLIGHT = 8
# Room for a worker's answers in its pipe (Linux's default is 64 KiB, a couple of a fleet's
# answers): a worker writes on while the dashboard's reading thread waits for the GIL.
ANSWER_PIPE_BYTES = 1024 * 1024
_READ_BYTES = 1024 * 1024
_HEADER = struct.Struct(">Q")


@dataclass(frozen=True)
class Unit:
    """Some runs of one project to look at elsewhere (``project``: the caller's key for it)."""

    project: int
    directory: str
    # None: every run of the project (the worker lists them, and picks the focus run as the
    # project's scanner would: ``focus``, ``shown``); else these, ``focus`` being the run to
    # inspect for the detail pane (or None).
    run_ids: tuple[str, ...] | None
    focus: str | None
    size: int
    shown: bool = True


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def plan(projects: Iterable[tuple[int, ProjectScanner]]) -> list[Unit]:
    """Units covering the runs of these projects ((key, its scanner) each). A fleet (MANY_PROJECTS
    or more) is a unit per project, listed by the workers: listing it here first, a syscall per
    run file in a thread that waits for the GIL at each while the UI thread composes a thousand
    tabs, took 1.6 s for 1,000 projects before any worker started. Fewer projects are sized: one
    whose run files come to UNIT_BYTES or less is one unit, its runs listed by the worker; a
    larger one is listed here and split. A project that cannot be listed is left out (its own
    scan says why). Reads the scanners' settings only: call it from the thread that owns them."""
    projects = list(projects)
    if len(projects) >= MANY_PROJECTS:
        return [Unit(key, scanner.directory, None, scanner.focus, 0, scanner.shown) for key, scanner in projects]
    units: list[Unit] = []
    for project, scanner in projects:
        directory = scanner.directory
        size = _run_files_size(directory)
        if size is None:
            continue
        if size <= UNIT_BYTES:
            units.append(Unit(project, directory, None, scanner.focus, size, scanner.shown))
            continue
        try:
            root = root_of(directory)
            run_ids = list_run_ids(root)
        except Exception:
            continue
        focus = scanner.focus_among(run_ids)
        part: list[str] = []
        size = 0
        for run_id in run_ids:
            try:
                length = os.lstat(os.path.join(root, run_path(run_id))).st_size
            except (OSError, ValueError):
                length = 0
            if part and size + length > UNIT_BYTES:
                units.append(Unit(project, directory, tuple(part), focus, size))
                part, size = [], 0
            part.append(run_id)
            size += length
        if part:
            units.append(Unit(project, directory, tuple(part), focus, size))
    return units


def _run_files_size(directory: str) -> int | None:
    """The bytes of a project's run files, for planning only (its scans check the directories
    safely); None if there are none or they cannot be listed."""
    try:
        with os.scandir(os.path.join(directory, RUNS)) as entries:
            sizes = [entry.stat(follow_symlinks=False).st_size for entry in entries if entry.name.endswith(".json")]
    except OSError:
        return None
    return sum(sizes) if sizes else None


def worth_sharing(units: list[Unit], processes: int, threshold: int = SHARE_FROM_BYTES) -> bool:
    """Whether these units are worth worker processes: a fleet always, else at least
    ``threshold`` bytes of run files."""
    if processes < 2 or len(units) < 2:
        return False
    return len({unit.project for unit in units}) >= MANY_PROJECTS or sum(unit.size for unit in units) >= threshold


class Answer(NamedTuple):
    """One unit's answer: what a worker found of those runs (None: it could not say), and
    whether it was the project's last unit."""

    project: int
    looked: Looked | None
    last: bool


class _Worker:
    def __init__(self) -> None:
        package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nexus_core.view.first_look"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # the dashboard owns the terminal; failures come back as text
            env=env,
            close_fds=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.requests: IO[bytes] = self.process.stdin
        self.answers: IO[bytes] = self.process.stdout  # read through ``messages`` only
        with contextlib.suppress(OSError, AttributeError):  # a smaller pipe is only slower
            fcntl.fcntl(self.answers.fileno(), fcntl.F_SETPIPE_SZ, ANSWER_PIPE_BYTES)
        self.messages = _Messages(self.answers.fileno())
        self.units: deque[Unit] = deque()  # sent, not answered yet, in the order answers come

    def send(self, unit: Unit) -> bool:
        try:
            _send(self.requests, (unit.directory, unit.run_ids, unit.focus, unit.shown))
        except OSError:
            return False
        self.units.append(unit)
        return True

    def feed(self, todo: list[Unit]) -> None:
        """Units from the end of ``todo`` until IN_FLIGHT are sent (or the worker is gone)."""
        while todo and len(self.units) < IN_FLIGHT and self.send(todo[-1]):
            todo.pop()

    def close(self) -> None:
        for stream in (self.requests, self.answers):
            with contextlib.suppress(OSError):
                stream.close()
        try:
            self.process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class FirstLooks:
    """Worker processes for one first load (``close``, or leaving its ``with``, ends them)."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._workers: list[_Worker] = []
        self.failed_units = 0  # units a worker could not answer (left to the scanners)

    def look(self, units: list[Unit], stopped: Callable[[], bool] = lambda: False) -> Iterator[Answer]:
        """Each unit's answer as it comes back; a project's last one says so (``last``). A unit
        no worker could answer comes as ``looked=None``. Ends early, with nothing more, once
        ``stopped()`` (asked every STOP_CHECK_SECONDS while waiting)."""
        left = {unit.project: 0 for unit in units}
        for unit in units:
            left[unit.project] += 1
        todo = list(reversed(units))
        selector = selectors.DefaultSelector()

        def answered(unit: Unit, looked: Looked | None) -> Answer:
            left[unit.project] -= 1
            if looked is None:
                self.failed_units += 1
            return Answer(unit.project, looked, left[unit.project] == 0)

        try:
            while len(self._workers) < min(self.processes, len(units)):
                try:
                    self._workers.append(_Worker())
                except OSError:
                    break
            for worker in self._workers:
                worker.feed(todo)
                if worker.units:
                    selector.register(worker.answers, selectors.EVENT_READ, worker)
            while selector.get_map():
                if stopped():
                    return
                for key, _ in selector.select(STOP_CHECK_SECONDS):
                    worker = key.data
                    answers = worker.messages.read()  # each a Looked or an explanation (str)
                    if answers is None or len(answers) > len(worker.units):
                        # Gone (or answering what it was not asked): what it was sent goes unanswered.
                        selector.unregister(worker.answers)
                        while worker.units:
                            yield answered(worker.units.popleft(), None)
                        continue
                    done = [worker.units.popleft() for _ in answers]
                    worker.feed(todo)
                    if not worker.units:
                        selector.unregister(worker.answers)
                    for unit, answer in zip(done, answers, strict=True):
                        yield answered(unit, answer if isinstance(answer, Looked) else None)
            # No worker left to ask (none started, or all gone): the rest are the scanners'.
            while todo:
                yield answered(todo.pop(), None)
        finally:
            selector.close()

    def __enter__(self) -> FirstLooks:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        workers, self._workers = self._workers, []
        for worker in workers:
            worker.close()


def _send(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


class _Messages:
    """The messages ``_send`` wrote to a pipe, read from its descriptor with one system call per
    ``read`` (a buffered reader makes one per 8 KiB, and each gives the GIL away)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._received = bytearray()

    def read(self) -> list[Any] | None:
        """The messages complete after one read (waiting for bytes to come), or None at the end
        of the stream (or a broken message)."""
        try:
            chunk = os.read(self.fd, _READ_BYTES)
        except OSError:
            return None
        if not chunk:
            return None
        self._received += chunk
        messages: list[Any] = []
        while len(self._received) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(self._received)
            end = _HEADER.size + length
            if len(self._received) < end:
                break
            data = bytes(self._received[_HEADER.size : end])
            del self._received[:end]
            try:
                messages.append(pickle.loads(data))
            except (pickle.UnpicklingError, EOFError, ValueError):
                return None
        return messages


def serve(requests: IO[bytes], answers: IO[bytes]) -> None:
    """A worker: each request (directory, run ids or None, focus, shown: a Unit's) answered with a
    Looked, or the text of what went wrong; ends when the requests end."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the dashboard decides when its workers stop
    # Each unit's objects are garbage once sent: collect between units, not during them (full
    # collections over a large run's parsed records were a tenth of a first look).
    gc.freeze()
    gc.disable()
    messages = _Messages(requests.fileno())
    while (batch := messages.read()) is not None:
        for directory, run_ids, focus, shown in batch:
            answer: Looked | str
            try:
                scanner = ProjectScanner(directory)
                if run_ids is None:  # the whole project: its runs, and its focus as its scanner picks it
                    scanner.focus, scanner.shown = focus, shown
                    scanner.root = root_of(directory)
                    run_ids = list_run_ids(scanner.root)
                    focus = scanner.focus_among(run_ids)
                answer = scanner.look_at(list(run_ids), focus)
            except Exception as error:
                answer = explained(error)
            try:
                _send(answers, answer)
            except OSError:
                return
            del answer
            gc.collect()


if __name__ == "__main__":
    serve(sys.stdin.buffer, sys.stdout.buffer)
