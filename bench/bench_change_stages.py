"""Where a change's latency goes, stage by stage (run by hand, prints a table; never a test).

    python bench/bench_change_stages.py [--runs 30] [--tasks 200] [--changes 40]

bench_tui's change loop (a run file of ``--tasks`` tasks replaced on disk by an atomic rename,
until the task table holds the change), with a timestamp at each stage, taken by wrapping the
app's own methods in this process: the watcher hands the changed paths to the app
(``NexusApp._on_changes``), the scanner starts and ends (``ProjectScanner.scan``), the scan is
applied on the UI thread (``NexusApp._apply_scan``), the bench sees the cell. Each stage is
printed as p50 / p95 / max ms after the file's replacement. The floor: the same replacement's
own cost (write and rename of the same bytes, nothing watching).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tui import clone_runs, flipped, replace_atomically, template_run

from nexus_core.state import canonical
from nexus_core.view import model

STAGES = ("watcher", "scan-start", "scan-end", "apply-start", "apply-end", "seen")
marks: dict[str, float] = {}


def first_mark(name: str) -> None:
    marks.setdefault(name, time.perf_counter())


def wrapped(owner: Any, name: str, before: str, after: str | None = None) -> None:
    original: Callable[..., Any] = getattr(owner, name)

    def call(*args: Any, **kwargs: Any) -> Any:
        first_mark(before)
        result = original(*args, **kwargs)
        if after is not None:
            first_mark(after)
        return result

    setattr(owner, name, call)


async def measure(root: Path, changes: int) -> dict[str, list[float]]:
    from nexus_tui import app as app_module

    wrapped(app_module.NexusApp, "_on_changes", "watcher")
    wrapped(model.ProjectScanner, "scan", "scan-start", "scan-end")
    wrapped(app_module.NexusApp, "_apply_scan", "apply-start", "apply-end")
    app = app_module.NexusApp([str(root)], tick=False, rescan_seconds=0)
    stages: dict[str, list[float]] = {stage: [] for stage in STAGES}
    async with app.run_test(size=(170, 46)) as pilot:
        await asyncio.wait_for(app.loaded.wait(), 300)
        pane = app.pane
        while pane.snapshot is None or any(view.loading for view in pane.snapshot.runs):
            await asyncio.sleep(0.005)
        await pilot.pause(1.5)  # the watchers arm
        state = root / ".bmad-plus/nexus/runs/r000.json"
        original = canonical.parse(state.read_text("utf-8"))["run"]
        target = next(t for t in original["tasks"] if t["attempts"] and t["attempts"][-1]["execution"] == "running")
        for index in range(changes):
            data, wanted = flipped(original, target["id"], index)
            await pilot.pause(0.05)
            marks.clear()
            begin = time.perf_counter()
            replace_atomically(state, data)
            while str(pane.tasks.get_cell(target["id"], "execution")) != wanted:
                await asyncio.sleep(0.001)
            first_mark("seen")
            for stage in STAGES:
                if stage in marks:
                    stages[stage].append((marks[stage] - begin) * 1000)
    return stages


def replacement_floor(root: Path, repeat: int) -> float:
    state = root / ".bmad-plus/nexus/runs/r001.json"
    data = state.read_bytes()
    samples = []
    for _ in range(repeat):
        begin = time.perf_counter()
        replace_atomically(state, data)
        samples.append((time.perf_counter() - begin) * 1000)
    return statistics.median(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--changes", type=int, default=40)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nexus-bench-stages-"))
    try:
        template_run(root, args.tasks)
        clone_runs(root, args.runs)
        floor = replacement_floor(root, args.changes)
        stages = asyncio.run(measure(root, args.changes))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"floor: replacing the run file (write + rename), median {floor:.1f} ms")
    print("ms after the run file was replaced:      p50     p95     max")
    for stage in STAGES:
        values = sorted(stages[stage])
        if values:
            p95 = values[max(0, int(len(values) * 0.95) - 1)]
            print(f"{stage:<38} {statistics.median(values):7.1f} {p95:7.1f} {values[-1]:7.1f}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
