"""``nexus attention``: the needs of projects, oldest first, as the CLI prints them; exit codes;
``--watch`` events under live writes (real watchfiles); ``--exec`` with the need as JSON on
stdin, bounded in time, failures logged. Every state is written by the real core or as a
crashed process would leave it (a lock file)."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from tui_actions_support import make_project, record, start, task_plan, write_dead_writer_lock

from nexus_core import engine

NEED_KEYS = ["id", "kind", "project", "run", "task", "attempt", "since", "action", "command", "what", "text"]


def attention(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-m", "nexus_core.cli", "attention", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=cwd,
    )
    assert "Traceback" not in done.stderr, done.stderr
    return done


def test_nothing_needs_a_person_exits_0(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    done = attention("-d", str(root), "--json")
    assert done.returncode == 0
    document = json.loads(done.stdout)
    assert list(document) == ["schemaVersion", "status", "time", "count", "needs"]
    assert (document["schemaVersion"], document["status"], document["count"], document["needs"]) == (1, "ok", 0, [])
    human = attention("-d", str(root))
    assert human.returncode == 0 and human.stdout == ""
    assert human.stderr == "nexus attention: nothing needs a person. [exit 0]\n"


def test_needs_are_listed_oldest_first_with_exit_5(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b"), task_plan("c")])
    start(root, "a")
    engine.cancel_task(str(root), "demo", "a", {"reason": "stop"})  # a cancellation to reconcile
    start(root, "b")
    record(root, "b", outcome="blocked")
    lock_hash = write_dead_writer_lock(root)  # created 2026-11-30: the oldest
    done = attention("-d", str(root), "--json")
    assert done.returncode == 5, done.stderr
    document = json.loads(done.stdout)
    assert document["count"] == 3
    needs = document["needs"]
    assert [list(need) for need in needs] == [NEED_KEYS] * 3
    assert [(n["kind"], n["task"], n["action"]) for n in needs] == [
        ("writer-lock-dead", None, "recover-lock"),
        ("cancellation-requested", "a", "reconcile"),
        ("attempt-blocked", "b", "record"),
    ]
    lock = needs[0]
    assert lock["since"] == "2026-11-30T00:00:00.000Z" and lock["project"] == str(root)
    assert lock["command"] == f"nexus recover-lock --input FILE -d {root}"
    assert lock["text"] == "writer.lock left by pid 4194304, which is gone"
    assert needs[1]["since"] <= needs[2]["since"]
    assert needs[2]["command"] == f"nexus record demo b --input FILE -d {root}"
    # The same needs keep their ids from one look to the next.
    again = json.loads(attention("-d", str(root), "--json").stdout)["needs"]
    assert [n["id"] for n in again] == [n["id"] for n in needs]
    # Human form: one line each, then the outcome on stderr.
    human = attention("-d", str(root))
    assert human.returncode == 5
    lines = human.stdout.splitlines()
    assert len(lines) == 3 and "writer.lock left by a process that is gone" in lines[0]
    assert "demo/b: the worker reported it is blocked -> nexus record demo b" in lines[2]
    assert human.stderr == "nexus attention: 3 need(s) a person. [exit 5]\n"
    assert lock_hash


def test_a_new_occurrence_gets_a_new_id(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a", maxAttempts=3)])
    start(root, "a")
    record(root, "a", outcome="failed")
    first = json.loads(attention("-d", str(root), "--json").stdout)["needs"]
    assert [n["kind"] for n in first] == ["attempt-failed"]
    engine.retry_task(str(root), "demo", "a", {"backend": {"kind": "host", "id": "worker", "sessionId": "session-1"}})
    assert json.loads(attention("-d", str(root), "--json").stdout)["count"] == 0
    record(root, "a", outcome="failed")
    second = json.loads(attention("-d", str(root), "--json").stdout)["needs"]
    assert [n["kind"] for n in second] == ["attempt-failed"] and second[0]["id"] != first[0]["id"]


def test_discover_finds_every_project_and_hostile_names_stay_inert(tmp_path: Path) -> None:
    quiet = make_project(tmp_path / "quiet")
    hostile = tmp_path / "x\x1b]0;pwned\x07"
    noisy = make_project(hostile)
    write_dead_writer_lock(noisy)
    done = attention("--discover", str(tmp_path), "--json")
    assert done.returncode == 5
    needs = json.loads(done.stdout)["needs"]
    assert [n["project"] for n in needs] == [str(noisy)]
    assert "\x1b" not in done.stdout  # JSON escapes it
    human = attention("--discover", str(tmp_path))
    assert "\x1b" not in human.stdout and "\x07" not in human.stdout and "\\x1b]0;pwned" in human.stdout
    assert attention("-d", str(quiet)).returncode == 0


def test_errors_exit_1_with_the_usual_envelope(tmp_path: Path) -> None:
    missing = attention("--discover", str(tmp_path / "missing"), "--json")
    assert missing.returncode == 1
    assert json.loads(missing.stdout) == {
        "schemaVersion": 1,
        "status": "error",
        "error": f"not a directory: {tmp_path / 'missing'}",
    }
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / ".bmad-plus").write_text("not a directory")
    done = attention("-d", str(broken))
    assert done.returncode == 1 and done.stderr.startswith("Nexus: ")
    no_watch = attention("-d", str(broken), "--exec", "true")
    assert no_watch.returncode == 1
    assert no_watch.stderr == "Nexus: --exec runs for each need opened while watching: add --watch.\n"


class Watcher:
    """``nexus attention --watch`` as a child; its stdout lines parsed as they come."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nexus_core.cli", "attention", "--watch", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines: queue.Queue[dict[str, Any]] = queue.Queue()
        self.errors: list[str] = []
        self.readers = [
            threading.Thread(target=self._read, daemon=True),
            threading.Thread(target=self._read_errors, daemon=True),
        ]
        for reader in self.readers:
            reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def _read_errors(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.errors.append(line)

    def err(self) -> str:
        return "".join(self.errors)

    def next(self, seconds: float = 30.0) -> dict[str, Any]:
        return self.lines.get(timeout=seconds)

    def stop(self, signal_number: int = signal.SIGTERM) -> str:
        self.process.send_signal(signal_number)
        self.process.wait(timeout=30)
        for reader in self.readers:
            reader.join(timeout=30)
        return self.err()


def test_watch_prints_needs_opened_and_closed_in_order(tmp_path: Path) -> None:
    root = make_project(tmp_path, [task_plan("a"), task_plan("b")])
    start(root, "a")
    record(root, "a", outcome="blocked")
    watcher = Watcher("-d", str(root))
    try:
        started = watcher.next()
        assert (started["type"], started["mode"], started["needs"]) == ("watch-started", "watchfiles", 1)
        initial = watcher.next()
        assert (initial["type"], initial["initial"], initial["kind"], initial["task"]) == (
            "need-opened",
            True,
            "attempt-blocked",
            "a",
        )
        write_dead_writer_lock(root)
        opened = watcher.next()
        assert (opened["type"], opened["kind"]) == ("need-opened", "writer-lock-dead")
        assert list(opened)[:2] == ["type", "time"] and "initial" not in opened
        (root / ".bmad-plus/nexus/writer.lock").unlink()
        closed = watcher.next()
        assert (closed["type"], closed["id"]) == ("need-closed", opened["id"])
        start(root, "b")
        engine.cancel_task(str(root), "demo", "b", {"reason": "stop"})
        record(root, "a")  # a's report arrives: its need closes
        events = [watcher.next(), watcher.next()]
        assert sorted((e["type"], e["task"]) for e in events) == [("need-closed", "a"), ("need-opened", "b")]
    finally:
        err = watcher.stop()
    assert watcher.process.returncode == 143
    assert err.endswith("nexus attention: terminated (SIGTERM); nothing was changed.\n")


def test_exec_gets_each_opened_need_as_json_and_failures_are_logged(tmp_path: Path) -> None:
    root = make_project(tmp_path)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    notifier = tmp_path / "notify.py"
    notifier.write_text(
        "import json, os, sys, time\n"
        "need = json.loads(sys.stdin.read())\n"
        f"path = os.path.join({str(inbox)!r}, need['id'] + '.json')\n"
        "open(path, 'w').write(json.dumps(need))\n"
        "if need['kind'] == 'attempt-blocked':\n    time.sleep(60)\n"
        "sys.exit(3 if need['kind'] == 'writer-lock-dead' else 0)\n"
    )
    watcher = Watcher("-d", str(root), "--exec", f"{sys.executable} {notifier}", "--exec-timeout", "2")
    try:
        assert watcher.next()["needs"] == 0
        write_dead_writer_lock(root)  # the notifier exits 3: logged, the watch goes on
        opened = watcher.next()
        assert opened["kind"] == "writer-lock-dead"
        written = _eventually(lambda: list(inbox.glob("*.json")))
        need = json.loads(written[0].read_text())
        assert need == {key: opened[key] for key in NEED_KEYS}
        (root / ".bmad-plus/nexus/writer.lock").unlink()  # recovered: its need closes
        assert watcher.next()["type"] == "need-closed"
        start(root, "a")
        record(root, "a", outcome="blocked")  # the notifier hangs: killed after 2 s
        blocked = watcher.next()
        assert blocked["kind"] == "attempt-blocked"
        _eventually(lambda: (inbox / f"{blocked['id']}.json").exists())
        # The watch is not held up by the hanging command: the next change is reported at once.
        record(root, "a")
        assert watcher.next()["type"] == "need-closed"
        _eventually(lambda: "killed after" in watcher.err())
    finally:
        err = watcher.stop()
    assert f"exited 3 for need {opened['id']} (writer-lock-dead)" in err
    assert f"was killed after 2 s for need {blocked['id']} (attempt-blocked)" in err


def _eventually(predicate: Any, seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.parametrize("signal_number, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_watch_stops_cleanly(tmp_path: Path, signal_number: int, code: int) -> None:
    root = make_project(tmp_path)
    watcher = Watcher("-d", str(root))
    assert watcher.next()["type"] == "watch-started"
    err = watcher.stop(signal_number)
    assert watcher.process.returncode == code
    assert "Traceback" not in err and err.startswith("nexus attention: ")
    assert os.path.exists(root)


def test_a_failed_scheduled_recheck_is_a_need_until_the_next_one_fires(tmp_path: Path) -> None:
    from schedule_kit import ScheduledProject, finished_events, stop_scheduler
    from supervise_kit import task_def, until

    project = ScheduledProject(tmp_path)
    project.create(task_def("a"))
    schedule = project.add("--every", "24h")
    state = project.root / ".bmad-plus/nexus/runs/demo.json"
    good = state.read_bytes()
    log = tmp_path / "events.jsonl"
    runner = project.scheduler(log)
    try:
        state.write_bytes(good[:60])  # the occurrence finds the run unreadable: it fails
        project.schedule("run", schedule["id"])
        until(lambda: finished_events(log), what="the failed occurrence")
        needs = json.loads(attention("-d", str(project.root), "--json").stdout)["needs"]
        failed = next(n for n in needs if n["kind"] == "schedule-failed")
        assert {n["kind"] for n in needs} == {"schedule-failed", "run-unreadable"}
        assert (failed["run"], failed["task"], failed["action"]) == ("demo", None, None)
        assert failed["command"] == f"nexus schedule runs {schedule['id']} -d {project.root}"
        assert failed["since"] == project.runs(schedule["id"])[0]["finishedAt"]
        state.write_bytes(good)  # restored: the run reads again, the failed re-check stays a need
        assert [n["kind"] for n in json.loads(attention("-d", str(project.root), "--json").stdout)["needs"]] == [
            "schedule-failed"
        ]
        project.schedule("run", schedule["id"])
        until(lambda: len(finished_events(log)) == 2, what="the next occurrence")
    finally:
        stop_scheduler(runner)
    assert [o["status"] for o in project.runs(schedule["id"])] == ["failed", "fired"]
    assert attention("-d", str(project.root)).returncode == 0


def test_exec_runs_its_words_without_a_shell(tmp_path: Path) -> None:
    """--exec CMD is split into words and run as they are: what a shell would expand or chain
    ($VAR, ;, $(...)) reaches the command as text and runs nothing."""
    root = make_project(tmp_path)
    marker = tmp_path / "a-shell-ran-this"
    argv_file = tmp_path / "argv.json"
    notifier = tmp_path / "notify.py"
    notifier.write_text(
        "import json, sys\n"
        "need = json.loads(sys.stdin.read())\n"
        f"open({str(argv_file)!r}, 'w').write(json.dumps([need['kind'], *sys.argv[1:]]))\n"
    )
    words = f"$HOME;touch {marker} `touch {marker}`"  # what `sh -c CMD` would run
    watcher = Watcher("-d", str(root), "--exec", f"{sys.executable} {notifier} {words}")
    try:
        assert watcher.next()["needs"] == 0
        write_dead_writer_lock(root)
        assert watcher.next()["kind"] == "writer-lock-dead"
        received = _eventually(lambda: argv_file.exists() and json.loads(argv_file.read_text()))
    finally:
        watcher.stop()
    assert received == ["writer-lock-dead", "$HOME;touch", str(marker), "`touch", f"{marker}`"]
    assert not marker.exists()


def test_watch_stops_on_sigint_even_when_started_with_sigint_ignored(tmp_path: Path) -> None:
    """A script's background job (``nexus attention --watch &``, nohup) starts with SIGINT
    ignored; kill -INT must still stop the watch, as it stops ``nexus loop``."""
    root = make_project(tmp_path)
    process = subprocess.Popen(
        [sys.executable, "-m", "nexus_core.cli", "attention", "--watch", "-d", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert process.stdout is not None
        assert json.loads(process.stdout.readline())["type"] == "watch-started"
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130
    assert err.startswith("nexus attention: interrupted")


def test_watch_stops_at_the_next_wake_when_a_signal_s_interrupt_was_lost(tmp_path: Path) -> None:
    """A signal handler's KeyboardInterrupt raised inside a weakref callback (the import system's,
    as the watch imports watchfiles) is printed and lost: the watch also asks, at each wake,
    whether a signal came (a loaded test run once watched on for 30 s after kill -INT)."""
    from nexus_core.attention import Projects, watch

    root = make_project(tmp_path)
    lines: list[str] = []
    signalled = False

    def wakes() -> Any:
        nonlocal signalled
        yield "watch"
        signalled = True  # the handler ran; its interrupt went nowhere
        yield "tick"
        raise AssertionError("the watch looked again after the signal")

    with pytest.raises(KeyboardInterrupt):
        watch(Projects([str(root)]), lines.append, lines.append, wakes=wakes(), interrupted=lambda: signalled)
    assert json.loads(lines[0])["type"] == "watch-started"
