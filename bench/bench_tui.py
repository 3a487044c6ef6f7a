"""Dashboard figures (run by hand, prints a table; never a test).

    python bench/bench_tui.py [--runs 100] [--tasks 200] [--changes 30] [--keep DIR]

1. data: one 200-task run made by the real engine (accepted, passed, completed, running and
   not-started tasks, real checks), cloned into 100 runs with their own scope files (paths
   rewritten, planHash and envelope recomputed with nexus_core.state.canonical);
2. first paint: from App start to (a) the first frame with every run row and (b) every run's
   counts shown;
3. latency: a run file of 200 tasks replaced on disk (atomic rename, like the core) to the
   task table showing the change, with the file watcher; p50/p95/max over N changes;
4. memory: the process's resident set size with the 100 runs loaded.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from nexus_core import engine
from nexus_core.state import canonical
from nexus_core.state.store import load_run

HOST = {"kind": "host", "id": "bench", "sessionId": "s1"}
CHECK = 'while IFS= read -r line || [ -n "$line" ]; do case "$line" in *ok*) exit 0 ;; esac; done < "$1"; exit 1\n'


def template_run(root: Path, tasks: int) -> None:
    """A real run `r000` of ``tasks`` tasks in a mix of states, driven through the engine."""
    (root / "checks").mkdir(parents=True)
    (root / "checks" / "ok.sh").write_text(CHECK)
    plan = {
        "id": "r000",
        "maxParallel": 32,
        "config": {},
        "tasks": [
            {
                "id": f"task-{i:03d}",
                "objective": f"Produce out/task-{i:03d}/result.txt.",
                "dependsOn": [f"task-{i - 1:03d}"] if 1 <= i % 10 <= 6 else [],
                "scope": [f"out/task-{i:03d}"],
                "artifacts": [f"out/task-{i:03d}/result.txt"],
                "resources": ["checks/ok.sh"],
                "checks": [
                    {"id": "ok", "command": "/bin/sh", "args": ["checks/ok.sh", f"out/task-{i:03d}/result.txt"]}
                ],
            }
            for i in range(tasks)
        ],
    }
    directory = str(root)
    engine.create_run(directory, plan)
    for i in range(tasks):
        task_id = f"task-{i:03d}"
        stage = i % 10  # 0-5 accepted, 6 passed, 7 completed, 8 running, 9 not started
        if stage == 9:
            continue
        engine.start_task(directory, "r000", task_id, {"backend": HOST})
        if stage == 8:
            continue
        out = root / "out" / task_id
        out.mkdir(parents=True)
        (out / "result.txt").write_text(f"ok {task_id}\n")
        attempt = engine.task_of(load_run(directory, "r000"), task_id)["attempts"][-1]
        engine.record_attempt(
            directory,
            "r000",
            task_id,
            {"attemptId": attempt["id"], "backend": HOST, "outcome": "completed", "summary": f"Wrote {task_id}."},
        )
        if stage == 7:
            continue
        engine.verify_task(directory, "r000", task_id)
        if stage <= 5:
            engine.accept_task(directory, "r000", task_id)


def envelope_for(run: dict[str, Any]) -> bytes:
    run["planHash"] = canonical.sha256_json(run["plan"])
    envelope = {"schemaVersion": 1, "sha256": canonical.sha256_json(run), "run": run}
    return (canonical.pretty(envelope) + "\n").encode("utf-8")


def flipped(original: dict[str, Any], task_id: str, change: int) -> tuple[bytes, str]:
    """Change number ``change`` of the benches' latency loops: the run file's bytes with task
    ``task_id``'s last attempt blocked (even changes) or running again (odd ones), the run's
    sequence moved on; and that execution state."""
    run = canonical.parse(canonical.compact(original))
    task = next(t for t in run["tasks"] if t["id"] == task_id)
    execution = "blocked" if change % 2 == 0 else "running"
    task["attempts"][-1]["execution"] = execution
    run["sequence"] = original["sequence"] + change + 1
    return envelope_for(run), execution


def clone_runs(root: Path, runs: int) -> None:
    state = root / ".bmad-plus/nexus/runs/r000.json"
    text = state.read_text("utf-8")
    for n in range(1, runs):
        run_id = f"r{n:03d}"
        prefix = f"{run_id}/out/"
        # Own scope files per run: rewrite every scope path, copy the files.
        cloned = canonical.parse(text.replace('"out/', f'"{prefix}').replace('"r000"', f'"{run_id}"'))
        run = cloned["run"]
        run["id"] = run_id
        run["plan"]["id"] = run_id
        shutil.copytree(root / "out", root / run_id / "out")
        (root / ".bmad-plus/nexus/runs" / f"{run_id}.json").write_bytes(envelope_for(run))
        os.chmod(root / ".bmad-plus/nexus/runs" / f"{run_id}.json", 0o600)


def rss_mb() -> float:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def replace_atomically(path: Path, data: bytes) -> None:
    temp = path.with_name(path.name + ".bench.tmp")
    temp.write_bytes(data)
    os.chmod(temp, 0o600)
    os.rename(temp, path)


async def measure(root: Path, runs: int, changes: int) -> dict[str, Any]:
    from nexus_tui.app import NexusApp

    figures: dict[str, Any] = {}
    started = time.perf_counter()
    app = NexusApp([str(root)], tick=False, rescan_seconds=0)
    async with app.run_test(size=(170, 46)) as pilot:
        figures["first frame (s)"] = time.perf_counter() - started
        pane = app.pane
        while pane.runs.row_count < runs:
            await asyncio.sleep(0.005)
        figures["every run row shown (s)"] = time.perf_counter() - started
        while pane.snapshot is None or pane.snapshot.runs[0].inspection is None:
            await asyncio.sleep(0.005)
        figures["first run's tasks and detail shown (s)"] = time.perf_counter() - started
        await asyncio.wait_for(app.loaded.wait(), 300)
        while pane.snapshot is None or any(view.loading for view in pane.snapshot.runs):
            await asyncio.sleep(0.005)
        await pilot.pause()
        figures["every run's counts shown (s)"] = time.perf_counter() - started
        gc.collect()
        figures["RSS with all runs loaded (MB)"] = rss_mb()
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        figures["first-load workers: used / peak RSS of one (MB)"] = (
            f"{bool(getattr(app, 'first_looks_shared', 0))} / {peak:.0f}"
        )

        # Latency: flip one task of the selected 200-task run between two real states.
        run_id = "r000"
        await pilot.pause(1.0)  # the watcher arms
        state = root / ".bmad-plus/nexus/runs" / f"{run_id}.json"
        original = canonical.parse(state.read_text("utf-8"))["run"]
        target = next(t for t in original["tasks"] if t["attempts"] and t["attempts"][-1]["execution"] == "running")
        samples = []
        for index in range(changes):
            data, wanted = flipped(original, target["id"], index)
            await pilot.pause(0.05)
            begin = time.perf_counter()
            replace_atomically(state, data)
            while str(pane.tasks.get_cell(target["id"], "execution")) != wanted:
                await asyncio.sleep(0.001)
            samples.append((time.perf_counter() - begin) * 1000)
        samples.sort()
        figures["change -> table, p50 (ms)"] = statistics.median(samples)
        figures["change -> table, p95 (ms)"] = samples[max(0, int(len(samples) * 0.95) - 1)]
        figures["change -> table, max (ms)"] = samples[-1]
        figures["RSS at the end (MB)"] = rss_mb()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--changes", type=int, default=30)
    parser.add_argument("--keep", help="build (or reuse) the data set here instead of a temporary directory")
    args = parser.parse_args()
    parent = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="nexus-bench-"))
    root = (parent / "project").resolve()
    try:
        if not (root / ".bmad-plus").exists():
            began = time.perf_counter()
            template_run(root, args.tasks)
            clone_runs(root, args.runs)
            print(f"data set: {args.runs} runs x {args.tasks} tasks built in {time.perf_counter() - began:.1f} s")
        size = sum(f.stat().st_size for f in (root / ".bmad-plus/nexus/runs").iterdir())
        print(f"run files: {size / 1e6:.1f} MB in total")
        figures = asyncio.run(measure(root, args.runs, args.changes))
    finally:
        if not args.keep:
            shutil.rmtree(parent, ignore_errors=True)
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:10.3f}" if isinstance(value, float) else f"{key:<{width}}  {value}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
