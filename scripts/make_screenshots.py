"""Make screenshots/*.svg: the dashboard on the demo project, headless, frozen clock, fixed size.

    python scripts/make_screenshots.py [OUTPUT_DIR]

The demo is built by the real core (nexus_tui.demo) at a fixed start time with a fixed seed;
the app then runs with its clock frozen one minute after the build, no file watcher and no
periodic rescan, so every SVG shows exactly one consistent state.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

from textual.pilot import Pilot

from nexus_core import timeutil
from nexus_tui.app import NexusApp
from nexus_tui.demo import FIXED_START, build_demo

SIZE = (170, 48)
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


def views() -> dict[str, Callable[[Pilot[None]], Awaitable[None]]]:
    async def overview(pilot: Pilot[None]) -> None:
        await select(pilot, "release", "client")

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

    async def help_screen(pilot: Pilot[None]) -> None:
        await pilot.press("question_mark")
        await pilot.pause()

    return {
        "overview": overview,
        "failed-verification-and-retry": retry,
        "cancelled-awaiting-reconciliation": cancelled,
        "process-task": process,
        "filter-attention": filtered,
        "help": help_screen,
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
    async with app.run_test(size=SIZE) as pilot:
        await asyncio.wait_for(app.loaded.wait(), 30)
        await pilot.pause()
        await action(pilot)
        await pilot.pause()
        app.save_screenshot(filename=f"{name}.svg", path=str(out))


def main() -> int:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "screenshots")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as parent:
        info = build_demo(os.path.join(parent, "demo"), start=FIXED_START, seed=SEED)
        for note in info.notes:
            print("note:", note)
        frozen = info.finished_at + 60
        try:
            for name, action in views().items():
                if name == "process-task" and not info.process_task:
                    print("skipped process-task: this core cannot launch yet")
                    continue
                asyncio.run(shoot(info.directory, frozen, name, action, out))
                print(f"wrote {out / (name + '.svg')}")
        finally:
            timeutil.set_clock(None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
