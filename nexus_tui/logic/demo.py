"""A demo project built by driving the real core: real plans, real checks that run.

:func:`build_demo` is shared by ``nexus-tui --demo``, the tests, the screenshot script and the
benchmarks. With ``seed`` and ``start`` it is deterministic (same ids, same times), which is
what snapshots need. Only the final ``writer.lock`` is written by hand, byte for byte the way
``nexus_core.state.locks`` publishes one, with a pid that cannot be alive.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from nexus_core import engine, timeutil
from nexus_core.backend import process
from nexus_core.errors import explained
from nexus_core.hostinfo import hostname as this_hostname
from nexus_core.shapes import JsonObject
from nexus_core.state import canonical
from nexus_core.state.locks import WRITER_LOCK
from nexus_core.state.store import load_run, make_dirs

# Linux's PID_MAX_LIMIT: no process can have this pid, so a liveness probe always says dead.
DEAD_PID = 4194304
STOP_WAIT_SECONDS = 5.0  # for the builder to end on SIGTERM before it is killed
# 2026-11-30T09:00:00Z: the fixed start of the deterministic demo.
FIXED_START = 1796029200.0
HOST = {"kind": "host", "id": "claude-code", "sessionId": "session-1"}
HOST_RETRY = {"kind": "host", "id": "claude-code", "sessionId": "session-2"}


class SteppingClock:
    """A clock that moves forward a little on every reading (so durations are not all zero)."""

    STEPS = (0.137, 0.291, 0.083, 0.412, 0.058, 0.176, 0.733, 0.119)

    def __init__(self, start: float) -> None:
        self.now = start
        self.readings = 0

    def __call__(self) -> float:
        self.now += self.STEPS[self.readings % len(self.STEPS)]
        self.readings += 1
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class DemoInfo:
    directory: str
    runs: list[str]
    finished_at: float  # clock value when the build ended (seconds since the epoch)
    process_task: bool  # whether the process task could be launched with this core
    notes: list[str] = field(default_factory=list)


@contextlib.contextmanager
def _identity(identity: tuple[int, str] | None) -> Iterator[None]:
    """Pretend to be process ``pid`` on ``host`` while recording (snapshots must not depend on
    the machine). Only the engine's own view of itself is patched."""
    if identity is None:
        yield
        return
    patched: Any = engine
    saved = patched.pid, patched.hostname
    patched.pid, patched.hostname = (lambda: identity[0]), (lambda: identity[1])
    try:
        yield
    finally:
        patched.pid, patched.hostname = saved


@contextlib.contextmanager
def _seeded_uuids(seed: int | None) -> Iterator[None]:
    if seed is None:
        yield
        return
    rng = random.Random(seed)
    original = uuid.uuid4

    def fake() -> uuid.UUID:
        return uuid.UUID(int=rng.getrandbits(128), version=4)

    uuid.uuid4 = fake
    try:
        yield
    finally:
        uuid.uuid4 = original


def _write(root: str, rel: str, text: str, mode: int = 0o644) -> None:
    path = os.path.join(root, rel)
    make_dirs(os.path.dirname(path))
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.chmod(path, mode)


