"""Timeline figures (run by hand, prints a table; never a test).

    python bench/bench_timeline.py [--tasks 200] [--attempts 3] [--keys 40] [--keep DIR]

1. data: one run of 200 tasks with 3 attempts each (600 bars: a failed attempt, a failed
   verification, then an accepted one) made by the real engine with a stepping
   clock, at 120x36;
2. the pure parts: ``timeline_of`` on the run's inspection, and the cells of every lane at once
   (what drawing all 200 lanes per frame would cost) against the cells of the lanes on screen;
3. the app: ``t`` on the run, then key presses that redraw (zoom in/out, pan, lane down), each
   timed from the press to the next idle frame; the floor is the same round trip for a key
   bound to an action that does nothing (Textual's own cost of a binding, its footer refresh
   and a frame), measured in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from nexus_core import engine, timeutil
from nexus_core.observe import inspect_loaded
from nexus_core.state.store import load_run
from nexus_core.timeline import timeline_of

HOST = {"kind": "host", "id": "bench", "sessionId": "s1"}
CHECK = 'case "$(cat "$1")" in *ok*) exit 0 ;; esac; exit 1\n'


def build(root: Path, tasks: int, attempts: int) -> None:
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "ok.sh").write_text(CHECK)
    plan = {
        "id": "big",
        "maxParallel": 32,
        "config": {},
        "tasks": [
            {
                "id": f"task-{i:03d}",
                "objective": f"Produce out/task-{i:03d}/r.txt.",
                "dependsOn": [f"task-{i - 1:03d}"] if i % 5 else [],
                "scope": [f"out/task-{i:03d}"],
                "artifacts": [f"out/task-{i:03d}/r.txt"],
                "resources": ["checks/ok.sh"],
                "checks": [{"id": "ok", "command": "/bin/sh", "args": ["checks/ok.sh", f"out/task-{i:03d}/r.txt"]}],
                "maxAttempts": attempts,
                "idempotent": True,
            }
            for i in range(tasks)
        ],
    }
    clock = [1_796_029_200.0]
    timeutil.set_clock(lambda: clock[0])
    directory = str(root)
    try:
        engine.create_run(directory, plan)
        for i in range(tasks):
            task = f"task-{i:03d}"
            for n in range(attempts):
                clock[0] += 7
                if n == 0:
                    engine.start_task(directory, "big", task, {"backend": HOST})
                else:
                    engine.retry_task(directory, "big", task, {"backend": HOST})
                clock[0] += 30 + (i * 13 + n * 29) % 240
                attempt = engine.task_of(load_run(directory, "big"), task)["attempts"][-1]["id"]
                last = n == attempts - 1
                (root / "out" / task).mkdir(parents=True, exist_ok=True)
                (root / "out" / task / "r.txt").write_text("ok\n" if last else "nope\n")
                outcome = "completed" if last or n == 1 else "failed"
                record = {"attemptId": attempt, "backend": HOST, "outcome": outcome, "summary": f"try {n + 1}"}
                engine.record_attempt(directory, "big", task, record)
                if outcome == "completed":
                    clock[0] += 5
                    engine.verify_task(directory, "big", task)
                if last:  # its dependants may start
                    clock[0] += 3
                    engine.accept_task(directory, "big", task)
            print(f"\r  built {i + 1}/{tasks} tasks", end="", flush=True)
        print()
    finally:
        timeutil.set_clock(None)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


async def app_figures(directory: str, keys: int) -> dict[str, list[float]]:
    from nexus_tui.app import NexusApp
    from nexus_tui.screens.timeline import TimelineScreen
    from nexus_tui.widgets.timeline import TimelineView

    app = NexusApp([directory], watch=False, rescan_seconds=0, tick=False)
    timings: dict[str, list[float]] = {"floor (no-op binding)": [], "lane down": [], "zoom in/out": [], "pan": []}
    async with app.run_test(size=(120, 36)) as pilot:
        await asyncio.wait_for(app.loaded.wait(), 120)
        while app.pane.current_view() is None or app.pane.current_view().inspection is None:  # type: ignore[union-attr]
            await pilot.pause(0.05)
        await pilot.press("t")
        while not (isinstance(app.screen, TimelineScreen) and app.screen.updates):
            await pilot.pause(0.05)
        await pilot.pause()
        lanes = app.screen.query_one(TimelineView)
        # The floor: a key bound to an action that does nothing (Textual's own cost of a binding,
        # its footer refresh and a frame).
        app.screen.action_bench_nothing = lambda: None  # type: ignore[attr-defined]
        app.screen._bindings.bind("x", "bench_nothing", show=False)
        drawn_before = lanes.lines_drawn
        plan = [("floor (no-op binding)", "x"), ("lane down", "down"), ("zoom in/out", "plus"), ("pan", "shift+right")]
        for round_ in range(keys):
            for name, key in plan:
                key = "minus" if key == "plus" and round_ % 2 else key
                key = "shift+left" if key == "shift+right" and round_ % 2 else key
                began = time.perf_counter()
                await pilot.press(key)
                await pilot.pause()
                timings[name].append(time.perf_counter() - began)
        timings["_lines"] = [float(lanes.lines_drawn - drawn_before), float(keys * 3)]
    return timings


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--attempts", type=int, default=3)
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--keep", metavar="DIR", help="build the run there once, reuse it next time")
    args = parser.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="nexus-bench-timeline-")) / "project"
    if not (root / ".bmad-plus").exists():
        print(f"building {args.tasks} tasks x {args.attempts} attempts in {root} ...")
        build(root, args.tasks, args.attempts)
    directory = str(root)
    inspection = inspect_loaded(directory, load_run(directory, "big"))
    runs = []
    for _ in range(20):
        began = time.perf_counter()
        timeline = timeline_of(inspection)
        runs.append(time.perf_counter() - began)
    from nexus_tui.logic import timeline as layout

    bars = sum(len(lane.bars) for lane in timeline.lanes)
    view = layout.fit(timeline.first_ms or 0, timeline.last_ms or 0, 96)
    now = timeline.last_ms or 0
    every, shown = [], []
    for _ in range(20):
        began = time.perf_counter()
        for lane in timeline.lanes:
            layout.lane_cells(lane, view, now)
        every.append(time.perf_counter() - began)
        began = time.perf_counter()
        for lane in timeline.lanes[:20]:
            layout.lane_cells(lane, view, now)
        shown.append(time.perf_counter() - began)
    print(f"\n{len(timeline.lanes)} lanes, {bars} bars; Python {sys.version.split()[0]}, {os.cpu_count()} cores")
    print(f"timeline_of (the run's inspection -> lanes)      median {ms(statistics.median(runs))}")
    print(f"cells of every lane (a frame drawing all lanes)  median {ms(statistics.median(every))}")
    print(f"cells of the 20 lanes on screen (what is drawn)  median {ms(statistics.median(shown))}")
    timings = asyncio.run(app_figures(directory, args.keys))
    lines, presses = timings.pop("_lines")
    floor = statistics.median(timings["floor (no-op binding)"])
    print(f"\nkey press -> next idle frame at 120x36 ({args.keys} presses each), ratio to the floor:")
    for name, values in timings.items():
        values.sort()
        p95 = values[int(len(values) * 0.95) - 1]
        median = statistics.median(values)
        print(f"  {name:<22} p50 {ms(median):>10}  p95 {ms(p95):>10}  x{median / floor:.2f}")
    print(f"lane lines drawn per redrawing key: {lines / presses:.1f} (of {len(timeline.lanes)} lanes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
