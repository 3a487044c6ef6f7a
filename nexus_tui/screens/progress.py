"""verify and launch with live progress: the core call runs in a thread worker, which only
posts messages; this screen turns them into "check i of n", the elapsed time and the current
command, and offers Stop (the core's ``should_stop``: the running check or the launched child
gets SIGTERM; never a passed verification)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Static

from nexus_core.errors import explained
from nexus_core.terminal import terminal_safe
from nexus_core.words import json_word

from ..logic import operations
from ..logic.operations import ActionLog, Preview
from ..widgets.render import plain
from .base import NexusDialog
from .dialogs import Display


def elapsed_text(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes} min {rest:02d} s"


class ProgressScreen(NexusDialog[dict[str, Any] | None]):
    """Runs one long action (verify or launch) and shows its progress until it ends."""

    DEFAULT_CSS = """
    ProgressScreen #progress-step { text-style: bold; }
    ProgressScreen #progress-command { color: $text-muted; }
    ProgressScreen #progress-events { height: auto; max-height: 16; margin-top: 1; }
    ProgressScreen #progress-result { margin-top: 1; height: auto; }
    ProgressScreen #progress-result.failed { color: $error; }
    ProgressScreen #progress-result.passed { color: $success; }
    """
    BINDINGS: ClassVar[list[Any]] = [Binding("escape", "close", "Close", show=False)]

    class Progress(Message):
        def __init__(self, event: dict[str, Any]) -> None:
            super().__init__()
            self.event = event

    class Finished(Message):
        def __init__(self, result: dict[str, Any] | None, error: str | None) -> None:
            super().__init__()
            self.result = result
            self.error = error

    def __init__(
        self,
        preview: Preview,
        values: dict[str, Any],
        log: ActionLog,
        *,
        clock: Callable[[], float] = time.monotonic,
        display: Display | None = None,
        autostart: bool = True,
    ) -> None:
        super().__init__()
        self.preview = preview
        self.values = values
        self.action_log = log
        self.clock = clock
        self.shown_text = display or (lambda text: text)
        self.autostart = autostart
        self.stop_requested = threading.Event()
        self.started_at = clock()
        self.ended_at: float | None = None
        self.result: dict[str, Any] | None = None
        self.error: str | None = None
        self.finished = False
        self.events: list[str] = []
        # What runs right now (for the quit dialog): the attempt, and the child with its pid.
        verified = preview.seen.facts.get("attempt") if preview.action == "verify" else None
        self.attempt_id: str | None = verified if isinstance(verified, str) else None
        self.child: str | None = None
        self.child_pid: int | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(plain(self.shown_text(self.preview.title)), id="dialog-title")
            yield Static(plain("Preparing…"), id="progress-step")
            yield Static("", id="progress-command")
            yield Static(plain(f"Elapsed {elapsed_text(0)}"), id="progress-elapsed")
            yield Static("", id="progress-events")
            yield Static("", id="progress-result")
            with Horizontal(id="dialog-buttons"):
                yield Button("Stop", id="stop", variant="warning")
                yield Button("Close", id="close", disabled=True)

    def on_mount(self) -> None:
        self.started_at = self.clock()
        self.set_interval(0.5, self._tick)
        self.query_one("#stop", Button).focus()
        if self.autostart:
            self.start()

    def start(self) -> None:
        self.run_worker(self._work, thread=True, exclusive=True, name=f"{self.preview.action}-worker")

    # -- the worker (a thread: it never touches widgets, it posts messages)
    def _work(self) -> None:
        try:
            result = operations.execute(
                self.preview,
                self.values,
                self.action_log,
                progress=self._progress,
                should_stop=self.stop_requested.is_set,
            )
        except Exception as error:  # every failure becomes a message; the app never crashes
            self.post_message(self.Finished(None, explained(error)))
            return
        self.post_message(self.Finished(result, None))

    def _progress(self, event: dict[str, Any]) -> None:
        self.post_message(self.Progress(dict(event)))

    # -- messages, on the UI thread
    def on_progress_screen_progress(self, message: Progress) -> None:
        event = message.event
        kind = event.get("event")
        step = self.query_one("#progress-step", Static)
        command = self.query_one("#progress-command", Static)
        if kind == "check-started":
            step.update(plain(f"Check {event['index'] + 1} of {event['total']}: {event['check']}"))
            command.update(plain(self.shown_text(" ".join(str(part) for part in event.get("command", [])))))
            self.child = f"check {event['check']} ({event['index'] + 1} of {event['total']})"
        elif kind == "check-spawned":
            self.child_pid = event.get("pid")
        elif kind == "check-finished":
            self.child_pid = None
            outcome = "passed" if event.get("exitCode") == 0 and not event.get("error") else "did not pass"
            words = f"{event['check']}: exit code {json_word(event.get('exitCode'))}"
            if event.get("timedOut"):
                words += ", timed out"
            if event.get("error"):
                words += f", {event['error']}"
            self._add_event(f"{'✓' if outcome == 'passed' else '✗'} {words}")
        elif kind == "spawned":
            step.update(plain(f"Process running (pid {event.get('pid')})"))
            self.child, self.child_pid = "the launched process", event.get("pid")
            self.attempt_id = event.get("attemptId") or self.attempt_id
            self._add_event(f"spawned pid {event.get('pid')}")
        elif kind == "heartbeat":
            self._add_event(f"heartbeat {event.get('count')}", replace_prefix="heartbeat")
        elif kind == "heartbeat-skipped":
            self._add_event(f"heartbeat skipped ({event.get('count')}): writer.lock busy")
        elif kind == "finished":
            self.child_pid = None
            self._add_event(f"process ended: outcome {event.get('outcome')}, reason {event.get('reason')}")

    def _add_event(self, line: str, replace_prefix: str | None = None) -> None:
        if replace_prefix and self.events and self.events[-1].startswith(replace_prefix):
            self.events[-1] = line
        else:
            self.events.append(line)
        self.query_one("#progress-events", Static).update(plain(self.shown_text("\n".join(self.events[-14:]))))

    def on_progress_screen_finished(self, message: Finished) -> None:
        self.finished = True
        self.ended_at = self.clock()
        self.result = message.result
        self.error = message.error
        result = self.query_one("#progress-result", Static)
        if message.error is not None:
            result.update(plain(self.shown_text(message.error)))
            result.add_class("failed")
            self.app.notify(
                terminal_safe(message.error), title=f"{self.preview.action} refused", severity="error", markup=False
            )
        else:
            words = self.action_log.entries[-1].result if self.action_log.entries else "done"
            result.update(plain(self.shown_text(words)))
            result.add_class("passed" if self._succeeded() else "failed")
        self.query_one("#progress-step", Static).update(plain("Stopped" if self.stop_requested.is_set() else "Done"))
        # The work ended: Stop (or "Stopping…") has nothing left to act on; Close is the one button.
        self.query_one("#stop", Button).display = False
        close = self.query_one("#close", Button)
        close.disabled = False
        close.focus()
        self._tick()

    def running_words(self) -> str:
        """What still runs, in one sentence (the quit dialog's): action, task, attempt, child, pid, time."""
        words = f"{self.preview.action} of task {self.preview.task_id} (run {self.preview.run_id})"
        if self.attempt_id:
            words += f", attempt {self.attempt_id}"
        if self.child:
            words += f": {self.child}"
        if self.finished:
            return self.shown_text(
                f"{words}: ended after {elapsed_text((self.ended_at or self.clock()) - self.started_at)}"
            )
        words += f", pid {self.child_pid}" if self.child_pid else ", no child running"
        if self.stop_requested.is_set():
            words += ", stop requested"
        return self.shown_text(f"{words}; running for {elapsed_text(self.clock() - self.started_at)}")

    def _succeeded(self) -> bool:
        if self.result is None:
            return False
        task = next((t for t in self.result.get("tasks", []) if t["id"] == self.preview.task_id), None)
        attempt = task["attempts"][-1] if task and task["attempts"] else None
        if attempt is None:
            return False
        if self.preview.action == "verify":
            return bool(attempt["verification"]["status"] == "passed")
        receipt = (attempt.get("process") or {}).get("receipt") or {}
        return bool(receipt.get("outcome") == "completed")

    def _tick(self) -> None:
        end = self.ended_at if self.ended_at is not None else self.clock()
        self.query_one("#progress-elapsed", Static).update(Text(f"Elapsed {elapsed_text(end - self.started_at)}"))

    # -- buttons
    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "stop":
            self.request_stop()
        elif event.button.id == "close":
            self.action_close()

    def request_stop(self) -> None:
        if self.finished:
            return
        self.stop_requested.set()
        stop = self.query_one("#stop", Button)
        stop.label = "Stopping…"
        stop.disabled = True
        self._add_event("stop requested: the running check or process gets SIGTERM")

    def action_close(self) -> None:
        if self.finished:
            self.dismiss(self.result)
