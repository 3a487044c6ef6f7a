"""Helpers for the dashboard's Pilot and snapshot tests (read-only view, issue 5)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual import events
from textual.pilot import Pilot
from textual.widget import Widget
from textual.widgets import DataTable, Static, Tree

from nexus_core import engine, timeutil
from nexus_tui.app import NexusApp
from nexus_tui.logic.demo import DemoInfo

HOST = {"kind": "host", "id": "tester", "sessionId": "s1"}
DEMO_HOST = "demo-host"


CHECK = (
    "import sys\ntext = open(sys.argv[1]).read()\nprint('checked', sys.argv[1])\nsys.exit(0 if 'ok' in text else 1)\n"
)


def demo_app_factory(demo: DemoInfo, monkeypatch: pytest.MonkeyPatch) -> Callable[[], NexusApp]:
    """Apps on the frozen demo for snapshots: its clock frozen a minute after it was built, this
    host named as the demo's, the interpreter's version and the temporary parent hidden."""
    monkeypatch.setattr("nexus_core.hostinfo.hostname", lambda: DEMO_HOST)
    monkeypatch.setattr(
        "nexus_tui.widgets.detail_text.command_label", lambda path: re.sub(r"[\d.]+$", "", os.path.basename(path))
    )
    frozen = demo.finished_at + 60
    timeutil.set_clock(lambda: frozen)
    parent = os.path.dirname(demo.directory)

    def make() -> NexusApp:
        return quiet_app([demo.directory], display_path=lambda path: path.replace(parent, "~"))

    return make


def then(*steps: Callable[[Pilot[None]], Awaitable[None]]) -> Callable[[Pilot[None]], Awaitable[None]]:
    async def run_before(pilot: Pilot[None]) -> None:
        await asyncio.wait_for(pilot.app.loaded.wait(), 60)  # type: ignore[attr-defined]
        # The focused run's full inspection arrives from the scanner after "loaded": wait for it,
        # or a screen drawn over the detail pane (help) can catch that pane half filled.
        await select(pilot, pilot.app.pane.run_id)  # type: ignore[attr-defined]
        await pilot.pause()
        for step in steps:
            await step(pilot)
        await pilot.pause()

    return run_before


def quiet_app(directories: list[str], **options: Any) -> NexusApp:
    """No watcher, no tick, no periodic rescan unless asked: the test drives every scan."""
    settings: dict[str, Any] = {"watch": False, "rescan_seconds": 0, "tick": False}
    settings.update(options)
    return NexusApp(directories, **settings)


async def loaded(app: NexusApp, pilot: Pilot[None]) -> None:
    await asyncio.wait_for(app.loaded.wait(), 30)
    await pilot.pause()


async def press_ending_the_app(app: NexusApp, key: str, timeout: float = 20.0) -> None:
    """Press ``key``, which ends the app, and wait until it has exited (a deadline, no Pilot).

    ``Pilot.press`` waits for the animator to finish every scheduled animation; an app that
    exits while one is scheduled shuts its animator down first, and that wait never returns
    (the test then hangs on an idle loop: seen in the suite under load). The key goes
    to the app as the terminal driver sends it, with nothing awaited but the exit."""
    app.post_message(events.Key(key, key if len(key) == 1 else None))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while app.is_running:
        assert loop.time() < deadline, f"the app did not exit after {key}"
        await asyncio.sleep(0.05)


async def eventually(
    pilot: Pilot[None], predicate: Callable[[], bool], timeout: float = 15.0, what: str = "condition"
) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise AssertionError(f"{what} not reached in time")
        await pilot.pause(0.05)


async def caught_up(pilot: Pilot[None], timeout: float = 30.0) -> None:
    """Wait until the app's scans have caught up: none asked, running or waiting to be applied, and
    the messages their results posted (a run focused asks for its inspection) handled. A count
    or a gate's answer read then is not changed by a scan still on its way."""
    app = pilot.app
    assert isinstance(app, NexusApp)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        await pilot.pause()
        if app.scans_caught_up:
            return
        if loop.time() > deadline:
            raise AssertionError("the scans did not catch up in time")
        await pilot.pause(0.02)


def showing(app: Any, screen_type: Any) -> bool:
    """Whether the screen shown is a ``screen_type`` and mounted (its widgets composed, its
    on_mount run): pushed is not yet ready for a key, a query or a dismiss."""
    return isinstance(app.screen, screen_type) and bool(app.screen.is_mounted)


def focused(app: NexusApp) -> Widget | None:
    """The focused widget, read afresh (``app.focused`` in an assert narrows it for the type
    checker, which does not know that a key press in between moves it)."""
    return app.focused


def row_keys(table: DataTable[Any]) -> list[str]:
    return [str(table.coordinate_to_cell_key((index, 0))[0].value) for index in range(table.row_count)]  # type: ignore[arg-type]


