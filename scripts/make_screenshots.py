"""Make screenshots/*.svg: the dashboard on the demo project, headless, frozen clock, fixed size.

    python scripts/make_screenshots.py [OUTPUT_DIR] [--only NAME ...]

The demo is built by the real core (nexus_tui.logic.demo) at a fixed start time with a fixed seed;
the app then runs with its clock frozen one minute after the build, no file watcher and no
periodic rescan, so every SVG shows exactly one consistent state.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot
from textual.widgets import Checkbox, Input

from nexus_core import timeutil
from nexus_tui.app import NexusApp
from nexus_tui.logic.demo import FIXED_START, build_demo
from nexus_tui.screens.dialogs import ActionDialog
from nexus_tui.screens.inbox import InboxScreen
from nexus_tui.screens.progress import ProgressScreen
from nexus_tui.screens.recovery import RecoveryListScreen, RecoveryScreen

SIZE = (170, 48)
SMALL = (80, 24)  # the small-terminal view: the compact forms (detail below, compact columns)
SIZES = {"small-terminal": SMALL, "timeline": (120, 36), "inbox": (120, 36)}  # the views not made at SIZE
SEED = 2026


async def select(pilot: Pilot[None], run_id: str | None = None, task_id: str | None = None) -> None:
    app = pilot.app
    assert isinstance(app, NexusApp)
    pane = app.pane
    if run_id is not None:
        pane.runs.move_cursor(row=pane.runs.get_row_index(run_id), animate=False)
        await pilot.pause()
    if task_id is not None:
        pane.tasks.focus()
        pane.tasks.move_cursor(row=pane.tasks.get_row_index(task_id), animate=False)
    await pilot.pause()


async def until(pilot: Pilot[None], predicate: Callable[[], bool], seconds: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + seconds
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError("the view did not appear")
        await pilot.pause(0.05)
    await pilot.pause()


async def open_dialog(pilot: Pilot[None], key: str) -> None:
    await pilot.press(key)
    await until(pilot, lambda: isinstance(pilot.app.screen, ActionDialog))


async def open_guide(pilot: Pilot[None], kind: str | None = None) -> None:
    await pilot.press("R")
    await until(pilot, lambda: isinstance(pilot.app.screen, RecoveryListScreen))
    if kind is None:
        return
    screen = pilot.app.screen
    assert isinstance(screen, RecoveryListScreen)
    index = next(i for i, s in enumerate(screen.situations) if s.kind == kind)
    await pilot.press(*["down"] * index, "enter")
    await until(pilot, lambda: isinstance(pilot.app.screen, RecoveryScreen))


def fill(pilot: Pilot[None], **values: object) -> None:
    for name, value in values.items():
        widget = pilot.app.screen.query_one(f"#{name}")
        if isinstance(widget, Checkbox | Input):
            widget.value = value  # type: ignore[assignment]


async def confirm(pilot: Pilot[None]) -> None:
    await pilot.click("#confirm")
    app = pilot.app
    await until(pilot, lambda: not [w for w in app.workers if w.group == "nexus-actions" and not w.is_finished])


def views() -> dict[str, Callable[[Pilot[None]], Awaitable[None]]]:
    async def overview(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "release-notes")

    async def retry(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "migrate")

    async def cancelled(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "cleanup")

    async def process(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "bench")

    async def filtered(pilot: Pilot[None]) -> None:
        await select(pilot, "release")
        await pilot.press("slash", *"state:attention", "enter")
        await pilot.pause()

    async def small_terminal(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "migrate")

    async def help_screen(pilot: Pilot[None]) -> None:
        await pilot.press("question_mark")
        await pilot.pause()

    async def guide(pilot: Pilot[None]) -> None:
        await select(pilot, "release")
        await open_guide(pilot)

    async def guide_stale(pilot: Pilot[None]) -> None:
        await open_guide(pilot, "accepted-stale")

    async def guide_lock(pilot: Pilot[None]) -> None:
        await open_guide(pilot, "writer-lock-dead")

    async def recover_lock(pilot: Pilot[None]) -> None:
        await open_dialog(pilot, "L")

    async def reconcile(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "cleanup")
        await open_dialog(pilot, "e")
        await pilot.click("#outcome-cancelled")
        fill(pilot, summary="Stopped before dropping any table.", owner_stopped=True)
        await pilot.pause()

    async def verify(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "perf-notes")
        await open_dialog(pilot, "v")

    async def inbox(pilot: Pilot[None]) -> None:
        await pilot.press("i")
        await until(pilot, lambda: isinstance(pilot.app.screen, InboxScreen))

    async def timeline(pilot: Pilot[None]) -> None:
        from nexus_tui.screens.timeline import TimelineScreen

        await select(pilot, "release", "migrate")
        await pilot.press("t")
        await until(pilot, lambda: isinstance(pilot.app.screen, TimelineScreen) and pilot.app.screen.updates > 0)

    async def action_log(pilot: Pilot[None]) -> None:
        """Acts for real (last view: it changes the demo): recover the dead lock, then verify
        perf-notes; the action log panel lists both calls."""
        app = pilot.app
        assert isinstance(app, NexusApp)
        await open_dialog(pilot, "L")
        fingerprint = app.pane.snapshot.writer_lock.fingerprint if app.pane.snapshot else ""
        fill(pilot, note="pid 4194304 does not exist on this host", owner_stopped=True, typed=(fingerprint or "")[:8])
        await confirm(pilot)
        await select(pilot, "release", "perf-notes")
        await open_dialog(pilot, "v")
        await pilot.click("#confirm")
        await until(pilot, lambda: isinstance(app.screen, ProgressScreen) and app.screen.finished)
        await pilot.click("#close")
        await until(pilot, lambda: app.query_one("#action-log").display)
        await pilot.pause(0.3)

    return {
        "overview": overview,
        "failed-verification-and-retry": retry,
        "cancelled-awaiting-reconciliation": cancelled,
        "process-task": process,
        "filter-attention": filtered,
        "small-terminal": small_terminal,
        "help": help_screen,
        "recovery-guide": guide,
        "recovery-stale-after-acceptance": guide_stale,
        "recovery-dead-writer-lock": guide_lock,
        "dialog-recover-lock": recover_lock,
        "dialog-reconcile": reconcile,
        "dialog-verify": verify,
        "inbox": inbox,
        "timeline": timeline,
        "action-log": action_log,  # last: it acts on the demo
    }


async def shoot(
    directory: str, frozen: float, name: str, action: Callable[[Pilot[None]], Awaitable[None]], out: Path
) -> None:
    timeutil.set_clock(lambda: frozen)
    app = NexusApp(
        [directory],
        watch=False,
        rescan_seconds=0,
        tick=False,
        display_path=lambda p: p.replace(os.path.dirname(directory), "~"),
    )
    async with app.run_test(size=SIZES.get(name, SIZE)) as pilot:
        await asyncio.wait_for(app.loaded.wait(), 30)
        await pilot.pause()
        await action(pilot)
        await pilot.pause()
        app.save_screenshot(filename=f"{name}.svg", path=str(out))


def main() -> int:
    words = sys.argv[1:]
    only = set(words[words.index("--only") + 1 :]) if "--only" in words else None
    words = words[: words.index("--only")] if "--only" in words else words
    out = Path(words[0] if words else Path(__file__).resolve().parent.parent / "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    # A private, unpredictable parent (mkdtemp: 0700, fresh name): never a fixed name in a shared /tmp.
    parent = tempfile.mkdtemp(prefix="nexus-screenshots-")
    try:
        info = build_demo(os.path.join(parent, "demo"), start=FIXED_START, seed=SEED)
        for note in info.notes:
            print("note:", note)
        frozen = info.finished_at + 60
        try:
            for name, action in views().items():
                if only is not None and name not in only:
                    continue
                if name == "process-task" and not info.process_task:
                    print("skipped process-task: this core cannot launch yet")
                    continue
                asyncio.run(shoot(info.directory, frozen, name, action, out))
                print(f"wrote {out / (name + '.svg')}")
        finally:
            timeutil.set_clock(None)
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