CONTENT_CHECK = textwrap.dedent(
    """\
    import sys

    # The task id, not the artifact path: create requires an existing file named by a check
    # argument to be a protected resource, and a fresh run of the plan is created after the
    # artifacts exist.
    task_id, needle = sys.argv[1], sys.argv[2]
    path = f"out/{task_id}/{task_id}.txt"
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as error:
        print(f"cannot read {path}: {error.strerror}", file=sys.stderr)
        sys.exit(2)
    lines = text.splitlines()
    print(f"checked {path}: {len(lines)} line(s)")
    if needle not in text:
        print(f"expected {needle!r} in {path}", file=sys.stderr)
        print(f"first line was: {lines[0] if lines else '(empty)'}", file=sys.stderr)
        sys.exit(1)
    print(f"found {needle!r}")
    """
)
LINT = textwrap.dedent(
    """\
    # Count lines of the artifact of every task id given; fail on a line containing TODO.
    status=0
    for task in "$@"; do
      file="out/$task/$task.txt"
      count=0
      while IFS= read -r line || [ -n "$line" ]; do
        count=$((count + 1))
        case "$line" in *TODO*) echo "$file:$count: TODO left" >&2; status=1 ;; esac
      done < "$file"
      echo "$file: $count line(s) ok"
    done
    exit $status
    """
)
WORKER = textwrap.dedent(
    """\
    import os, sys

    task_id = sys.argv[1]
    target = f"out/{task_id}/{task_id}.txt"
    os.makedirs(os.path.dirname(target), exist_ok=True)
    brief = sys.stdin.read().strip()
    with open(target, "w", encoding="utf-8") as handle:
        handle.write("benchmark: 42 ops/s\\n")
    print(f"wrote {target} from a brief of {len(brief)} chars")
    """
)


def _task(
    task_id: str,
    objective: str,
    needle: str,
    depends: list[str] | None = None,
    deadline_ms: int | None = None,
    lint: bool = True,
    max_attempts: int = 2,
) -> JsonObject:
    artifact = f"out/{task_id}/{task_id}.txt"
    checks: list[JsonObject] = [
        {"id": "content", "command": "python", "args": ["checks/content.py", task_id, needle], "timeoutMs": 20000},
    ]
    if lint:
        checks.append({"id": "lint", "command": "/bin/sh", "args": ["checks/lint.sh", task_id], "timeoutMs": 20000})
    task: JsonObject = {
        "id": task_id,
        "objective": objective,
        "dependsOn": depends or [],
        "scope": [f"out/{task_id}"],
        "artifacts": [artifact],
        "resources": ["checks/content.py", "checks/lint.sh"],
        "checks": checks,
        "maxAttempts": max_attempts,
        "idempotent": True,
    }
    if deadline_ms is not None:
        task["deadlineMs"] = deadline_ms
    return task


class _Driver:
    """Small verbs over the real engine for one run."""

    def __init__(self, root: str, run_id: str, clock: SteppingClock) -> None:
        self.root, self.run_id, self.clock = root, run_id, clock

    def attempt_id(self, task_id: str) -> str:
        run = load_run(self.root, self.run_id)
        return str(engine.task_of(run, task_id)["attempts"][-1]["id"])

    def produce(self, task_id: str, content: str) -> None:
        _write(self.root, f"out/{task_id}/{task_id}.txt", content)

    def start(self, task_id: str, backend: JsonObject = HOST) -> None:
        engine.start_task(self.root, self.run_id, task_id, {"backend": backend})

    def record(self, task_id: str, summary: str, backend: JsonObject = HOST, outcome: str = "completed") -> None:
        options: JsonObject = {
            "attemptId": self.attempt_id(task_id),
            "backend": backend,
            "outcome": outcome,
            "summary": summary,
        }
        if outcome == "completed":
            options["exitCode"] = 0
        engine.record_attempt(self.root, self.run_id, task_id, options)

    def verify(self, task_id: str) -> None:
        engine.verify_task(self.root, self.run_id, task_id)

    def accept(self, task_id: str) -> None:
        engine.accept_task(self.root, self.run_id, task_id)

    def work(self, task_id: str, content: str, summary: str, minutes: float = 4) -> None:
        """start, produce the artifact, record completed."""
        self.start(task_id)
        self.clock.advance(minutes * 60)
        self.produce(task_id, content)
        self.record(task_id, summary)

    def deliver(self, task_id: str, content: str, summary: str, accept: bool = True) -> None:
        self.work(task_id, content, summary)
        self.clock.advance(30)
        self.verify(task_id)
        if accept:
            self.clock.advance(45)
            self.accept(task_id)