def cell(table: DataTable[Any], row: str, column: str) -> str:
    value = table.get_cell(row, column)
    return str(getattr(value, "plain", value))


def _tree_text(tree: Tree[Any]) -> list[str]:
    lines: list[str] = []

    def walk(node: Any) -> None:
        for child in node.children:
            lines.append(str(getattr(child.label, "plain", child.label)))
            walk(child)

    walk(tree.root)
    return lines


def detail_text(app: NexusApp) -> str:
    pane = app.pane
    head = pane.query_one(f"#detail-head-{pane.index}", Static)
    verification = pane.query_one(f"#detail-verification-{pane.index}", Static)
    parts = [_static_text(head), *_tree_text(pane.attempts_tree), _static_text(verification)]
    return "\n".join(parts)


def _static_text(widget: Static) -> str:
    content = widget.content
    return str(getattr(content, "plain", content))


def status_text(app: NexusApp) -> str:
    pane = app.pane
    return _static_text(pane.query_one(f"#status-{pane.index}", Static))


async def select(pilot: Pilot[None], run_id: str | None = None, task_id: str | None = None) -> None:
    """Move the cursors like a user would; the highlight messages are processed before returning."""
    app = pilot.app
    assert isinstance(app, NexusApp)
    pane = app.pane
    # Wait for the highlight to be handled, not for a forced full repaint per move (selecting
    # every task of every fixture one repaint at a time dominated the suite's time).
    if run_id is not None:
        pane.runs.move_cursor(row=pane.runs.get_row_index(run_id), animate=False)
        await _handled(lambda: pane.run_id == run_id)

        def shown() -> bool:  # the scanner sends the newly focused run's full inspection
            view = pane.current_view()
            return view is None or view.error is not None or view.inspection is not None

        await _handled(shown, timeout=30)
        await asyncio.sleep(0)
    if task_id is not None:
        pane.tasks.focus()
        pane.tasks.move_cursor(row=pane.tasks.get_row_index(task_id), animate=False)
        await _handled(lambda: pane.task_id == task_id)


async def _handled(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        assert loop.time() < deadline, "the highlight was not handled in time"
        await asyncio.sleep(0.002)
    await asyncio.sleep(0)  # let the handler's follow-up messages (detail pane) run


def tree_fingerprint(root: str) -> dict[str, tuple[Any, ...]]:
    """Every entry under root: type, mode, size, mtime and content hash (the read-only proof)."""
    entries: dict[str, tuple[Any, ...]] = {}
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            digest = None
            if stat.S_ISREG(info.st_mode):
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            entries[os.path.relpath(path, root)] = (
                stat.S_IFMT(info.st_mode),
                stat.S_IMODE(info.st_mode),
                info.st_size,
                info.st_mtime_ns,
                info.st_ino,
                digest,
            )
    return entries


def small_project(directory: Path, tasks: int = 3) -> str:
    """A real run `live` made by the engine: task t1 started, the others not started."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "checks").mkdir(exist_ok=True)
    (directory / "checks" / "check.py").write_text(CHECK)
    plan = {
        "id": "live",
        "maxParallel": 4,
        "config": {},
        "tasks": [
            {
                "id": f"t{index}",
                "objective": f"Write out/t{index}/r.txt containing ok.",
                "scope": [f"out/t{index}"],
                "artifacts": [f"out/t{index}/r.txt"],
                "resources": ["checks/check.py"],
                "checks": [{"id": "ok", "command": "python", "args": ["checks/check.py", f"out/t{index}/r.txt"]}],
            }
            for index in range(1, tasks + 1)
        ],
    }
    root = str(directory.resolve())
    engine.create_run(root, plan)
    engine.start_task(root, "live", "t1", {"backend": HOST})
    return root


def finish(root: str, run_id: str, task_id: str, summary: str = "done", accept: bool = True) -> None:
    """Produce the artifact, record completed, verify (and accept) through the real engine."""
    from nexus_core.state.store import load_run

    out = Path(root, "out", task_id)
    out.mkdir(parents=True, exist_ok=True)
    (out / "r.txt").write_text("ok\n")
    attempt = engine.task_of(load_run(root, run_id), task_id)["attempts"][-1]
    engine.record_attempt(
        root,
        run_id,
        task_id,
        {"attemptId": attempt["id"], "backend": HOST, "outcome": "completed", "summary": summary},
    )
    engine.verify_task(root, run_id, task_id)
    if accept:
        engine.accept_task(root, run_id, task_id)


def laid_out(screen: Any, selector: str) -> bool:
    """Whether the widget is composed and has a size (a click before that lands nowhere)."""
    found = screen.query(selector)
    return bool(found) and found.first().region.width > 0
