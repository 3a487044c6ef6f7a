"""What reaches a REAL terminal: ``nexus-tui`` runs in tmux on a project whose worker-controlled
text (host identities, record summaries, check output, scope file names) carries terminal escape
sequences (OSC 0 title, OSC 52 clipboard, CSI 2J clear screen) and C1 controls. tmux records the
raw bytes the app writes (``pipe-pane``); none of the hostile sequences may be among them, while
their visible escaped forms (``\\x1b]0;pwned``) are on the screen (``capture-pane``).

Skipped only when tmux is missing outside CI; under ``CI=true`` a missing tmux fails."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from tui_actions_support import CHECK as CHECK_B
from tui_actions_support import task_plan, write_result

from nexus_core import engine
from nexus_core.state.store import load_run

TMUX = shutil.which("tmux")
if TMUX is None:
    if os.environ.get("CI") == "true":
        raise RuntimeError("tmux is required under CI=true for the real-terminal tests (apt-get install tmux)")
    pytest.skip("tmux is not installed", allow_module_level=True)

TITLE = "\x1b]0;pwned\x07"  # sets the terminal (window) title
CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4K\x07"  # OSC 52: writes "rm -rf ~" to the clipboard
WIPE = "\x1b[2Jwipe"  # clears the screen
C1 = "\u009b31m\u0090\u009d"  # CSI, DCS and OSC as single C1 characters
HOSTILE_ID = f"ag{TITLE}-id"
HOSTILE_SESSION = f"s{WIPE}{CLIPBOARD}{C1}"
HOSTILE_SUMMARY = f"done {TITLE} {C1} {CLIPBOARD}"
HOSTILE_FILE = f"x{TITLE}{C1}.txt"
# The check prints hostile output on stdout and passes.
CHECK = (
    "import pathlib, sys\n"
    f"print({'out ' + TITLE + WIPE + CLIPBOARD + C1!r})\n"
    "sys.exit(0 if 'ok' in pathlib.Path('out/a/result.txt').read_text() else 1)\n"
)
# The hostile payloads after their ESC: drawn as text they are harmless (partial redraws may
# start them anywhere, e.g. after a colour code); a real ESC right before one makes it a command.
PAYLOADS = (b"]0;pwned", b"]52;c;cm0g", b"[2Jwipe")
C1_BYTES = tuple(chr(code).encode() for code in range(0x80, 0xA0))  # C1 controls, UTF-8 encoded
SIZE = ("220", "60")


def hostile_project(tmp_path: Path) -> Path:
    root = (tmp_path / "project").resolve()
    for directory in ("checks", "out/a", "out/b"):
        (root / directory).mkdir(parents=True)
    (root / "checks" / "check.py").write_text(CHECK_B)
    (root / "checks" / "hostile.py").write_text(CHECK)
    plan_a = task_plan("a", resources=["checks/hostile.py"])
    plan_a["checks"] = [{"id": "hostile-output", "command": "python", "args": ["checks/hostile.py"]}]
    engine.create_run(str(root), {"id": "demo", "maxParallel": 4, "tasks": [plan_a, task_plan("b")]})
    hostile = {"kind": "host", "id": HOSTILE_ID, "sessionId": HOSTILE_SESSION}
    for task_id in ("a", "b"):
        engine.start_task(str(root), "demo", task_id, {"backend": hostile})
    write_result(root, "a")
    attempt = load_run(str(root), "demo")["tasks"][0]["attempts"][-1]["id"]
    engine.record_attempt(
        str(root),
        "demo",
        "a",
        {"attemptId": attempt, "backend": hostile, "outcome": "completed", "summary": HOSTILE_SUMMARY},
    )
    engine.verify_task(str(root), "demo", "a")
    engine.accept_task(str(root), "demo", "a")
    (root / "out" / "a" / HOSTILE_FILE).write_text("planted\n")  # the accepted evidence goes stale
    return root


class Terminal:
    """One tmux server on a private socket, one pane running the app, its raw output recorded."""

    def __init__(self, tmp_path: Path) -> None:
        self.socket = str(tmp_path / "tmux.sock")
        self.raw = tmp_path / "raw-output.bin"
        self.go = tmp_path / "go.fifo"

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            [TMUX or "tmux", "-S", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self, command: list[str]) -> None:
        os.mkfifo(self.go)
        # The pane waits on the fifo so that recording starts before the app writes a byte.
        launcher = self.raw.with_name("launch.sh")
        # COLUMNS/LINES (set by the test runner) would override the pane's real size.
        launcher.write_text(f"read _ < {shlex.quote(str(self.go))}\nunset COLUMNS LINES\nexec {shlex.join(command)}\n")
        self.tmux("new-session", "-d", "-s", "t", "-x", SIZE[0], "-y", SIZE[1], f"sh {shlex.quote(str(launcher))}")
        self.tmux("set-option", "-t", "t", "remain-on-exit", "on")
        self.tmux("resize-window", "-t", "t", "-x", SIZE[0], "-y", SIZE[1])  # no client sets the size
        self.tmux("pipe-pane", "-o", "-t", "t", f"cat >> {shlex.quote(str(self.raw))}")
        with open(self.go, "w") as fifo:
            fifo.write("go\n")

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", "t")

    def styled_screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-e", "-t", "t")

    def settle(self, timeout: float = 30.0) -> None:
        """Wait until the pane stops changing (a dialog's mount moves the focus after it shows)."""
        deadline = time.monotonic() + timeout
        last, stable_since = self.styled_screen(), time.monotonic()
        while time.monotonic() - stable_since < 0.5:
            assert time.monotonic() < deadline, "the screen never settled"
            time.sleep(0.05)
            now = self.styled_screen()
            if now != last:
                last, stable_since = now, time.monotonic()

    def focus_step(self, key: str) -> None:
        """Press a focus key and wait until the app has redrawn the moved focus."""
        before = self.styled_screen()
        self.keys(key)
        self.wait_for(lambda _: self.styled_screen() != before, f"the focus to move on {key}")

    def keys(self, *keys: str) -> None:
        for key in keys:
            self.tmux("send-keys", "-t", "t", key)

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "t", "-l", text)

    def wait_for(self, predicate: Callable[[str], bool], what: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            shown = self.screen()
            if predicate(shown):
                return shown
            assert time.monotonic() < deadline, f"timed out waiting for {what}; screen:\n{shown}"
            time.sleep(0.1)  # polling the screen for a condition, bounded by the deadline

    def close(self) -> None:
        subprocess.run([TMUX or "tmux", "-S", self.socket, "kill-server"], capture_output=True, timeout=30)


def dashboard_command(root: Path) -> list[str]:
    script = Path(sys.executable).with_name("nexus-tui")
    entry = str(script) if script.exists() else shutil.which("nexus-tui")
    assert entry, "the nexus-tui console script is not installed"
    return [entry, "-d", str(root)]


def test_hostile_worker_text_never_reaches_the_terminal_raw(tmp_path: Path) -> None:
    root = hostile_project(tmp_path)
    terminal = Terminal(tmp_path)
    try:
        terminal.start(dashboard_command(root))
        seen: list[str] = []
        # The detail pane of task a: identity (attempt tree), summary, check output.
        terminal.wait_for(lambda s: "Runs (1)" in s, "the runs list")
        terminal.keys("Tab")
        seen.append(terminal.wait_for(lambda s: "hostile-output" in s and "\\x1b]0;pwned" in s, "task a's detail"))
        # The guided recovery of the stale accepted task names the planted file.
        terminal.keys("R")
        terminal.wait_for(lambda s: "Guided recovery" in s, "the recovery list")
        terminal.keys("Enter")
        seen.append(terminal.wait_for(lambda s: "What is known" in s and "out/a/x\\x1b]0;pwned" in s, "the guide"))
        terminal.keys("Escape")
        terminal.wait_for(lambda s: "What is known" not in s, "the recovery guide to close")
        # The reconcile dialog of task b, its identity fields prefilled from the worker's id.
        terminal.keys("Down")
        terminal.wait_for(lambda s: "b  running" in s, "task b's detail")
        terminal.keys("e")
        seen.append(terminal.wait_for(lambda s: "Reconcile b" in s and "ag\\x1b]0;pwned" in s, "the reconcile dialog"))
        terminal.keys("Escape")
        terminal.wait_for(lambda s: "Reconcile b" not in s, "the reconcile dialog to close")
        # Record a report on b (the prefilled identity is submitted unchanged): the action log
        # shows the call with the worker's identity in its input.
        terminal.keys("O")
        terminal.wait_for(lambda s: "Record a worker report for b" in s, "the record dialog")
        terminal.settle()
        for _ in range(4):  # from Cancel back to the summary field
            terminal.focus_step("BTab")
        terminal.type("seen it")
        terminal.wait_for(lambda s: "seen it" in s, "the typed summary")
        for _ in range(2):  # back to the Record button (outcome, then Record: no hidden stop between)
            terminal.focus_step("BTab")
        terminal.keys("Enter")
        seen.append(terminal.wait_for(lambda s: "Action log" in s and "backend=host:ag\\x1b]0;pwned" in s, "the log"))
        title = terminal.tmux("display-message", "-p", "-t", "t", "#{pane_title}")
    finally:
        terminal.close()
    raw = terminal.raw.read_bytes()
    assert len(raw) > 10_000  # the recording really holds the app's output
    for payload in PAYLOADS:
        assert payload in raw, f"{payload!r} was never drawn at all"
        assert b"\x1b" + payload not in raw, f"{payload!r} reached the terminal as an escape sequence"
    for control in C1_BYTES:
        assert control not in raw, f"C1 control {control!r} reached the terminal"
    assert "pwned" not in title
    shown = "\n".join(seen)
    for visible in ("\\x1b]0;pwned\\x07", "\\u009b31m", "\\x1b]52;c;cm0gLXJmIH4K", "\\x1b[2Jwipe"):
        assert visible in shown, f"{visible} is not shown visibly"
    # The prefilled identity reached the core exactly as the worker reported it.
    attempt = load_run(str(root), "demo")["tasks"][1]["attempts"][-1]
    assert attempt["execution"] == "completed" and attempt["backend"]["id"] == HOSTILE_ID