def release_plan(with_process: bool) -> JsonObject:
    tasks = [
        _task("schema", "Write the v2 schema to out/schema/schema.txt.", "version: 2"),
        _task("api", "Implement the API described by the schema.", "endpoints:", depends=["schema"]),
        _task("client", "Generate the client from the API.", "client for api v2", depends=["api"]),
        _task("release-notes", "Write the release notes once the client is in.", "## v2", depends=["client"]),
        _task("migrate", "Write the data migration (two tries allowed).", "migrated: 1200 rows", max_attempts=3),
        _task(
            "backfill",
            "Backfill the history table (deadline 20 minutes).",
            "backfilled",
            deadline_ms=20 * 60 * 1000,
        ),
        _task("cleanup", "Remove the v1 tables.", "dropped"),
        _task("perf-notes", "Summarise the performance run.", "p95"),
    ]
    if with_process:
        tasks.append(
            {
                "id": "bench",
                "objective": "Run the benchmark worker as an owned process.",
                "scope": ["out/bench"],
                "artifacts": ["out/bench/bench.txt"],
                "resources": ["checks/content.py"],
                "checks": [
                    {
                        "id": "content",
                        "command": "python",
                        "args": ["checks/content.py", "bench", "ops/s"],
                        "timeoutMs": 20000,
                    }
                ],
                "execution": {
                    "adapter": "command",
                    "command": "python",
                    "args": ["workers/bench.py", "bench"],
                    "input": "briefs/bench.md",
                    "resources": ["workers/bench.py"],
                    "outputLimitBytes": 4096,
                },
            }
        )
    return {"id": "release", "maxParallel": 6, "config": {"target": "v2"}, "tasks": tasks}


def _process_available() -> bool:
    try:
        from nexus_core.backend import process

        return hasattr(process, "interpret_output")  # the placeholder module has no supervisor
    except Exception:
        return False


def _add_process_task(driver: _Driver) -> str | None:
    """Launch, collect and verify the process task; returns why it could not, or None."""
    try:
        process.launch_task(driver.root, driver.run_id, "bench", {})
        run = load_run(driver.root, driver.run_id)
        attempt = engine.task_of(run, "bench")["attempts"][-1]
        process.collect_task(
            driver.root,
            driver.run_id,
            "bench",
            {
                "attemptId": attempt["id"],
                "backend": {k: v for k, v in attempt["backend"].items() if k != "capabilities"},
            },
        )
        driver.clock.advance(20)
        driver.verify("bench")
    except Exception as error:
        return f"process task: {error}"
    return None


# What build_demo reports, in order, to ``progress`` (one line per step).
DEMO_STEPS = (
    "checks, workers and briefs",
    "run 'release': a dependency chain, a failed verification and its retry, a cancelled attempt, "
    "the process task, stale evidence, an overdue attempt",
    "run 'docs-site': two accepted tasks",
    "run 'hotfix': a blocked attempt",
    "writer.lock left by a dead process",
)


def build_demo(
    directory: str,
    *,
    start: float | None = None,
    seed: int | None = None,
    identity: tuple[int, str] | None = None,
    with_process: bool | None = None,
    progress: Callable[[str], None] | None = None,
) -> DemoInfo:
    """Fill ``directory`` (empty or missing) with the demo project. Restores the real clock.

    ``start`` (epoch seconds) and ``seed`` make times and ids deterministic; ``identity``
    (pid, host) replaces this process's pid and host in what gets recorded and in the lock.
    Without ``identity`` the pids recorded (verifier, supervisor) are this process's: build in
    a process of its own (:class:`DemoBuild`) so that they name a process that has exited.
    ``progress`` is told each of :data:`DEMO_STEPS` as it starts."""
    step = iter(DEMO_STEPS)

    def announce() -> None:
        if progress is not None:
            progress(next(step))

    os.makedirs(directory, exist_ok=True)
    root = os.path.realpath(directory)
    if start is None:
        start = time.time() - 3 * 3600
    clock = SteppingClock(start)
    if with_process is None:
        with_process = _process_available()
    notes: list[str] = []
    timeutil.set_clock(clock)
    try:
        with _seeded_uuids(seed), _identity(identity):
            announce()
            _write(root, "checks/content.py", CONTENT_CHECK)
            _write(root, "checks/lint.sh", LINT)
            _write(root, "workers/bench.py", WORKER)
            _write(root, "briefs/bench.md", "Run the benchmark and write out/bench/bench.txt.\n")
            _write(root, "docs/guide.md", "# Guide\n")
            announce()
            process_ok = _build_release(root, clock, with_process, notes)
            announce()
            _build_docs_site(root, clock)
            announce()
            _build_hotfix(root, clock)
            clock.advance(300)
            announce()
            write_dead_writer_lock(root, identity[1] if identity else this_hostname())
            finished = clock.now
    finally:
        timeutil.set_clock(None)
    return DemoInfo(root, ["docs-site", "hotfix", "release"], finished, process_ok, notes)


