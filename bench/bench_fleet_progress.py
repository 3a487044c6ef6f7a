"""``--discover`` over a large fleet, with progress lines (run by hand; never a test).

    python bench/bench_fleet_progress.py [--projects 1000] [--runs 5] [--tasks 10] [--limit 420]

bench_overview.py prints its figures at the end only, which a 1,000-project start may not
reach in reasonable time: this builds the same data (bench_overview.build) and prints, every
15 s, the rows shown, the CPU seconds of the process (every thread) and of its first-load
workers, and its resident set size, until every row is shown or ``--limit`` seconds have passed.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_overview import build, cpu_seconds
from bench_tui import rss_mb


async def measure(root: Path, projects: int, limit: float) -> None:
    from nexus_tui.discover_app import DiscoverApp

    started, cpu_started = time.perf_counter(), cpu_seconds()
    app = DiscoverApp(str(root), tick=False, rescan_seconds=0)
    async with app.run_test(size=(170, 46)):
        print(f"first frame {time.perf_counter() - started:.2f} s, RSS {rss_mb():.0f} MB", flush=True)
        overview, printed = app.overview, 0.0
        while True:
            shown = sum(1 for summary in overview.summaries.values() if summary.loaded)
            elapsed = time.perf_counter() - started
            if shown >= projects or elapsed > limit:
                break
            if elapsed - printed >= 15:
                printed = elapsed
                cpu = cpu_seconds() - cpu_started
                print(f"{elapsed:6.1f} s: {shown} rows shown, CPU {cpu:.1f} s, RSS {rss_mb():.0f} MB", flush=True)
            await asyncio.sleep(0.05)
        elapsed, cpu = time.perf_counter() - started, cpu_seconds() - cpu_started
        print(f"end {elapsed:.1f} s: {shown}/{projects} rows shown, CPU {cpu:.1f} s, RSS {rss_mb():.0f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--projects", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--limit", type=float, default=420.0)
    args = parser.parse_args()
    parent = Path(tempfile.mkdtemp(prefix="nexus-bench-fleet-"))
    root = (parent / "root").resolve()
    try:
        build(root, args.projects, args.runs, args.tasks)
        asyncio.run(measure(root, args.projects, args.limit))
    finally:
        shutil.rmtree(parent, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
