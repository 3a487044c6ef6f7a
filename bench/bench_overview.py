"""``nexus-tui --discover`` figures (run by hand, prints a table; never a test).

    python bench/bench_overview.py [--projects 50] [--runs 20] [--tasks 10] [--changes 30]
    python bench/bench_overview.py --projects 1000 --runs 5      # a fleet

1. data: one project of ``--runs`` runs (bench_tui's engine-made template run, cloned), copied
   into ``--projects`` projects under one root, at depth 2 (``team-N/project-M``), each run
   re-homed to its copy (``project`` and checksums recomputed);
2. first frame, and every project's row shown in the "All projects" tab (each project scanned
   once), from App start, and the CPU seconds spent until then (every thread, and the worker
   processes of a first load shared among them: steadier than wall time on a shared machine);
   the process's resident set size then (and the largest of its ended workers');
3. latency: a run file of one project replaced on disk (atomic rename, like the core) to the
   overview row of that project showing the change (its "blocked" count), with the file
   watcher and the discovery thread running; p50/p95/max over N changes.

Figures are noisy on a loaded machine: the floor lines (``python -c pass``, one sha256 pass over
64 MB, and reading every run file of the data set with its sha256, measured in the same run) let
two runs on different machines be compared.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import hashlib
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_tui import clone_runs, envelope_for, flipped, replace_atomically, rss_mb, template_run

from nexus_core.state import canonical


def floor(root: Path) -> dict[str, float]:
    began = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    startup = time.perf_counter() - began
    began = time.perf_counter()
    hashlib.sha256(bytes(64 * 1024 * 1024)).hexdigest()
    sha = time.perf_counter() - began
    began = time.perf_counter()
    size = 0
    for state in root.glob("*/*/.bmad-plus/nexus/runs/*.json"):
        data = state.read_bytes()
        size += len(data)
        hashlib.sha256(data).hexdigest()
    return {
        "python -c pass (s)": startup,
        "sha256 of 64 MB (s)": sha,
        f"read + sha256 of every run file, {size / 1e6:.0f} MB (s)": time.perf_counter() - began,
    }


def cpu_seconds() -> float:
    """CPU seconds of this process and its children (the first load's worker processes): the
    reaped ones from RUSAGE_CHILDREN, the others (running, or ended and not yet reaped) from
    /proc. A child reaped between the two reads would be counted by neither (or both): the
    reads are taken again until no child was reaped meanwhile."""
    ticks = os.sysconf("SC_CLK_TCK")
    while True:
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        unreaped = 0.0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    fields = handle.read().rpartition(")")[2].split()
            except OSError:
                continue
            if int(fields[1]) == os.getpid():  # ppid
                unreaped += (int(fields[11]) + int(fields[12])) / ticks  # utime, stime
        if resource.getrusage(resource.RUSAGE_CHILDREN) == reaped:
            break
    own = resource.getrusage(resource.RUSAGE_SELF)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime + unreaped


def children_peak_rss_mb() -> float:
    """The largest resident set of a child process that has ended (the first load's workers)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def build(root: Path, projects: int, runs: int, tasks: int) -> None:
    template = root / "template"
    template_run(template, tasks)
    clone_runs(template, runs)
    for index in range(projects):
        copy = (root / f"team-{index % 5}" / f"project-{index:02d}").resolve()
        shutil.copytree(template, copy, symlinks=True)
        # A run names its project's real path: re-home each copied run (checksums recomputed).
        for state in (copy / ".bmad-plus/nexus/runs").glob("*.json"):
            run = canonical.parse(state.read_text("utf-8"))["run"]
            run["project"] = str(copy)
            state.write_bytes(envelope_for(run))
    shutil.rmtree(template)


async def measure(root: Path, projects: int, changes: int) -> dict[str, Any]:
    from nexus_tui.discover_app import DiscoverApp

    figures: dict[str, Any] = {}
    started, cpu_started = time.perf_counter(), cpu_seconds()
    app = DiscoverApp(str(root), tick=False, rescan_seconds=0)
    async with app.run_test(size=(170, 46)) as pilot:
        figures["first frame (s)"] = time.perf_counter() - started
        applied_at = [time.perf_counter()]  # when a scan was last applied (the app's counter, polled)

        async def track() -> None:
            applied = app.scans_applied
            while True:
                await asyncio.sleep(0.01)
                if app.scans_applied != applied:
                    applied, applied_at[0] = app.scans_applied, time.perf_counter()

        tracking = asyncio.ensure_future(track())
        overview = app.overview
        while len(overview.summaries) < projects or not all(s.loaded for s in overview.summaries.values()):
            await asyncio.sleep(0.005)
        rows_shown = time.perf_counter()
        figures["every project's row shown (s)"] = rows_shown - started
        figures["CPU until every row shown (s)"] = cpu_seconds() - cpu_started
        await asyncio.wait_for(app.loaded.wait(), 300)
        await pilot.pause()
        unreadable = sum(summary.unreadable for summary in overview.summaries.values())
        if unreadable:
            raise SystemExit(f"the data set is broken: {unreadable} unreadable run(s)")
        gc.collect()
        figures["RSS with every project loaded (MB)"] = rss_mb()
        figures["first-load workers: projects / peak RSS of one (MB)"] = (
            f"{getattr(app, 'first_looks_shared', 0)} / {children_peak_rss_mb():.0f}"
        )

        # Latency: flip one running task of one project's run between running and blocked.
        target_dir = sorted(app.directories)[projects // 2]
        index = app.directories.index(target_dir)
        # The watcher arms (restarted as projects' paths become known), and each arming asks a
        # catch-up rescan of the projects it is the first to watch: the figure is when the last
        # of those scans was applied, known once no scan has been applied for a whole second
        # (that second of quiet is how it is known, not part of it).
        while time.perf_counter() - applied_at[0] < 1.0:
            await asyncio.sleep(0.05)
        tracking.cancel()
        figures["watchers armed and caught up (s)"] = applied_at[0] - started
        figures["settling after every row shown (s)"] = applied_at[0] - rows_shown
        state = Path(target_dir, ".bmad-plus/nexus/runs/r000.json")
        original = canonical.parse(state.read_text("utf-8"))["run"]
        target = next(t for t in original["tasks"] if t["attempts"] and t["attempts"][-1]["execution"] == "running")
        blocked_before = overview.summaries[index].blocked
        samples = []
        for change in range(changes):
            data, execution = flipped(original, target["id"], change)
            wanted = blocked_before + (1 if execution == "blocked" else 0)
            await pilot.pause(0.05)
            begin = time.perf_counter()
            replace_atomically(state, data)
            while overview.summaries[index].blocked != wanted:
                await asyncio.sleep(0.001)
            samples.append((time.perf_counter() - begin) * 1000)
        print("samples (ms, in order):", " ".join(f"{sample:.0f}" for sample in samples))
        samples.sort()
        figures["change -> overview row, p50 (ms)"] = statistics.median(samples)
        figures["change -> overview row, p95 (ms)"] = samples[max(0, int(len(samples) * 0.95) - 1)]
        figures["change -> overview row, max (ms)"] = samples[-1]
        figures["watchers"] = sum(1 for worker in app.workers if worker.group == "watch")
        figures["RSS at the end (MB)"] = rss_mb()
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--projects", type=int, default=50)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--changes", type=int, default=30)
    args = parser.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="nexus-bench-overview-"))
    root = (parent / "root").resolve()
    try:
        began = time.perf_counter()
        build(root, args.projects, args.runs, args.tasks)
        print(
            f"data set: {args.projects} projects x {args.runs} runs x {args.tasks} tasks "
            f"built in {time.perf_counter() - began:.1f} s"
        )
        figures = floor(root)
        figures.update(asyncio.run(measure(root, args.projects, args.changes)))
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        print(f"{key:<{width}}  {value:10.3f}" if isinstance(value, float) else f"{key:<{width}}  {value}")
    latency = figures["change -> overview row, p95 (ms)"]
    print(f"p95 latency / sha256-of-64-MB floor: {latency / 1000 / figures['sha256 of 64 MB (s)']:.2f}")
    read = next(value for key, value in figures.items() if key.startswith("read + sha256"))
    rows = figures["every project's row shown (s)"]
    print(f"every row shown / read-and-hash floor: {rows / read:.1f}")
    print(f"python {sys.version.split()[0]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