def _build_release(root: str, clock: SteppingClock, with_process: bool, notes: list[str]) -> bool:
    engine.create_run(root, release_plan(with_process))
    run = _Driver(root, "release", clock)
    # A dependency chain: schema <- api <- client <- release-notes, all accepted.
    run.deliver("schema", "version: 2\ntables: 14\n", "Wrote the v2 schema (14 tables).")
    run.deliver("api", "endpoints:\n  GET /v2/items\n  POST /v2/items\n", "Implemented 2 endpoints.")
    run.deliver(
        "client",
        "client for api v2\n",
        "Generated the client. Summary text is untrusted: [bold red]not markup[/] stays literal.",
    )
    run.deliver("release-notes", "## v2\n- schema v2\n- client for api v2\n", "Wrote the v2 release notes.")
    # A failed verification, then a retry that passes and waits for accept.
    run.work("migrate", "migrated: 1150 rows\n", "Migration ran; 50 rows skipped.")
    clock.advance(20)
    run.verify("migrate")
    clock.advance(600)
    engine.retry_task(root, "release", "migrate", {"backend": HOST_RETRY})
    clock.advance(240)
    run.produce("migrate", "migrated: 1200 rows\n")
    run.record("migrate", "Re-ran with the skipped rows included.", backend=HOST_RETRY)
    clock.advance(20)
    run.verify("migrate")
    # Waiting for verification.
    run.work("perf-notes", "p95: 84 ms\np99: 120 ms\n", "Summarised the perf run.")
    # A cancelled attempt awaiting reconciliation.
    run.start("cleanup")
    clock.advance(120)
    engine.cancel_task(root, "release", "cleanup", {"reason": "Wrong database selected; stop before dropping tables."})
    process_ok = False
    if with_process:
        problem = _add_process_task(run)
        if problem:
            notes.append(problem)
        else:
            process_ok = True
    # Stale evidence: an accepted artifact is edited afterwards. It is a leaf (no task depends on
    # it): an accepted task is permanent, so a stale dependency would block its dependants for good.
    clock.advance(900)
    run.produce("release-notes", "## v2\n- schema v2\n- client for api v2\n- hand-edited after acceptance\n")
    # An overdue running attempt (20 minute deadline, started long ago).
    run.start("backfill")
    clock.advance(3600)
    return process_ok


def _build_docs_site(root: str, clock: SteppingClock) -> None:
    plan = {
        "id": "docs-site",
        "maxParallel": 2,
        "config": {},
        "tasks": [
            _task("guide", "Write the user guide.", "# Guide v2", lint=False),
            _task("reference", "Write the API reference.", "GET /v2/items", depends=["guide"], lint=False),
        ],
    }
    engine.create_run(root, plan)
    run = _Driver(root, "docs-site", clock)
    run.deliver("guide", "# Guide v2\nInstall, run, inspect.\n", "Wrote the guide.")
    run.deliver("reference", "GET /v2/items\nPOST /v2/items\n", "Wrote the reference.")


