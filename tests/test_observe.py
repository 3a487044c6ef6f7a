"""``nexus observe``: the dashboard's own snapshots, streamed. A real subprocess of the CLI is
compared with the local scanner on the same project (equal once decoded), changes arrive as
lines carrying only the changed runs, control lines move the focus and ask fresh reads, the
lines are terminal-safe, nothing is written, and it ends when its reader goes away."""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent / "tui"))
from dashboard_kit import HOST, finish, small_project, tree_fingerprint

from nexus_core import engine, observe_protocol
from nexus_core.state.store import load_run
from nexus_core.view.codec import SnapshotReader
from nexus_core.view.model import ProjectScanner, ProjectSnapshot, RunView
from nexus_tui.logic.demo import build_demo


class Observed:
    """A running ``nexus observe``: its lines read with the protocol's reader, its snapshots
    rebuilt like the dashboard does."""

    def __init__(self, *directories: str, json_lines: bool = True) -> None:
        words = [arg for directory in directories for arg in ("-d", directory)]
        self.process = subprocess.Popen(
            [sys.executable, "-m", "nexus_core.cli", "observe", *words, *(["--json-lines"] if json_lines else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert self.process.stdout is not None
        self.reader = observe_protocol.LineReader(self.process.stdout.fileno())
        self.snapshots = [SnapshotReader() for _ in directories]
        self.messages: list[dict[str, Any]] = []

    def next_message(self, timeout: float = 60) -> dict[str, Any]:
        line = self.reader.readline(timeout)
        assert line is not None, self.process.stderr.read() if self.process.stderr else ""
        message = observe_protocol.decode(line)
        self.messages.append(message)
        if message["type"] in ("snapshot", "change"):
            self.snapshots[message["project"]].apply(message)
        return message

    def snapshot(self, project: int) -> ProjectSnapshot:
        """Project ``project``'s snapshot as the lines so far make it (one came already)."""
        shown = self.snapshots[project].snapshot
        assert shown is not None, "no snapshot of this project yet"
        return shown

    def run(self, project: int, run_id: str) -> RunView:
        view = self.snapshot(project).run(run_id)
        assert view is not None, f"no run {run_id} in the snapshot"
        return view

    def until(self, predicate: Callable[[], Any], timeout: float = 60) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            found = predicate()
            if found:
                return found
            left = deadline - time.monotonic()
            assert left > 0, f"not seen within {timeout} s; last messages: {self.messages[-3:]}"
            self.next_message(left)

    def send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(observe_protocol.encode(message).encode())
        self.process.stdin.flush()

    def close(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(30)


@pytest.fixture
def observed() -> Iterator[Callable[..., Observed]]:
    made: list[Observed] = []

    def start(*directories: str, json_lines: bool = True) -> Observed:
        made.append(Observed(*directories, json_lines=json_lines))
        return made[-1]

    yield start
    for one in made:
        one.close()


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The demo project (real core: accepted chains, a failed verification and its retry, an
    overdue attempt, a stale leaf, a cancellation, a blocked task, a dead writer.lock)."""
    directory = str(tmp_path_factory.mktemp("observe") / "demo")
    build_demo(directory, with_process=False)
    return directory


def comparable(snapshot: ProjectSnapshot) -> ProjectSnapshot:
    """Without what only says when and after which scan it was taken."""
    return dataclasses.replace(snapshot, scanned_at_ms=0, changed=frozenset())


def settled(reader: SnapshotReader, focus: str | None) -> ProjectSnapshot | None:
    """The snapshot once every run is loaded and the focus run carries its full inspection."""
    snapshot = reader.snapshot
    if snapshot is None or any(view.loading for view in snapshot.runs):
        return None
    shown = snapshot.run(focus) if focus else (snapshot.runs[0] if snapshot.runs else None)
    if shown is not None and shown.inspection is None:
        return None
    return snapshot


def local_snapshot(directory: str, focus: str | None = None) -> ProjectSnapshot:
    scanner = ProjectScanner(os.path.abspath(directory))
    scanner.focus = focus
    return scanner.scan()


def test_the_observed_snapshot_equals_the_local_scanner_s(demo: str, observed: Callable[..., Observed]) -> None:
    before = tree_fingerprint(demo)
    stream = observed(demo)
    assert stream.next_message() == {"type": "hello", "protocol": 1, "nexus": "0.1.0"}
    remote = stream.until(lambda: settled(stream.snapshots[0], None))
    local = local_snapshot(demo)
    assert len(local.runs) == 3
    assert comparable(remote) == comparable(local)
    # Another run in focus: its full inspection comes; the views still equal the local ones.
    stream.send(observe_protocol.focus("release"))
    remote = stream.until(lambda: settled(stream.snapshots[0], "release"))
    assert comparable(remote).run("release") == comparable(local_snapshot(demo, "release")).run("release")
    assert tree_fingerprint(demo) == before  # observing writes nothing


def test_a_change_on_disk_is_a_line_with_only_the_changed_run(
    tmp_path: Path, observed: Callable[..., Observed]
) -> None:
    root = small_project(tmp_path / "p")
    engine.create_run(root, {**load_run(root, "live")["plan"], "id": "other"})
    stream = observed(root)
    stream.until(lambda: settled(stream.snapshots[0], None))
    stream.messages.clear()
    finish(root, "live", "t1", summary="finished \x1b]52;c;AAAA\x07 \u009b31m")
    change = stream.until(
        lambda: next(
            (m for m in stream.messages if m["type"] == "change" and stream.run(0, "live").count("accepted")),
            None,
        )
    )
    assert change["runs"] == ["live", "other"]
    assert [view["run_id"] for view in change["snapshot"]["runs"]] == ["live"]
    assert comparable(stream.snapshot(0)) == comparable(local_snapshot(root))


def stopped_after(signal_name: str, seconds: int) -> list[str]:
    """nexus observe, sent SIGNAL after SECONDS (its own exit status kept)."""
    return [
        "timeout",
        "--preserve-status",
        "-s",
        signal_name,
        str(seconds),
        sys.executable,
        "-m",
        "nexus_core.cli",
        "observe",
    ]


HOSTILE = "\x1b[2J\u009b31m\u202eevil\ud800"


def test_the_lines_are_terminal_safe(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")
    attempt = load_run(root, "live")["tasks"][0]["attempts"][-1]
    engine.record_attempt(
        root, "live", "t1",
        {"attemptId": attempt["id"], "backend": HOST, "outcome": "blocked", "summary": HOSTILE},
    )  # fmt: skip
    done = subprocess.run(
        [
            "timeout",
            "--preserve-status",
            "-s",
            "TERM",
            "6",
            sys.executable,
            "-m",
            "nexus_core.cli",
            "observe",
            "-d",
            root,
            "--json-lines",
        ],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    text = done.stdout.decode("utf-8", "surrogatepass")
    assert "blocked" in text and "\\u001b[2J" in text
    for raw in ("\x1b", "\u009b", "\u202e", "\ud800"):
        assert raw not in text
    assert done.returncode == 143


def test_a_fresh_read_is_answered_after_its_scan(demo: str, observed: Callable[..., Observed]) -> None:
    stream = observed(demo)
    stream.until(lambda: settled(stream.snapshots[0], None))
    stream.send(observe_protocol.rescan(0, ("hotfix",), token="fresh-1"))
    answer = stream.until(lambda: next((m for m in stream.messages if m["type"] == "rescanned"), None))
    assert answer == {"type": "rescanned", "project": 0, "token": "fresh-1"}
    assert stream.snapshot(0).run("hotfix") is not None


def test_several_projects_in_one_observer(tmp_path: Path, demo: str, observed: Callable[..., Observed]) -> None:
    other = small_project(tmp_path / "other")
    stream = observed(demo, other)
    stream.until(lambda: settled(stream.snapshots[0], None) and settled(stream.snapshots[1], None))
    assert [view.run_id for view in stream.snapshot(1).runs] == ["live"]
    assert comparable(stream.snapshot(1)) == comparable(local_snapshot(other))


def test_a_missing_project_is_an_error_in_its_snapshot_not_an_exit(
    tmp_path: Path, observed: Callable[..., Observed]
) -> None:
    stream = observed(str(tmp_path / "nowhere"))
    stream.next_message()
    first = stream.until(lambda: stream.snapshots[0].snapshot)
    assert first.error and "nowhere" in first.error
    assert stream.next_message(10)["type"] in ("heartbeat", "change")


def test_it_ends_when_its_output_is_closed_and_heartbeats_meanwhile(
    tmp_path: Path, observed: Callable[..., Observed]
) -> None:
    root = small_project(tmp_path / "p")
    stream = observed(root)
    stream.until(lambda: next((m for m in stream.messages if m["type"] == "heartbeat"), None), timeout=30)
    assert stream.process.stdout is not None
    stream.process.stdout.close()
    assert stream.process.wait(30) == 141


def test_without_json_lines_it_prints_a_line_per_changed_run(tmp_path: Path) -> None:
    root = small_project(tmp_path / "p")
    done = subprocess.run(
        [
            "timeout",
            "--preserve-status",
            "-s",
            "INT",
            "5",
            sys.executable,
            "-m",
            "nexus_core.cli",
            "observe",
            "-d",
            root,
        ],
        capture_output=True,
        stdin=subprocess.DEVNULL,
        timeout=60,
    )
    lines = done.stdout.decode().splitlines()
    assert lines[0].startswith("nexus observe (protocol 1, nexus 0.1.0)")
    assert any(line.endswith(f"{root} live: 1 running, 2 not started") for line in lines[1:])
    assert done.returncode == 130