def _build_hotfix(root: str, clock: SteppingClock) -> None:
    plan = {
        "id": "hotfix",
        "maxParallel": 1,
        "config": {},
        "tasks": [_task("patch", "Patch the date parser.", "fixed: parse_date")],
    }
    engine.create_run(root, plan)
    run = _Driver(root, "hotfix", clock)
    run.start("patch")
    clock.advance(200)
    run.record("patch", "Blocked: needs the production timezone table.", outcome="blocked")


def write_dead_writer_lock(root: str, host: str) -> str:
    """A writer.lock as locks.py publishes it (compact owner JSON, 0600, no newline), owned by a
    pid that cannot be alive: what a killed mutation leaves behind."""
    owner = {"token": str(uuid.uuid4()), "pid": DEAD_PID, "hostname": host, "createdAt": timeutil.now_iso()}
    path = os.path.join(root, WRITER_LOCK)
    make_dirs(os.path.dirname(path))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, canonical.compact(owner).encode("utf-8"))
    finally:
        os.close(fd)
    return path


class DemoBuildFailed(Exception):
    """The demo builder process failed; the message is its own."""


class DemoBuild:
    """``nexus-tui --demo``'s build: :func:`build_demo` in a child process (``python -m
    nexus_tui.logic.demo DIR``), so that the dashboard draws its first frame at once and the pids
    the demo records (verifier, supervisor) are the builder's, which has exited once the
    dashboard shows them (never the dashboard's own pid, which is alive). Its stdout is one
    ``step``/``note`` line each, read by :meth:`run`."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._child: subprocess.Popen[str] | None = None
        self._stopped = False

    def run(self, progress: Callable[[str], object]) -> list[str]:
        """Build (blocking: a worker thread calls it); each step goes to ``progress``; returns
        the notes (what could not be built); raises DemoBuildFailed."""
        command = [sys.executable, "-m", "nexus_tui.logic.demo", self.directory]
        notes: list[str] = []
        problem: list[str] = []
        with subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        ) as child:
            self._child = child
            if self._stopped:
                child.terminate()
            assert child.stdout is not None and child.stderr is not None
            for line in child.stdout:
                kind, _, text = line.rstrip("\n").partition("\t")
                if kind == "step":
                    progress(text)
                elif kind == "note":
                    notes.append(text)
                elif kind == "error":
                    problem.append(text)
            errors = child.stderr.read()
        if child.returncode != 0:
            why = problem[0] if problem else (errors.strip().splitlines() or [f"exit status {child.returncode}"])[-1]
            raise DemoBuildFailed(why)
        return notes

    @property
    def pid(self) -> int | None:
        """The builder process's pid once it started."""
        return self._child.pid if self._child is not None else None

    def stop(self, wait: bool = False) -> None:
        """Stop a build still running (the dashboard quits before it ended); ``wait``: until the
        builder has exited (it writes in the demo project, about to be removed)."""
        self._stopped = True
        child = self._child
        if child is not None and child.poll() is None:
            with contextlib.suppress(OSError):
                child.terminate()
            if wait:
                try:
                    child.wait(STOP_WAIT_SECONDS)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()


def remove_demo(directory: str) -> str | None:
    """Delete the demo project ``--demo`` made in its temporary directory (symbolic links are
    removed, never followed); None, or why something stays."""
    problems: list[str] = []

    def note(_function: Any, path: str, error: Any) -> None:
        problems.append(f"{path}: {error[1] if isinstance(error, tuple) else error}")

    shutil.rmtree(directory, onerror=note)  # Python 3.11: onerror (3.12 adds onexc)
    if os.path.lexists(directory):
        return problems[0] if problems else "it is still there"
    return None


def main(argv: list[str]) -> int:
    """The builder process: ``python -m nexus_tui.logic.demo DIR``."""

    def say(kind: str, text: str) -> None:
        print(f"{kind}\t{' '.join(text.split())}", flush=True)

    try:
        info = build_demo(argv[0], progress=lambda line: say("step", line))
    except Exception as error:
        say("error", explained(error))
        return 1
    for note in info.notes:
        say("note", note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
